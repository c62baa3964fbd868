"""Choosing the format and the default results path."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from agentv.errors import ConfigError
from agentv.results.writers import (
    JsonlWriter,
    ResultWriter,
    YamlWriter,
    default_results_path,
    normalize_format,
    open_writer,
)


@pytest.mark.parametrize(
    ("fmt", "cls"),
    [("jsonl", JsonlWriter), ("yaml", YamlWriter), ("YAML", YamlWriter), ("yml", YamlWriter)],
)
def test_open_writer_picks_the_format(tmp_path: Path, fmt: str, cls: type) -> None:
    writer = open_writer(tmp_path / "r", fmt)
    try:
        assert isinstance(writer, cls)
        assert isinstance(writer, ResultWriter)
        assert writer.path == tmp_path / "r"
    finally:
        writer.close()


def test_unknown_format_lists_the_valid_ones(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        open_writer(tmp_path / "r.csv", "csv")
    assert str(info.value) == "Unknown output format 'csv'. Valid formats: jsonl, yaml."
    assert not (tmp_path / "r.csv").exists()


def test_a_path_that_cannot_be_created_names_it(tmp_path: Path) -> None:
    target = tmp_path / "is_a_dir"
    target.mkdir()
    with pytest.raises(ConfigError, match=r"Cannot create the results file .*is_a_dir.*--out"):
        open_writer(target)


def test_default_results_path() -> None:
    now = datetime(2025, 11, 30, 1, 2, 3, 456789, tzinfo=UTC)
    assert default_results_path(Path("/p"), "jsonl", now=now) == Path(
        "/p/.agentv/results/eval_2025-11-30T01-02-03-456Z.jsonl"
    )
    # Other time zones are written in UTC.
    plus_two = now.astimezone(timezone(timedelta(hours=2)))
    assert default_results_path(Path("/p"), "yml", now=plus_two).name == (
        "eval_2025-11-30T01-02-03-456Z.yaml"
    )


def test_default_results_path_now_has_no_colons_or_dots_in_the_stamp(tmp_path: Path) -> None:
    path = default_results_path(tmp_path, "jsonl")
    assert path.parent == tmp_path / ".agentv" / "results"
    stem = path.name.removesuffix(".jsonl")
    assert ":" not in stem and "." not in stem and stem.endswith("Z")
    assert normalize_format(" JSONL ") == "jsonl"
