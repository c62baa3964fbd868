"""Step 7 of the data flow: grade a candidate's answer.

``grade_case(ctx)`` runs a case's evaluators (``llm_judge``, ``code`` and the deterministic
``contains``, ``icontains``, ``equals``, ``regex``, ``is_json``) and aggregates their
verdicts into a ``CaseGrade``. It never raises for a grading problem: an evaluator that
cannot grade is recorded with ``error`` set and score 0.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: public name -> its module, imported on first use: the evaluators' settings models
#: (``specs``), which the eval file format takes, come without the evaluators themselves
_EXPORTS = {
    "CaseGrade": "agentv.evaluators.base",
    "EvaluationContext": "agentv.evaluators.base",
    "Evaluator": "agentv.evaluators.base",
    "EvaluatorScore": "agentv.evaluators.base",
    "aggregate": "agentv.evaluators.grading",
    "grade_case": "agentv.evaluators.grading",
    "needs_judge": "agentv.evaluators.grading",
    "run_evaluator": "agentv.evaluators.grading",
    "EVALUATORS": "agentv.evaluators.registry",
    "get_evaluator": "agentv.evaluators.registry",
}

__all__ = [
    "EVALUATORS",
    "CaseGrade",
    "EvaluationContext",
    "Evaluator",
    "EvaluatorScore",
    "aggregate",
    "get_evaluator",
    "grade_case",
    "needs_judge",
    "run_evaluator",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'agentv.evaluators' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:
    from agentv.evaluators.base import CaseGrade, EvaluationContext, Evaluator, EvaluatorScore
    from agentv.evaluators.grading import aggregate, grade_case, needs_judge, run_evaluator
    from agentv.evaluators.registry import EVALUATORS, get_evaluator
