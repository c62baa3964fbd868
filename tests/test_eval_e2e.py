"""`agentv eval` end to end: real CLI process, real OpenAI SDK, loopback fake API server."""

from __future__ import annotations

import json
import shlex
import signal
import time
from pathlib import Path

import pytest

from support.cli import agentv_cli, start_agentv
from support.fakes.llm_server import FakeLLMServer
from support.files import write
from support.suites import (
    DEBUG_ENV,
    DEBUG_SECRET,
    debug_reply,
    debug_targets,
    write_debug_suite,
)
from support.targets import write_targets

#: every test here runs agentv as a process: left out of `make test-fast`
pytestmark = pytest.mark.slow


@pytest.fixture
def server():
    with FakeLLMServer(reply=debug_reply) as srv:
        yield srv


def _rows(path: Path) -> dict[str, dict]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return {r["eval_id"]: r for r in rows}


def test_end_to_end_results_requests_and_secrets(repo: Path, server: FakeLLMServer) -> None:
    write_targets(repo, *debug_targets(server.url))
    write_debug_suite(repo)
    out = repo / "out.jsonl"
    proc = agentv_cli(
        repo, "eval", "evals/debug.yaml", "--out", str(out), "--dump-prompts", env=DEBUG_ENV
    )
    # a provider failure and an evaluator crash: the run finishes, and says so in its code
    assert proc.returncode == 3, proc.stderr
    assert "2 run(s) errored, 0 invalid: exit code 3" in proc.stderr
    rows = _rows(out)
    assert set(rows) == {"multi-turn", "provider-down", "checker-crash"}

    good = rows["multi-turn"]
    assert "error" not in good
    assert (good["status"], good["passed"], good["attempts"]) == ("ok", True, 1)
    # judge 0.75 and code 1.0 -> mean
    assert good["score"] == pytest.approx(0.875)
    assert [e["name"] for e in good["evaluator_results"]] == ["judge", "check"]
    assert good["evaluator_results"][1]["reasoning"] == "question had 4 markers"
    raw = good["raw_request"]
    assert raw["question"].startswith("@[System]:\nYou are a debugging assistant.\n\n@[User]:\n")
    assert "<Attached: guides/debug.instructions.md>" in raw["question"]
    assert raw["question"].endswith("@[User]:\nA KeyError. Why?")
    assert raw["guidelines"] == "Answer in one paragraph."
    assert raw["guideline_paths"] == [str(repo / "evals/guides/debug.instructions.md")]
    assert raw["input_files"] == [str(repo / "evals/src/app.py")]
    assert good["usage"]["input_tokens"] > 0
    assert good["latency_ms"] >= 0

    # The chat prompt in the results is exactly what reached the API.
    candidate_calls = [
        r
        for r in server.requests
        if not r.body["messages"][0]["content"].startswith("You are an expert")
    ]
    judge_calls = [r for r in server.requests if r not in candidate_calls]
    sent = next(r for r in candidate_calls if "debugging" in r.body["messages"][0]["content"])
    assert [{"role": m["role"], "content": m["content"]} for m in sent.body["messages"]] == raw[
        "chat_prompt"
    ]
    assert [m["role"] for m in raw["chat_prompt"]] == ["system", "user", "assistant", "user"]
    assert raw["chat_prompt"][0]["content"] == (
        "You are a debugging assistant.\n\n[[ ## Guidelines ## ]]\n\nAnswer in one paragraph."
    )
    assert raw["chat_prompt"][1]["content"] == (
        "My handler crashes.\n<Attached: guides/debug.instructions.md>\n"
        "=== src/app.py ===\ndef handler(event):\n    return event['user']"
    )
    assert not any("@[" in m["content"] for m in raw["chat_prompt"])
    # The judge saw the candidate's question, markers included (docs/prompt-rules.md section 7).
    assert len(judge_calls) == 1
    judge_user = judge_calls[0].body["messages"][1]["content"]
    assert "[[ ## question ## ]]\n" + raw["question"] in judge_user
    assert "Answer in one paragraph." not in judge_user
    assert sent.headers["authorization"] == f"Bearer {DEBUG_SECRET}"

    # A provider failure and an evaluator crash are rows, not the end of the run.
    down = rows["provider-down"]
    assert down["score"] == 0 and down["error"] and down["status"] == "error"
    assert down["candidate_answer"].startswith("Error occurred: ")
    crash = rows["checker-crash"]
    assert crash["status"] == "error" and crash["passed"] is False
    assert crash["error"].startswith("evaluator 'crash' could not grade: ")
    assert crash["score"] == pytest.approx(0.5)
    crashed = crash["evaluator_results"][0]
    assert crashed["score"] == 0 and "boom: checker crashed" in crashed["error"]

    # The key is nowhere: results, console output, prompt dumps.
    dumps = list((repo / ".agentv/prompts").glob("*.json"))
    assert len(dumps) == 3
    dumped = json.loads(next(d for d in dumps if "multi-turn" in d.name).read_text())
    assert dumped["question"] == raw["question"]
    for text in [out.read_text(), proc.stdout, proc.stderr, *(d.read_text() for d in dumps)]:
        assert DEBUG_SECRET not in text
    assert "Results written to:" in proc.stdout


