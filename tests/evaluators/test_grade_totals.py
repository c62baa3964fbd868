"""What a case's grade adds up: token usage (None, not an empty usage, when nothing was
reported), judge failures, errors and the default evaluator's fields, compared whole."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from agentv.cases import EvalCase, EvaluatorConfig, SimulatedUser, Turn
from agentv.evaluators.base import EvaluationContext, EvaluatorScore
from agentv.evaluators.code import CodeSpec
from agentv.evaluators.deterministic import ContainsSpec
from agentv.evaluators.grading import aggregate, grade_case, needs_judge, run_evaluator
from agentv.providers.base import ProviderResponse, Usage
from support.evaluator_kit import FakeJudge, contains, judge, make_case, make_ctx, regex
from support.evaluator_kit import user as user_message


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


def _raising(name: str, exc: BaseException) -> EvaluatorConfig:
    """A ``contains`` evaluator whose grading raises ``exc``."""

    class Raising(ContainsSpec):
        async def evaluate(self, ctx: EvaluationContext, config: EvaluatorConfig) -> EvaluatorScore:
            raise exc

    return EvaluatorConfig(name, Raising(type="contains", value="x"))


@pytest.mark.parametrize(
    ("exc", "error"),
    [(RuntimeError(""), "RuntimeError"), (ValueError("bad value"), "bad value")],
)
async def test_an_evaluator_that_raises_without_a_message_is_named_by_its_type(
    tmp_path: Path, exc: BaseException, error: str
) -> None:
    case = make_case(tmp_path, evaluators=[_raising("boom", exc)])
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


def _live(*turns: Turn, evaluators: tuple[EvaluatorConfig, ...] = ()) -> EvalCase:
    return replace(make_case(Path("/nowhere"), evaluators=evaluators), turns=turns)


def _simulated(
    evaluators: tuple[EvaluatorConfig, ...] = (contains("x"),), **user: object
) -> EvalCase:
    person = SimulatedUser(target="sim", persona="a customer", goal="a refund", **user)  # type: ignore[arg-type]
    return replace(make_case(Path("/nowhere"), evaluators=evaluators), user=person)


def _turn(outcome: str = "", *evaluators: EvaluatorConfig) -> Turn:
    return Turn(message=user_message("hi"), outcome=outcome, evaluators=evaluators)


def test_needs_judge_in_a_live_conversation() -> None:
    assert needs_judge(_live(_turn("Says hello.")))  # graded by a judge of its outcome
    assert not needs_judge(_live(_turn("Says hello.", contains("hello"))))
    assert not needs_judge(_live(_turn(), evaluators=(contains("x"),)))
    assert needs_judge(_live(_turn("", judge("j"))))
    assert needs_judge(_live(_turn("Says hello.", contains("hello")), evaluators=(judge("j"),)))


def test_needs_judge_with_a_simulated_user() -> None:
    assert not needs_judge(_simulated())
    assert needs_judge(_simulated(evaluators=()))  # the conversation's default judge
    assert needs_judge(_simulated(stop_when_judge="Was the refund granted?"))
    assert needs_judge(_simulated(role_judge=True))
    assert needs_judge(_simulated(stop_when=(judge("done"),)))
    assert not needs_judge(_simulated(stop_when=(contains("refund"),)))
    turn_judged = replace(_simulated(), turn_evaluators=(judge("each"),))
    assert needs_judge(turn_judged)


def test_weights_below_one_in_all_still_make_a_weighted_mean() -> None:
    full = EvaluatorScore("a", "contains", 1.0, ["a"], [], weight=0.5)
    none = EvaluatorScore("b", "contains", 0.0, [], ["b"], weight=0.25)
    assert aggregate([full, none]).score == 0.5 / 0.75


@dataclass(frozen=True)
class _Foreign:
    """Settings that are no evaluator of agentv's (a program building its own cases)."""

    type: str = "mine"
    name: str | None = None
    weight: float = 1.0
    required: bool = False
    threshold: float | None = None

    def model_dump(self, *, mode: str = "python") -> dict[str, object]:
        return {"type": self.type}

    def __repr__(self) -> str:
        return "_Foreign()"


async def test_settings_that_are_no_evaluator_are_an_evaluator_error(tmp_path: Path) -> None:
    config = EvaluatorConfig("mine", _Foreign())
    entry = await run_evaluator(make_ctx(make_case(tmp_path), "Paris"), config)
    reason = "_Foreign() is not an evaluator (agentv.evaluators.base.EvaluatorSpec)"
    assert (entry.name, entry.type, entry.score, entry.error) == ("mine", "mine", 0.0, reason)
