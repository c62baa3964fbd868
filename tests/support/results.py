"""Reading results as a run writes them, and summing them up as the run does."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def rows(path: Path) -> list[dict[str, Any]]:
    """The records of a JSON Lines results file, in order."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def record_collector() -> Any:
    """A ``SummaryCollector`` that also takes records as plain mappings (as they are
    written) with the grade of the run, read as the run reads them (``add_record``)."""
    from agentv.results.outcome import grading_fields
    from agentv.results.summary import SummaryCollector

    class RecordCollector(SummaryCollector):
        def add(self, result: Any, grade: Any = None) -> None:
            """``grade``: the record holds what the run writes of it (``grading_fields``)."""
            if not isinstance(result, Mapping):  # a model, or a record read as one
                super().add(result)
                return
            record = dict(result)
            if grade is not None:
                record.update(grading_fields(grade))
            super().add_record(record)

    return RecordCollector()