def test_cache_second_run_sends_nothing(repo: Path, server: FakeLLMServer) -> None:
    write_targets(repo, *debug_targets(server.url))
    write(
        repo,
        "evals/simple.yaml",
        """$schema: agentv-eval-v2
evalcases:
  - id: one
    outcome: Says 42.
    input_messages: [{role: user, content: What is 6 times 7?}]
    execution: {evaluators: [{type: contains, value: "42"}]}
  - id: two
    outcome: Says 42.
    input_messages: [{role: user, content: And 7 times 6?}]
    execution: {evaluators: [{type: contains, value: "42"}]}
""",
    )
    first = agentv_cli(
        repo, "eval", "evals/simple.yaml", "--cache", "--out", "a.jsonl", env=DEBUG_ENV
    )
    assert first.returncode == 0, first.stderr
    assert len(server.requests) == 2
    second = agentv_cli(
        repo, "eval", "evals/simple.yaml", "--cache", "--out", "b.jsonl", env=DEBUG_ENV
    )
    assert second.returncode == 0, second.stderr
    assert len(server.requests) == 2  # nothing new reached the API
    assert (
        "Cache: 2 target answers and 0 judge answers reused, 0 target requests sent"
        in second.stdout
    )
    volatile = ("timestamp", "duration_ms", "queued_ms", "attempts", "cached")
    a, b = _rows(repo / "a.jsonl"), _rows(repo / "b.jsonl")
    for key in ("one", "two"):
        assert (a[key]["attempts"], b[key]["attempts"]) == (1, 0)  # the second sent nothing
        assert ("cached" in a[key], b[key]["cached"]) == (False, True)  # reused, not spent
        assert {k: v for k, v in a[key].items() if k not in volatile} == {
            k: v for k, v in b[key].items() if k not in volatile
        }


def _many_cases(repo: Path, n: int) -> Path:
    cases = "\n".join(
        f"""  - id: case-{i:02d}
    outcome: Says 42.
    input_messages: [{{role: user, content: "Question {i}"}}]
    execution: {{evaluators: [{{type: contains, value: "42"}}]}}"""
        for i in range(n)
    )
    return write(repo, "evals/many.yaml", f"$schema: agentv-eval-v2\nevalcases:\n{cases}\n")


