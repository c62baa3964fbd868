"""Trajectories of model targets: the tool loop against the loopback fake server (through
the vendors' SDKs) recorded step by step with its turns, graded by the trajectory
evaluators per turn and over the conversation, with weights and required evaluators in the
records, the summary (text and JSON) and a run read back; tool calls written in the eval
file are context, never the model's trajectory. Agents' trajectories: tests/providers/agents/
test_trajectory_agents.py; the evaluators alone: tests/evaluators/."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import agentv
from support.cli import agentv_cli
from support.fakes import FakeLLMServer, RecordedRequest, ToolCalls
from support.files import write
from support.results import rows
from support.targets import lm_target, write_targets

EVAL = """$schema: agentv-eval-v2
evalcases:
  - id: weather
    outcome: Checks the weather before answering, and never books.
    input_messages:
      - role: system
        content: You are a weather bot.
      # a scripted earlier exchange: the context, not what the model did
      - role: user
        content: Is it cold in Oslo?
      - role: assistant
        content: Let me check.
        tool_calls: [{id: s1, name: weather, arguments: {city: Oslo}}]
      - role: tool
        tool_call_id: s1
        content: "-5"
      - role: assistant
        content: It is -5 in Oslo.
    tools:
      - name: weather
        parameters: {type: object, properties: {city: {type: string}}, required: [city]}
        results:
          - {arguments: {city: Paris}, result: sunny}
          - {arguments: {city: Rome}, result: rain}
      - name: book
        result: booked
    turns:
      - content: And Paris?
        evaluators:
          - {name: paris, type: tool_used, tool: weather, args: {city: Paris}}
          - {name: one-call, type: step_count, max: 1}
      - content: And Rome, then Rome again?
        evaluators:
          - {name: rome, type: tool_used, tool: weather, args: {city: Rome}}
          - {name: no-oslo, type: tool_not_used, tool: weather, args: {city: Oslo}}
          - {name: once-each, type: repeated_calls, required: true}
          - {name: answer, type: contains, value: rain, weight: 3}
    evaluators:
      - {name: order, type: tool_trajectory, mode: exact, expected: [weather, weather, weather]}
      - {name: cities, type: tool_trajectory, mode: in_order,
         expected: [{tool: weather, args: {city: Paris}}, {tool: weather, args: {city: Rome}}]}
      - {name: never-books, type: tool_not_used, tool: book, required: true}
      - {name: f1, type: tool_call_f1, expected: [weather, weather], threshold: 0.5, weight: 2}
"""


def weather(rec: RecordedRequest) -> str | ToolCalls:
    """Calls the weather tool once per city asked for (Rome twice), then answers."""
    messages = (rec.body or {}).get("messages", [])
    asked = next(m["content"] for m in reversed(messages) if m["role"] == "user")
    results = []
    for m in reversed(messages):
        if m["role"] != "tool":
            break
        results.append(m["content"])
    if "Paris" in asked:
        return "Paris is " + results[0] if results else ToolCalls((("weather", {"city": "Paris"}),))
    if not results:
        return ToolCalls((("weather", {"city": "Rome"}), ("weather", {"city": "Rome"})))
    return "Rome: " + ", ".join(results)


def test_the_tool_loop_is_the_trajectory_graded_per_turn_and_whole(repo: Path) -> None:
    with FakeLLMServer(reply=weather) as server:
        write_targets(repo, lm_target("openai", server))
        write(repo, "evals/weather.yaml", EVAL)
        run = agentv.run_eval("evals/weather.yaml", cwd=repo, out=repo / "r.jsonl")
    assert len(server.requests) == 4  # a call and an answer per turn
    (result,) = run.results
    # every step the model made, with its turn; the scripted Oslo call is not one of them
    assert [
        (s["turn"], s["name"], s["arguments"], s.get("result")) for s in result.trajectory or []
    ] == [
        (1, "weather", {"city": "Paris"}, "sunny"),
        (2, "weather", {"city": "Rome"}, "rain"),
        (2, "weather", {"city": "Rome"}, "rain"),
    ]
    assert all(s["id"].startswith("call_") and s["duration_ms"] >= 0 for s in result.trajectory)
    first, second = result.turns or []
    # a turn's evaluators see the turn's calls only
    assert [(e["name"], e["score"]) for e in first["evaluator_results"]] == [
        ("paris", 1.0),
        ("one-call", 1.0),
    ]
    turn2 = {e["name"]: e for e in second["evaluator_results"]}
    assert {n: e["score"] for n, e in turn2.items()} == {
        "rome": 1.0,
        "no-oslo": 1.0,
        "once-each": 0.0,
        "answer": 1.0,
    }
    # the turn's weighted mean passes, but a required evaluator missed: the turn fails
    assert second["score"] == pytest.approx(5 / 6)
    assert (second["status"], second["failed_required"]) == ("failed", ["once-each"])
    assert turn2["once-each"]["misses"] == [
        'weather {"city": "Rome"} was made 2 times (steps 1, 2), at most 1 allowed'
    ]
    # the conversation's evaluators see every turn's calls
    whole = {e["name"]: e for e in result.evaluator_results or []}
    assert {n: e["score"] for n, e in whole.items()} == {
        "order": 1.0,
        "cities": 1.0,
        "never-books": 1.0,
        "f1": pytest.approx(0.8),  # precision 2/3, recall 1
    }
    assert (whole["f1"]["weight"], whole["f1"]["threshold"], whole["f1"]["passed"]) == (
        2.0,
        0.5,
        True,
    )
    assert (whole["never-books"]["required"], whole["never-books"]["passed"]) == (True, True)
    # the mean of the turns and the conversation passes; the required miss fails the case
    assert result.score >= 0.8
    assert (result.status, result.failed_required) == ("failed", ["turn 2: once-each"])
    assert result.misses == [
        'turn 2: weather {"city": "Rome"} was made 2 times (steps 1, 2), at most 1 allowed',
        "turn 2: required evaluator 'once-each' scored 0.00, below its threshold 0.80: the "
        "case fails whatever its mean",
        'step 3: \'weather\' {"city": "Rome"} was not expected',  # f1's, over the conversation
    ]
    assert run.summary.required_failures == 1
    # read back, the file says the same
    (again,) = agentv.read_results(repo / "r.jsonl").results
    assert again.trajectory == result.trajectory and again.failed_required == ["turn 2: once-each"]


GATES = """$schema: agentv-eval-v2
evalcases:
{cases}
"""
GATED = """  - id: {id}
    outcome: Answers {answer}.
    input_messages: [{{role: user, content: "{answer}"}}]
    tools: [{{name: lookup, result: found}}]
    evaluators:
      - {{name: answer, type: contains, value: "{answer}", weight: 4}}
      - {{name: looked-up, type: tool_used, tool: lookup, required: {required}, threshold: 1}}
