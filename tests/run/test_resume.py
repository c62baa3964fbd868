"""--resume after a kill (every case exactly once, no record lost, a partial line set
aside), a changed prompt run again, and --rerun-failed / --rerun-errors running only the
cases they pick (the fake server counts the requests)."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from support.cli import agentv_cli, start_agentv
from support.fakes import FakeLLMServer, RecordedRequest
from support.files import write
from support.targets import mock_target, openai_target, write_targets

#: every test here runs agentv as a process: left out of `make test-fast`
pytestmark = pytest.mark.slow

CASES = 12


def _suite(repo: Path, *, changed: str | None = None) -> None:
    lines = ["$schema: agentv-eval-v2", "evalcases:"]
    for i in range(CASES):
        content = changed if changed and i == 0 else f"question {i}"
        value = "42" if i % 3 else "7"  # every third case fails: the mock says 42
        lines.append(
            f"  - {{id: c{i}, outcome: ok, input_messages: [{{role: user, content: '{content}'}}],"
            f" evaluators: [{{type: contains, value: '{value}'}}]}}"
        )
    write(repo, "evals/s.yaml", "\n".join(lines) + "\n")


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_resume_after_a_kill_runs_each_case_exactly_once(repo: Path) -> None:
    write_targets(repo, mock_target(response="The answer is 42.", delay_ms=250))
    _suite(repo)
    out = repo / "r.jsonl"
    proc = start_agentv(
        repo,
        *("eval", "evals/", "--workers", "2", "--out", str(out)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # kill it once some, not all, cases are written
        if out.exists() and 3 <= out.read_text(encoding="utf-8").count("\n") < CASES:
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    before = _rows(out)
    assert 3 <= len(before) < CASES
    with out.open("a", encoding="utf-8") as fh:  # as if killed in the middle of a write
        fh.write('{"eval_id": "c99", "dataset": "s", "stat')

    resumed = agentv_cli(repo, "eval", "evals/", "--workers", "2", "--resume", str(out))
    assert resumed.returncode == 7, resumed.stdout + resumed.stderr
    assert f"Resuming {out}: {CASES - len(before)} run(s) to do" in resumed.stdout
    assert "was moved to r.jsonl.partial" in resumed.stderr
    assert (repo / "r.jsonl.partial").read_text(encoding="utf-8") == (
        '{"eval_id": "c99", "dataset": "s", "stat\n'
    )
    after = _rows(out)  # valid JSONL, every line
    assert after[: len(before)] == before  # no record lost or rewritten
    assert Counter(r["eval_id"] for r in after) == {f"c{i}": 1 for i in range(CASES)}
    again = agentv_cli(repo, "eval", "evals/", "--resume", str(out))
    assert "Nothing to do" in again.stdout and len(_rows(out)) == CASES


def test_a_case_whose_prompt_changed_runs_again(repo: Path) -> None:
    write_targets(repo, mock_target(response="The answer is 42."))
    _suite(repo)
    assert agentv_cli(repo, "eval", "evals/", "--out", "r.jsonl").returncode == 7
    _suite(repo, changed="a new question")
    proc = agentv_cli(repo, "eval", "evals/", "--resume", "r.jsonl")
    assert "1 run(s) to do (1 because their prompt changed)" in proc.stdout
    rows = _rows(repo / "r.jsonl")
    assert len(rows) == CASES + 1
    assert rows[-1]["eval_id"] == "c0"
    assert rows[-1]["raw_request"]["question"] == "a new question"


def test_rerun_picks_only_the_failed_or_errored_cases(repo: Path) -> None:
    def reply(rec: RecordedRequest) -> str:
        text = rec.body["messages"][-1]["content"]
        return "error please" if text in ("question 1", "question 4") else "The answer is 42."

    with FakeLLMServer(reply=reply) as server:
        write_targets(repo, openai_target(server.url, max_retries=0))
        _suite(repo)

        first = agentv_cli(repo, "eval", "evals/", "--out", "r.jsonl")
        assert first.returncode == 7
        rows = {r["eval_id"]: r for r in _rows(repo / "r.jsonl")}
        failed = {k for k, r in rows.items() if r["status"] == "failed"}
        assert failed == {"c0", "c1", "c3", "c4", "c6", "c9"}  # "7" cases, and 1 and 4
        server.reset()
        proc = agentv_cli(
            repo, "eval", "evals/", "--rerun-failed", "r.jsonl", "--out", "again.jsonl"
        )
        assert (
            f"Rerunning {len(failed)} run(s) (error, failed, invalid, uncertain, user_error)"
            in proc.stdout
        )
        assert "into " in proc.stdout and "again.jsonl" in proc.stdout
        assert len(server.requests) == len(failed)  # only those were sent
        assert {r["eval_id"] for r in _rows(repo / "again.jsonl")} == failed
        server.reset()
        errors_only = agentv_cli(
            repo, "eval", "evals/", "--rerun-errors", "r.jsonl", "--out", "none.jsonl"
        )
        assert errors_only.returncode == 0  # no run errored: nothing to do is no failure
        assert (
            "Nothing to do: no run in r.jsonl has status error, invalid, user_error."
            in errors_only.stdout
        )
        assert server.requests == []


# --- a file another run is writing, and files that are not results --------------------------


def test_resume_on_a_file_another_run_is_writing_changes_nothing(repo: Path) -> None:
    # Another run holds the file (its writer took the lock) and is in the middle of writing
    # a large record: the file ends with part of a line. Resuming it must stop at the lock
    # before reading or repairing anything: that line is a finished case, not a partial one.
    from agentv.results.writers import open_writer

    write_targets(repo, mock_target(response="The answer is 42."))
    _suite(repo)
    assert agentv_cli(repo, "eval", "evals/", "--out", "r.jsonl").returncode == 7
    out = repo / "r.jsonl"
    rows = _rows(out)
    out.write_text("".join(json.dumps(r) + "\n" for r in rows[:5]))
    writer = open_writer(out, "jsonl", append=True)
    try:
        record = json.dumps(rows[5] | {"candidate_answer": "x" * 100_000})
        with out.open("a") as fh:  # the first part of a write still going on
            fh.write(record[:50_000])
        before = out.read_bytes()
        resumed = agentv_cli(repo, "eval", "evals/", "--resume", "r.jsonl")
        assert resumed.returncode == 1
        assert "another agentv run is writing it" in resumed.stderr
        assert out.read_bytes() == before  # nothing set aside, nothing appended
        assert not (repo / "r.jsonl.partial").exists()
        with out.open("a") as fh:  # the other run finishes its write: the case is whole
            fh.write(record[50_000:] + "\n")
    finally:
        writer.close()
    assert [r["eval_id"] for r in _rows(out)] == ["c0", "c1", "c2", "c3", "c4", "c5"]
    resumed = agentv_cli(repo, "eval", "evals/", "--resume", "r.jsonl")
    assert resumed.returncode == 7, resumed.stderr  # c0, c3, ... fail
    assert f"Resuming {out}: {CASES - 6} run(s) to do" in resumed.stdout


def test_resume_refuses_a_file_that_is_not_results_and_leaves_it_as_it_is(repo: Path) -> None:
    write_targets(repo, mock_target(response="The answer is 42."))
    _suite(repo)
    samples = {
        "binary.jsonl": bytes(range(256)) * 40,  # binary, no newline at its end
        "image.jsonl": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00" + bytes(200),
        "notes.jsonl": b"# Notes\n\nnot results at all\n",
        "notes.yaml": b"title: notes\nbody: text\n",
    }
    for name, data in samples.items():
        (repo / name).write_bytes(data)
        proc = agentv_cli(repo, "eval", "evals/", "--resume", name)
        assert proc.returncode == 1, (name, proc.stdout)
        assert "is not a results file" in proc.stderr, name
        assert (repo / name).read_bytes() == data, name  # nothing appended or set aside
        assert not (repo / f"{name}.partial").exists(), name
