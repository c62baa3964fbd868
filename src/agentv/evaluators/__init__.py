"""Step 7 of the data flow: grade a candidate's answer.

- ``base``: what an evaluator is (``EvaluatorSpec``: its settings as an eval file writes
  them, its checks before a run, its grading), its input (``EvaluationContext``) and its
  verdict (``EvaluatorScore``, ``CaseGrade``);
- ``registry``: every evaluator kind, in one table (``KINDS``), and the eval file's
  ``evaluators:`` entry that follows from it;
- ``grading``: running a case's evaluators and aggregating their verdicts (``grade_case``);
- one module per family of evaluators: ``llm_judge``, ``code``, ``deterministic``
  (``contains``, ``icontains``, ``equals``, ``regex``, ``is_json``), ``limits``
  (``latency``, ``cost``), ``trajectory`` (the tools the candidate called); ``schemas``: the
  JSON Schemas the evaluators take.
"""
