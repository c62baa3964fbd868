"""Simulated users (docs/eval-files.md, "Simulated users"): a model plays the user toward a
goal, turn by turn, through its own target. Both parties are loopback fake OpenAI servers
driven through the official SDK (each answers from the conversation it is sent), so every
request either party got is counted and read."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import agentv
from support.cli import agentv_cli
from support.fakes import Every, FakeLLMServer, Fault, RecordedRequest, ToolCalls
from support.files import write
from support.providers import provider_fields
from support.suites import (
    agent_reply,
    customer_reply,
    messages_of,
    support_parties,
    write_support_suite,
)
from support.targets import write_targets


def test_a_goal_reached_at_turn_three_ends_the_conversation(repo: Path) -> None:
    with (
        FakeLLMServer(reply=agent_reply) as agent,
        FakeLLMServer(reply=customer_reply) as customer,
    ):
        write_targets(repo, *support_parties(agent, customer))
        write_support_suite(repo, {"id": "refund"})
        run = agentv.run_eval("evals/support.yaml", cwd=repo, out="r.jsonl")
    (result,) = run.results
    assert (result.status, result.score) == ("ok", 1.0), result.error
    assert [t["content"] for t in result.turns] == [
        "Hi there.",  # the first message, as written
        "My kettle arrived broken and I want a refund.",
        "It is order 1234.",
    ]
    assert [t["user"]["source"] for t in result.turns] == ["first_message", *["simulator"] * 2]
    assert result.user["ended"] == "goal" and result.user["turns"] == 3
    # the agent got 3 requests, the simulator 3 (two messages, then done)
    assert len(agent.requests) == 3 and len(customer.requests) == 3
    # the agent's third request: the simulator's messages as user turns, byte-exact
    assert messages_of(agent.requests[2])[1:] == [
        {"role": "user", "content": "Hi there."},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "My kettle arrived broken and I want a refund."},
        {"role": "assistant", "content": "Sorry about that. What is your order number?"},
        {"role": "user", "content": "It is order 1234."},
    ]
    # the simulator sees the conversation from the user's side, with its part in the system
    last = customer.requests[2].body
    system = last["messages"][0]["content"]
    assert "Who you are: A polite customer." in system and "- order: 1234" in system
    assert "Get a refund for the broken kettle of order 1234." in system
    assert [m["role"] for m in last["messages"][1:]] == ["user", "assistant"] * 3 + ["user"]
    assert last["messages"][-1]["content"] == "Refund issued for order 1234."
    assert last["messages"][2]["content"] == "Hi there."  # its own first message
    # its sampling is its own: sent to it, never to the agent
    assert (last["seed"], last["temperature"]) == (7, 0.3)
    assert "seed" not in agent.requests[0].body and "temperature" not in agent.requests[0].body
    # its tokens are counted apart from the agent's
    assert result.user["usage"]["input_tokens"] > 0
    agent_in = sum(t["usage"]["input_tokens"] for t in result.turns)
    assert result.usage["input_tokens"] == agent_in
    turns = run.summary.turns
    assert turns is not None and dict(turns.ended) == {"goal": 1}
    assert turns.user_tokens is not None and turns.user_tokens.input > 0


def test_max_turns_and_stop_when_end_the_conversation(repo: Path) -> None:
    stuck = "Hello?"  # a customer that never says what it wants, and never ends
    with (
        FakeLLMServer(reply=agent_reply) as agent,
        FakeLLMServer(reply=lambda rec: stuck) as customer,
    ):
        write_targets(repo, *support_parties(agent, customer))
        write_support_suite(
            repo,
            {"id": "capped", "max_turns": 2},
            # a judge's question: the mock judge finds it met at the first answer
            {"id": "judged", "extra": "\n      stop_when: The agent greeted the customer."},
        )
        run = agentv.run_eval("evals/support.yaml", cwd=repo)
    by_id = {r.eval_id: r for r in run.results}
    capped, judged = by_id["capped"], by_id["judged"]
    assert capped.user["ended"] == "max_turns" and len(capped.turns) == 2
    assert capped.status == "failed"  # graded as any conversation: no refund
    assert judged.user["ended"] == "stop_when" and len(judged.turns) == 1
    assert judged.turns[0]["stop_check"] == {"score": 1.0, "passed": True}
    # capped: 1 simulated message (the first is written); judged: none (stopped at once)
    assert len(customer.requests) == 1

    with (
        FakeLLMServer(reply=agent_reply) as agent,
        FakeLLMServer(reply=customer_reply) as customer,
    ):
        write_targets(repo, *support_parties(agent, customer))
        check = "\n      stop_when: {type: contains, value: Refund issued}"
        write_support_suite(repo, {"id": "checked", "extra": check})
        (checked,) = agentv.run_eval("evals/support.yaml", cwd=repo).results
    assert checked.user["ended"] == "stop_when" and len(checked.turns) == 3
    assert checked.status == "ok"
    # the check ended it: the simulator was not asked after the refund
    assert len(customer.requests) == 2
    assert [t["stop_check"]["passed"] for t in checked.turns] == [False, False, True]


BREAKS = {
    "as-assistant": ("Assistant: How can I help you today?", "answered as the assistant"),
    "reveals": ("As the simulated user, my goal is a refund.", "revealed its instructions"),
    "transcript": ("@[User]: hi\n@[Assistant]: hello", "transcript of several turns"),
    # an LM API answering nothing is a failed call already (retried, then given up)
    "empty": ("   ", "the API returned an empty answer"),
    "tools": (ToolCalls((("lookup", {"q": 1}),)), "answered with tool calls"),
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(BREAKS))
def test_a_simulator_that_breaks_role_is_a_user_error_not_the_models(repo: Path, kind: str) -> None:
    bad, why = BREAKS[kind]

    def reply(rec: RecordedRequest) -> str | ToolCalls:
        # the persona says which customer this is: one breaks role, the other does not
        return bad if "BROKEN" in messages_of(rec)[0]["content"] else customer_reply(rec)

    with FakeLLMServer(reply=agent_reply) as agent, FakeLLMServer(reply=reply) as customer:
        write_targets(repo, *support_parties(agent, customer))
        write_support_suite(repo, {"id": "good"}, {"id": "bad", "persona": "A BROKEN customer."})
        proc = agentv_cli(repo, "eval", "evals/support.yaml", "--out", "r.jsonl")
        asked_agent = len(agent.requests)
    assert proc.returncode == 5, proc.stdout + proc.stderr
    assert "1 simulated user(s) failed (user_error): exit code 5" in proc.stderr
    records = {
        r["eval_id"]: r for r in map(json.loads, (repo / "r.jsonl").read_text().splitlines())
    }
    bad_rec, good = records["bad"], records["good"]
    assert bad_rec["status"] == "user_error" and why in bad_rec["error"]
    assert bad_rec["error"].startswith("the simulated user failed: ")
    assert bad_rec["user"]["ended"] == "user_error"
    assert bad_rec["stopped"]["turn"] == 2  # its first message was written; its second broke
    assert len(bad_rec["turns"]) == 1
    assert asked_agent == 3 + 1  # the good conversation's 3 turns, the bad one's first
    # the model's statistics are the good conversation's alone
    assert good["status"] == "ok"
    assert "Passed: 1  Failed: 0  Errors: 0  Invalid: 0  User errors: 1" in proc.stdout
    assert "Mean score: 1.000 (over 1 graded runs)" in proc.stdout
    summary = agentv.read_results(repo / "r.jsonl").summary
    assert (summary.user_errors, summary.errors, summary.graded, summary.mean) == (1, 0, 1, 1.0)
    # JUnit: skipped, neither a failure nor an error of the model
    xml = agentv.write_junit(repo / "r.jsonl", repo / "r.xml").read_text()
    assert '<skipped message="the simulated user failed: ' in xml
    assert 'errors="0"' in xml and 'failures="0"' in xml


def test_a_simulator_whose_target_fails_is_a_user_error(repo: Path) -> None:
    down = FakeLLMServer(standing=(Every(1, Fault.server_error()),))
    with FakeLLMServer(reply=agent_reply) as agent, down:
        write_targets(repo, *support_parties(agent, down))
        write_support_suite(repo, {"id": "down"}, {"id": "opens", "first": "null"})
        run = agentv.run_eval("evals/support.yaml", cwd=repo)
    by_id = {r.eval_id: r for r in run.results}
    for result in run.results:
        assert result.status == "user_error"
        assert "its target 'customer' failed" in (result.error or "") and "500" in result.error
    assert len(by_id["down"].turns) == 1  # the written first message was answered
    assert by_id["opens"].turns == [] and by_id["opens"].stopped["turn"] == 1
    assert len(agent.requests) == 1  # nothing was sent for the one that never opened


def test_a_simulator_done_before_its_first_message_is_a_user_error(repo: Path) -> None:
    with FakeLLMServer(reply=agent_reply) as agent, FakeLLMServer(reply="[[DONE]]") as customer:
        write_targets(repo, *support_parties(agent, customer))
        write_support_suite(repo, {"id": "mute", "first": "null"})
        (result,) = agentv.run_eval("evals/support.yaml", cwd=repo).results
    assert result.status == "user_error" and result.turns == []
    assert "it was done before its first message" in (result.error or "")
    assert agent.requests == [] and len(customer.requests) == 1
    assert result.user["usage"]["output_tokens"] > 0  # its one call was counted


def test_a_role_judge_checks_every_simulated_message(repo: Path) -> None:
    with (
        FakeLLMServer(reply=agent_reply) as agent,
        FakeLLMServer(reply=customer_reply) as customer,
    ):
        no = '{"in_role": false, "reason": "it speaks as the shop"}'
        yes = '{"in_role": true, "reason": "a customer speaking"}'
        judges = {
            "strict": {"provider": "mock", "response": no},
            "lenient": {"provider": "mock", "response": yes},
        }
        write_targets(repo, *support_parties(agent, customer, **judges))
        text = (repo / ".agentv/targets.yaml").read_text()
        for verdict in ("lenient", "strict"):
            write(
                repo,
                ".agentv/targets.yaml",
                text.replace('"judge_target": "judge"', f'"judge_target": "{verdict}"'),
            )
            write_support_suite(repo, {"id": "checked", "extra": "\n      role_judge: true"})
            (result,) = agentv.run_eval("evals/support.yaml", cwd=repo).results
            if verdict == "lenient":
                assert result.status == "ok", result.error
                checks = [t["user"].get("role_check") for t in result.turns]
                assert checks[0] is None  # the written first message is not checked
                assert checks[1:] == [{"in_role": True, "reason": "a customer speaking"}] * 2
            else:
                assert result.status == "user_error"
                assert "the role check found it out of role: it speaks as the shop" in (
                    result.error or ""
                )


def test_replay_sends_the_recorded_user_turns_byte_exact_and_reports_a_divergence(
    repo: Path,
) -> None:
    def slow_agent(rec: RecordedRequest) -> str:
        """Agent B wants an e-mail address too before it refunds."""
        asked = messages_of(rec)[-1]["content"]
        if "@" in asked:
            return "Refund issued for order 1234."
        if re.search(r"order \d+", asked):
            return "What is your e-mail address?"
        return agent_reply(rec)

    def customer(rec: RecordedRequest) -> str:
        heard = messages_of(rec)[-1]["content"]
        return "ada@example.com" if "e-mail" in heard else customer_reply(rec)

    check = "\n      stop_when: {type: contains, value: Refund issued}"
    with (
        FakeLLMServer(reply=agent_reply) as agent,
        FakeLLMServer(reply=slow_agent) as agent_b,
        FakeLLMServer(reply=customer) as sim,
    ):
        fields_b = {"provider": "openai", "judge_target": "judge"}
        write_targets(
            repo, *support_parties(agent, sim, b=fields_b | provider_fields("openai", agent_b))
        )
        write_support_suite(repo, {"id": "refund", "first": "null", "extra": check})
        first = agentv.run_eval("evals/support.yaml", cwd=repo, out="recorded.jsonl")
        recorded = [t["content"] for t in first.results[0].turns]
        assert first.results[0].user["ended"] == "stop_when" and len(recorded) == 3
        sim.reset()
        agent.reset()
        replayed = agentv.run_eval(
            "evals/support.yaml",
            cwd=repo,
            target=["default", "b"],
            replay_user="recorded.jsonl",
        )
        # the same agent: every user turn from the recording, the simulator never asked
        sent = [messages_of(r)[-1]["content"] for r in agent.requests]
        assert sent == recorded  # byte-exact
        by_target = {r.target: r for r in replayed.results}
        same, other = by_target["default"], by_target["b"]
        assert same.user["replay"] == {"from": same.user["replay"]["from"], "turns": 3}
        assert "recorded.jsonl:1" in same.user["replay"]["from"]
        assert [t["user"]["source"] for t in same.turns] == ["replay"] * 3
        # agent B needed a fourth turn: the recording has none, the simulator played it
        assert [messages_of(r)[-1]["content"] for r in agent_b.requests] == [
            *recorded,
            "ada@example.com",
        ]
        assert len(sim.requests) == 1
        replay = other.user["replay"]
        assert replay["turns"] == 3 and replay["diverged_at"] == 4
        assert "ended by stop_when" in replay["reason"]
        assert [t["user"]["source"] for t in other.turns] == ["replay"] * 3 + ["simulator"]
        assert other.status == "ok" and other.user["ended"] == "stop_when"
        assert replayed.summary.turns is not None
        assert replayed.summary.turns.replays_diverged == 1


def test_the_simulators_requests_are_throttled_by_its_own_target(repo: Path) -> None:
    with (
        FakeLLMServer(reply=agent_reply) as agent,
        FakeLLMServer(reply=customer_reply, limit_rps=4, limit_burst=1) as customer,
    ):
        # its retries may wait as long as the server asks (the test's default is 5 ms)
        write_targets(repo, *support_parties(agent, customer, {"retry_max_delay_ms": 5000}))
        write_support_suite(repo, *({"id": f"c{i}", "first": "null"} for i in range(4)))
        run = agentv.run_eval("evals/support.yaml", cwd=repo, workers=8)
    assert {r.status for r in run.results} == {"ok"}, [r.error for r in run.results]
    assert customer.limited_at, "the limit was never reached: the test proves nothing"
    # the customer's 429s paused the customer's gate, never the agent's
    assert run.load["customer"].throttled > 0
    assert run.load["default"].throttled == 0
    assert not agent.limited_at


def test_a_case_is_checked_for_its_simulated_user(repo: Path) -> None:
    with FakeLLMServer() as agent, FakeLLMServer() as customer:
        write_targets(repo, *support_parties(agent, customer))
        write_support_suite(repo, {"id": "nobody"}, header="")
        report = agentv.validate("evals/support.yaml", cwd=repo)
        messages = [d.message for d in report.errors]
        assert any("this simulated user has no target to play it" in m for m in messages)
        write_support_suite(repo, {"id": "wrong"}, header="user_target: nobody\n")
        run = agentv.run_eval("evals/support.yaml", cwd=repo)
    (invalid,) = run.results
    assert invalid.status == "invalid"
    assert "its simulated user's target: target 'nobody' not found" in (invalid.error or "")
    assert agent.requests == [] and customer.requests == []
    write(
        repo,
        "evals/both.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n  - id: both\n    outcome: o\n"
        "    input_messages: [{role: user, content: hi}]\n"
        "    turns: [{content: again, evaluators: [{type: contains, value: x}]}]\n"
        "    user: {target: customer, persona: p, goal: g}\n",
    )
    loaded = agentv.load_eval_file(repo / "evals/both.yaml")
    assert loaded.cases == []
    assert any("either scripted `turns` or a simulated `user`" in d.message for d in loaded.errors)


def test_cache_and_repeats_work_on_simulated_conversations(repo: Path) -> None:
    with (
        FakeLLMServer(reply=agent_reply) as agent,
        FakeLLMServer(reply=customer_reply) as customer,
    ):
        write_targets(repo, *support_parties(agent, customer))
        write_support_suite(repo, {"id": "refund", "first": "null"})
        first = agentv.run_eval("evals/support.yaml", cwd=repo, cache=True, repeat=2)
        sent = (len(agent.requests), len(customer.requests))
        assert sent == (2 * 3, 2 * 4)  # each repeat its own conversation, asked afresh
        again = agentv.run_eval("evals/support.yaml", cwd=repo, cache=True, repeat=2)
        assert (len(agent.requests), len(customer.requests)) == sent  # nothing sent again
    assert sorted(r.repeat for r in again.results) == [0, 1]
    for result in again.results:
        assert result.status == "ok" and result.cached
        assert result.user["cached"] is True and result.user["ended"] == "goal"
    turns = again.summary.turns
    assert turns is not None and turns.user_tokens is not None
    # the simulator's reused tokens are counted as reused, not spent again
    assert turns.user_tokens.input == 0 and turns.user_tokens.reused_input > 0
    assert [t["content"] for t in again.results[0].turns] == [
        t["content"] for t in first.results[0].turns
    ]


def test_the_estimate_counts_a_simulated_conversation_at_its_longest(repo: Path) -> None:
    with FakeLLMServer() as agent, FakeLLMServer() as customer:
        write_targets(repo, *support_parties(agent, customer))
        write_support_suite(
            repo, {"id": "opens", "first": "null", "max_turns": 3}, {"id": "written"}
        )
        found = agentv.estimate("evals/support.yaml", cwd=repo, answer_tokens=10)
        assert agent.requests == [] and customer.requests == []  # nothing sent
    lines = {(line.target, line.role): line for line in found.lines}
    # "opens": 3 turns, each simulated; "written": 6 turns, the first one written
    assert lines[("default", "target")].requests == 3 + 6
    user = lines[("customer", "user")]
    assert user.requests == 3 + 5
    assert user.output_tokens == (3 + 5) * found.user_message_tokens
    # a later simulator request carries the conversation so far: it is the longer one
    assert user.input_tokens > 8 * 100
