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
from agentv.evaluators.trajectory import (
    RepeatedCallsEvaluator,
    StepCountEvaluator,
    ToolCallF1Evaluator,
    ToolTrajectoryEvaluator,
    ToolUsedEvaluator,
)

_contains = ContainsEvaluator()
_tool_used = ToolUsedEvaluator()

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
    "tool_used": _tool_used,
    "tool_not_used": _tool_used,  # the same count, which must be zero (it reads the type)
    "tool_trajectory": ToolTrajectoryEvaluator(),
    "tool_call_f1": ToolCallF1Evaluator(),
    "step_count": StepCountEvaluator(),
    "repeated_calls": RepeatedCallsEvaluator(),
}


def get_evaluator(type_: str) -> Evaluator:
    """The evaluator for a ``type:`` value; ``EvaluatorError`` listing the valid ones."""
    try:
        return EVALUATORS[type_]
    except KeyError:
        raise EvaluatorError(
            f"unknown evaluator type {type_!r}; valid choices: {', '.join(sorted(EVALUATORS))}"
        ) from None
