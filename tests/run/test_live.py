"""Live conversations (docs/eval-files.md, "Live conversations"): the target's own answers
carried forward turn by turn, per-turn grading, aggregation, stopping on a failed turn, and
tools that answer. The targets are the four LM APIs through their official SDKs against the
loopback fake server (which answers from a script keyed by the conversation so far), a cli
agent, and a Python function; the server counts what it gets."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import agentv
from support.cli import agentv_cli, start_agentv
from support.fakes import FakeLLMServer, RecordedRequest, ToolCalls
from support.files import write
from support.targets import lm_target, write_targets

KINDS = ("openai", "azure", "anthropic", "gemini")


def said(rec: RecordedRequest) -> list[tuple[str, str]]:
    """The conversation a request carries, whatever the API: (role, text) pairs, tool
    calls as ``call NAME ARGS`` and results as ``result TEXT``."""
    body = rec.body or {}
    out: list[tuple[str, str]] = []
    if "contents" in body:  # Gemini
        for turn in body["contents"]:
            role = "assistant" if turn["role"] == "model" else turn["role"]
            for part in turn["parts"]:
                if "text" in part:
                    out.append((role, part["text"]))
                elif "functionCall" in part:
                    call = part["functionCall"]
                    out.append((role, f"call {call['name']} {json.dumps(call['args'])}"))
                elif "functionResponse" in part:
                    out.append(("tool", f"result {part['functionResponse']['response']['output']}"))
        return out
    for message in body.get("messages", []):
        role, content = message["role"], message.get("content")
        if isinstance(content, list):  # Anthropic blocks
            for block in content:
                if block["type"] == "text":
                    out.append((role, block["text"]))
                elif block["type"] == "tool_use":
                    out.append((role, f"call {block['name']} {json.dumps(block['input'])}"))
                elif block["type"] == "tool_result":
                    out.append(("tool", f"result {block['content']}"))
            continue
        if role == "tool":
            out.append(("tool", f"result {content}"))
            continue
        if content:
            out.append((role, content))
        for call in message.get("tool_calls") or []:
            args = json.dumps(json.loads(call["function"]["arguments"]))
            out.append((role, f"call {call['function']['name']} {args}"))
    return [(r, t) for r, t in out if r != "system"]


def last_user(rec: RecordedRequest) -> str:
    return next(t for r, t in reversed(said(rec)) if r == "user")


TRIP = """$schema: agentv-eval-v2
evalcases:
  - id: trip
    outcome: Remembers the traveller.
    input_messages:
      - role: system
        content: You are a travel planner.
    turns:
      - content: I am Ada and I go to Lisbon.
        evaluators: [{type: contains, value: Lisbon}]
      - content: Who am I?
        evaluators: [{type: contains, value: Ada}]
