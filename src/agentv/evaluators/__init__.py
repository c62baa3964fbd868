"""Step 7 of the data flow: grade a candidate's answer.

``grade_case(ctx)`` runs a case's evaluators (``llm_judge``, ``code`` and the deterministic
``contains``, ``icontains``, ``equals``, ``regex``, ``is_json``) and aggregates their
verdicts into a ``CaseGrade``. It never raises for a grading problem: an evaluator that
cannot grade is recorded with ``error`` set and score 0.
"""

from agentv.evaluators.base import CaseGrade, EvaluationContext, Evaluator, EvaluatorScore
from agentv.evaluators.grading import aggregate, grade_case, needs_judge, run_evaluator
from agentv.evaluators.registry import EVALUATORS, get_evaluator

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
