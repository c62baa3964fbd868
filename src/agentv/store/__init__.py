"""The run store: every run's entry, an index of its results file, and the reviews people
made, in one SQLite file per project (docs/run-history.md).

``RunStore`` is the one way in: opened on a path, it holds one connection; each of its
methods is a short transaction of its own (``store.db``), so several processes (runs
registering theirs, an import, ``agentv view``) use one store at once.
"""

from __future__ import annotations

from agentv.store.calibrate import Agreement, Calibration
from agentv.store.history import CaseHistory, CaseRun, FlakyCase
from agentv.store.records import RecordPage, RecordQuery, RecordRow
from agentv.store.reviews import ImportedReviews, QueueItem, Review, ReviewCounts
from agentv.store.runs import RunFilter, RunStart, StoredRun, TrendPoint
from agentv.store.store import RunStore

__all__ = [
    "Agreement",
    "Calibration",
    "CaseHistory",
    "CaseRun",
    "FlakyCase",
    "ImportedReviews",
    "QueueItem",
    "RecordPage",
    "RecordQuery",
    "RecordRow",
    "Review",
    "ReviewCounts",
    "RunFilter",
    "RunStart",
    "RunStore",
    "StoredRun",
    "TrendPoint",
]
