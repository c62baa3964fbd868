"""A judge that never answers is bounded as the target is (docs/targets.md, "Fields";
docs/reliability.md): its requests get the run's ``--agent-timeout``, not the 600 s a
request without any limit gets. Through the real command line, the official OpenAI SDK
and two loopback fake servers (the target's answers, the judge's hangs)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from support.cli import agentv_cli
from support.fakes import FakeLLMServer, Fault
from support.files import write
from support.results import rows
from support.targets import lm_target, write_targets

#: every test here starts agentv (or a script) as a process: left out of `make test-fast`
pytestmark = pytest.mark.slow


def test_a_hung_judge_fails_its_case_at_the_runs_time_limit(repo: Path) -> None:
    with FakeLLMServer(reply="Paris") as target, FakeLLMServer() as judge:
        judge.script(*[Fault.hanging()] * 10)
        write_targets(
            repo,
            lm_target("openai", target, judge_target="judge"),
            lm_target("openai", judge, name="judge"),
        )
        write(
            repo,
            "evals/e.yaml",
            "$schema: agentv-eval-v2\nevalcases:\n  - id: capital\n"
            "    outcome: Names Paris.\n"
            "    input_messages: [{role: user, content: What is the capital of France?}]\n",
        )
        started = time.monotonic()
        # the hang guard (90 s) is far below the 600 s an unbounded judge request waits
        proc = agentv_cli(
            repo,
            "eval",
            "evals/e.yaml",
            "--out",
            "r.jsonl",
            "--agent-timeout",
            "2",
            timeout=90,
        )
        took = time.monotonic() - started
    assert proc.returncode == 3, proc.stdout + proc.stderr
    (record,) = rows(repo / "r.jsonl")
    assert record["status"] == "error"
    assert record["candidate_answer"] == "Paris"  # the answer is kept
    assert "target 'judge' did not answer within 2s" in record["error"]
    assert took < 90