def test_workers_run_cases_concurrently(repo: Path) -> None:
    with FakeLLMServer(reply="42", delay_ms=200) as srv:
        write_targets(repo, *debug_targets(srv.url))
        _many_cases(repo, 20)
        proc = agentv_cli(
            repo, "eval", "evals/many.yaml", "--workers", "10", "--out", "r.jsonl", env=DEBUG_ENV
        )
        received = [r.received_at for r in srv.requests]
    assert proc.returncode == 0, proc.stderr
    assert len(_rows(repo / "r.jsonl")) == 20
    assert len(received) == 20
    # Several requests waited at the server together (each is answered 200 ms after it
    # arrives, so serial dispatch never has two arrivals within 200 ms). How fast a run is
    # belongs to the benchmarks (S2 in benchmarks/README.md).
    times = sorted(received)
    most = max(sum(1 for u in times if t <= u < t + 0.2) for t in times)
    assert 1 < most <= 10, most


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_keeps_finished_cases(repo: Path, signum: int) -> None:
    with FakeLLMServer(reply="42", delay_ms=300) as srv:
        write_targets(repo, *debug_targets(srv.url))
        _many_cases(repo, 40)
        out = repo / "r.jsonl"
        proc = start_agentv(
            repo, "eval", "evals/many.yaml", "--workers", "2", "--out", str(out), env=DEBUG_ENV
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if out.exists() and len(out.read_text().splitlines()) >= 3:
                break
            time.sleep(0.05)
        proc.send_signal(signum)
        _stdout, stderr = proc.communicate(timeout=30)
        assert proc.returncode == (130 if signum == signal.SIGINT else 143), stderr
        text = out.read_text()
        assert text.endswith("\n")
        rows = [json.loads(line) for line in text.splitlines()]
        assert 3 <= len(rows) < 40
        assert all(r["score"] == 1.0 for r in rows)
        assert "Interrupted:" in stderr
        assert str(out) in stderr
        # the command it prints finishes the run, into the same file
        said = [x for x in stderr.splitlines() if x.startswith("To finish the run: ")]
        assert said == ["To finish the run: agentv eval evals/many.yaml --resume r.jsonl"]
        program, *words = shlex.split(said[0].removeprefix("To finish the run: "))
        assert program == "agentv"
        done = agentv_cli(repo, *words, env=DEBUG_ENV)
        assert done.returncode == 0, done.stderr
    ids = [json.loads(line)["eval_id"] for line in out.read_text().splitlines()]
    assert sorted(ids) == [f"case-{i:02d}" for i in range(40)]


def test_threshold_sets_exit_code(repo: Path, server: FakeLLMServer) -> None:
    write_targets(repo, *debug_targets(server.url))
    write(
        repo,
        "evals/t.yaml",
        """$schema: agentv-eval-v2
evalcases:
  - id: needs-43
    outcome: Says 43.
    input_messages: [{role: user, content: Say 43}]
    execution: {evaluators: [{type: contains, value: "43"}]}
""",
    )
    low = agentv_cli(
        repo, "eval", "evals/t.yaml", "--threshold", "0.5", "--out", "a.jsonl", env=DEBUG_ENV
    )
    assert low.returncode == 1
    assert "below the threshold" in low.stderr
    ok = agentv_cli(
        repo, "eval", "evals/t.yaml", "--threshold", "0", "--out", "b.jsonl", env=DEBUG_ENV
    )
    assert ok.returncode == 0, ok.stderr


def test_init_never_overwrites(repo: Path) -> None:
    write(repo, ".agentv/targets.yaml", "# mine\n")
    proc = agentv_cli(repo, "init", env=DEBUG_ENV)
    assert proc.returncode == 0, proc.stderr
    assert (repo / ".agentv/targets.yaml").read_text() == "# mine\n"
    assert "Kept existing .agentv/targets.yaml" in proc.stdout
    assert (repo / ".agentv/config.yaml").read_text().startswith("$schema: agentv-config-v2")
    assert (repo / ".env.example").exists()
    again = agentv_cli(repo, "init", env=DEBUG_ENV)
    assert "Nothing to do" in again.stdout
