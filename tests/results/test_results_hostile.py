"""Results files that do not deserve trust: deep nesting, alias bombs, huge records, fields
of the wrong type. Every view of results (report, compare, JUnit, --resume, --rerun-*, the
API) reads them through the one reader, which reports each bad record by its line and goes
on. Each failure was reproduced through the command line first (a RecursionError or a
serialisation traceback, or past 4 GB); here the commands run with 1 GB of memory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentv.errors import InputError
from agentv.results import reader as results_reader
from agentv.results.reader import read_results
from support.cli import agentv_cli
from support.files import write
from support.targets import mock_target, write_targets

CAP_MB = 1024


def _record(eval_id: str, **fields: Any) -> dict[str, Any]:
    # the records of `evals/e.yaml` run on `default`: a resume finds nothing left to do
    return {
        "eval_id": eval_id,
        "dataset": "e",
        "status": "ok",
        "score": 1.0,
        "target": "default",
        **fields,
    }


def _jsonl(path: Path, *lines: dict[str, Any] | str) -> Path:
    text = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    path.write_text(text, encoding="utf-8")
    return path


def _project(root: Path) -> Path:
    (root / ".git").mkdir(parents=True, exist_ok=True)
    write_targets(root, mock_target())
    write(
        root,
        "evals/e.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n"
        + "".join(
            f"  - {{id: {name}, outcome: x, input_messages: [{{role: user, content: hi}}]}}\n"
            for name in ("a", "b")
        ),
    )
    return root


def _nested(depth: int) -> str:
    return '{"eval_id":"d","status":"ok","x":' + "[" * depth + "]" * depth + "}"


# --- depth ----------------------------------------------------------------------------------


@pytest.mark.parametrize("depth", [300, 1020, 100_000])
def test_a_deep_line_is_a_bad_line_by_its_number(tmp_path: Path, depth: int) -> None:
    path = _jsonl(tmp_path / "r.jsonl", _record("a"), _nested(depth), _record("b"))
    found = read_results(path)
    assert [r.eval_id for _, r in found] == ["a", "b"]
    (diag,) = found.diagnostics
    assert diag.line == 2
    assert diag.message == "not a result: nested more than 200 levels"


def test_nesting_up_to_the_limit_is_read(tmp_path: Path) -> None:
    # the record itself is level 1: 199 more lists make 200
    path = _jsonl(tmp_path / "r.jsonl", _nested(199))
    assert [r.eval_id for _, r in read_results(path)] == ["d"]


@pytest.mark.slow
def test_every_command_meets_a_deep_line_with_its_line_number(tmp_path: Path) -> None:
    project = _project(tmp_path)
    good = [_record("a"), _record("b")]
    _jsonl(project / "base.jsonl", *good)
    for name in ("deep", "resume", "rerun"):
        _jsonl(project / f"{name}.jsonl", *good, _nested(900))
    report = agentv_cli(project, "report", "deep.jsonl", "--junit", "j.xml", memory_mb=CAP_MB)
    # the report leaves the line out; JUnit, strict, names it
    assert "deep.jsonl: 1 line(s) are not results" in report.stderr
    assert "deep.jsonl:3: not a result (nested more than 200 levels)" in report.stderr
    assert report.returncode == 1 and (project / "deep.html").is_file()
    compare = agentv_cli(project, "compare", "base.jsonl", "deep.jsonl", memory_mb=CAP_MB)
    assert "deep.jsonl:3: not a result (nested more than 200 levels)" in compare.stderr
    for flag, name in (("--resume", "resume"), ("--rerun-failed", "rerun")):
        proc = agentv_cli(project, "eval", "evals", flag, f"{name}.jsonl", memory_mb=CAP_MB)
        assert f"{name}.jsonl:3: warning: not a result: nested more than 200 levels" in proc.stderr
        assert proc.returncode == 0, proc.stderr
    for proc in (report, compare):
        assert "Traceback" not in proc.stderr


# --- alias bombs and huge records in YAML results ----------------------------------------------

#: the issue's 9-line file: `a0` lists `x` ten times, each next level the previous ten times
BOMB = "eval_id: bomb\nstatus: ok\na0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9)
)


@pytest.mark.slow
def test_an_alias_bomb_in_a_yaml_results_file(tmp_path: Path) -> None:
    project = _project(tmp_path)
    done = "dataset: e\nstatus: ok\ntarget: default\n"
    write(project, "bomb.yaml", f"---\neval_id: a\n{done}---\n{BOMB}---\neval_id: b\n{done}")
    found = read_results(project / "bomb.yaml")
    assert [r.eval_id for _, r in found] == ["a", "b"]  # the documents after it are read
    (diag,) = found.diagnostics
    assert diag.line == 14  # a5, where the aliases pass a million values
    assert "aliases repeat more than 1,000,000 values" in diag.message
    proc = agentv_cli(project, "report", "bomb.yaml", memory_mb=CAP_MB)
    assert proc.returncode == 0, proc.stderr
    assert "bomb.yaml: 1 line(s) are not results and were left out" in proc.stderr
    assert "Report written to: bomb.html (2 results)" in proc.stdout
    proc = agentv_cli(project, "eval", "evals", "--resume", "bomb.yaml", memory_mb=CAP_MB)
    assert "bomb.yaml:14: warning: not a result: aliases repeat" in proc.stderr
    assert proc.returncode == 0, proc.stderr


def test_a_record_larger_than_the_reader_takes_is_left_out_unread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(results_reader, "MAX_RECORD_BYTES", 1000)
    big = _record("big", candidate_answer="x" * 5000)
    path = _jsonl(tmp_path / "r.jsonl", _record("a"), big, _record("b"))
    found = read_results(path)
    assert [r.eval_id for _, r in found] == ["a", "b"]
    (diag,) = found.diagnostics
    assert diag.line == 2
    size = len(path.read_bytes().splitlines(keepends=True)[1])
    assert diag.message == (
        f"not a result: a record of {size:,} bytes, more than agentv reads in one record "
        "(1,000 bytes)"
    )
    yaml_path = tmp_path / "r.yaml"
    yaml_path.write_text(
        "---\neval_id: a\nstatus: ok\n---\neval_id: big\nstatus: ok\ncandidate_answer: "
        + "x" * 5000
        + "\n---\neval_id: b\nstatus: ok\n"
    )
    found = read_results(yaml_path)
    assert [r.eval_id for _, r in found] == ["a", "b"]
    assert [d.line for d in found.diagnostics] == [4]


@pytest.mark.slow
def test_the_reader_holds_one_record_at_a_time(tmp_path: Path) -> None:
    # 40 MB of answer in one record and the memory capped: read, reported and written
    project = _project(tmp_path)
    _jsonl(project / "r.jsonl", _record("a", candidate_answer="y" * 40_000_000), _record("b"))
    proc = agentv_cli(project, "report", "r.jsonl", memory_mb=CAP_MB)
    assert proc.returncode == 0, proc.stderr
    assert "(2 results)" in proc.stdout


def test_a_bad_yaml_document_does_not_hide_the_ones_after_it(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(
        "---\neval_id: a\nstatus: ok\n---\neval_id: [unclosed\n---\n- a list\n---\n"
        "eval_id: b\nstatus: ok\n"
    )
    found = read_results(path)
    assert [r.eval_id for _, r in found] == ["a", "b"]
    assert [(d.line, d.message.split(" (")[0]) for d in found.diagnostics] == [
        (6, "not a result: not YAML"),
        (7, "not a result: not a mapping"),
    ]


# --- fields of the wrong type ----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("duration_ms", '"slow"'),
        ("score", '"abc"'),
        ("repeat", '"abc"'),
        ("repeat", "1e400"),
        ("line", '"x"'),
        ("large_content", "[1]"),
    ],
)
def test_a_field_of_the_wrong_type(tmp_path: Path, field: str, value: str) -> None:
    project = _project(tmp_path)
    bad = '{"eval_id":"z","status":"failed","' + field + '":' + value + "}"
    _jsonl(project / "r.jsonl", _record("a"), bad)
    _jsonl(project / "resume.jsonl", _record("a"), bad, _record("b"))
    junit = agentv_cli(project, "report", "r.jsonl", "--junit", "j.xml")
    assert junit.returncode == 1
    assert f"r.jsonl:2: not a result ({field}: " in junit.stderr
    resume = agentv_cli(project, "eval", "evals", "--resume", "resume.jsonl")
    assert f"resume.jsonl:2: warning: not a result: {field}: " in resume.stderr
    assert resume.returncode == 0, resume.stderr
    for proc in (junit, resume):
        assert "Traceback" not in proc.stderr


# --- what is not a results file at all -------------------------------------------------------


def test_a_fifo_is_not_a_results_file(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "r.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match=r"r\.jsonl is a FIFO \(named pipe\), not a results file"):
        read_results(fifo)
