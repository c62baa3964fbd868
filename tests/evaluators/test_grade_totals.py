"""What a case's grade adds up: token usage (None, not an empty usage, when nothing was
reported), judge failures, errors and the default evaluator's fields, compared whole."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest

from agentv.cases import EvaluatorConfig
from agentv.evaluators import registry
from agentv.evaluators.base import EvaluationContext, EvaluatorScore
from agentv.evaluators.grading import aggregate, grade_case, needs_judge
from agentv.evaluators.specs import CodeSpec
from agentv.providers.base import ProviderResponse, Usage
from support.evaluator_kit import FakeJudge, contains, judge, make_case, make_ctx, regex


def scored(name: str, usage: Usage | None, *, kind: str = "llm_judge", error: str | None = None):
    return EvaluatorScore(name, kind, 1.0, [], [], usage=usage, error=error)


def test_usage_is_none_when_no_evaluator_reported_any() -> None:
    grade = aggregate([scored("a", None, kind="contains"), scored("b", None)])
    assert grade.usage is None


def test_usage_sums_what_was_reported_and_keeps_unknown_fields_unknown() -> None:
    grade = aggregate(
        [
            scored("a", Usage(10, None, None)),
            scored("b", None, kind="contains"),
            scored("c", Usage(5, 3, None)),
            scored("d", Usage(1, 2, 3)),
        ]
    )
    assert grade.usage == Usage(16, 5, 3)
    only_inputs = aggregate([scored("a", Usage(7, None, None)), scored("b", Usage(0, None, None))])
    assert only_inputs.usage == Usage(7, None, None)
    zeros = aggregate([scored("a", Usage(0, 0, 0))])
    assert zeros.usage == Usage(0, 0, 0)


async def test_case_usage_none_without_a_judge_call(tmp_path: Path) -> None:
    case = make_case(tmp_path, evaluators=[contains("Paris"), regex("P")])
    grade = await grade_case(make_ctx(case, "Paris"))
    assert grade.usage is None
    reply = ProviderResponse(text='{"score": 1, "hits": ["ok"]}', usage=None)
    judged = make_case(tmp_path, evaluators=[contains("Paris"), judge("quality")])
    grade = await grade_case(make_ctx(judged, "Paris", judge=FakeJudge(reply)))
    assert grade.usage is None


async def test_case_usage_of_two_judges_is_summed(tmp_path: Path) -> None:
    fake = FakeJudge(
        ProviderResponse(text='{"score": 1}', usage=Usage(10, 5, 15)),
        ProviderResponse(text='{"score": 0}', usage=Usage(20, None, None)),
    )
    case = make_case(tmp_path, evaluators=[judge("first"), judge("second")])
    grade = await grade_case(make_ctx(case, "Paris", judge=fake))
    assert (grade.score, grade.usage) == (0.5, Usage(30, 5, 15))


def test_judge_failed_only_for_a_judge_with_an_error() -> None:
    assert not aggregate([scored("rx", None, kind="regex", error="bad")]).judge_failed
    assert not aggregate([scored("j", None)]).judge_failed
    assert aggregate([scored("rx", None, kind="regex"), scored("j", None, error="x")]).judge_failed


def test_aggregate_mean_and_aspects_in_full() -> None:
    grade = aggregate(
        [
            EvaluatorScore("a", "contains", 1.0, ["h"], [], "fine", expected_aspect_count=2),
            EvaluatorScore("b", "regex", 0.0, [], ["m"], None, expected_aspect_count=3),
            EvaluatorScore("c", "equals", 0.5, [], [], "", expected_aspect_count=0),
        ]
    )
    assert (grade.score, grade.expected_aspect_count, grade.reasoning, grade.error) == (
        0.5,
        5,
        "a: fine",
        None,
    )
    assert (grade.hits, grade.misses, grade.default_name) == (["h"], ["m"], "llm_judge")


async def test_default_evaluator_grade_in_full(tmp_path: Path) -> None:
    fake = FakeJudge(
        ProviderResponse(
            text='{"score": 0.25, "hits": ["h"], "misses": ["m1", "m2"], "reasoning": "meh"}',
            usage=Usage(4, 2, 6),
        )
    )
    grade = await grade_case(make_ctx(make_case(tmp_path), "Lyon", judge=fake))
    assert (grade.score, grade.hits, grade.misses, grade.reasoning) == (
        0.25,
        ["h"],
        ["m1", "m2"],
        "meh",
    )
    assert (grade.evaluator_results, grade.error, grade.judge_failed) == (None, None, False)
    assert (grade.usage, grade.default_name, grade.expected_aspect_count) == (
        Usage(4, 2, 6),
        "llm_judge",
        3,
    )


async def test_default_judge_that_fails_sets_the_grade_error(tmp_path: Path) -> None:
    grade = await grade_case(make_ctx(make_case(tmp_path), "Paris", judge=FakeJudge("nonsense")))
    assert grade.judge_failed
    assert grade.error is not None
    assert grade.evaluator_errors() == [("llm_judge", grade.error)]
    assert grade.score == 0.0


async def test_default_code_evaluator_falls_back_to_the_judge(tmp_path: Path) -> None:
    fake = FakeJudge('{"score": 1}')
    case = make_case(tmp_path, default_evaluator="code")
    grade = await grade_case(make_ctx(case, "Paris", judge=fake))
    assert (grade.score, grade.default_name, len(fake.requests)) == (1.0, "llm_judge", 1)


class _Raising:
    type: ClassVar[str] = "contains"

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    async def evaluate(self, ctx: EvaluationContext, config: EvaluatorConfig) -> EvaluatorScore:
        raise self.exc


@pytest.mark.parametrize(
    ("exc", "error"),
    [(RuntimeError(""), "RuntimeError"), (ValueError("bad value"), "bad value")],
)
async def test_an_evaluator_that_raises_without_a_message_is_named_by_its_type(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exc: BaseException, error: str
) -> None:
    monkeypatch.setitem(registry.EVALUATORS, "contains", _Raising(exc))
    case = make_case(tmp_path, evaluators=[contains("x", "boom")])
    grade = await grade_case(make_ctx(case, "Paris"))
    assert grade.evaluator_results is not None
    (entry,) = grade.evaluator_results
    assert (entry.name, entry.type, entry.score, entry.error) == ("boom", "contains", 0.0, error)
    assert entry.misses == [f"Evaluator 'boom' failed: {error}"]


def test_needs_judge() -> None:
    base = Path("/nowhere")
    assert needs_judge(make_case(base))  # no list: the default evaluator is the judge
    assert not needs_judge(make_case(base, evaluators=[contains("x"), regex("y")]))
    assert needs_judge(make_case(base, evaluators=[contains("x"), judge("j")]))
    script = EvaluatorConfig("c", CodeSpec(type="code", script="true"))
    assert not needs_judge(make_case(base, evaluators=[script]))