"""


def trip_reply(rec: RecordedRequest) -> str:
    """Answers from the conversation so far: the second answer depends on the first."""
    turns = said(rec)
    if last_user(rec) == "Who am I?":
        first = next(t for r, t in turns if r == "assistant")
        return f"You are Ada; you said so before I answered: {first}"
    return "Lisbon it is, Ada."


@pytest.mark.parametrize("kind", KINDS)
def test_the_second_turn_carries_the_first_answer_on_every_api(repo: Path, kind: str) -> None:
    with FakeLLMServer(reply=trip_reply) as server:
        write_targets(repo, lm_target(kind, server))
        write(repo, "evals/trip.yaml", TRIP)
        run = agentv.run_eval("evals/trip.yaml", cwd=repo)
    (result,) = run.results
    assert (result.status, result.score) == ("ok", 1.0), result.error
    _, second = server.requests
    body = second.body
    # byte-exact, in each API's own shape: the answer as the model gave it
    if kind in ("openai", "azure"):
        assert body["messages"][2] == {"role": "assistant", "content": "Lisbon it is, Ada."}
        assert body["messages"][3] == {"role": "user", "content": "Who am I?"}
    elif kind == "anthropic":
        assert body["system"] == "You are a travel planner."
        assert body["messages"][1] == {"role": "assistant", "content": "Lisbon it is, Ada."}
    else:
        assert body["contents"][1] == {"role": "model", "parts": [{"text": "Lisbon it is, Ada."}]}
    assert [r for r, _ in said(second)] == ["user", "assistant", "user"]
    assert result.turns is not None
    assert [t["answer"] for t in result.turns] == [
        "Lisbon it is, Ada.",
        "You are Ada; you said so before I answered: Lisbon it is, Ada.",
    ]
    # each turn's request is a prefix of the last one's messages
    chat = (result.raw_request or {})["chat_prompt"]
    assert [t["requests"][0]["messages"] for t in result.turns] == [2, 4] == [2, len(chat)]
    assert chat[2] == {"role": "assistant", "content": "Lisbon it is, Ada."}


@pytest.mark.slow
def test_a_cli_agent_gets_the_transcript_with_its_own_answers(repo: Path) -> None:
    write(
        repo,
        "agent.py",
        "import sys\nq = sys.argv[1]\n"
        "print('Q' + str(q.count('@[User]:')) + ' heard: ' + q.splitlines()[-1])\n",
    )
    write(
        repo,
        ".agentv/targets.yaml",
        "$schema: agentv-targets-v2.2\ntargets:\n  - name: default\n    provider: cli\n"
        f"    command_template: {sys.executable} agent.py {{PROMPT}}\n",
    )
    write(
        repo,
        "evals/trip.yaml",
        TRIP.replace("value: Lisbon", "value: Q1").replace("value: Ada", "value: Q2"),
    )
    run = agentv.run_eval("evals/trip.yaml", cwd=repo)
    (result,) = run.results
    assert result.status == "ok", result.error
    assert result.turns is not None
    first, second = (t["answer"] for t in result.turns)
    assert first == "Q1 heard: I am Ada and I go to Lisbon."
    assert second == "Q2 heard: Who am I?"
    # the question of the last turn, as the agent got it: its own first answer in it
    question = (result.raw_request or {})["question"]
    assert question == (
        "@[System]:\nYou are a travel planner.\n\n@[User]:\nI am Ada and I go to Lisbon.\n\n"
        f"@[Assistant]:\n{first}\n\n@[User]:\nWho am I?"
    )


GRADED = """$schema: agentv-eval-v2
evalcases:
{cases}
"""
CASE = """  - id: {id}
    outcome: Three turns.
    aggregation: {how}
    on_turn_failure: {failure}
    input_messages: [{{role: system, content: Be brief.}}]
    turns:
      - content: one
        evaluators: [{{type: contains, value: ONE}}]
      - content: two
        evaluators: [{{type: contains, value: TWO}}]
      - content: three
        evaluators:
          - {{type: contains, value: THREE}}
          - {{type: regex, value: "^ans"}}
    evaluators: [{{type: contains, value: ans}}]