"""


@pytest.mark.slow
def test_weights_and_required_gates_in_the_summary(repo: Path) -> None:
    def never_looks_up(rec: RecordedRequest) -> str:
        return next(m["content"] for m in rec.body["messages"] if m["role"] == "user")

    cases = "".join(
        GATED.format(id=f"case-{n}", answer=answer, required=required)
        for n, (answer, required) in enumerate([("yes", "true"), ("no", "false")], 1)
    )
    with FakeLLMServer(reply=never_looks_up) as server:
        write_targets(repo, lm_target("openai", server))
        write(repo, "evals/gates.yaml", GATES.format(cases=cases))
        proc = agentv_cli(
            repo, "eval", "evals/gates.yaml", "--out", "g.jsonl", "--summary-json", "s.json"
        )
    assert proc.returncode == 7, proc.stderr
    one, two = sorted(rows(repo / "g.jsonl"), key=lambda r: r["eval_id"])
    # both answered right and never looked up: weighted mean 4/5 each
    assert one["score"] == two["score"] == pytest.approx(0.8)
    assert (one["status"], one["failed_required"]) == ("failed", ["looked-up"])
    assert (two["status"], "failed_required" in two) == ("ok", False)
    assert one["trajectory"] == two["trajectory"] == []  # a case with tools: none called, said
    summary = json.loads((repo / "s.json").read_text())
    assert (summary["ok"], summary["failed"], summary["required_failures"]) == (1, 1, 1)
    by_name: dict[str, Any] = {e["name"]: e for e in summary["evaluators"]}
    assert by_name["answer"] | {"mean": 1.0} == {
        "name": "answer",
        "type": "contains",
        "runs": 2,
        "mean": 1.0,
        "weight": 4.0,
        "required": False,
        "threshold": None,
        "passed": None,
        "judged": 0,
        "failed_cases": 0,
        "sampled": 0,
        "uncertain": 0,
        "weighted": True,
    }
    looked = by_name["looked-up"]
    assert (looked["required"], looked["threshold"], looked["passed"], looked["judged"]) == (
        True,
        1.0,
        0,
        2,
    )
    assert looked["failed_cases"] == 1
    out = proc.stdout
    assert "Failed by a required evaluator: 1 (of the 1 failed)" in out
    table = out.split("Evaluators (weighted mean", 1)[1].splitlines()
    assert table[2].split() == ["answer", "4", "no", "-", "1.000", "-", "0"]
    assert table[3].split() == ["looked-up", "1", "yes", "1.00", "0.000", "0/2", "1"]
