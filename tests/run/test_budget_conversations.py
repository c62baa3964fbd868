"""A budget reached part-way through a live conversation (docs/running.md, "A budget";
docs/after-the-run.md, "Resume and rerun"): the turns paid for are kept in a `skipped`
record that says where the budget stopped it, and `--resume` goes on from there without
sending (or paying for) any of them again. The target, the judge and the simulated user are
loopback fake OpenAI servers driven through the official SDK, so every request is counted
and read."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import agentv
from support.cli import agentv_cli
from support.fakes import FakeLLMServer, RecordedRequest, ToolCalls
from support.files import write
from support.providers import provider_fields
from support.results import rows

#: every test here starts agentv (or a script) as a process: left out of `make test-fast`
pytestmark = pytest.mark.slow

#: every answer of five words costs exactly $1: output at $0.20 a token (a word), input free
PRICE = {"input_per_mtok": 0, "output_per_mtok": 200_000}
VERDICT = '{"score": 1, "hits": ["fine"], "misses": [], "reasoning": "fine"}'
#: what the model writes as the arguments of its call, spaced its own way
ARGUMENTS = '{"city":  "Oslo"}'


def _messages(rec: RecordedRequest) -> list[dict[str, Any]]:
    return list((rec.body or {}).get("messages", []))


def _planner(rec: RecordedRequest) -> str | ToolCalls:
    """Five words an answer; at turn 2 it first calls the weather tool."""
    last = _messages(rec)[-1]
    if last["role"] == "tool":
        return "the sky is clear there"
    if last["content"].startswith("Turn 2"):
        return ToolCalls((("weather", ARGUMENTS),), text="let me look that up")
    number = sum(m["role"] == "user" for m in _messages(rec))
    return f"answer number {number} for you"


def _targets(repo: Path, target: FakeLLMServer, judge: FakeLLMServer | None = None) -> None:
    entries: list[dict[str, Any]] = [
        {"name": "default", "provider": "openai", **provider_fields("openai", target)}
        | {"price": PRICE, "judge_target": "judge"}
    ]
    if judge is not None:
        entries.append(
            {"name": "judge", "provider": "openai", **provider_fields("openai", judge)}
            | {"price": PRICE}
        )
    else:
        entries.append({"name": "judge", "provider": "mock", "response": VERDICT})
    body = "".join(f"  - {json.dumps(e)}\n" for e in entries)
    write(repo, ".agentv/targets.yaml", f"$schema: agentv-targets-v2.2\ntargets:\n{body}")


def _conversation(repo: Path, evaluators: str = "[{type: contains, value: answer}]") -> None:
    turns = "".join(
        f"      - content: 'Turn {i}: tell me more.'\n"
        "        evaluators: [{type: regex, value: '(?i)answer|look|sky'}]\n"
        for i in range(1, 5)
    )
    write(
        repo,
        "evals/trip.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n"
        "  - id: trip\n    outcome: Plans the trip.\n"
        "    input_messages: [{role: system, content: You plan trips.}]\n"
        f"    evaluators: {evaluators}\n"
        "    tools:\n"
        "      - name: weather\n        description: The weather in a city.\n"
        "        parameters: {type: object, properties: {city: {type: string}}}\n"
        "        result: {sky: clear}\n"
        "    turns:\n" + turns,
    )


def _without_times(value: Any) -> Any:
    """A record's part with what differs from run to run left out (times, reuse)."""
    if isinstance(value, dict):
        return {
            k: _without_times(v)
            for k, v in value.items()
            if k not in ("latency_ms", "duration_ms", "cached")
        }
    if isinstance(value, list):
        return [_without_times(v) for v in value]
    return value


