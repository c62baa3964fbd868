"""``agentv regrade`` under hostile conditions (docs/reliability.md, "Regrading"): its
``--out`` is never the results file it reads (by any name), never a file that is not
results, and is written whole or not at all; the records' eval files follow the
repository root rule; a large results file streams through in flat memory. Through the
real command line on real files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from support.cli import agentv_cli
from support.files import write
from support.results import rows
from support.targets import mock_target, write_targets

#: every test here starts agentv (or a script) as a process: left out of `make test-fast`
pytestmark = pytest.mark.slow


def _suite(cases: int, value: str = "word") -> str:
    return "$schema: agentv-eval-v2\nevalcases:\n" + "".join(
        f"  - id: c{i}\n    outcome: x\n    input_messages: [{{role: user, content: hi}}]\n"
        f"    evaluators: [{{type: contains, value: {value}}}]\n"
        for i in range(cases)
    )


def _results(repo: Path, cases: int = 3, answer: str = "a word") -> Path:
    """A results file of ``cases`` cases graded by `contains: word`, then the eval file
    changed to look for `answer` instead (a regrade changes every score)."""
    write_targets(repo, mock_target(response=answer))
    write(repo, "evals/s.yaml", _suite(cases))
    ran = agentv_cli(repo, "eval", "evals/s.yaml", "--out", "r.jsonl")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    write(repo, "evals/s.yaml", _suite(cases, "nothing-like-it"))
    return repo / "r.jsonl"


@pytest.mark.parametrize("how", ["hard", "symbolic"])
def test_regrade_never_writes_over_its_input_by_another_name(repo: Path, how: str) -> None:
    source = _results(repo)
    before = source.read_bytes()
    link = repo / "other.jsonl"
    (os.link if how == "hard" else os.symlink)(source, link)
    proc = agentv_cli(repo, "regrade", "r.jsonl", "--out", "other.jsonl")
    assert proc.returncode == 1
    assert "regrade writes a new results file" in proc.stderr
    assert "other.jsonl is that file" in proc.stderr
    assert source.read_bytes() == before


def test_regrade_does_not_replace_a_file_that_is_not_results(repo: Path) -> None:
    _results(repo)
    notes = write(repo, "notes.md", "# my notes\n\nkeep these\n")
    proc = agentv_cli(repo, "regrade", "r.jsonl", "--out", "notes.md")
    assert proc.returncode == 1
    assert "notes.md exists and is not a results file: regrade does not replace it" in (proc.stderr)
    assert notes.read_text() == "# my notes\n\nkeep these\n"
    # results there (an earlier regrade's) are replaced
    assert agentv_cli(repo, "regrade", "r.jsonl", "--out", "new.jsonl").returncode == 0
    again = agentv_cli(repo, "regrade", "r.jsonl", "--out", "new.jsonl")
    assert again.returncode == 0, again.stderr
    assert [r["score"] for r in rows(repo / "new.jsonl")] == [0.0, 0.0, 0.0]


def test_a_regrade_that_cannot_be_written_leaves_what_was_there(repo: Path) -> None:
    _results(repo, cases=40, answer="a word " * 2000)  # each record about 15 KB
    earlier = write(repo, "new.jsonl", (repo / "r.jsonl").read_text())
    before = earlier.read_bytes()

    # a file size limit: the write fails part-way
    proc = agentv_cli(repo, "regrade", "r.jsonl", "--out", "new.jsonl", file_size=100_000)
    assert proc.returncode == 1, proc.stdout
    assert "error: cannot write the regraded results to" in proc.stderr
    assert "File too large (nothing was written there" in proc.stderr
    assert earlier.read_bytes() == before
    assert sorted(p.name for p in repo.iterdir() if p.is_file()) == ["new.jsonl", "r.jsonl"]


def test_an_eval_file_outside_the_root_named_by_a_record_is_not_read(
    repo: Path, tmp_path: Path
) -> None:
    source = _results(repo)
    outside = write(tmp_path, "outside/s.yaml", (repo / "evals/s.yaml").read_text())
    records = rows(source)
    for record in records:  # the records name a file outside the repository
        record["eval_file"] = os.path.relpath(outside, repo)
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    proc = agentv_cli(repo, "regrade", "r.jsonl", "--out", "new.jsonl")
    assert proc.returncode == 0, proc.stderr
    assert "the eval file resolves outside the repository root" in proc.stderr
    assert "Regraded: 0 record(s)" in proc.stdout
    assert "c0 [default]: its eval file is outside the repository root (not read)" in (proc.stdout)
    assert rows(repo / "new.jsonl") == records  # copied as they were
    trusted = agentv_cli(repo, "regrade", "r.jsonl", "--out", "new.jsonl", "--allow-outside-root")
    assert trusted.returncode == 0, trusted.stderr
    assert "Regraded: 3 record(s)" in trusted.stdout


def test_a_large_results_file_regrades_in_flat_memory(repo: Path) -> None:
    """12,000 records of 10 KB (about 120 MB) with the memory capped at 250 MB: holding
    the file's records would need several times the file."""
    cases = 12_000
    source = _results(repo, cases=1, answer="word " * 2000)
    template = rows(source)[0]
    write(repo, "evals/s.yaml", _suite(cases, "nothing-like-it"))
    with source.open("w") as fh:
        for i in range(cases):
            fh.write(json.dumps({**template, "eval_id": f"c{i}", "line": 3 + 4 * i}) + "\n")
    assert source.stat().st_size > 120_000_000
    proc = agentv_cli(repo, "regrade", "r.jsonl", "--out", "new.jsonl", memory_mb=250, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f"Regraded: {cases} record(s)" in proc.stdout
    with (repo / "new.jsonl").open() as fh:
        ids = [json.loads(line)["eval_id"] for line in fh]
    assert ids == [f"c{i}" for i in range(cases)]  # every record, in the file's order
