"""Grading one case: run its evaluators and aggregate their verdicts (reference 9.1, 9.4).

A case with an evaluator list runs each evaluator in list order; the grade is their mean
weighted by each one's ``weight`` (1 unless it says otherwise: the plain mean of the
original AgentV), with hits, misses and reasonings concatenated in order. Each verdict
keeps its ``required`` flag and its ``threshold``: whether a required evaluator missed is
decided with the pass threshold, when the case's status is (``results.outcome``). A case without a list runs its
default evaluator (``llm_judge``; a ``code`` default has no script to run, so it falls back
to ``llm_judge`` as in the original AgentV) and reports that evaluator's request record.
"""

from __future__ import annotations

import math

from agentv.cases import EvalCase, EvaluatorConfig
from agentv.errors import BudgetReached
from agentv.evaluators.base import (
    CaseGrade,
    EvaluationContext,
    EvaluatorScore,
    EvaluatorSpec,
    failed,
)
from agentv.evaluators.llm_judge import LlmJudgeSpec
from agentv.providers.base import total_usage

DEFAULT_JUDGE = EvaluatorConfig(name="llm_judge", spec=LlmJudgeSpec(type="llm_judge"))


async def run_evaluator(ctx: EvaluationContext, config: EvaluatorConfig) -> EvaluatorScore:
    """One evaluator's verdict. Never raises (except cancellation): failures are entries."""
    spec = config.spec
    try:
        if not isinstance(spec, EvaluatorSpec):  # only a program building its own cases
            raise TypeError(f"{spec!r} is not an evaluator (agentv.evaluators.base.EvaluatorSpec)")
        score = await spec.evaluate(ctx, config)
    except BudgetReached:
        raise  # the run's budget: the case is not graded, it is recorded as skipped
    except Exception as exc:  # a bug or an unexpected error: recorded, never fatal
        score = failed(config, str(exc) or type(exc).__name__)
    score.weight, score.required, score.threshold = spec.weight, spec.required, spec.threshold
    return score


def _judge_failed(score: EvaluatorScore) -> bool:
    return score.type == "llm_judge" and score.error is not None


def aggregate(scores: list[EvaluatorScore]) -> CaseGrade:
    """The grade of a case with an evaluator list (``evaluator_results`` set)."""
    hits: list[str] = []
    misses: list[str] = []
    reasons: list[str] = []
    aspects = 0
    for s in scores:
        hits.extend(s.hits)
        misses.extend(s.misses)
        aspects += s.expected_aspect_count
        if s.reasoning and s.reasoning.strip():
            reasons.append(f"{s.name}: {s.reasoning}")
    return CaseGrade(
        score=weighted_mean([(s.weight, s.score) for s in scores]),
        hits=hits,
        misses=misses,
        reasoning=" | ".join(reasons) if reasons else None,
        expected_aspect_count=aspects,
        evaluator_results=scores,
        evaluator_raw_request=None,
        judge_failed=any(_judge_failed(s) for s in scores),
        usage=total_usage(s.usage for s in scores),
    )


def weighted_mean(pairs: list[tuple[float, float]]) -> float:
    """The mean of (weight, score) pairs weighted by their weights, always a score from 0
    to 1: weights are scaled by the largest first (huge weights cannot overflow the sum),
    and a score that is not a number counts as 0. No weight above 0: 0."""
    top = max((w for w, _ in pairs if math.isfinite(w)), default=0.0)
    if top <= 0:
        return 0.0
    total = weights = 0.0
    for weight, score in pairs:
        w = weight / top if math.isfinite(weight) and weight > 0 else 0.0
        total += w * (score if math.isfinite(score) else 0.0)
        weights += w
    return min(1.0, max(0.0, total / weights))


def _single(score: EvaluatorScore) -> CaseGrade:
    return CaseGrade(
        score=score.score,
        hits=score.hits,
        misses=score.misses,
        reasoning=score.reasoning,
        expected_aspect_count=score.expected_aspect_count,
        evaluator_results=None,
        evaluator_raw_request=score.call_record(),
        judge_failed=_judge_failed(score),
        error=score.error,
        usage=score.usage,
        default_name=score.name,
        default=score,
    )


def _judged(configs: list[EvaluatorConfig] | tuple[EvaluatorConfig, ...]) -> bool:
    """Whether one of ``configs`` asks a judge target (an ``llm_judge``)."""
    return any(isinstance(c.spec, EvaluatorSpec) and c.spec.uses_judge for c in configs)


def needs_judge(case: EvalCase) -> bool:
    """Whether grading ``case`` asks a judge target: an ``llm_judge`` in its list, or no
    list at all (the default evaluator is the judge); for a live conversation, a judge in
    any turn's list or the case's, or a turn graded by its ``outcome``; for a simulated
    user, also a judge in its ``stop_when`` or its role check."""
    user = case.user
    if user is not None:
        configs = [*case.turn_evaluators, *user.stop_when, *case.evaluators]
        return (
            not case.evaluators or bool(user.stop_when_judge) or user.role_judge or _judged(configs)
        )
    if case.turns:  # a live conversation: its turns' judges, and its own evaluators'
        if any(t.outcome.strip() and not t.evaluators for t in case.turns):
            return True  # a turn graded by a judge of its outcome
        return _judged([e for t in case.turns for e in t.evaluators] + list(case.evaluators))
    if not case.evaluators:
        return True
    return _judged(case.evaluators)


async def grade_case(
    ctx: EvaluationContext, evaluators: tuple[EvaluatorConfig, ...] | None = None
) -> CaseGrade:
    """Grade ``ctx.candidate`` with the case's evaluators (``evaluators``, when given: the
    list of the case as graded, without making it). Never raises for a grading problem:
    every evaluator failure is recorded on its entry (or on the grade, for the default)."""
    configs = ctx.case.evaluators if evaluators is None else evaluators
    if not configs:
        return _single(await run_evaluator(ctx, DEFAULT_JUDGE))
    # in list order, one at a time, as the original AgentV did: a case's judge calls don't pile up
    return aggregate([await run_evaluator(ctx, config) for config in configs])
