"""Step 7 of the data flow: grade a candidate's answer.

``grade_case(ctx)`` runs a case's evaluators (``llm_judge``, ``code`` and the deterministic
``contains``, ``icontains``, ``equals``, ``regex``, ``is_json``) and aggregates their
verdicts into a ``CaseGrade``. It never raises for a grading problem: an evaluator that
cannot grade is recorded with ``error`` set and score 0.

Import what you use from its module: ``base`` (``EvaluationContext``, ``EvaluatorScore``,
``CaseGrade``), ``grading`` (``grade_case``, ``run_evaluator``, ``needs_judge``),
``registry``; importing the package itself loads none of them, so the evaluators' settings
(``specs``), which the eval file format takes, come without the evaluators.
"""
