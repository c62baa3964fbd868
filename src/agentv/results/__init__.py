"""Results: what a run writes and everything read back from it.

- ``record``: one run of a case as one results line (``EvalResult``), and its statuses.
- ``writers``: the JSON Lines and YAML writers (each record on disk when its case ends).
- ``summary`` / ``stats``: statistics over records; ``compare``: two runs side by side.
- ``junit``: JUnit XML and GitHub Actions annotations; ``report``: the HTML report.
- ``dumps``: ``--dump-prompts``.
"""
