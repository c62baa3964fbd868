"""YAML writer: one document per record, readable, on disk when written."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agentv.results.writers import ResultsFileError, dumps_document, open_writer


def _documents(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as fh:
        return list(yaml.safe_load_all(fh))


def test_documents_parse_back_and_are_on_disk_before_close(tmp_path: Path) -> None:
    path = tmp_path / "out" / "results.yaml"
    writer = open_writer(path, "yaml")
    records = [
        {"eval_id": "a", "score": 0.5, "hits": ["one", "two"], "candidate_answer": "l1\nl2\n"},
        {"eval_id": "b", "score": 1, "nested": {"list": [{"k": "v"}], "empty": []}, "u": "✓ é"},
        {"eval_id": "c", "score": 0, "error": "it: broke", "text": "  leading spaces\nx"},
    ]
    for i, record in enumerate(records, 1):
        writer.write(record)
        assert _documents(path) == records[:i]
    writer.close()
    text = path.read_text(encoding="utf-8")
    assert text.startswith("---\neval_id: a\n")
    assert text.count("\n---\n") == 2  # later documents follow an empty line


def test_layout_block_style_indented_lists_no_wrapping() -> None:
    long = "word " * 60
    text = dumps_document(
        {"eval_id": "a", "hits": ["x", "y"], "answer": "first\r\nsecond", "long": long}
    )
    assert "hits:\n  - x\n  - y\n" in text
    assert "answer: |-\n  first\n  second\n" in text  # CRLF normalised, block scalar
    long_line = next(line for line in text.splitlines() if line.startswith("long:"))
    assert yaml.safe_load(long_line)["long"] == long  # one line, not folded
    assert "{" not in text and "[" not in text


def test_values_yaml_lacks_are_written(tmp_path: Path) -> None:
    text = dumps_document({"p": Path("a/b"), "t": (1, 2), "s": {"b", "a"}})
    assert yaml.safe_load(text) == {"p": "a/b", "t": [1, 2], "s": ["a", "b"]}


def test_write_after_close_is_a_clear_error(tmp_path: Path) -> None:
    writer = open_writer(tmp_path / "r.yaml", "yaml")
    writer.close()
    with pytest.raises(ResultsFileError, match="Cannot write to closed YAML writer"):
        writer.write({"eval_id": "a"})
