"""Every evaluator is one class in one module, listed once (``evaluators.registry.KINDS``);
the eval file's validation and its error hints follow from that class, wherever an
evaluator list is written."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from agentv.evalfile.loader import load_eval_file
from agentv.evaluators.base import EvaluatorSpec
from agentv.evaluators.registry import BY_TYPE, EVALUATOR_TYPES, KINDS, type_names
from support.files import write

#: the smallest settings of each kind that load cleanly
MINIMAL = {
    "llm_judge": {},
    "code": {"script": "exit 0"},
    "contains": {"value": "x"},
    "icontains": {"value": "x"},
    "equals": {"value": "x"},
    "regex": {"value": "x"},
    "is_json": {},
    "latency": {"max_ms": 100},
    "cost": {"max_usd": 0.1},
    "tool_used": {"tool": "search"},
    "tool_not_used": {"tool": "search"},
    "tool_trajectory": {"mode": "exact", "expected": ["search"]},
    "tool_call_f1": {"expected": ["search"]},
    "step_count": {"max": 3},
    "repeated_calls": {},
    "file_exists": {"path": "a.txt"},
    "file_contains": {"path": "a.txt", "value": "x"},
    "command": {"command": "exit 0"},
    "diff": {"must_change": ["a.txt"]},
}
COMMON = "name, weight, required, threshold, type"
#: each kind's keys, as "valid keys here" lists them
KEYS = {
    "llm_judge": f"{COMMON}, prompt, model, samples, on_uncertain",
    "code": f"{COMMON}, script, cwd, timeout_seconds, inherit_env",
    "contains": f"{COMMON}, value",
    "icontains": f"{COMMON}, value",
    "equals": f"{COMMON}, value",
    "regex": f"{COMMON}, value, flags",
    "is_json": f"{COMMON}, schema",
    "latency": f"{COMMON}, max_ms",
    "cost": f"{COMMON}, max_usd",
    "tool_used": f"tool, args, args_match, args_schema, {COMMON}, min, max",
    "tool_not_used": f"tool, args, args_match, args_schema, {COMMON}",
    "tool_trajectory": f"{COMMON}, mode, expected, minimums",
    "tool_call_f1": f"{COMMON}, expected, metric",
    "step_count": f"{COMMON}, min, max, tool",
    "repeated_calls": f"{COMMON}, max, tool",
    "file_exists": f"{COMMON}, path",
    "file_contains": f"{COMMON}, path, value, pattern, flags",
    "command": f"{COMMON}, command, cwd, timeout_seconds, score_pattern, inherit_env",
    "diff": f"{COMMON}, must_change, must_not_change",
}


def test_the_types_in_the_order_messages_list_them() -> None:
    assert EVALUATOR_TYPES == (
        "llm_judge",
        "code",
        "contains",
        "icontains",
        "equals",
        "regex",
        "is_json",
        "latency",
        "cost",
        "tool_used",
        "tool_not_used",
        "tool_trajectory",
        "tool_call_f1",
        "step_count",
        "repeated_calls",
        "file_exists",
        "file_contains",
        "command",
        "diff",
    )
    assert list(MINIMAL) == list(EVALUATOR_TYPES)  # every kind is tried below
    assert [BY_TYPE[t].__name__ for t in ("contains", "icontains")] == ["ContainsSpec"] * 2


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.__name__)
def test_each_kind_is_one_class_with_its_settings_and_its_grading(
    kind: type[EvaluatorSpec],
) -> None:
    assert issubclass(kind, EvaluatorSpec)
    assert kind.__module__.startswith("agentv.evaluators.")
    assert type_names(kind) and all(BY_TYPE[t] is kind for t in type_names(kind))
    assert kind.evaluate is not EvaluatorSpec.evaluate  # it grades
    assert inspect.iscoroutinefunction(kind.evaluate)


def test_a_kind_without_a_literal_type_is_refused() -> None:
    class Untyped(EvaluatorSpec):
        type: str

    with pytest.raises(TypeError, match=r"Untyped\.type must be a Literal"):
        type_names(Untyped)


def _entry(kind: str, **extra: object) -> str:
    settings = {"type": kind, **MINIMAL[kind], **extra}
    return "{" + ", ".join(f"{k}: {_yaml(v)}" for k, v in settings.items()) + "}"


def _yaml(value: object) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_yaml(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_yaml(v)}" for k, v in value.items()) + "}"
    return str(value)


def _problems(tmp_path: Path, case: str) -> list[tuple[str, str | None]]:
    path = write(
        tmp_path,
        "evals/e.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n"
        "  - id: a\n    outcome: ok\n    input_messages: [{role: user, content: hi}]\n"
        # a workspace, for the kinds that grade one
        "    workspace: {isolation: none}\n" + case,
    )
    return [(d.message, d.hint) for d in load_eval_file(path).errors]


@pytest.mark.parametrize("kind", list(MINIMAL))
def test_the_minimal_settings_of_each_kind_load(tmp_path: Path, kind: str) -> None:
    assert _problems(tmp_path, f"    evaluators: [{_entry(kind)}]\n") == []


@pytest.mark.parametrize("kind", list(MINIMAL))
def test_an_unknown_key_lists_the_keys_of_its_own_kind(tmp_path: Path, kind: str) -> None:
    problems = _problems(tmp_path, f"    evaluators: [{_entry(kind, zzzz=1)}]\n")
    assert problems == [("case 'a': unknown key 'zzzz'", f"valid keys here: {KEYS[kind]}")]


@pytest.mark.parametrize(
    "where",
    [
        "    evaluators: [{type: regex, value: x, flgs: i}]\n",
        "    execution: {evaluators: [{type: regex, value: x, flgs: i}]}\n",
        "    turns: [{content: hi, evaluators: [{type: regex, value: x, flgs: i}]}]\n",
        "    turn_evaluators: [{type: regex, value: x, flgs: i}]\n    turns: [{content: hi}]\n",
        "    user: {persona: p, goal: g, stop_when: {type: regex, value: x, flgs: i}}\n",
    ],
    ids=["case", "execution", "turn", "turn_evaluators", "stop_when"],
)
def test_a_misspelt_key_gets_a_did_you_mean_wherever_the_evaluator_is(
    tmp_path: Path, where: str
) -> None:
    assert _problems(tmp_path, where) == [
        ("case 'a': unknown key 'flgs'", f"did you mean 'flags'? valid keys here: {KEYS['regex']}")
    ]


def test_an_evaluator_says_what_its_own_keys_need(tmp_path: Path) -> None:
    """Hints an evaluator class carries: a missing key (``key_hints``), a bound every kind
    has, an item of a list that is neither of its forms (``item_errors``)."""
    problems = _problems(
        tmp_path,
        "    evaluators:\n"
        "      - {type: code}\n"
        "      - {type: contains, value: x, threshold: 2}\n"
        "      - {type: tool_call_f1, expected: [search, 5]}\n",
    )
    assert problems == [
        ("case 'a': missing required key `script`", "add `script:` with the command to run"),
        ("case 'a': `threshold` must be at most 1.0", "a threshold is a score from 0 to 1"),
        (
            "case 'a': an `expected` call is a tool's name or a mapping with `tool`",
            "write `- search` or `- {tool: search, args: {query: ...}}`",
        ),
    ]


def test_every_block_of_a_case_lists_its_own_keys(tmp_path: Path) -> None:
    """The keys a block may hold come from its model, for every block of a case."""
    problems = _problems(
        tmp_path,
        "    user: {persona: p, goal: g, zzzz: 1}\n"
        "    tools: [{name: t, result: 1, zzzz: 1}]\n"
        "    turns: [{content: hi, zzzz: 1}]\n",
    )
    assert problems == [
        (
            "case 'a': unknown key 'zzzz'",
            "valid keys here: target, persona, goal, instructions, facts, first_message, "
            "max_turns, stop_when, seed, temperature, role_judge",
        ),
        (
            "case 'a': unknown key 'zzzz'",
            "valid keys here: name, description, parameters, result, results, script, cwd, "
            "timeout_seconds, inherit_env",
        ),
        (
            "case 'a': unknown key 'zzzz'",
            "valid keys here: content, outcome, expected_messages, evaluators",
        ),
    ]
