"""End-of-run statistics over every result of a run (printed by ``agentv.cli.summary``).

``SummaryCollector.add`` is called once per finished case and only appends to a few flat
arrays and counters, so a run of 100,000 cases stays cheap; everything else is computed
once, in ``summary()``. Results that could not be graded (``error``, ``invalid``) count
with score 0, as in the original AgentV, and the counts by status say how many there are.
"""

from __future__ import annotations

import heapq
import math
import re
from array import array
from bisect import bisect_right
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentv.evaluators.base import CaseGrade

HISTOGRAM_EDGES: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
"""Bin edges of the score distribution: 0.0-0.2, 0.2-0.4, ..., 0.8-1.0."""

# A score belongs to the first bin with ``score < end + 1e-9``: a boundary value lands in
# the LOWER bin (0.2 -> first, 0.8 -> fourth), which is how the original AgentV counted.
_BIN_LIMITS = tuple(end + 1e-9 for end in HISTOGRAM_EDGES[1:-1])

TOP_COUNT = 3
SLOWEST_COUNT = 5
_DIGITS = re.compile(r"(\d+)")


def natural_key(text: str) -> tuple[Any, ...]:
    """Sort key that orders ``c2`` before ``c10`` (digit runs compare as numbers)."""
    parts = _DIGITS.split(text)
    return tuple((0, int(p)) if i % 2 else (1, p.casefold()) for i, p in enumerate(parts))


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
class Tokens:
    """Input and output tokens, summed over the calls that reported them."""

    input: int = 0
    output: int = 0


@dataclass(frozen=True, slots=True)
class Summary:
    """Statistics over all results of a run; ``None`` where there is nothing to compute."""

    total: int
    ok: int = 0
    """Graded at or above the pass threshold."""
    failed: int = 0
    """Graded below the pass threshold."""
    errors: int = 0
    """The target or an evaluator could not do its job (score 0 when no answer came)."""
    invalid: int = 0
    """The case could not run (it could not be loaded, or its target or judge is unusable)."""
    judge_failures: int = 0
    """Cases where an LLM judge could not produce a verdict."""
    evaluator_errors: tuple[tuple[str, int], ...] = ()
    """``(evaluator name, cases)`` for each evaluator that could not grade, most first."""
    mean: float | None = None
    median: float | None = None
    min: float | None = None
    max: float | None = None
    std_dev: float | None = None
    """Sample standard deviation (n - 1); only with two results or more."""
    histogram: tuple[HistogramBin, ...] = ()
    top: tuple[tuple[str, float], ...] = ()
    """Best ``(eval_id, score)`` first; ties by eval id (naturally sorted)."""
    bottom: tuple[tuple[str, float], ...] = ()
    """The lowest scores, lowest first, ties by eval id; empty when ``top`` already lists
    every case (a small suite)."""
    slowest: tuple[tuple[str, float], ...] = ()
    """``(eval_id, seconds)``, slowest first."""
    error_details: tuple[tuple[str, str, str], ...] = field(default=())
    """``(eval_id, status, message)`` of every ``error`` and ``invalid`` case, by id."""
    tokens: tuple[tuple[str, Tokens], ...] = ()
    """Token totals per target, in the order the targets first answered."""
    judge_tokens: Tokens | None = None
    """Token totals of the judge calls (None when no judge reported any)."""

    @property
    def passed(self) -> int:
        """Cases that passed (status ``ok``)."""
        return self.ok

    @property
    def pass_rate(self) -> float | None:
        """Passed cases over all cases."""
        return self.ok / self.total if self.total else None


class SummaryCollector:
    """Collects what the summary needs, in O(1) time per case."""

    def __init__(self) -> None:
        self._ids: list[str] = []
        self._scores = array("d")
        self._durations = array("d")  # NaN where unknown
        self._statuses: Counter[str] = Counter()
        self._problems: list[tuple[str, str, str]] = []
        self._judge_failures = 0
        self._evaluator_errors: Counter[str] = Counter()
        self._tokens: dict[str, list[int]] = {}
        self._judge_tokens: list[int] | None = None

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, record: Mapping[str, Any], grade: CaseGrade | None = None) -> None:
        """Record one finished case: its result record, and its grade when it was graded."""
        eval_id = (
            record.get("eval_id") or f"{record.get('eval_file', '?')}:{record.get('line', '?')}"
        )
        status = record["status"]
        score = record.get("score", 0.0)
        # Scores are meant to be in [0, 1]; keep a stray value from skewing every statistic.
        if not score > 0.0:  # also catches NaN, and -0.0 (shown as "-0.000")
            score = 0.0
        elif score > 1.0:
            score = 1.0
        self._ids.append(eval_id)
        self._scores.append(score)
        duration = record.get("duration_ms")
        self._durations.append(math.nan if duration is None else duration / 1000)
        self._statuses[status] += 1
        if status in ("error", "invalid"):
            self._problems.append((eval_id, status, record.get("error") or ""))
        usage = record.get("usage")
        if usage:
            _add_tokens(self._tokens.setdefault(record.get("target") or "?", [0, 0]), usage)
        if grade is not None:
            if grade.judge_failed:
                self._judge_failures += 1
            for name, _ in grade.evaluator_errors():
                self._evaluator_errors[name] += 1
            if grade.usage is not None:
                if self._judge_tokens is None:
                    self._judge_tokens = [0, 0]
                _add_tokens(
                    self._judge_tokens,
                    {
                        "input_tokens": grade.usage.input_tokens,
                        "output_tokens": grade.usage.output_tokens,
                    },
                )

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
        keys = [natural_key(i) for i in ids]
        # Best first, ties by eval id (results arrive in completion order, which is not
        # reproducible; eval ids are). A small suite is listed once, whole.
        shown = n if n <= 2 * TOP_COUNT else TOP_COUNT
        top_idx = heapq.nsmallest(shown, range(n), key=lambda i: (-scores[i], keys[i]))
        bottom_idx = []
        if n > 2 * TOP_COUNT:  # lowest first: "1." is the case most worth a look
            bottom_idx = heapq.nsmallest(TOP_COUNT, range(n), key=lambda i: (scores[i], keys[i]))

        timed = [i for i in range(n) if not math.isnan(self._durations[i])]
        slow_idx = heapq.nsmallest(
            SLOWEST_COUNT, timed, key=lambda i: (-self._durations[i], keys[i])
        )
        st = self._statuses
        judge = self._judge_tokens
        return Summary(
            total=n,
            ok=st["ok"],
            failed=st["failed"],
            errors=st["error"],
            invalid=st["invalid"],
            judge_failures=self._judge_failures,
            evaluator_errors=tuple(
                sorted(self._evaluator_errors.items(), key=lambda kv: (-kv[1], natural_key(kv[0])))
            ),
            mean=mean,
            median=median,
            min=ordered[0],
            max=ordered[-1],
            std_dev=std_dev,
            histogram=histogram,
            top=tuple((ids[i], scores[i]) for i in top_idx),
            bottom=tuple((ids[i], scores[i]) for i in bottom_idx),
            slowest=tuple((ids[i], self._durations[i]) for i in slow_idx),
            error_details=tuple(sorted(self._problems, key=lambda p: natural_key(p[0]))),
            tokens=tuple((t, Tokens(*v)) for t, v in self._tokens.items()),
            judge_tokens=Tokens(*judge) if judge is not None else None,
        )


def _add_tokens(total: list[int], usage: Mapping[str, Any]) -> None:
    total[0] += usage.get("input_tokens") or 0
    total[1] += usage.get("output_tokens") or 0
