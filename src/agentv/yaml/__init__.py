"""Reading YAML the way agentv's files need it (eval, targets, config and results files).

- ``stream``: the event-driven reader: a file's cases one at a time, with each value's
  line, and keys written twice recorded as it goes (memory stays flat however many cases).
- ``source``: a file's data together with where each value was written, so that every
  problem is reported at its line (``Diagnostic``).

PyYAML is imported as ``yaml`` inside this package too (absolute imports): this package is
``agentv.yaml``, never ``yaml``.
"""