def test_a_budget_reached_mid_turn_keeps_the_paid_turns_and_resume_goes_on(repo: Path) -> None:
    # the whole conversation without a budget: what every request and the record should be
    with FakeLLMServer(reply=_planner) as reference:
        _targets(repo, reference)
        _conversation(repo)
        whole = agentv_cli(repo, "eval", "evals/", "--out", "whole.jsonl")
        assert whole.returncode == 0, whole.stderr
    expected = [_messages(rec) for rec in reference.requests]
    assert len(expected) == 5  # turn 2 takes two requests: the call, then the answer

    with FakeLLMServer(reply=_planner) as server:
        _targets(repo, server)
        # $1 a request: turn 1, then turn 2's call bring the spend to the budget, and turn
        # 2's second request is not sent
        first = agentv_cli(repo, "eval", "evals/", "--budget-usd", "1.5", "--out", "r.jsonl")
        assert first.returncode == 4, first.stderr
        assert len(server.requests) == 2
        (stopped,) = rows(repo / "r.jsonl")
        reason = stopped["skip_reason"]
        assert stopped["status"] == "skipped" and not stopped["passed"]
        assert reason.startswith(
            "not finished: the run's spend reached its budget ($2.0000 of $1.5) during turn 2"
        )
        assert stopped["stopped"] == {"turn": 2, "reason": reason}
        assert stopped["attempts"] == 2 and stopped["cost"] == {"target": {"usd": 2.0}}
        # what was paid for is kept: turn 1 whole, turn 2's call with its result
        one, two = stopped["turns"]
        assert (one["answer"], one["status"]) == ("answer number 1 for you", "ok")
        assert two["answer"] == "" and "status" not in two
        (request,) = two["requests"]
        assert (request["text"], request["tool_calls"]) == ("let me look that up", 1)
        (call,) = two["tool_calls"]
        assert (call["arguments"], call["arguments_text"]) == ({"city": "Oslo"}, ARGUMENTS)
        assert call["result"] == '{"sky": "clear"}'
        assert stopped["misses"][0] == f"Skipped: {reason}"
        assert "1 run(s) not run: the budget was reached (exit code 4)" in first.stderr

        again = agentv_cli(repo, "eval", "evals/", "--resume", "r.jsonl", "--budget-usd", "100")
        assert again.returncode == 0, again.stderr
        assert (
            "1 run(s) to do (1 conversation(s) going on from where the budget stopped them)"
        ) in again.stdout
        # nothing paid for is sent again: each request of the conversation went out once,
        # each as the whole run sent it (the model's own words and arguments, byte for byte)
        assert [_messages(rec) for rec in server.requests] == expected
    resumed = rows(repo / "r.jsonl")[-1]
    (reference_record,) = rows(repo / "whole.jsonl")
    assert resumed["status"] == "ok" and "skip_reason" not in resumed
    assert resumed["resumed"] == {"from": f"{repo / 'r.jsonl'}:1", "turns": 2}
    assert resumed["attempts"] == 3
    assert resumed["cost"] == {"target": {"usd": 3.0, "reused_usd": 2.0}}
    assert _without_times(resumed["turns"]) == _without_times(reference_record["turns"])
    assert resumed["score"] == reference_record["score"]
    assert resumed["trajectory"] == [
        {**step, "duration_ms": resumed["trajectory"][0]["duration_ms"]}
        for step in reference_record["trajectory"]
    ]
    # the requests taken from the record say that nothing was sent for them this time
    assert [r.get("cached", False) for t in resumed["turns"] for r in t["requests"]] == [
        True,
        True,
        False,
        False,
        False,
    ]
    summary = agentv.read_results(repo / "r.jsonl").summary
    assert (summary.ok, summary.skipped) == (1, 0)


def test_a_budget_reached_between_turns_keeps_them_graded(repo: Path) -> None:
    with FakeLLMServer(reply=_planner) as server:
        _targets(repo, server)
        _conversation(repo)
        # turn 1 ($1) and turn 2's two requests ($3): turn 3 is not sent
        first = agentv_cli(repo, "eval", "evals/", "--budget-usd", "2.5", "--out", "r.jsonl")
        assert first.returncode == 4, first.stderr
        (stopped,) = rows(repo / "r.jsonl")
        assert stopped["stopped"]["turn"] == 3
        assert "before turn 3;" in stopped["skip_reason"]
        assert [t["status"] for t in stopped["turns"]] == ["ok", "ok"]
        assert stopped["expected_aspect_count"] == 2  # the graded turns' aspects
        assert len(server.requests) == 3
        again = agentv_cli(repo, "eval", "evals/", "--resume", "r.jsonl")
        assert again.returncode == 0, again.stderr
        assert len(server.requests) == 5  # turns 3 and 4 only
    resumed = rows(repo / "r.jsonl")[-1]
    assert [t["status"] for t in resumed["turns"]] == ["ok"] * 4
    assert resumed["expected_aspect_count"] == 5  # four turns and the conversation
    # the turns taken up are the record's (each request's time too; a turn's sum of them
    # is made again from them, to the microsecond)
    kept = [{k: v for k, v in t.items() if k != "latency_ms"} for t in resumed["turns"][:2]]
    assert kept == [
        {
            **{k: v for k, v in turn.items() if k != "latency_ms"},
            "requests": [{**r, "cached": True} for r in turn["requests"]],
        }
        for turn in stopped["turns"]
    ]


