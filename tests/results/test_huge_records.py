"""A record agentv writes is always one its own reader takes (docs/reliability.md, "Whole
records only"): an answer is stored once per record, however many places hold it (the
answer, the turns, the messages carried forward, the judge's prompt), and a record that
would still be larger than a reader takes (256 MiB) has its longest texts cut, and says
so. ``report`` never says "0 results" with exit 0 when it left lines out. Through the real
command line, the loopback fake server and a real command-line agent."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from agentv.results.reader import MAX_RECORD_BYTES, read_results
from support.cli import agentv_cli
from support.fakes import FakeLLMServer, RecordedRequest
from support.files import write
from support.targets import openai_target, write_targets

#: every test here starts agentv (or a script) as a process: left out of `make test-fast`
pytestmark = pytest.mark.slow

MB = 1_000_000
TURNS = 8
ANSWER = 9 * MB


def _answer(turn: int) -> str:
    """The fake model's answer to turn ``turn`` (1-based): 9 MB, each turn's its own."""
    head = f"answer {turn}: "
    return head + "abcdefghij"[turn % 10] * (ANSWER - len(head))


def _reply(rec: RecordedRequest) -> str:
    users = [m for m in (rec.body or {}).get("messages", []) if m["role"] == "user"]
    return _answer(len(users))


def _conversation(repo: Path, server: FakeLLMServer) -> None:
    write_targets(repo, openai_target(server.url))
    turns = "".join(
        f"      - content: 'turn {i}'\n        evaluators: [{{type: contains, value: 'answer {i}'}}]\n"
        for i in range(1, TURNS + 1)
    )
    write(
        repo,
        "evals/long.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n  - id: long\n    outcome: Answers at length.\n"
        "    input_messages: [{role: system, content: Be thorough.}]\n"
        f"    turns:\n{turns}"
        "    evaluators: [{type: contains, value: 'answer 8'}]\n",
    )


def test_a_long_conversation_stores_each_answer_once_and_reads_back(repo: Path) -> None:
    with FakeLLMServer(reply=_reply, record=False) as server:
        _conversation(repo, server)
        ran = agentv_cli(repo, "eval", "evals/long.yaml", "--out", "r.jsonl", timeout=600)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    size = (repo / "r.jsonl").stat().st_size
    # each answer once (72 MB in all), not once per place that holds it
    assert TURNS * ANSWER < size < TURNS * ANSWER * 1.05
    # every reader takes it whole, each answer as the model gave it
    reader = read_results(repo / "r.jsonl")
    ((_, result),) = list(reader)
    assert reader.diagnostics == []
    assert result.status == "ok"
    assert result.candidate_answer == _answer(TURNS)
    assert [t["answer"] for t in result.turns or []] == [_answer(i) for i in range(1, 9)]
    report = agentv_cli(repo, "report", "r.jsonl", "-o", "r.html", timeout=600)
    assert report.returncode == 0, report.stderr
    assert "(1 results)" in report.stdout
    resumed = agentv_cli(repo, "eval", "evals/long.yaml", "--resume", "r.jsonl")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "r.jsonl: 0 run(s) to do" in resumed.stdout
    # a regrade copies it (a conversation is run again, not regraded), still whole
    regraded = agentv_cli(repo, "regrade", "r.jsonl", "--out", "again.jsonl", timeout=600)
    assert regraded.returncode == 0, regraded.stdout + regraded.stderr
    assert (repo / "again.jsonl").stat().st_size < TURNS * ANSWER * 1.05
    ((_, copied),) = list(read_results(repo / "again.jsonl"))
    assert copied.turns == result.turns
    assert copied.candidate_answer == result.candidate_answer


#: an answer of whole megabytes, 20 MB more than a record may hold
TOO_LARGE = (MAX_RECORD_BYTES // MB + 20) * MB


def test_a_record_larger_than_a_reader_takes_is_cut_and_says_so(repo: Path) -> None:
    """A command-line agent allowed to answer more than a record may hold."""
    command = (
        f'{sys.executable} -c "import sys; w = sys.stdout.write; '
        f"[w('x' * {MB}) for _ in range({TOO_LARGE // MB})]\""
    )
    cli = {"command_template": command, "max_output_bytes": TOO_LARGE * 2}
    write_targets(repo, {"name": "default", "provider": "cli", **cli})
    write(
        repo,
        "evals/big.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n  - id: big\n    outcome: x\n"
        "    input_messages: [{role: user, content: hi}]\n"
        "    evaluators: [{type: contains, value: xxx}]\n",
    )
    ran = agentv_cli(repo, "eval", "evals/big.yaml", "--out", "r.jsonl", timeout=600)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert (repo / "r.jsonl").stat().st_size <= MAX_RECORD_BYTES
    reader = read_results(repo / "r.jsonl")
    ((_, result),) = list(reader)
    assert reader.diagnostics == []
    assert (result.status, result.score) == ("ok", 1.0)  # graded on the whole answer
    assert result.shortened is not None
    assert result.shortened["bytes"] > MAX_RECORD_BYTES
    # the answer, stored once, is the text cut
    (digest,) = result.large_content or {}
    assert result.shortened["texts"] == [f"large_content.{digest}"]
    kept = result.candidate_answer.split("\n[")[0]
    assert set(kept) == {"x"} and len(kept) > 200 * MB
    left_out = TOO_LARGE - len(kept)
    assert result.candidate_answer.endswith(
        f"\n[{left_out:,} characters left out here: the record would have been larger "
        "than a results file's record may be (256 MiB)]"
    )
    report = agentv_cli(repo, "report", "r.jsonl", "-o", "r.html", timeout=600)
    assert report.returncode == 0, report.stderr
    assert "(1 results)" in report.stdout


def test_report_of_nothing_but_refused_lines_is_an_error(repo: Path) -> None:
    write(repo, "r.jsonl", '{"eval_id": "a", "status": "ok", "score": "high"}\nnot json\n')
    proc = agentv_cli(repo, "report", "r.jsonl", "-o", "r.html")
    assert proc.returncode == 1
    assert not (repo / "r.html").exists()
    assert "r.jsonl:1: warning: not a result: score: input should be a valid number" in proc.stderr
    assert "r.jsonl:2: warning: not a result: not JSON" in proc.stderr
    assert "error: r.jsonl holds no result (2 line(s) are not results)" in proc.stderr
