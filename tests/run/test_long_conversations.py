"""Long live conversations (docs/reliability.md, "Long conversations"): each request carries
the whole conversation so far, but what a run keeps of it, and what `agentv estimate` counts
for it, grows with the turns, not with their square.

No test here is timed. Memory is measured with tracemalloc (what Python allocates) at two
sizes, four times apart: keeping every request would make the larger run take about sixteen
times the memory of the smaller, keeping each message once about four. The estimate's work
is counted the same way, in the calls it makes.
"""

from __future__ import annotations

import json
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import agentv
from support.fakes import FakeLLMServer, RecordedRequest
from support.files import write
from support.providers import provider_fields

#: a linear growth makes four times the turns cost about four times as much; a quadratic
#: one about sixteen times: the bound sits between them, with room for the fixed part
GROWTH_BOUND = 8.0


def _suite(repo: Path, turns: int) -> None:
    said = "".join(
        f"      - content: 'Question {i}: what is six times seven?'\n" for i in range(turns)
    )
    write(
        repo,
        "evals/long.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n"
        "  - id: long\n    outcome: Answers.\n"
        "    evaluators: [{type: contains, value: '42'}]\n"
        "    input_messages: [{role: system, content: Be terse.}]\n"
        "    turns:\n" + said,
    )


def _mock_targets(repo: Path) -> None:
    write(
        repo,
        ".agentv/targets.yaml",
        "$schema: agentv-targets-v2.2\ntargets:\n"
        "  - {name: default, provider: mock, response: 'The answer is 42.'}\n",
    )


def _peak_bytes(work: Callable[[], Any]) -> int:
    """The most memory Python held at once while ``work`` ran, above what it held before."""
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        work()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        if started:
            tracemalloc.stop()


def _calls(work: Callable[[], Any]) -> int:
    """The function calls (Python's and built-in ones) made while ``work`` ran."""
    count = 0

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(profile)
    try:
        work()
    finally:
        sys.setprofile(None)
    return count


def test_a_run_keeps_memory_linear_in_a_conversations_turns(repo: Path) -> None:
    _mock_targets(repo)

    def run(turns: int) -> int:
        _suite(repo, turns)
        out = repo / f"r{turns}.jsonl"
        found: list[agentv.EvalRun] = []
        peak = _peak_bytes(lambda: found.append(agentv.run_eval("evals/", out=out)))
        (result,) = found[0].results
        assert result.status == "ok", result.error
        assert len(result.turns or ()) == turns
        return peak

    run(10)  # imports and first-use caches, not counted below
    small, large = run(150), run(600)
    # each request is a list of the whole conversation: a run that kept every request (or
    # every request's record of what was sent) held 88 MB at 600 turns, 6 MB at 150
    assert large < GROWTH_BOUND * small, (small, large)
    assert large < 30_000_000, large


def test_the_estimate_of_a_long_conversation_grows_linearly(repo: Path) -> None:
    _mock_targets(repo)

    def estimate(turns: int) -> tuple[int, int]:
        _suite(repo, turns)
        found: list[agentv.Estimate] = []
        calls = _calls(lambda: found.append(agentv.estimate("evals/long.yaml")))
        (line,) = found[0].lines
        assert line.requests == turns
        return calls, line.input_tokens

    estimate(5)
    (small, _), (large, tokens) = estimate(100), estimate(400)
    # building each turn's request anew made 8.1 million calls at 400 turns, 0.5 at 100
    assert large < GROWTH_BOUND * small, (small, large)
    # what is counted is still every request whole: the system message and the question
    # of each turn, and 500 tokens for each earlier answer ("word " 500 times)
    question = len("Question 0: what is six times seven?")
    assert tokens > sum(i * 2500 + question for i in range(400)) // 4


def _words(count: int) -> str:
    return "word " * count


def test_the_estimate_counts_the_very_requests_a_run_sends(repo: Path) -> None:
    # a target that answers exactly what the estimate takes an answer to be (5 tokens of
    # "word "): the estimate's input tokens are then the run's requests' own, turn by turn,
    # with guideline files and attachments joining at later turns
    write(repo, "evals/style.instructions.md", "Answer in one line.\n" * 3)
    write(repo, "evals/notes.txt", "Six times seven is a classic.\n")
    write(
        repo,
        "evals/conv.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n"
        "  - id: conv\n    outcome: Answers.\n"
        "    evaluators: [{type: contains, value: word}]\n"
        "    input_messages: [{role: system, content: Be terse.}]\n"
        "    turns:\n"
        "      - content: First question.\n"
        "      - content:\n"
        "          - {type: text, value: 'With a guideline now.'}\n"
        "          - {type: file, value: style.instructions.md}\n"
        "      - content:\n"
        "          - {type: text, value: 'And a file to read.'}\n"
        "          - {type: file, value: notes.txt}\n"
        "      - content: Last question.\n",
    )

    def reply(rec: RecordedRequest) -> str:
        return _words(5)

    with FakeLLMServer(reply=reply) as server:
        entry = {"name": "default", "provider": "openai", **provider_fields("openai", server)}
        write(
            repo,
            ".agentv/targets.yaml",
            "$schema: agentv-targets-v2.2\ntargets:\n  - " + json.dumps(entry) + "\n",
        )
        found = agentv.estimate("evals/conv.yaml", answer_tokens=5)
        run = agentv.run_eval("evals/conv.yaml", out="r.jsonl")
        sent = [rec.body or {} for rec in server.requests]
    (result,) = run.results
    assert result.status == "ok", result.error
    assert len(sent) == 4
    chars = [sum(len(m["content"]) for m in body["messages"]) for body in sent]
    (line,) = found.lines
    assert (line.requests, line.input_tokens) == (4, sum(c // 4 + 1 for c in chars))
    # the guideline joined the system message at the second turn, the file at the third
    assert "Answer in one line." not in sent[0]["messages"][0]["content"]
    assert sent[3]["messages"][0]["content"].count("Answer in one line.") == 3  # once
    assert "classic" in sent[3]["messages"][-3]["content"]
