"""Evaluator ``type`` -> evaluator. Evaluators are stateless, so one instance serves all."""

from __future__ import annotations

from agentv.errors import EvaluatorError
from agentv.evaluators.base import Evaluator
from agentv.evaluators.code import CodeEvaluator
from agentv.evaluators.deterministic import (
    ContainsEvaluator,
    EqualsEvaluator,
    IsJsonEvaluator,
    RegexEvaluator,
)
from agentv.evaluators.limits import CostEvaluator, LatencyEvaluator
from agentv.evaluators.llm_judge import LlmJudgeEvaluator

_contains = ContainsEvaluator()

EVALUATORS: dict[str, Evaluator] = {
    "llm_judge": LlmJudgeEvaluator(),
    "code": CodeEvaluator(),
    "contains": _contains,
    "icontains": _contains,  # the same check, ignoring case (it reads the spec's type)
    "equals": EqualsEvaluator(),
    "regex": RegexEvaluator(),
    "is_json": IsJsonEvaluator(),
    "latency": LatencyEvaluator(),
    "cost": CostEvaluator(),
}


def get_evaluator(type_: str) -> Evaluator:
    """The evaluator for a ``type:`` value; ``EvaluatorError`` listing the valid ones."""
    try:
        return EVALUATORS[type_]
    except KeyError:
        raise EvaluatorError(
            f"unknown evaluator type {type_!r}; valid choices: {', '.join(sorted(EVALUATORS))}"
        ) from None
