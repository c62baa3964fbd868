"""End-of-run statistics over every result of a run (printed by ``agentv.cli.summary``).

``SummaryCollector.add`` is called once per finished case and only appends to a few flat
arrays, so a run of 100,000 cases stays cheap; everything else is computed once, in
``summary()``. Error results count with score 0, as in the original AgentV.
"""

from __future__ import annotations

import heapq
import math
from array import array
from bisect import bisect_right
from dataclasses import dataclass, field

HISTOGRAM_EDGES: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
"""Bin edges of the score distribution: 0.0-0.2, 0.2-0.4, ..., 0.8-1.0."""

# A score belongs to the first bin with ``score < end + 1e-9``: a boundary value lands in
# the LOWER bin (0.2 -> first, 0.8 -> fourth), which is how the original AgentV counted.
_BIN_LIMITS = tuple(end + 1e-9 for end in HISTOGRAM_EDGES[1:-1])

TOP_COUNT = 3
SLOWEST_COUNT = 5


@dataclass(frozen=True, slots=True)
class HistogramBin:
    """One bar of the score distribution."""

    start: float
    end: float
    count: int

    @property
    def label(self) -> str:
        """``0.0-0.2`` style."""
        return f"{self.start:.1f}-{self.end:.1f}"


@dataclass(frozen=True, slots=True)
class Summary:
    """Statistics over all results of a run; ``None`` where there is nothing to compute."""

    total: int
    errors: int = 0
    """Results with ``error`` set (the case could not run); they count with score 0."""
    judge_failures: int = 0
    """Cases where an evaluator (usually the LLM judge) failed to grade."""
    mean: float | None = None
    median: float | None = None
    min: float | None = None
    max: float | None = None
    std_dev: float | None = None
    """Sample standard deviation (n - 1); only with two results or more."""
    histogram: tuple[HistogramBin, ...] = ()
    top: tuple[tuple[str, float], ...] = ()
    """Best ``(eval_id, score)`` first; ties by eval id."""
    bottom: tuple[tuple[str, float], ...] = ()
    """The lowest scores, lowest first, ties by eval id (the original AgentV listed them reversed)."""
    slowest: tuple[tuple[str, float], ...] = ()
    """``(eval_id, seconds)``, slowest first."""
    error_details: tuple[tuple[str, str], ...] = field(default=())
    """``(eval_id, message)`` for every error, in the order they were added."""

    @property
    def passed(self) -> int:
        """Results without an error, whatever their score."""
        return self.total - self.errors


class SummaryCollector:
    """Collects what the summary needs, in O(1) time per case."""

    def __init__(self) -> None:
        self._ids: list[str] = []
        self._scores = array("d")
        self._durations = array("d")  # NaN where unknown
        self._errors: list[tuple[str, str]] = []
        self._judge_failures = 0

    def __len__(self) -> int:
        return len(self._ids)

    def add(
        self,
        eval_id: str,
        score: float,
        *,
        error: str | None = None,
        judge_failed: bool = False,
        duration_s: float | None = None,
    ) -> None:
        """Record one finished case (an error result with its score, normally 0)."""
        # Scores are meant to be in [0, 1]; keep a stray value from skewing every statistic.
        if not score >= 0.0:  # also catches NaN
            score = 0.0
        elif score > 1.0:
            score = 1.0
        self._ids.append(eval_id)
        self._scores.append(score)
        self._durations.append(math.nan if duration_s is None else duration_s)
        if error is not None:
            self._errors.append((eval_id, error))
        if judge_failed:
            self._judge_failures += 1

    def summary(self) -> Summary:
        """The statistics over everything added so far."""
        n = len(self._scores)
        if n == 0:
            return Summary(total=0)
        scores = self._scores
        ordered = sorted(scores)
        mean = math.fsum(scores) / n
        middle = n // 2
        median = ordered[middle] if n % 2 else (ordered[middle - 1] + ordered[middle]) / 2
        std_dev = None
        if n >= 2:
            std_dev = math.sqrt(math.fsum((s - mean) ** 2 for s in scores) / (n - 1))

        counts = [0] * (len(HISTOGRAM_EDGES) - 1)
        for s in scores:
            counts[bisect_right(_BIN_LIMITS, s)] += 1
        histogram = tuple(
            HistogramBin(start, end, count)
            for start, end, count in zip(
                HISTOGRAM_EDGES[:-1], HISTOGRAM_EDGES[1:], counts, strict=True
            )
        )

        ids = self._ids
        # Order: best score first, ties by eval id (results arrive in completion order,
        # which is not reproducible; eval ids are).
        top_idx = heapq.nsmallest(TOP_COUNT, range(n), key=lambda i: (-scores[i], ids[i]))
        # Lowest first: "1." is the case most worth a look.
        bottom_idx = heapq.nsmallest(TOP_COUNT, range(n), key=lambda i: (scores[i], ids[i]))

        timed = [i for i in range(n) if not math.isnan(self._durations[i])]
        slow_idx = heapq.nsmallest(
            SLOWEST_COUNT, timed, key=lambda i: (-self._durations[i], ids[i])
        )

        return Summary(
            total=n,
            errors=len(self._errors),
            judge_failures=self._judge_failures,
            mean=mean,
            median=median,
            min=ordered[0],
            max=ordered[-1],
            std_dev=std_dev,
            histogram=histogram,
            top=tuple((ids[i], scores[i]) for i in top_idx),
            bottom=tuple((ids[i], scores[i]) for i in bottom_idx),
            slowest=tuple((ids[i], self._durations[i]) for i in slow_idx),
            error_details=tuple(self._errors),
        )
