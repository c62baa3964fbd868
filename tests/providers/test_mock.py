"""The mock target's script of ``answers``: the n-th request of a run of a case gets the
n-th entry, text or tool calls, so that tools and live conversations run offline."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

import agentv
from agentv.messages import ToolCall
from agentv.providers.mock import MockProvider, MockSettings
from support.files import write
from support.providers import ask

SCRIPT = MockSettings.model_validate(
    {
        "answers": [
            {"tool_calls": [{"name": "lookup", "arguments": {"q": "x"}}, {"name": "now"}]},
            {"text": "Found it.", "tool_calls": [{"name": "save", "id": "mine"}]},
            "Done.",
        ]
    }
)


async def test_each_request_of_a_run_gets_the_next_answer_then_the_last_again() -> None:
    mock = MockProvider("m", SCRIPT)
    said = []
    for _ in range(4):
        answer = await mock.invoke(ask("q", eval_id="a"))
        said.append((answer.text, answer.tool_calls, answer.finish_reason))
    assert said == [
        (
            "",
            (ToolCall("call_1_1", "lookup", {"q": "x"}), ToolCall("call_1_2", "now", {})),
            "tool_calls",
        ),
        ("Found it.", (ToolCall("mine", "save", {}),), "tool_calls"),
        ("Done.", (), None),
        ("Done.", (), None),
    ]


async def test_runs_repeats_and_parties_count_apart_and_a_retry_repeats() -> None:
    mock = MockProvider("m", SCRIPT)

    async def text(**fields: object) -> str:
        answer = await mock.invoke(ask("q", **fields))
        return answer.text or ",".join(c.name for c in answer.tool_calls)

    assert await text(eval_id="a") == "lookup,now"
    assert await text(eval_id="a", attempt=1) == "lookup,now"  # the same request again
    assert await text(eval_id="b") == "lookup,now"  # another case starts at the first
    assert await text(eval_id="a", repeat=1) == "lookup,now"  # so does another repeat
    assert await text(eval_id="a", party="user") == "lookup,now"  # and another party
    assert await text(eval_id="a") == "Found it."


async def test_one_response_answers_everything_as_before() -> None:
    mock = MockProvider("m", MockSettings(response="fixed"))
    answers = [await mock.invoke(ask("q", eval_id="a")) for _ in range(2)]
    assert [(a.text, a.tool_calls, a.raw) for a in answers] == [
        ("fixed", (), {"response": "fixed"})
    ] * 2


@pytest.mark.slow
def test_a_case_with_tools_runs_offline_on_a_scripted_mock(tmp_path: Path) -> None:
    write(
        tmp_path,
        ".agentv/targets.yaml",
        """$schema: agentv-targets-v2.2
targets:
  - name: default
    provider: mock
    answers:
      - tool_calls: [{name: add, arguments: {a: 2, b: 3}}]
      - The sum is 5.
""",
    )
    write(
        tmp_path, "tools/add.py", "import json,sys\nc=json.load(sys.stdin)\nprint(c['a']+c['b'])\n"
    )
    write(
        tmp_path,
        "evals/sum.yaml",
        """$schema: agentv-eval-v2
evalcases:
  - id: sum
    outcome: Adds with the tool.
    input_messages: [{role: user, content: What is 2 + 3?}]
    tools:
      - name: add
        parameters: {type: object, properties: {a: {type: number}, b: {type: number}}}
        script: python3 tools/add.py
        cwd: ..
    evaluators:
      - {type: tool_trajectory, mode: exact, expected: [{tool: add, args: {a: 2, b: 3}}]}
      - {type: contains, value: "5"}
""",
    )
    run = agentv.run_eval("evals/sum.yaml", cwd=tmp_path, out=tmp_path / "r.jsonl")
    (record,) = run.results
    assert (record.status, record.score, record.candidate_answer) == ("ok", 1.0, "The sum is 5.")
    assert [
        (step["name"], step["arguments"], step["result"]) for step in record.trajectory or []
    ] == [("add", {"a": 2, "b": 3}, "5")]
    assert run.summary.turns is None  # one question answered with a tool: no conversation


def test_answers_in_order_and_responses_drawn_do_not_go_together() -> None:
    with pytest.raises(ValidationError) as raised:
        MockSettings.model_validate({"answers": ["a"], "responses": ["b"]})
    assert [e["msg"] for e in raised.value.errors()] == [
        "Value error, give `answers` (played in order) or `responses` (drawn for each "
        "request), not both"
    ]
