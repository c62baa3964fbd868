"""Running cases: from a checked plan to a result record per run of a case.

In the order a run meets them:

- ``plan``: which files, cases, targets and repeats; what ``--resume`` / ``--rerun-*`` leave
  out. Nothing is sent before the plan is complete.
- ``orchestrator``: hands each target's cases to its workers (or to an executor) and
  writes each record the moment its case ends.
- ``pipeline``: one case from its job to its record: build, send, grade, record;
  ``conversation``: a live case, the same line in a loop; ``simulator``: a simulated user.
- ``sending``: what those share: every request through the target as the run wraps it
  (gate, cache, meter, budget), judges and simulated users' targets, the one way an
  answer is graded.
- ``scheduling``: one gate per target (concurrency, pauses, pace, rate limits).
- ``cache``: ``--cache``, answers keyed by the exact request.
- ``resume``: what a results file says was already run (and the user turns it recorded).
- ``preview``: the same path up to the request, for ``agentv render``.
- ``executors``: where cases run when not in this process (Ray).
"""