def test_a_budget_reached_before_the_conversations_grade_resumes_with_the_grade_only(
    repo: Path,
) -> None:
    verdict = '{"score": 1, "hits": ["planned"], "misses": [], "reasoning": "good plan"}'
    with FakeLLMServer(reply=_planner) as server, FakeLLMServer(reply=verdict) as judge:
        _targets(repo, server, judge)
        _conversation(repo, evaluators="[{type: llm_judge}]")
        # the five requests of the turns cost $5: the conversation's judge is not asked
        first = agentv_cli(repo, "eval", "evals/", "--budget-usd", "5", "--out", "r.jsonl")
        assert first.returncode == 4, first.stderr
        assert (len(server.requests), len(judge.requests)) == (5, 0)
        (stopped,) = rows(repo / "r.jsonl")
        assert "before the conversation's grade was asked for" in stopped["skip_reason"]
        assert stopped["stopped"]["turn"] == 4 and len(stopped["turns"]) == 4
        again = agentv_cli(repo, "eval", "evals/", "--resume", "r.jsonl", "--budget-usd", "50")
        assert again.returncode == 0, again.stderr
        assert (len(server.requests), len(judge.requests)) == (5, 1)
    resumed = rows(repo / "r.jsonl")[-1]
    assert (resumed["status"], resumed["score"]) == ("ok", 1.0)
    assert resumed["attempts"] == 0 and resumed["cached"] is True  # no answer sent again
    (entry,) = resumed["evaluator_results"]
    assert entry["reasoning"] == "good plan"
    # the judge's verdict is paid now, the turns were paid before
    assert resumed["cost"]["target"] == {"usd": 0.0, "reused_usd": 5.0}
    assert resumed["cost"]["judge"]["usd"] > 0


def test_a_conversation_whose_record_cannot_be_taken_up_is_run_again(repo: Path) -> None:
    with FakeLLMServer(reply=_planner) as server:
        _targets(repo, server)
        _conversation(repo)
        first = agentv_cli(repo, "eval", "evals/", "--budget-usd", "2.5", "--out", "r.jsonl")
        assert first.returncode == 4, first.stderr
        (stopped,) = rows(repo / "r.jsonl")
        del stopped["turns"][1]["requests"]  # damaged: what turn 2 asked is not known
        (repo / "r.jsonl").write_text(json.dumps(stopped) + "\n", encoding="utf-8")
        again = agentv_cli(repo, "eval", "evals/", "--resume", "r.jsonl")
        assert again.returncode == 0, again.stderr
        assert len(server.requests) == 3 + 5  # the whole conversation, from its start
    resumed = rows(repo / "r.jsonl")[-1]
    assert resumed["status"] == "ok" and "resumed" not in resumed
    assert resumed["cost"] == {"target": {"usd": 5.0}}


# --- a simulated user ------------------------------------------------------------------------


def _agent(rec: RecordedRequest) -> str:
    asked = _messages(rec)[-1]["content"]
    if "order 1234" in asked:
        return "Refund issued for order 1234."
    if "refund" in asked.lower():
        return "Sorry. Your order number, please?"
    return "Hello! How can I help?"


def _customer(rec: RecordedRequest) -> str:
    heard = _messages(rec)[-1]["content"]
    if "Refund issued" in heard:
        return "[[DONE]]"
    if "order number" in heard:
        return "It is order 1234."
    return "My kettle arrived broken, refund please."