"""


def numbered(rec: RecordedRequest) -> str:
    # turn two gets a wrong answer: "TWO" is missing from it
    return {"one": "ans ONE", "two": "ans 2", "three": "ans THREE"}[last_user(rec)]


def test_turn_grades_and_aggregation(repo: Path) -> None:
    cases = "".join(
        CASE.format(id=f"agg-{how}", how=how, failure="continue") for how in ("mean", "min", "max")
    )
    with FakeLLMServer(reply=numbered) as server:
        write_targets(repo, lm_target("openai", server))
        write(repo, "evals/agg.yaml", GRADED.format(cases=cases))
        run = agentv.run_eval("evals/agg.yaml", cwd=repo)
    by_id = {r.eval_id: r for r in run.results}
    # turns 1.0, 0.0, 1.0 (two evaluators, both hit); the conversation's own check 1.0
    assert by_id["agg-mean"].score == pytest.approx(3 / 4)
    assert (by_id["agg-min"].score, by_id["agg-max"].score) == (0.0, 1.0)
    assert (by_id["agg-min"].status, by_id["agg-max"].status) == ("failed", "ok")
    turns = by_id["agg-mean"].turns or []
    assert [(t["status"], t["score"]) for t in turns] == [("ok", 1.0), ("failed", 0.0), ("ok", 1.0)]
    assert turns[1]["misses"] == ['answer does not contain "TWO"']
    assert [e["name"] for e in turns[2]["evaluator_results"]] == ["contains", "regex"]
    assert by_id["agg-mean"].evaluator_results == [
        {
            "name": "contains",
            "type": "contains",
            "score": 1.0,
            "hits": ['answer contains "ans"'],
            "misses": [],
        }
    ]
    assert 'turn 2: answer does not contain "TWO"' in by_id["agg-mean"].misses
    assert len(server.requests) == 9
    assert run.summary.turns is not None
    assert (run.summary.turns.turns, run.summary.turns.graded, run.summary.turns.passed) == (
        9,
        9,
        6,
    )


def test_conversations_beyond_the_targets_limit_take_turns_with_the_others(repo: Path) -> None:
    # --workers 2: three conversations run at once (a spare one) for two turns in flight;
    # the spare one waits in line, and each freed turn goes to the line's first, not to
    # the conversation whose answer just came (which would keep both turns to the end)
    cases = "".join(CASE.format(id=f"c{i}", how="mean", failure="continue") for i in range(3))
    with FakeLLMServer(reply=numbered, delay_ms=30) as server:
        # priced in the targets file: no price table to load, which would make the first
        # answers wait (and so let the line have its turn) and hide what is tested
        write_targets(
            repo, lm_target("openai", server, price={"input_per_mtok": 1, "output_per_mtok": 1})
        )
        write(repo, "evals/three.yaml", GRADED.format(cases=cases))
        run = agentv.run_eval("evals/three.yaml", cwd=repo, workers=2)
    assert len(run.results) == 3 and len(server.requests) == 9
    order = sorted(server.requests, key=lambda r: r.received_at)
    first_turns = [i for i, r in enumerate(order) if last_user(r) == "one"]
    last_turns = [i for i, r in enumerate(order) if last_user(r) == "three"]
    # every conversation had started before any had ended
    assert max(first_turns) < min(last_turns)


def test_a_failed_turn_stops_the_conversation(repo: Path) -> None:
    with FakeLLMServer(reply=numbered) as server:
        write_targets(repo, lm_target("openai", server))
        case = CASE.format(id="stops", how="mean", failure="stop")
        write(repo, "evals/stop.yaml", GRADED.format(cases=case))
        run = agentv.run_eval("evals/stop.yaml", cwd=repo)
    (result,) = run.results
    assert [last_user(r) for r in server.requests] == ["one", "two"]  # turn 3 never sent
    assert result.status == "failed"
    assert result.stopped == {
        "turn": 2,
        "reason": "turn 2 failed (on_turn_failure: stop): 1 turn(s) not sent",
    }
    assert [t["turn"] for t in result.turns or []] == [1, 2]
    assert result.evaluator_results is not None  # the conversation is still graded


TOOLS = """$schema: agentv-eval-v2
evalcases:
  - id: tools
    outcome: Uses the tools.
    max_tool_rounds: {rounds}
    input_messages:
      - role: user
        content: How is the weather in Paris and Rome?
    tools:
      - name: weather
        description: The weather of a city
        parameters: {{type: object, properties: {{city: {{type: string}}}}, required: [city]}}
        results:
          - {{arguments: {{city: Paris}}, result: "sunny"}}
          - {{arguments: {{city: Rome}}, result: {{sky: rain}}}}
      - name: broken
        description: A tool whose script fails
        script: {python} -c "import sys; sys.exit('the tool broke')"
    evaluators: [{{type: contains, value: sunny}}]
