"""The trajectory evaluators on trajectories given directly: how calls match (names,
arguments as a subset, exactly, by JSON Schema), every mode of ``tool_trajectory``,
precision/recall/F1, step counts, repeated calls, and what each says in its hits and misses.
The same evaluators on trajectories recorded from real runs: tests/run/test_trajectory.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from agentv.cases import EvaluatorConfig
from agentv.evaluators.base import EvaluatorScore
from agentv.evaluators.grading import aggregate, run_evaluator
from agentv.evaluators.registry import AnyEvaluatorSpec
from agentv.trajectory import ToolStep
from support.evaluator_kit import make_case, make_ctx

SPEC: TypeAdapter[Any] = TypeAdapter(AnyEvaluatorSpec)


def config(**fields: Any) -> EvaluatorConfig:
    spec = SPEC.validate_python(fields)
    return EvaluatorConfig(fields.get("name") or spec.type, spec)


def step(name: str, **arguments: Any) -> ToolStep:
    return ToolStep(name, arguments)


async def grade(
    tmp_path: Path, steps: list[ToolStep] | None, error: str | None = None, **fields: Any
) -> EvaluatorScore:
    cfg = config(**fields)
    case = make_case(tmp_path, evaluators=[cfg])
    ctx = make_ctx(
        case,
        "done",
        trajectory=tuple(steps) if steps is not None else None,
        trajectory_error=error,
    )
    return await run_evaluator(ctx, cfg)


# A researcher's run: search twice, read a page, answer.
RUN = [
    step("search", query="lisbon weather", limit=5),
    step("fetch", url="https://example.org/lisbon", options={"timeout": 5, "cache": True}),
    step("search", query="lisbon restaurants", limit=5),
    step("summarize"),
]


# --- tool_used / tool_not_used and argument matching ------------------------------------------


async def test_tool_used_by_name_counts_the_calls(tmp_path: Path) -> None:
    hit = await grade(tmp_path, RUN, type="tool_used", tool="search")
    assert (hit.score, hit.hits) == (
        1.0,
        ["search was called 2 times (steps 1, 3; at least 1)"],
    )
    miss = await grade(tmp_path, RUN, type="tool_used", tool="book")
    assert (miss.score, miss.misses) == (0.0, ["book was never called"])
    bounded = await grade(tmp_path, RUN, type="tool_used", tool="search", min=1, max=1)
    assert bounded.misses == [
        "search was called 2 times (steps 1, 3), expected at least 1 and at most 1"
    ]


async def test_argument_subset_checks_only_the_keys_given_at_every_depth(tmp_path: Path) -> None:
    nested = await grade(
        tmp_path, RUN, type="tool_used", tool="fetch", args={"options": {"timeout": 5}}
    )
    assert nested.score == 1.0
    wrong = await grade(
        tmp_path, RUN, type="tool_used", tool="search", args={"query": "oslo weather"}
    )
    assert wrong.score == 0.0
    assert wrong.misses == [
        'search {"query": "oslo weather"} was never called (\'search\' was called, but '
        'step 1: `query` is "lisbon weather", not "oslo weather"; '
        'step 3: `query` is "lisbon restaurants", not "oslo weather")'
    ]
    # a number is a number (5 == 5.0), but true is not 1
    assert (await grade(tmp_path, RUN, type="tool_used", tool="search", args={"limit": 5.0})).score
    flag = [step("fetch", cache=True)]
    assert not (
        await grade(tmp_path, flag, type="tool_used", tool="fetch", args={"cache": 1})
    ).score


async def test_exact_arguments_refuse_extra_keys(tmp_path: Path) -> None:
    exact = {"type": "tool_used", "tool": "search", "args_match": "exact"}
    missing_key = await grade(tmp_path, RUN, **exact, args={"query": "lisbon weather"})
    assert missing_key.score == 0.0
    assert "it has other arguments too: `limit`" in missing_key.misses[0]
    whole = await grade(tmp_path, RUN, **exact, args={"query": "lisbon weather", "limit": 5})
    assert whole.score == 1.0


async def test_arguments_against_a_json_schema_inline_or_in_a_file(tmp_path: Path) -> None:
    schema = {
        "type": "object",
        "properties": {"query": {"type": "string", "pattern": "restaurants"}},
        "required": ["query"],
    }
    inline = await grade(tmp_path, RUN, type="tool_used", tool="search", args_schema=schema)
    assert inline.hits == ["search (arguments per schema) was called 1 time (step 3; at least 1)"]
    (tmp_path / "schema.json").write_text(json.dumps({**schema, "required": ["missing"]}))
    from_file = await grade(
        tmp_path, RUN, type="tool_used", tool="search", args_schema="schema.json"
    )
    assert from_file.score == 0.0
    assert "'missing' is a required property" in from_file.misses[0]
    broken = await grade(tmp_path, RUN, type="tool_used", tool="search", args_schema="nowhere.json")
    assert broken.error is not None and "JSON Schema file not found: nowhere.json" in broken.error


async def test_tool_not_used_names_the_calls_it_found(tmp_path: Path) -> None:
    ok = await grade(tmp_path, RUN, type="tool_not_used", tool="delete_file")
    assert (ok.score, ok.hits) == (1.0, ["delete_file was not called"])
    bad = await grade(tmp_path, RUN, type="tool_not_used", tool="search", args={"limit": 5})
    assert bad.score == 0.0
    assert bad.misses == [
        'search {"limit": 5} was called 2 times (steps 1, 3): '
        '{"limit": 5, "query": "lisbon weather"}; {"limit": 5, "query": "lisbon restaurants"}'
    ]
    # with arguments, only the matching calls count
    other = await grade(tmp_path, RUN, type="tool_not_used", tool="search", args={"limit": 50})
    assert other.score == 1.0


async def test_a_target_that_cannot_say_gets_no_grade(tmp_path: Path) -> None:
    unknown = await grade(tmp_path, None, type="tool_not_used", tool="rm")
    assert unknown.score == 0.0
    assert unknown.error is not None and "does not report the tools it called" in unknown.error
    broken = await grade(tmp_path, None, "the file is empty", type="step_count", max=3)
    assert broken.error == "the file is empty"
    # an empty trajectory is known: nothing was called
    none = await grade(tmp_path, [], type="tool_not_used", tool="rm")
    assert (none.score, none.error) == (1.0, None)


# --- tool_trajectory -------------------------------------------------------------------------

NAMES = ["search", "fetch", "search", "summarize"]


@pytest.mark.parametrize(
    ("mode", "expected", "score"),
    [
        ("exact", NAMES, 1.0),
        ("exact", ["search", "fetch", "summarize"], 2 / 4),  # positions 1, 2 agree
        ("exact", [*NAMES, "answer"], 4 / 5),
        ("in_order", ["search", "summarize"], 1.0),
        ("in_order", ["fetch", "search"], 1.0),
        ("in_order", ["summarize", "fetch"], 1 / 2),
        ("unordered", ["summarize", "search", "fetch", "search"], 1.0),
        ("unordered", ["summarize", "search", "fetch"], 3 / 4),
        ("superset", ["summarize", "fetch"], 1.0),
        ("superset", ["summarize", "fetch", "book"], 2 / 3),
        ("subset", [*NAMES, "book"], 1.0),
        ("subset", ["search", "fetch"], 2 / 4),
    ],
)
async def test_sequence_modes(tmp_path: Path, mode: str, expected: list[str], score: float) -> None:
    result = await grade(tmp_path, RUN, type="tool_trajectory", mode=mode, expected=expected)
    assert result.score == pytest.approx(score)
    assert result.error is None


async def test_in_order_finds_the_longest_run_in_order_not_the_first(tmp_path: Path) -> None:
    # a greedy scan would match `summarize` first at step 4 and lose fetch and search
    steps = [step("fetch"), step("search"), step("summarize")]
    result = await grade(
        tmp_path,
        steps,
        type="tool_trajectory",
        mode="in_order",
        expected=["summarize", "fetch", "search"],
    )
    assert result.score == pytest.approx(2 / 3)
    assert result.hits == [
        "expected call 2 (fetch) at step 1",
        "expected call 3 (search) at step 2",
    ]
    assert result.misses == [
        "expected call 1 (summarize) not found before step 1: it was made out of order (step 3)"
    ]


async def test_unordered_matching_gives_the_strict_pattern_its_only_call(tmp_path: Path) -> None:
    # `search` (any arguments) could take step 1, the only call the strict one fits
    expected = [
        "search",
        {"tool": "search", "args": {"query": "lisbon weather"}},
    ]
    result = await grade(
        tmp_path, RUN[:3], type="tool_trajectory", mode="superset", expected=expected
    )
    assert result.score == 1.0
    assert result.hits[:2] == [
        "expected call 1 (search) at step 3",
        'expected call 2 (search {"query": "lisbon weather"}) at step 1',
    ]


async def test_exact_and_unordered_say_what_differs(tmp_path: Path) -> None:
    exact = await grade(
        tmp_path,
        RUN,
        type="tool_trajectory",
        mode="exact",
        expected=["search", {"tool": "fetch", "args": {"url": "https://example.org/oslo"}}],
    )
    assert exact.hits == ["step 1: search"]
    assert exact.misses == [
        'step 2: expected fetch {"url": "https://example.org/oslo"}, but `url` is '
        '"https://example.org/lisbon", not "https://example.org/oslo"',
        "step 3: 'search' was not expected (exactly 2 calls expected)",
        "step 4: 'summarize' was not expected (exactly 2 calls expected)",
    ]
    unordered = await grade(
        tmp_path, RUN, type="tool_trajectory", mode="unordered", expected=["summarize", "book"]
    )
    assert unordered.misses[0] == "expected call 2 (book) was not made"
    assert unordered.misses[1].startswith("step 1: 'search' {")
    assert unordered.misses[1].endswith("is not among the expected calls")


async def test_any_order_counts_minimums_as_the_original_agentv(tmp_path: Path) -> None:
    result = await grade(
        tmp_path,
        RUN,
        type="tool_trajectory",
        mode="any_order",
        minimums={"search": 2, "fetch": 2, "summarize": 1},
    )
    assert result.score == pytest.approx(2 / 3)
    assert result.misses == ["'fetch' was called 1 time (at least 2 expected)"]


# --- tool_call_f1, step_count, repeated_calls ----------------------------------------------------


async def test_precision_recall_and_f1(tmp_path: Path) -> None:
    expected = ["search", "fetch", "book"]
    f1 = await grade(tmp_path, RUN, type="tool_call_f1", expected=expected)
    # 2 of 4 calls were expected, 2 of 3 expected calls made
    assert f1.score == pytest.approx(2 * 0.5 * (2 / 3) / (0.5 + 2 / 3))
    assert f1.hits[0] == (
        "precision 0.50 (2 of 4 calls expected), recall 0.67 (2 of 3 expected calls made), F1 0.57"
    )
    assert "expected call 3 (book) was not made" in f1.misses
    recall = await grade(tmp_path, RUN, type="tool_call_f1", expected=expected, metric="recall")
    assert recall.score == pytest.approx(2 / 3)
    nothing = await grade(tmp_path, [], type="tool_call_f1", expected=["search"])
    assert nothing.score == 0.0


async def test_step_count_and_repeated_calls(tmp_path: Path) -> None:
    many = await grade(tmp_path, RUN, type="step_count", max=3)
    assert (many.score, many.misses) == (0.0, ["4 tool calls (at most 3 allowed)"])
    searches = await grade(tmp_path, RUN, type="step_count", tool="search", min=2, max=2)
    assert searches.hits == ["2 calls of 'search' (at least 2 and at most 2 allowed)"]
    assert (await grade(tmp_path, RUN, type="repeated_calls")).score == 1.0
    loop = [step("search", query="x"), step("fetch"), step("search", query="x")] * 2
    looped = await grade(tmp_path, loop, type="repeated_calls", max=2)
    assert looped.score == 0.0
    assert looped.misses == [
        'search {"query": "x"} was made 4 times (steps 1, 3, 4, 6), at most 2 allowed'
    ]  # fetch was made twice: allowed
    only_fetch = await grade(tmp_path, loop, type="repeated_calls", max=2, tool="fetch")
    assert only_fetch.score == 1.0


# --- weights, required, threshold --------------------------------------------------------------


async def test_weights_make_a_weighted_mean_and_entries_say_their_settings(
    tmp_path: Path,
) -> None:
    configs = [
        config(type="tool_used", tool="search", weight=3),
        config(type="tool_used", tool="book", name="booked", weight=1, required=True),
        config(type="step_count", max=10, weight=0),
    ]
    case = make_case(tmp_path, evaluators=configs)
    ctx = make_ctx(case, "done", trajectory=tuple(RUN))
    grade_ = aggregate([await run_evaluator(ctx, c) for c in configs])
    assert grade_.score == pytest.approx(3 / 4)  # (3 * 1 + 1 * 0 + 0 * 1) / 4
    assert [s.name for s in grade_.required_misses(0.5)] == ["booked"]
    entries = [s.to_dict(0.8) for s in grade_.evaluator_results or []]
    assert entries[0]["weight"] == 3.0 and "required" not in entries[0]
    assert (entries[1]["required"], entries[1]["threshold"], entries[1]["passed"]) == (
        True,
        0.8,
        False,
    )
    assert entries[2]["weight"] == 0.0 and "passed" not in entries[2]