def test_a_simulated_conversation_the_budget_stopped_goes_on_with_its_recorded_turns(
    repo: Path,
) -> None:
    with FakeLLMServer(reply=_agent) as agent, FakeLLMServer(reply=_customer) as customer:
        entries = [
            {"name": "default", "provider": "openai", **provider_fields("openai", agent)}
            | {"price": PRICE, "judge_target": "judge"},
            {"name": "customer", "provider": "openai", **provider_fields("openai", customer)}
            | {"price": PRICE},
            {"name": "judge", "provider": "mock", "response": VERDICT},
        ]
        body = "".join(f"  - {json.dumps(e)}\n" for e in entries)
        write(repo, ".agentv/targets.yaml", f"$schema: agentv-targets-v2.2\ntargets:\n{body}")
        write(
            repo,
            "evals/support.yaml",
            "$schema: agentv-eval-v2\nevalcases:\n"
            "  - id: refund\n    outcome: Refunds the kettle.\n"
            "    input_messages: [{role: system, content: You are a support agent.}]\n"
            "    user:\n      target: customer\n      persona: A customer.\n"
            "      goal: A refund for order 1234.\n      max_turns: 6\n"
            "    turn_evaluators: [{type: regex, value: '(?i)help|order|refund'}]\n"
            "    evaluators: [{type: contains, value: Refund issued}]\n",
        )
        # the customer's first message ($1), the agent's answer ($1), the customer's second
        # ($1): the agent's second answer is not sent
        first = agentv_cli(
            repo, "eval", "evals/", "--budget-usd", "2.5", "--workers", "1", "--out", "r.jsonl"
        )
        assert first.returncode == 4, first.stderr
        assert (len(agent.requests), len(customer.requests)) == (1, 2)
        (stopped,) = rows(repo / "r.jsonl")
        assert stopped["user"]["ended"] == "budget"
        assert [t["content"] for t in stopped["turns"]] == [
            "My kettle arrived broken, refund please.",
            "It is order 1234.",
        ]
        assert stopped["turns"][1]["answer"] == ""  # its answer was not asked for
        again = agentv_cli(repo, "eval", "evals/", "--resume", "r.jsonl")
        assert again.returncode == 0, again.stderr
        # the agent is asked its second answer only, the customer only whether it is done
        assert (len(agent.requests), len(customer.requests)) == (2, 3)
        assert _messages(agent.requests[1])[1:] == [
            {"role": "user", "content": "My kettle arrived broken, refund please."},
            {"role": "assistant", "content": "Sorry. Your order number, please?"},
            {"role": "user", "content": "It is order 1234."},
        ]
    resumed = rows(repo / "r.jsonl")[-1]
    assert (resumed["status"], resumed["user"]["ended"]) == ("ok", "goal")
    assert [t["content"] for t in resumed["turns"]] == [t["content"] for t in stopped["turns"]]
    assert [t["user"]["source"] for t in resumed["turns"]] == ["simulator", "simulator"]
    # its two messages were paid before; its "[[DONE]]" (one word) now
    assert resumed["cost"]["user"] == {"usd": 0.2, "reused_usd": 2.0}
    assert resumed["cost"]["target"] == {"usd": 1.0, "reused_usd": 1.0}


def test_a_large_answer_stored_once_is_taken_up_byte_for_byte(repo: Path) -> None:
    # an answer over 64 KiB is stored once in the record (large_content), its turn referring
    # to it: taken up again, it goes back to the model whole, trailing space included
    large = "word " * 14_000

    def reply(rec: RecordedRequest) -> str:
        users = sum(m["role"] == "user" for m in _messages(rec))
        return large if users == 1 else "answer number two for you"

    with FakeLLMServer(reply=reply) as server:
        _targets(repo, server)
        write(
            repo,
            "evals/long.yaml",
            "$schema: agentv-eval-v2\nevalcases:\n"
            "  - id: long\n    outcome: Answers.\n"
            "    input_messages: [{role: system, content: Be thorough.}]\n"
            "    evaluators: [{type: contains, value: number two}]\n"
            "    turns:\n      - content: Write at length.\n      - content: And now?\n",
        )
        first = agentv_cli(repo, "eval", "evals/", "--budget-usd", "1000", "--out", "r.jsonl")
        assert first.returncode == 4, first.stderr
        text = (repo / "r.jsonl").read_text(encoding="utf-8")
        assert text.count(large) == 1  # once, in large_content
        again = agentv_cli(repo, "eval", "evals/", "--resume", "r.jsonl", "--budget-usd", "100000")
        assert again.returncode == 0, again.stderr
        assert len(server.requests) == 2
        assert _messages(server.requests[1])[2] == {"role": "assistant", "content": large}
    resumed = rows(repo / "r.jsonl")[-1]
    assert resumed["status"] == "ok" and resumed["resumed"]["turns"] == 1