"""


def toolish(rec: RecordedRequest) -> str | ToolCalls:
    """Calls the weather tool for Paris, then for Rome, then answers from the results."""
    results = [t for r, t in said(rec) if r == "tool"]
    if not results:
        return ToolCalls((("weather", {"city": "Paris"}),), text="Let me look.")
    if len(results) == 1:
        return ToolCalls((("weather", {"city": "Rome"}), ("nope", {}), ("broken", {})))
    return "Paris: " + " / ".join(results)


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_tools_answer_in_each_apis_shape(repo: Path, kind: str) -> None:
    with FakeLLMServer(reply=toolish) as server:
        write_targets(repo, lm_target(kind, server))
        write(repo, "evals/tools.yaml", TOOLS.format(rounds=8, python=sys.executable))
        run = agentv.run_eval("evals/tools.yaml", cwd=repo)
    (result,) = run.results
    assert result.status == "ok", result.error
    first, second, third = server.requests
    tools = {
        "openai": lambda b: [t["function"]["name"] for t in b["tools"]],
        "azure": lambda b: [t["function"]["name"] for t in b["tools"]],
        "anthropic": lambda b: [t["name"] for t in b["tools"]],
        "gemini": lambda b: [d["name"] for d in b["tools"][0]["functionDeclarations"]],
    }[kind]
    assert tools(first.body) == ["weather", "broken"]  # sent natively, every request
    assert said(second)[-2:] == [
        ("assistant", 'call weather {"city": "Paris"}'),
        ("tool", "result sunny"),
    ]
    assert said(third)[-4:] == [
        ("assistant", "call broken {}"),
        ("tool", 'result {"sky": "rain"}'),
        ("tool", "result Error: there is no tool called 'nope' (the tools are: broken, weather)"),
        (
            "tool",
            "result Error: the tool's script `"
            + sys.executable
            + " -c \"import sys; sys.exit('the tool broke')\"` exited with code 1: the tool broke",
        ),
    ]
    # paired in the API's own way
    if kind in ("openai", "azure"):
        calls = third.body["messages"][-4]["tool_calls"]
        assert [m.get("tool_call_id") for m in third.body["messages"][-3:]] == [
            c["id"] for c in calls
        ]
    elif kind == "anthropic":
        uses = [b["id"] for b in third.body["messages"][-2]["content"] if b["type"] == "tool_use"]
        results = [b["tool_use_id"] for b in third.body["messages"][-1]["content"]]
        assert uses == results
    else:
        names = [p["functionResponse"]["name"] for p in third.body["contents"][-1]["parts"]]
        assert names == ["weather", "nope", "broken"]
    (turn,) = result.turns or []
    assert [(c["name"], c.get("error") is not None, c["round"]) for c in turn["tool_calls"]] == [
        ("weather", False, 0),
        ("weather", False, 1),
        ("nope", True, 1),
        ("broken", True, 1),
    ]
    assert len(turn["requests"]) == 3  # three requests: two tool rounds, then the answer
    assert result.candidate_answer.startswith("Paris: result sunny / ")


def test_the_tool_rounds_are_bounded(repo: Path) -> None:
    def always(rec: RecordedRequest) -> ToolCalls:
        return ToolCalls((("weather", {"city": "Paris"}),), text="again")

    with FakeLLMServer(reply=always) as server:
        write_targets(repo, lm_target("openai", server))
        write(repo, "evals/tools.yaml", TOOLS.format(rounds=2, python=sys.executable))
        run = agentv.run_eval("evals/tools.yaml", cwd=repo)
    (result,) = run.results
    assert len(server.requests) == 3  # two rounds answered, then the answer counts
    (turn,) = result.turns or []
    assert turn["tool_rounds_exhausted"] is True
    assert turn["answer"] == "again"
    assert len(turn["tool_calls"]) == 2


def test_cache_across_turns_and_a_change_resends_only_what_follows(repo: Path) -> None:
    with FakeLLMServer(reply=numbered) as server:
        write_targets(repo, lm_target("openai", server))
        write(
            repo,
            "evals/c.yaml",
            GRADED.format(cases=CASE.format(id="c", how="mean", failure="continue")),
        )
        first = agentv.run_eval("evals/c.yaml", cwd=repo, cache=True)
        assert len(server.requests) == 3
        again = agentv.run_eval("evals/c.yaml", cwd=repo, cache=True)
        assert len(server.requests) == 3  # every turn's exact request was cached
        assert (first.results[0].score, again.results[0].cached) == (again.results[0].score, True)
        # a changed second turn: the first request is the same, what follows is new
        write(
            repo,
            "evals/c.yaml",
            GRADED.format(cases=CASE.format(id="c", how="mean", failure="continue")).replace(
                "content: two", "content: two\n        outcome: changed"
            ),
        )
        agentv.run_eval("evals/c.yaml", cwd=repo, cache=True)
        # only the outcome changed (no request did): nothing sent
        assert len(server.requests) == 3
        text = (repo / "evals/c.yaml").read_text().replace("content: one", "content: uno")
        write(repo, "evals/c.yaml", text)
        server.reply = lambda rec: {"uno": "ans ONE"}.get(last_user(rec)) or numbered(rec)
        agentv.run_eval("evals/c.yaml", cwd=repo, cache=True)
        assert [last_user(r) for r in server.requests[3:]] == ["uno", "two", "three"]


def test_repeats_of_a_conversation_are_runs_of_their_own(repo: Path) -> None:
    with FakeLLMServer(reply=trip_reply) as server:
        write_targets(repo, lm_target("openai", server))
        write(repo, "evals/trip.yaml", TRIP)
        run = agentv.run_eval("evals/trip.yaml", cwd=repo, repeat=3)
    assert sorted(r.repeat or 0 for r in run.results) == [0, 1, 2]
    assert all(r.status == "ok" and len(r.turns or []) == 2 for r in run.results)
    assert len(server.requests) == 6


@pytest.mark.slow
def test_an_interrupted_conversation_run_resumes(repo: Path) -> None:
    with FakeLLMServer(reply=trip_reply, delay_ms=150) as server:
        write_targets(repo, lm_target("openai", server))
        cases = "".join(
            TRIP.split("evalcases:\n", 1)[1].replace("id: trip", f"id: trip{i}") for i in range(6)
        )
        write(repo, "evals/trip.yaml", "$schema: agentv-eval-v2\nevalcases:\n" + cases)
        out = repo / "r.jsonl"
        proc = start_agentv(
            repo,
            *("eval", "evals/", "--workers", "2", "--out", str(out)),
            stdout=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if out.exists() and 2 <= out.read_text(encoding="utf-8").count("\n") < 6:
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 130, err
        done = {json.loads(line)["eval_id"] for line in out.read_text().splitlines()}
        sent = len(server.requests)
        resumed = agentv_cli(repo, "eval", "evals/", "--resume", str(out))
    assert resumed.returncode == 0, resumed.stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["eval_id"] for r in records) == [f"trip{i}" for i in range(6)]
    # a conversation is one run: those not recorded ran again, whole
    assert len(server.requests) - sent == 2 * (6 - len(done))
    assert all(len(r["turns"]) == 2 for r in records)


def test_live_cases_load_render_and_run_from_python(repo: Path) -> None:
    write(repo, "evals/trip.yaml", TRIP)
    loaded = agentv.load_eval_file(repo / "evals/trip.yaml")
    (case,) = loaded.cases
    assert [t.outcome for t in case.turns] == ["", ""] and len(case.turns) == 2
    (view,) = agentv.render("evals/trip.yaml", cwd=repo)
    assert view["sent_messages"][-1] == {"role": "user", "content": "I am Ada and I go to Lisbon."}
    assert view["conversation"][-2:] == [
        {"role": "user", "content": "Who am I?"},
        {"role": "assistant", "content": "<the target's answer to turn 2>"},
    ]
    seen: list[list[dict[str, Any]]] = []

    def app(messages: list[dict[str, Any]]) -> str:
        seen.append(messages)
        return "Ada, in Lisbon." if len(messages) > 2 else "Lisbon, Ada."

    run = agentv.run_eval("evals/trip.yaml", target=agentv.PythonTarget(app), cwd=repo)
    (result,) = run.results
    assert (result.status, result.target) == ("ok", "app")
    assert seen[1][2] == {"role": "assistant", "content": "Lisbon, Ada."}


def test_a_live_case_with_nothing_to_grade_is_refused(repo: Path) -> None:
    write(
        repo,
        "evals/x.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n  - id: x\n    outcome: o\n"
        "    input_messages: [{role: user, content: hi}]\n    turns:\n      - content: again\n",
    )
    loaded = agentv.load_eval_file(repo / "evals/x.yaml")
    assert [d.message for d in loaded.errors] == [
        "case 'x': this live conversation has nothing to grade"
    ]


def test_a_python_target_that_raises_is_that_case_error_and_refuses_ray(repo: Path) -> None:
    write(repo, "evals/trip.yaml", TRIP)

    def broken(messages: list[dict[str, Any]]) -> str:
        raise RuntimeError("database is down")

    run = agentv.run_eval("evals/trip.yaml", target=agentv.PythonTarget(broken), cwd=repo)
    (result,) = run.results
    assert result.status == "error"
    assert "RuntimeError: database is down" in (result.error or "")
    with pytest.raises(agentv.ConfigError, match="executor='local'"):
        agentv.run_eval(
            "evals/trip.yaml", target=agentv.PythonTarget(broken), executor="ray", cwd=repo
        )
