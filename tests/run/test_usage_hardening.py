"""Token counts a server reports are read as counts only (docs/reliability.md, "Costs"):
a negative count, a string or a number beyond any count is left out of the usage and the
answer is not priced (said in the record and on the console): it never fails the case,
never makes a negative or infinite cost, and never keeps ``--budget-usd`` from being
reached. Through the real command line, the official OpenAI SDK and the loopback fake
server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from support.cli import agentv_cli
from support.fakes import FakeLLMServer, Fault
from support.files import write
from support.results import rows
from support.targets import openai_target, write_targets

#: every test here starts agentv (or a script) as a process: left out of `make test-fast`
pytestmark = pytest.mark.slow

ANSWER = "the answer"


def _completion(usage: dict[str, Any]) -> Fault:
    """An OpenAI chat completion answering ``ANSWER`` with this ``usage``."""
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": ANSWER},
                "finish_reason": "stop",
            }
        ],
        "usage": usage,
    }
    return Fault.body(json.dumps(body), content_type="application/json")


def _project(repo: Path, server: FakeLLMServer, cases: int) -> None:
    # $1 a token of output, input free: every answer's cost is its output tokens
    price = {"input_per_mtok": 0, "output_per_mtok": 1000000}
    write_targets(repo, openai_target(server.url, retry_initial_delay_ms=1, price=price))
    write(
        repo,
        "evals/s.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n"
        + "".join(
            f"  - id: c{i}\n    outcome: x\n    input_messages: [{{role: user, content: q{i}}}]\n"
            "    evaluators: [{type: contains, value: answer}]\n"
            for i in range(cases)
        ),
    )


BAD = {
    "negative": (
        {"prompt_tokens": 5, "completion_tokens": -1000, "total_tokens": -995},
        ["output_tokens: -1000", "total_tokens: -995"],
    ),
    "strings": (
        {"prompt_tokens": "12", "completion_tokens": "5", "total_tokens": 17},
        ["input_tokens: '12'", "output_tokens: '5'"],
    ),
    "huge": (
        {"prompt_tokens": 1e308, "completion_tokens": 2, "total_tokens": 1e308},
        ["input_tokens: 1e+308", "total_tokens: 1e+308"],
    ),
}


@pytest.mark.parametrize("kind", sorted(BAD))
def test_counts_that_are_not_counts_are_not_priced_and_the_answer_stands(
    repo: Path, kind: str
) -> None:
    usage, ignored = BAD[kind]
    with FakeLLMServer() as server:
        _project(repo, server, 1)
        server.script(_completion(usage))
        proc = agentv_cli(
            repo, "eval", "evals/s.yaml", "--out", "r.jsonl", "--summary-json", "s.json"
        )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (record,) = rows(repo / "r.jsonl")
    assert (record["status"], record["candidate_answer"]) == ("ok", ANSWER)
    assert record["usage"]["ignored"] == ignored
    assert record["cost"] == {"target": {"unpriced": True}}
    assert (
        "target 'default': the server reported token counts that are not counts ("
        + ", ".join(ignored)
        + "): those answers are not priced"
    ) in proc.stdout + proc.stderr
    summary = json.loads((repo / "s.json").read_text())
    assert "inf" not in json.dumps(summary).lower()
    assert summary["cost"]["usd"] == 0.0 and summary["cost"]["unpriced_runs"] == 1


def test_a_negative_count_does_not_keep_the_budget_from_being_reached(repo: Path) -> None:
    """$1 spent, then an answer claiming -$1, then $1: the budget of $1.5 is reached after
    the third, and the fourth is not sent."""
    good = _completion({"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2})
    back = _completion({"prompt_tokens": 1, "completion_tokens": -1, "total_tokens": 0})
    with FakeLLMServer() as server:
        _project(repo, server, 4)
        server.script(good, back, good, good)
        proc = agentv_cli(
            repo,
            "eval",
            "evals/s.yaml",
            "--out",
            "r.jsonl",
            "--budget-usd",
            "1.5",
            "--workers",
            "1",
        )
        sent = len(server.requests)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert sent == 3
    statuses = {r["eval_id"]: r["status"] for r in rows(repo / "r.jsonl")}
    assert statuses == {"c0": "ok", "c1": "ok", "c2": "ok", "c3": "skipped"}
