"""Running cases: from a checked plan to a result record per run of a case.

In the order a run meets them:

- ``plan``: which files, cases, targets and repeats; what ``--resume`` / ``--rerun-*`` leave
  out. Nothing is sent before the plan is complete.
- ``orchestrator``: hands each target's cases to its workers (or to an executor) and
  writes each record the moment its case ends.
- ``pipeline``: one case from its job to its record: prompt, request, grading, record.
- ``scheduling``: one gate per target (concurrency, pauses, pace, rate limits).
- ``cache``: ``--cache``, answers keyed by the exact request.
- ``masking``: known secret values masked in everything written or forwarded.
- ``resume``: what a results file says was already run.
- ``preview``: the same path up to the request, for ``agentv render``.
- ``executors``: where cases run when not in this process (Ray).
"""
