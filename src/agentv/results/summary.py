"""Statistics over the results of a run, or of a whole results file: the one place any
figure about a set of results is computed. The terminal summary (``agentv.cli.summary``),
``--summary-json`` (``Summary.to_dict``), the HTML report, JUnit's counts, ``agentv
compare``'s run totals and the Python API all read a ``Summary``; none counts on its own.

``SummaryCollector.add_record`` is called once per run of a case and only appends to a few
flat arrays and counters, so a run of 100,000 cases stays cheap; everything else is computed
once, in ``summary()``. Everything it needs is in the records, so the summary of a results
file read back equals the summary its run printed.

Errors are not scores (docs/results.md, "Errors are not scores"): the score statistics
(mean, median, spread, histogram, pass rate, the best and the worst, per target and per
case) cover the graded runs (``ok``, ``failed``); runs that errored or were invalid are
counted and listed beside them, never averaged in as zeros. A broken server or a missing
file says nothing about how good the answers were.
"""

from __future__ import annotations

import heapq
import json
import math
import re
from array import array
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import filterfalse
from typing import TYPE_CHECKING, Any

from agentv.results import stats
from agentv.results.record import GRADED, STATUSES, repeat_label
from agentv.results.record import usd as dollars
from agentv.results.settled import AutoRule, Outcome, verdict

if TYPE_CHECKING:
    from agentv.results.record import EvalResult

HISTOGRAM_EDGES: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
"""Bin edges of the score distribution: 0.0-0.2, 0.2-0.4, ..., 0.8-1.0."""

# A score belongs to the first bin with ``score < end + 1e-9``: a boundary value lands in
# the LOWER bin (0.2 -> first, 0.8 -> fourth), which is how the original AgentV counted.
_BIN_LIMITS = tuple(end + 1e-9 for end in HISTOGRAM_EDGES[1:-1])

#: the fields of a record the summary reads (``SummaryCollector.add`` of a model)
READ_FIELDS = (
    "eval_id",
    "eval_file",
    "line",
    "dataset",
    "status",
    "score",
    "target",
    "timestamp",
    "repeat",
    "error",
    "evaluator_results",
    "evaluator_raw_request",
    "failed_required",
    "usage",
    "cost",
    "turns",
    "stopped",
    "user",
    "trajectory",
    "latency_ms",
    "duration_ms",
    "cached",
    "vars",
    "uncertain",
    "auto_repeat",
)
TOP_COUNT = 3
SLOWEST_COUNT = 5
CASE_TABLE_MAX = 50
#: where each of agentv's statuses comes in ``Summary.statuses``
_STATUS_ORDER = {status: n for n, status in enumerate(STATUSES)}
_DIGITS = re.compile(r"(\d+)")
_split_digits = _DIGITS.split


def natural_key(text: str) -> tuple[Any, ...]:
    """Sort key that orders ``c2`` before ``c10`` (digit runs compare as numbers)."""
    # Case-folding the whole text first is the same as folding each part: no character
    # folds into or out of a digit. Most ids hold one number: that shape is built directly.
    parts: list[Any] = _split_digits(text.casefold())
    if len(parts) == 3:
        return ((1, parts[0]), (0, int(parts[1])), (1, parts[2]))
    parts[::2] = [(1, p) for p in parts[::2]]
    parts[1::2] = [(0, int(p)) for p in parts[1::2]]
    return tuple(parts)


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
    """Input and output tokens, summed over the calls that reported them: ``input`` and
    ``output`` were spent by this run's requests; ``reused_*`` are those of answers taken
    from ``--cache`` (nothing was sent for them)."""

    input: int = 0
    output: int = 0
    reused_input: int = 0
    reused_output: int = 0

    @property
    def reused(self) -> bool:
        """Whether any of these tokens came from reused answers."""
        return bool(self.reused_input or self.reused_output)


@dataclass(frozen=True, slots=True)
class Spend:
    """US dollars: ``usd`` spent by this run's requests, ``reused_usd`` the price of the
    answers reused (from ``--cache``, or by a regrade: not spent again)."""

    usd: float = 0.0
    reused_usd: float = 0.0

    def to_dict(self) -> dict[str, float]:
        data = {"usd": dollars(self.usd)}
        if self.reused_usd:
            data["reused_usd"] = dollars(self.reused_usd)
        return data


@dataclass(frozen=True, slots=True)
class CostSummary:
    """What the runs cost (docs/results.md, "Cost"): in all, by party (``target``: the
    cases' targets, ``judge``: their judges, and any other party of a run), and how many
    runs had tokens without a price (their cost is unknown, not zero: it is not in these
    figures)."""

    total: Spend = Spend()
    parties: tuple[tuple[str, Spend], ...] = ()
    unpriced_runs: int = 0
    #: the mean price of the targets' answers per run that had one, every target together
    #: (spent or reused alike: what the answers cost; None: no run's answer had a price)
    per_run_usd: float | None = None

    def party(self, name: str) -> Spend | None:
        """One party's spend (None: it spent nothing known)."""
        return next((spend for key, spend in self.parties if key == name), None)


@dataclass(frozen=True, slots=True)
class TurnStats:
    """The turns of the live conversations among the runs (docs/eval-files.md, "Live
    conversations")."""

    conversations: int = 0  # runs that were live conversations
    turns: int = 0  # turns sent
    graded: int = 0  # turns graded on their own (ok or failed)
    passed: int = 0  # turns graded ok
    mean: float | None = None  # of the graded turns' scores
    stopped: int = 0  # conversations that stopped before their last turn
    tool_calls: int = 0  # tool calls answered during them
    #: simulated conversations by how they ended (goal, stop_when, max_turns, user_error...)
    ended: tuple[tuple[str, int], ...] = ()
    user_tokens: Tokens | None = None  # what the simulated users spent (apart)
    replays_diverged: int = 0  # replayed conversations that needed more user turns


@dataclass(frozen=True, slots=True)
class EvaluatorStats:
    """One evaluator (by name) over the runs that listed it: its settings as the records
    say them (docs/eval-files.md, "Weights, required evaluators and thresholds") and how
    it graded."""

    name: str
    type: str
    runs: int  # entries that graded (errors left out)
    mean: float | None
    weight: float | None  # None: not the same in every run
    required: bool  # required in at least one run
    threshold: float | None  # its own threshold, when every run says the same
    passed: int  # entries at or above their threshold (required or thresholded ones)
    judged: int  # entries that say whether they passed
    failed_cases: int  # runs it failed as a required evaluator
    sampled: int = 0  # entries of a judge asked more than once (``samples``)
    uncertain: int = 0  # of those, the ones whose samples disagreed about pass or fail

    @property
    def weighted(self) -> bool:
        """Whether it has anything but the defaults: a weight, ``required``, a threshold."""
        return self.weight != 1.0 or self.required or self.threshold is not None


@dataclass(frozen=True, slots=True)
class Timing:
    """When the runs happened, by their records: ``started`` is the earliest start (a
    record's ``timestamp``, when it was written, less its ``duration_ms``), ``ended`` the
    latest ``timestamp`` (seconds since the epoch, UTC; None when no record says), and
    ``case_seconds`` the runs' durations summed."""

    started: float | None = None
    ended: float | None = None
    case_seconds: float = 0.0

    @property
    def wall_seconds(self) -> float | None:
        """From the first run's start to the last run's end (None when unknown)."""
        if self.started is None or self.ended is None:
            return None
        return max(0.0, self.ended - self.started)


@dataclass(frozen=True, slots=True)
class DatasetCounts:
    """One dataset's runs by status (what JUnit makes a test suite of) and their durations
    summed, in seconds."""

    name: str
    runs: int
    ok: int = 0
    failed: int = 0
    errors: int = 0
    invalid: int = 0
    user_errors: int = 0
    skipped: int = 0
    seconds: float = 0.0
    uncertain: int = 0


@dataclass(frozen=True, slots=True)
class VarGroup:
    """The runs made with one value of one variable (``vars:``; docs/eval-files.md,
    "Variables"): how they ended, and their mean score and pass rate over the graded ones,
    to set a variable's values side by side."""

    variable: str
    value: str  # as the case ids write it
    runs: int
    ok: int = 0
    failed: int = 0
    errors: int = 0
    invalid: int = 0
    user_errors: int = 0
    skipped: int = 0
    mean: float | None = None
    uncertain: int = 0

    @property
    def graded(self) -> int:
        """Runs that were graded (``ok``, ``failed`` or ``uncertain``)."""
        return self.ok + self.failed + self.uncertain

    @property
    def pass_rate(self) -> float | None:
        """Runs that passed over the graded runs (None when none was graded)."""
        return self.ok / self.graded if self.graded else None


@dataclass(frozen=True, slots=True)
class NoiseSplit:
    """Where one target's scores vary (docs/trusting-verdicts.md, "Two kinds of noise"):
    between the repeats of a case (``target_variance``: its answers differ) and between
    the samples a judge gave one answer (``judge_variance``: the judge's own noise in a
    run's score). Each is the mean over the cases that have both repeats and a judge asked
    more than once: a case's judge variance is the mean over its runs of
    ``sum((w / W)**2 * s**2 / k)`` over its sampled judges (weight ``w`` of the runs'
    ``W``, samples' variance ``s**2`` over ``k`` samples); its target variance is the
    variance of its runs' scores less that (0 at least)."""

    cases: int
    target_variance: float
    judge_variance: float
    #: cases whose judge's share of their variance is more than half: decided by the
    #: judge's mood more than by the model
    judge_decided: tuple[str, ...] = ()

    @property
    def judge_share(self) -> float | None:
        """The judge's share of the variance (None: no variance at all)."""
        total = self.target_variance + self.judge_variance
        return self.judge_variance / total if total > 0 else None


@dataclass(frozen=True, slots=True)
class TargetSummary:
    """One target's results, to set targets side by side (``--target A --target B``).

    Each case weighs the same whatever its number of runs: the mean, its standard error and
    its 95% interval are over the cases' mean scores (the interval by a seeded bootstrap
    over cases; see ``agentv.results.stats.mean_ci``).
    """

    name: str
    cases: int
    runs: int
    mean: float | None
    std_error: float | None
    ci: tuple[float, float] | None
    pass_rate: float | None  # runs that passed, over the graded runs
    ok: int
    failed: int
    errors: int
    invalid: int
    tokens: Tokens
    latency_median_ms: float | None
    latency_p95_ms: float | None
    #: what its answers cost (its judges' not included: ``Summary.cost``), and their mean
    #: price per run that reported one (spent or reused alike; None: none did)
    cost: Spend = Spend()
    cost_per_run: float | None = None
    skipped: int = 0
    #: mean over cases of pass@k and pass^k, for k = 1 .. the fewest runs of any case
    pass_at: tuple[float, ...] = ()
    pass_all: tuple[float, ...] = ()
    flaky: tuple[str, ...] = ()  # cases where some runs passed and some did not
    user_errors: int = 0
    uncertain: int = 0
    #: with repeats and a judge asked more than once: its scores' variance split
    noise: NoiseSplit | None = None

    @property
    def graded(self) -> int:
        """Its runs that were graded (``ok``, ``failed`` or ``uncertain``)."""
        return self.ok + self.failed + self.uncertain


@dataclass(frozen=True, slots=True)
class AutoCase:
    """One case of a ``--repeat auto`` run: how many runs it got and why it stopped
    (docs/trusting-verdicts.md, "Repeats where the verdict is unsettled").

    ``state``: ``settled``, ``max`` (unsettled at the most runs), ``budget`` (unsettled
    when the budget stopped the run), ``stopped`` (unsettled, the run ended before its
    next run: interrupted) or ``no_verdict`` (a run could not be graded)."""

    target: str
    eval_id: str
    runs: int
    state: str
    why: str
    passed: int
    failed: int
    uncertain: int
    p_value: float


@dataclass(frozen=True, slots=True)
class AutoRepeatSummary:
    """What ``--repeat auto`` did: its rule and each case's runs."""

    rule: AutoRule
    cases: tuple[AutoCase, ...]

    @property
    def runs(self) -> int:
        """The runs made, over every case."""
        return sum(c.runs for c in self.cases)

    def count(self, state: str, *, runs: int | None = None) -> int:
        """Cases in ``state`` (with exactly ``runs`` runs, when given)."""
        return sum(1 for c in self.cases if c.state == state and (runs is None or c.runs == runs))


@dataclass(frozen=True, slots=True)
class Summary:
    """Statistics over all results of a run; ``None`` where there is nothing to compute."""

    total: int
    """Runs summarised: one per case, target and repeat."""
    cases: int = 0
    """Distinct eval cases among them (fewer than ``total`` with repeats or several
    targets)."""
    ok: int = 0
    """Graded at or above the pass threshold."""
    failed: int = 0
    """Graded below the pass threshold."""
    uncertain: int = 0
    """Graded, but the verdict hangs on a judge whose samples disagreed about pass or fail
    (status ``uncertain``): neither a pass nor a failure."""
    uncertain_passed: int = 0
    """Runs whose verdict hung on a judge's disagreeing samples that its ``on_uncertain:
    pass`` made ``ok``."""
    uncertain_failed: int = 0
    """... and that ``on_uncertain: fail`` made ``failed``."""
    uncertain_details: tuple[tuple[str, str, str], ...] = ()
    """``(run, status, judges)`` of every run whose verdict hung on disagreeing samples
    (``uncertain``, or made ``ok`` or ``failed`` by ``on_uncertain``), in natural order."""
    errors: int = 0
    """The target or an evaluator could not do its job (score 0 when no answer came)."""
    invalid: int = 0
    """The case could not run (it could not be loaded, or its target or judge is unusable)."""
    user_errors: int = 0
    """Simulated users that could not go on (``user_error``): not the model's doing, so
    neither graded nor counted among the errors."""
    skipped: int = 0
    """Not run: the run's budget was reached first (``--budget-usd``); never scores."""
    judge_failures: int = 0
    """Cases where an LLM judge could not produce a verdict."""
    evaluator_errors: tuple[tuple[str, int], ...] = ()
    """``(evaluator name, cases)`` for each evaluator that could not grade, most first."""
    mean: float | None = None
    """Over the graded runs' scores (None when no run was graded: all errored or were
    invalid); errored and invalid runs are counted, never averaged in."""
    median: float | None = None
    """The median of the graded runs' scores."""
    min: float | None = None
    """The lowest graded score."""
    max: float | None = None
    """The highest graded score."""
    std_dev: float | None = None
    """Sample standard deviation (n - 1); only with two results or more."""
    histogram: tuple[HistogramBin, ...] = ()
    """The graded scores' distribution: ``start``, ``end`` and ``count`` per bar."""
    top: tuple[tuple[str, float], ...] = ()
    """Best ``(eval_id, score)`` first; ties by eval id (naturally sorted)."""
    bottom: tuple[tuple[str, float], ...] = ()
    """The lowest scores, lowest first, ties by eval id; empty when ``top`` already lists
    every case (a small suite)."""
    slowest: tuple[tuple[str, float], ...] = ()
    """``(eval_id, seconds)``, slowest first; runs that took no time (invalid) left out.
    Where a case ran more than once, its label names the target and the repeat
    (``id [target, #3]``: ``repeat_label``)."""
    error_details: tuple[tuple[str, str, str], ...] = field(default=())
    """``(eval_id, status, message)`` of every ``error`` and ``invalid`` case, by id."""
    tokens: tuple[tuple[str, Tokens], ...] = ()
    """Token totals per target, in the order the targets first answered."""
    judge_tokens: Tokens | None = None
    """Token totals of the judge calls (None when no judge reported any)."""
    targets: tuple[TargetSummary, ...] = ()
    """Each target's figures (one entry for a one-target run)."""
    repeats: int = 1
    """The most runs any case had on one target (``--repeat``)."""
    case_stats: tuple[tuple[str, str, stats.CaseStats], ...] = ()
    """With repeats: ``(target, eval_id, statistics of its runs)`` for every case."""
    case_noise: tuple[tuple[str, str, float, float], ...] = ()
    """With repeats and judges asked more than once: ``(target, eval_id, judge variance,
    target variance)`` of each case that has both (``NoiseSplit``)."""
    auto_repeat: AutoRepeatSummary | None = None
    """The runs made by ``--repeat auto``: how many each case got, and why."""
    case_table: tuple[tuple[str, tuple[float | None, ...]], ...] = ()
    """For up to ``CASE_TABLE_MAX`` cases: each case's mean score on each target (in
    ``targets`` order; None where it did not run), ids in natural order."""
    turns: TurnStats | None = None
    """The live conversations' turns (None: no run was a live conversation)."""
    cost: CostSummary | None = None
    """What the runs cost (None: no run reported tokens)."""
    required_failures: int = 0
    """Runs that failed because a required evaluator missed (whatever their mean)."""
    evaluators: tuple[EvaluatorStats, ...] = ()
    """Each evaluator of the runs' evaluator lists, by name in natural order."""
    statuses: tuple[tuple[str, int], ...] = ()
    """Every status among the runs with its count: agentv's in their order (``ok``,
    ``failed``, ``error``, ...), then any other (a newer version's) by name."""
    trajectory_calls: int = 0
    """Tool calls in the runs' trajectories (``trajectory``: what the candidates called)."""
    time: Timing = Timing()
    """When the runs happened, by their records' timestamps and durations."""
    datasets: tuple[DatasetCounts, ...] = ()
    """Each dataset's runs by status, in the order the datasets first came."""
    vars: tuple[VarGroup, ...] = ()
    """The runs grouped by each variable's values (runs made from ``vars:``), variables
    in the order first met, each one's values in the order first met."""

    @property
    def all_tokens(self) -> Tokens:
        """The targets' tokens, every target together (the judges' apart: ``judge_tokens``)."""
        totals = [0, 0, 0, 0]
        for _, t in self.tokens:
            totals[0] += t.input
            totals[1] += t.output
            totals[2] += t.reused_input
            totals[3] += t.reused_output
        return Tokens(*totals)

    @property
    def weighted(self) -> bool:
        """Whether any evaluator has a weight, is required or has a threshold."""
        return any(e.weighted for e in self.evaluators)

    @property
    def passed(self) -> int:
        """Cases that passed (status ``ok``)."""
        return self.ok

    @property
    def graded(self) -> int:
        """Runs that were graded (``ok``, ``failed`` or ``uncertain``): what the score
        statistics cover."""
        return self.ok + self.failed + self.uncertain

    @property
    def pass_rate(self) -> float | None:
        """Runs that passed over the graded runs (None when none was graded): an
        ``uncertain`` run did not pass."""
        return self.ok / self.graded if self.graded else None

    def to_dict(self) -> dict[str, Any]:
        """The figures as JSON-ready data.

        Returns:
            What ``--summary-json`` writes.
        """
        return summary_dict(self)


class SummaryCollector:
    """Collects what the summary needs, in O(1) time per run."""

    def __init__(self) -> None:
        self._ids: list[str] = []  # per run (row)
        self._durations = array("d")  # per row; NaN where unknown
        self._scores = array("d")  # per graded run
        self._score_rows = array("I")  # per graded run: its row
        self._statuses: Counter[str] = Counter()
        self._problems: list[tuple[str, str, str]] = []
        self._judge_failures = 0
        self._evaluator_errors: Counter[str] = Counter()
        self._tokens: dict[str, list[int]] = {}  # target -> [in, out, reused in, reused out]
        self._judge_tokens: list[int] | None = None
        #: target -> case -> None (no graded run yet), the index in ``_scores`` of its one
        #: graded run or, from its second on, (graded runs, passes, score sum, score sum of
        #: squares, min, max): a case run once keeps no figures of its own
        self._runs: dict[str, dict[str, int | tuple[float, ...] | None]] = {}
        self._ok = bytearray()  # per graded run: the status is "ok"
        self._row_target = array("I")  # per row: its target's index in `_by_target`
        self._row_repeat = array("I")  # per row: its repeat (0 .. N-1)
        self._target_index: dict[str, int] = {}
        self._most_runs = 1  # of any (target, case)
        self._case_runs: dict[str, Counter[str]] = {}  # target -> case -> runs (all)
        self._by_target: dict[str, Counter[str]] = {}
        self._latencies: dict[str, array[float]] = {}
        #: live conversations: [conversations, turns, graded, passed, stopped, tool calls],
        #: and the graded turns' score sum
        self._turns = [0, 0, 0, 0, 0, 0]
        self._turn_score = 0.0
        self._ended: Counter[str] = Counter()  # simulated conversations by how they ended
        self._user_tokens: list[int] | None = None
        self._diverged = 0
        #: party -> [spent, reused]; target -> [spent, reused, runs priced, their price sum]
        self._party_cost: dict[str, list[float]] = {}
        self._target_cost: dict[str, list[float]] = {}
        self._unpriced = 0
        self._evaluators: dict[str, _EvaluatorFigures] = {}  # by evaluator name
        self._required_failures = 0
        self._trajectory_calls = 0
        #: dataset -> its runs by status, and their durations summed (seconds)
        self._datasets: dict[str, Counter[str]] = {}
        self._dataset_seconds: dict[str, float] = {}
        self._started: float | None = None  # the earliest start, the latest end (epoch s)
        self._ended_at: float | None = None

        #: (variable, value) -> [statuses, score sum over the graded runs], in order met
        self._vars: dict[tuple[str, str], tuple[Counter[str], list[float]]] = {}
        #: runs whose verdict hung on a judge's disagreeing samples: (row, status, judges)
        self._uncertain: list[tuple[int, str, str]] = []
        #: target -> case -> [sum of its graded runs' judge variance, runs that have one]
        self._judge_noise: dict[str, dict[str, list[float]]] = {}
        #: --repeat auto: (target, case) -> its runs by repeat, whether the budget
        #: skipped a run (it ended the rounds), and the rule of the latest record
        self._auto: dict[tuple[str, str], dict[int, Outcome]] = {}
        self._auto_budget = False
        self._auto_rule: AutoRule | None = None

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, result: EvalResult) -> None:
        """Record one run of a case: its result record as a model (``add_record`` of what
        the summary reads of it)."""
        self.add_record({name: getattr(result, name) for name in READ_FIELDS})

    def add_record(self, record: Mapping[str, Any]) -> None:
        """Record one run of a case from its record as written (a mapping: as the run
        makes it, or as a results file holds it; a field left out reads as the
        ``EvalResult`` default), without building a model for it."""
        get = record.get
        eval_id = get("eval_id")
        if not eval_id:
            eval_id = f"{get('eval_file') or '?'}:{get('line') or '?'}"
        elif not isinstance(eval_id, str):  # an id written as a number reads as its text
            eval_id = str(eval_id)
        status = get("status")
        if not status:  # the original AgentV's records carry none (as ``EvalResult`` reads them)
            status = "error" if get("error") else "ok"
        row = len(self._ids)
        self._ids.append(eval_id)
        duration = get("duration_ms")
        known = isinstance(duration, int | float) and math.isfinite(duration)
        seconds = duration / 1000 if known else math.nan
        self._durations.append(seconds)
        self._statuses[status] += 1
        if status in ("error", "invalid", "user_error"):
            self._problems.append((eval_id, status, get("error") or ""))
        target = get("target") or "?"
        counts = self._by_target.get(target)
        if counts is None:
            counts = self._by_target[target] = Counter()
            self._runs[target] = {}
            self._case_runs[target] = Counter()
        counts[status] += 1
        self._dataset(get("dataset") or "", status, seconds)
        self._row_target.append(self._target_index.setdefault(target, len(self._target_index)))
        repeat = get("repeat")
        self._row_repeat.append(repeat if isinstance(repeat, int) and repeat >= 0 else 0)
        runs = self._case_runs[target]
        runs[eval_id] += 1
        self._most_runs = max(self._most_runs, runs[eval_id])
        cases = self._runs[target]
        if status in GRADED:
            score = get("score")
            number = float(score) if isinstance(score, int | float) else 0.0
            self._graded(cases, eval_id, row, status == "ok", number)
            noise = judge_variance(record)
            if noise is not None:
                seen = self._judge_noise.setdefault(target, {}).setdefault(eval_id, [0.0, 0])
                seen[0] += noise
                seen[1] += 1
            unsure = get("uncertain")
            if isinstance(unsure, list) and unsure:
                self._uncertain.append((row, status, ", ".join(map(str, unsure))))
        else:
            cases.setdefault(eval_id, None)
        latency = get("latency_ms")
        if latency is not None:
            latencies = self._latencies.get(target)
            if latencies is None:
                latencies = self._latencies[target] = array("d")
            latencies.append(latency)
        usage = get("usage")
        if usage:
            _add_tokens(
                self._tokens.setdefault(target, [0, 0, 0, 0]), usage, reused=bool(get("cached"))
            )
        self._grading(record)
        self._gates(record, status)
        if get("turns") is not None and _live(record):
            self._conversation(record)
        cost = get("cost")
        if cost:
            self._cost(target, cost)
        trajectory = get("trajectory")
        if isinstance(trajectory, list):
            self._trajectory_calls += len(trajectory)
        self._moment(get("timestamp"), seconds)
        variables = get("vars")
        if isinstance(variables, dict) and variables:
            self._variables(variables, status, get("score"))
        auto = get("auto_repeat")
        if isinstance(auto, dict):
            self._auto_run((target, eval_id), self._row_repeat[row], status, get("score"), auto)

    def _auto_run(
        self, key: tuple[str, str], repeat: int, status: str, score: Any, auto: Mapping[str, Any]
    ) -> None:
        """A run of ``--repeat auto``: counted towards its case's verdict."""
        rule = AutoRule.from_record(auto)
        if rule is not None:
            self._auto_rule = rule
        runs = self._auto.setdefault(key, {})
        threshold = auto.get("threshold")
        if status == "skipped":
            self._auto_budget = True
        elif isinstance(threshold, int | float):
            number = float(score) if isinstance(score, int | float) else 0.0
            runs[repeat] = Outcome(status, number, float(threshold))

    def _auto_summary(self) -> AutoRepeatSummary | None:
        rule = self._auto_rule
        if rule is None:
            return None
        cases = []
        for (target, eval_id), runs in self._auto.items():
            found = verdict(runs.values(), rule)
            state, why = found.state, found.why()
            if state == "unsettled":  # the rounds ended before it settled: why
                budget = self._auto_budget
                state = "budget" if budget else "stopped"
                why += "; the budget stopped the run" if budget else "; the run ended first"
            cases.append(
                AutoCase(
                    target=target,
                    eval_id=eval_id,
                    runs=found.runs,
                    state=state,
                    why=why,
                    passed=found.passed,
                    failed=found.failed,
                    uncertain=found.uncertain,
                    p_value=found.p_value,
                )
            )
        cases.sort(key=lambda c: (c.target, natural_key(c.eval_id)))
        return AutoRepeatSummary(rule, tuple(cases))

    def _variables(self, variables: Mapping[str, Any], status: str, score: Any) -> None:
        """Count a run under each of its variables' values."""
        for name, value in variables.items():
            key = (str(name), _value_text(value))
            group = self._vars.get(key)
            if group is None:
                group = self._vars[key] = (Counter(), [0.0])
            group[0][status] += 1
            if status in GRADED and isinstance(score, int | float):
                group[1][0] += float(score)

    def _var_groups(self) -> tuple[VarGroup, ...]:
        order: dict[str, int] = {}
        for name, _ in self._vars:
            order.setdefault(name, len(order))
        out = []
        for (name, value), (counts, total) in sorted(
            self._vars.items(), key=lambda kv: order[kv[0][0]]
        ):
            graded = counts["ok"] + counts["failed"] + counts["uncertain"]
            out.append(
                VarGroup(
                    variable=name,
                    value=value,
                    runs=sum(counts.values()),
                    ok=counts["ok"],
                    failed=counts["failed"],
                    errors=counts["error"],
                    invalid=counts["invalid"],
                    user_errors=counts["user_error"],
                    skipped=counts["skipped"],
                    mean=total[0] / graded if graded else None,
                    uncertain=counts["uncertain"],
                )
            )
        return tuple(out)

    def _dataset(self, dataset: str, status: str, seconds: float) -> None:
        """Count a run in its dataset."""
        counts = self._datasets.get(dataset)
        if counts is None:
            counts = self._datasets[dataset] = Counter()
            self._dataset_seconds[dataset] = 0.0
        counts[status] += 1
        if seconds == seconds:  # not NaN: the duration is known
            self._dataset_seconds[dataset] += seconds

    def _moment(self, timestamp: Any, seconds: float) -> None:
        """Widen the runs' time span by a record's (it ends at its ``timestamp``)."""
        if not isinstance(timestamp, str) or not timestamp:
            return
        try:
            moment = datetime.fromisoformat(timestamp)
        except ValueError:
            return
        if moment.tzinfo is None:  # a time without a zone is UTC, as agentv writes it
            moment = moment.replace(tzinfo=UTC)
        end = moment.timestamp()
        start = end - seconds if seconds == seconds else end
        if self._started is None or start < self._started:
            self._started = start
        if self._ended_at is None or end > self._ended_at:
            self._ended_at = end

    def _cost(self, target: str, cost: Mapping[str, Any]) -> None:
        """Add a run's ``cost`` (by party) to the totals."""
        unpriced = False
        for party, entry in cost.items():
            if not isinstance(entry, Mapping):
                continue
            unpriced = unpriced or bool(entry.get("unpriced"))
            usd, reused = _usd(entry.get("usd")), _usd(entry.get("reused_usd"))
            if usd is None and reused is None:
                continue
            totals = self._party_cost.setdefault(str(party), [0.0, 0.0])
            totals[0] += usd or 0.0
            totals[1] += reused or 0.0
            if party == "target":
                mine = self._target_cost.setdefault(target, [0.0, 0.0, 0.0, 0.0])
                mine[0] += usd or 0.0
                mine[1] += reused or 0.0
                mine[2] += 1
                mine[3] += (usd or 0.0) + (reused or 0.0)
        self._unpriced += unpriced

    def _cost_summary(self) -> CostSummary | None:
        if not self._party_cost and not self._unpriced:
            return None
        parties = tuple((p, Spend(v[0], v[1])) for p, v in self._party_cost.items())
        priced = sum(v[2] for v in self._target_cost.values())
        return CostSummary(
            total=Spend(
                math.fsum(v[0] for v in self._party_cost.values()),
                math.fsum(v[1] for v in self._party_cost.values()),
            ),
            parties=parties,
            unpriced_runs=self._unpriced,
            per_run_usd=(
                math.fsum(v[3] for v in self._target_cost.values()) / priced if priced else None
            ),
        )

    def _conversation(self, record: Mapping[str, Any]) -> None:
        """Count a live conversation's turns: sent, graded, passed, their tool calls."""
        counts = self._turns
        counts[0] += 1
        counts[4] += record.get("stopped") is not None
        user = record.get("user")
        if isinstance(user, dict):
            self._ended[str(user.get("ended") or "?")] += 1
            usage = user.get("usage")
            if isinstance(usage, dict):
                if self._user_tokens is None:
                    self._user_tokens = [0, 0, 0, 0]
                _add_tokens(self._user_tokens, usage, reused=bool(user.get("cached")))
            replay = user.get("replay")
            self._diverged += isinstance(replay, dict) and "diverged_at" in replay
        for turn in record.get("turns") or ():
            if not isinstance(turn, dict):
                continue
            counts[1] += 1
            calls = turn.get("tool_calls")
            counts[5] += len(calls) if isinstance(calls, list) else 0
            status, score = turn.get("status"), turn.get("score")
            if status in GRADED and isinstance(score, int | float):
                counts[2] += 1
                counts[3] += status == "ok"
                self._turn_score += min(1.0, max(0.0, float(score)))

    def _graded(
        self,
        cases: dict[str, int | tuple[float, ...] | None],
        case: str,
        row: int,
        ok: bool,
        score: float,
    ) -> None:
        # Scores are meant to be in [0, 1]; keep a stray value from skewing every statistic.
        if not score > 0.0:  # also catches NaN, and -0.0 (shown as "-0.000")
            score = 0.0
        elif score > 1.0:
            score = 1.0
        index = len(self._scores)
        self._scores.append(score)
        self._score_rows.append(row)
        self._ok.append(ok)
        seen = cases.get(case)
        if seen is None:
            cases[case] = index
            return
        # tuples, not lists: once collected, the garbage collector no longer walks them
        n, passes, total, squares, low, high = self._figures(seen)
        cases[case] = (
            n + 1,
            passes + ok,
            total + score,
            squares + score * score,
            min(low, score),
            max(high, score),
        )

    def _grading(self, record: Mapping[str, Any]) -> None:
        """What the grading of a run says beyond its score: evaluators that could not
        grade, judges that failed, and the judges' tokens (all in the record)."""
        listed = record.get("evaluator_results")
        entries = listed
        if entries is None:
            raw = record.get("evaluator_raw_request")
            # the default evaluator (no list): its call's record carries its outcome
            entries = [{"type": "llm_judge", "name": "llm_judge", **raw}] if raw else []
        for entry in entries:
            if not isinstance(entry, dict):
                continue
            name = str(entry.get("name") or entry.get("type") or "?")
            if entry.get("error") is not None:
                self._evaluator_errors[name] += 1
                if entry.get("type") == "llm_judge":
                    self._judge_failures += 1
            elif listed is not None:
                self._evaluator(name, entry)
            usage = entry.get("usage")
            if isinstance(usage, dict) and usage:
                if self._judge_tokens is None:
                    self._judge_tokens = [0, 0, 0, 0]
                _add_tokens(self._judge_tokens, usage, reused=bool(entry.get("cached")))

    def _evaluator(self, name: str, entry: dict[str, Any]) -> None:
        """Count one graded entry of an evaluator list (the common entry, without settings
        of its own, takes the short way: this runs for every entry of a large run)."""
        seen = self._evaluators.get(name)
        if seen is None:
            seen = self._evaluators[name] = _EvaluatorFigures(str(entry.get("type") or "?"))
        seen.runs += 1
        if "samples" in entry:
            seen.sampled += 1
            seen.uncertain += entry.get("uncertain") is True
        score = entry.get("score")
        if isinstance(score, int | float):
            seen.total += score if 0.0 <= score <= 1.0 else min(1.0, max(0.0, float(score)))
        if "weight" in entry or "required" in entry or "passed" in entry:
            seen.settings(entry)
        else:
            seen.plain = True

    def _gates(self, record: Mapping[str, Any], status: str) -> None:
        """Count a run failed by required evaluators, and each one that missed."""
        names = record.get("failed_required")
        if not isinstance(names, list) or not names:
            return
        if status == "failed":
            self._required_failures += 1
        for name in names:
            seen = self._evaluators.get(str(name))
            if seen is not None:
                seen.failed += 1

    def _evaluator_stats(self) -> tuple[EvaluatorStats, ...]:
        return tuple(
            self._evaluators[name].stats(name) for name in sorted(self._evaluators, key=natural_key)
        )

    def _figures(self, entry: int | tuple[float, ...]) -> tuple[float, ...]:
        """A (target, case)'s (graded runs, passes, score sum, sum of squares, min, max)."""
        if isinstance(entry, tuple):
            return entry
        score = self._scores[entry]
        return (1, self._ok[entry], score, score * score, score, score)

    def _each_run(self, target: str | None = None) -> Iterator[tuple[str, str, tuple[float, ...]]]:
        """(target, case, figures) of every target's graded cases, or of one target's."""
        figures = self._figures
        chosen = self._runs.items() if target is None else [(target, self._runs[target])]
        for name, cases in chosen:
            for case, entry in cases.items():
                if entry is not None:
                    yield name, case, figures(entry)

    def summary(self) -> Summary:
        """The statistics over everything added so far."""
        n = len(self._ids)
        if n == 0:
            return Summary(total=0)
        scores = self._scores
        graded = len(scores)
        mean = median = std_dev = low = high = None
        histogram: tuple[HistogramBin, ...] = ()
        if graded:  # else every run errored or was invalid: no score means anything
            ordered = sorted(scores)
            mean = math.fsum(scores) / graded
            middle = graded // 2
            median = ordered[middle] if graded % 2 else (ordered[middle - 1] + ordered[middle]) / 2
            low, high = ordered[0], ordered[-1]
            if graded >= 2:
                std_dev = math.sqrt(math.fsum((s - mean) ** 2 for s in scores) / (graded - 1))
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
        repeats = self._most_runs
        names: list[str] = [ids[row] for row in self._score_rows]
        values: Sequence[float] = scores
        if repeats > 1 or len(self._by_target) > 1:
            # one entry per case and target (its graded runs' mean), named by both when needed
            several = len(self._by_target) > 1
            names = []
            values = array("d")
            for target, case, run in self._each_run():
                names.append(f"{case} [{target}]" if several else case)
                values.append(run[2] / run[0])
        m = len(names)
        # Best first, ties by eval id (results arrive in completion order, which is not
        # reproducible; eval ids are). A small suite is listed once, whole.
        shown = m if m <= 2 * TOP_COUNT else TOP_COUNT
        top_idx = _first_by(shown, values, names, largest=True)
        bottom_idx = []
        if m > 2 * TOP_COUNT:  # lowest first: "1." is the case most worth a look
            # every value equal (e.g. all passed): the lowest are the same first ids as the best
            tied = min(values) == max(values)
            bottom_idx = top_idx if tied else _first_by(TOP_COUNT, values, names)
        # a run that took no time (an invalid case) is no "slowest"
        durations = array("d", (d if d > 0 else math.nan for d in self._durations))
        slow_idx = _first_by(SLOWEST_COUNT, durations, ids, largest=True)
        st = self._statuses
        judge = self._judge_tokens
        seen = Counter(ids)  # runs per eval id
        return Summary(
            total=n,
            cases=len(seen),
            ok=st["ok"],
            failed=st["failed"],
            uncertain=st["uncertain"],
            uncertain_passed=sum(1 for _, status, _ in self._uncertain if status == "ok"),
            uncertain_failed=sum(1 for _, status, _ in self._uncertain if status == "failed"),
            uncertain_details=self._uncertain_details(seen),
            errors=st["error"],
            invalid=st["invalid"],
            user_errors=st["user_error"],
            skipped=st["skipped"],
            judge_failures=self._judge_failures,
            evaluator_errors=tuple(
                sorted(self._evaluator_errors.items(), key=lambda kv: (-kv[1], natural_key(kv[0])))
            ),
            mean=mean,
            median=median,
            min=low,
            max=high,
            std_dev=std_dev,
            histogram=histogram,
            top=tuple((names[i], values[i]) for i in top_idx),
            bottom=tuple((names[i], values[i]) for i in bottom_idx),
            slowest=tuple((self._run_label(i, seen[ids[i]]), durations[i]) for i in slow_idx),
            error_details=tuple(sorted(self._problems, key=lambda p: natural_key(p[0]))),
            tokens=tuple((t, Tokens(*v)) for t, v in self._tokens.items()),
            judge_tokens=Tokens(*judge) if judge is not None else None,
            targets=tuple(self._target_summary(t) for t in self._by_target),
            repeats=repeats,
            case_stats=self._case_stats() if repeats > 1 else (),
            case_noise=self._case_noise() if repeats > 1 else (),
            auto_repeat=self._auto_summary(),
            case_table=self._case_table(seen),
            turns=self._turn_stats(),
            cost=self._cost_summary(),
            required_failures=self._required_failures,
            evaluators=self._evaluator_stats(),
            statuses=tuple(
                sorted(st.items(), key=lambda kv: (_STATUS_ORDER.get(kv[0], len(STATUSES)), kv[0]))
            ),
            trajectory_calls=self._trajectory_calls,
            time=Timing(
                started=self._started,
                ended=self._ended_at,
                case_seconds=math.fsum(d for d in self._durations if d == d),
            ),
            datasets=tuple(
                DatasetCounts(
                    name=name,
                    runs=sum(counts.values()),
                    ok=counts["ok"],
                    failed=counts["failed"],
                    errors=counts["error"],
                    invalid=counts["invalid"],
                    user_errors=counts["user_error"],
                    skipped=counts["skipped"],
                    seconds=self._dataset_seconds[name],
                    uncertain=counts["uncertain"],
                )
                for name, counts in self._datasets.items()
            ),
            vars=self._var_groups(),
        )

    def _uncertain_details(self, seen: Mapping[str, int]) -> tuple[tuple[str, str, str], ...]:
        ids = self._ids
        found = [
            (self._run_label(row, seen[ids[row]]), status, judges)
            for row, status, judges in self._uncertain
        ]
        return tuple(sorted(found, key=lambda item: natural_key(item[0])))

    def _case_noise(self, target: str | None = None) -> tuple[tuple[str, str, float, float], ...]:
        """``(target, case, judge variance, target variance)`` of every case with two graded
        runs or more and a judge variance (``NoiseSplit``), targets in order, cases in
        natural order."""
        out = []
        for name, case, run in self._each_run(target):
            noise = self._judge_noise.get(name, {}).get(case)
            n = int(run[0])
            if noise is None or n < 2:
                continue
            mean = run[2] / n
            observed = max(0.0, run[3] - n * mean * mean) / (n - 1)
            judge = noise[0] / noise[1]
            out.append((name, case, judge, max(0.0, observed - judge)))
        return tuple(sorted(out, key=lambda row: (row[0], natural_key(row[1]))))

    def _noise(self, target: str) -> NoiseSplit | None:
        cases = self._case_noise(target)
        if not cases:
            return None
        judge = math.fsum(row[2] for row in cases) / len(cases)
        own = math.fsum(row[3] for row in cases) / len(cases)
        decided = [row[1] for row in cases if row[2] > row[3]]
        return NoiseSplit(len(cases), own, judge, tuple(decided))

    def _turn_stats(self) -> TurnStats | None:
        conversations, turns, graded, passed, stopped, calls = self._turns
        if not conversations:
            return None
        return TurnStats(
            conversations=conversations,
            turns=turns,
            graded=graded,
            passed=passed,
            mean=self._turn_score / graded if graded else None,
            stopped=stopped,
            tool_calls=calls,
            ended=tuple(sorted(self._ended.items(), key=lambda kv: (-kv[1], kv[0]))),
            user_tokens=Tokens(*self._user_tokens) if self._user_tokens is not None else None,
            replays_diverged=self._diverged,
        )

    def _run_label(self, row: int, runs: int) -> str:
        """A row's eval id; with its target and repeat when its id has other ``runs``."""
        if runs == 1:
            return self._ids[row]
        names = list(self._target_index)
        target = names[self._row_target[row]]
        # "?": a record without a target (an invalid case), which names no other target
        several = sum(1 for name in names if name != "?") > 1
        parts = [target] if several and target != "?" else []
        if self._most_runs > 1:
            parts.append(repeat_label(self._row_repeat[row]))
        return f"{self._ids[row]} [{', '.join(parts)}]" if parts else self._ids[row]

    def _case_stats(self) -> tuple[tuple[str, str, stats.CaseStats], ...]:
        out = []
        for target, case, (n, c, total, squares, low, high) in self._each_run():
            runs, passes = int(n), int(c)
            mean = total / runs
            sd = (
                math.sqrt(max(0.0, squares - runs * mean * mean) / (runs - 1)) if runs > 1 else None
            )
            out.append(
                (
                    target,
                    case,
                    stats.CaseStats(
                        n=runs,
                        passes=passes,
                        mean=mean,
                        min=low,
                        max=high,
                        std_dev=sd,
                        pass_at=tuple(stats.pass_at_k(runs, passes, k) for k in range(1, runs + 1)),
                        pass_all=tuple(
                            stats.pass_hat_k(runs, passes, k) for k in range(1, runs + 1)
                        ),
                    ),
                )
            )
        return tuple(sorted(out, key=lambda row: (row[0], natural_key(row[1]))))

    def _target_summary(self, target: str) -> TargetSummary:
        # one pass over the cases (no list of them: a large run's would be large)
        means = array("d")
        # the same few (runs, passes) pairs again and again: each one's figures computed once
        pairs: Counter[tuple[float, float]] = Counter()
        flaky = []
        for _, case, run in self._each_run(target):
            means.append(run[2] / run[0])
            pairs[(run[0], run[1])] += 1
            if 0 < run[1] < run[0]:
                flaky.append(case)
        graded_cases = len(means)
        st = self._by_target[target]
        total = sum(st.values())
        graded = st["ok"] + st["failed"] + st["uncertain"]
        fewest = int(min((n for n, _ in pairs), default=0))
        pass_at = [0.0] * fewest
        pass_all = [0.0] * fewest
        figures = {
            (n, c): [
                (stats.pass_at_k(int(n), int(c), k), stats.pass_hat_k(int(n), int(c), k))
                for k in range(1, fewest + 1)
            ]
            for n, c in pairs
        }
        if all(v.is_integer() for found in figures.values() for pair in found for v in pair):
            # 0s and 1s (no repeats): whole sums, the same in any order
            for pair, found in figures.items():
                for k, (at, every) in enumerate(found):
                    pass_at[k] += pairs[pair] * at
                    pass_all[k] += pairs[pair] * every
        else:  # added in the cases' order, as always
            for _, _, run in self._each_run(target):
                for k, (at, every) in enumerate(figures[(run[0], run[1])]):
                    pass_at[k] += at
                    pass_all[k] += every
        latencies = self._latencies.get(target, array("d"))
        tokens = self._tokens.get(target)
        cost = self._target_cost.get(target)
        return TargetSummary(
            name=target,
            cases=len(self._case_runs[target]),
            runs=total,
            mean=stats.mean(means),
            std_error=stats.standard_error(means),
            ci=stats.mean_ci(means),
            pass_rate=st["ok"] / graded if graded else None,
            ok=st["ok"],
            failed=st["failed"],
            errors=st["error"],
            invalid=st["invalid"],
            tokens=Tokens(*tokens) if tokens else Tokens(),
            latency_median_ms=stats.percentile(latencies, 0.5),
            latency_p95_ms=stats.percentile(latencies, 0.95),
            cost=Spend(cost[0], cost[1]) if cost else Spend(),
            cost_per_run=cost[3] / cost[2] if cost and cost[2] else None,
            skipped=st["skipped"],
            user_errors=st["user_error"],
            uncertain=st["uncertain"],
            noise=self._noise(target) if self._judge_noise.get(target) else None,
            pass_at=tuple(v / graded_cases for v in pass_at),
            pass_all=tuple(v / graded_cases for v in pass_all),
            flaky=tuple(sorted(flaky, key=natural_key)),
        )

    def _case_table(
        self, unique: Mapping[str, int]
    ) -> tuple[tuple[str, tuple[float | None, ...]], ...]:
        """``unique``: the runs' eval ids (every one is a case of some target)."""
        if len(unique) > CASE_TABLE_MAX:
            return ()
        cases = sorted(unique, key=natural_key)
        targets = list(self._by_target)
        rows = []
        for case in cases:
            cells = []
            for target in targets:
                entry = self._runs[target].get(case)
                if entry is None:  # not run there, or never graded
                    cells.append(None)
                else:
                    run = self._figures(entry)
                    cells.append(run[2] / run[0])
            rows.append((case, tuple(cells)))
        return tuple(rows)


class _EvaluatorFigures:
    """What the summary counts of one evaluator (by name) as entries come."""

    __slots__ = ("failed", "judged", "passed", "plain", "required", "runs", "thresholds")
    __slots__ += ("sampled", "total", "type", "uncertain", "weights")

    def __init__(self, kind: str) -> None:
        self.type = kind
        self.runs = 0
        self.total = 0.0
        self.plain = False  # an entry without settings of its own (weight 1, no threshold)
        self.weights: set[float] = set()
        self.thresholds: set[float | None] = set()
        self.required = False
        self.passed = 0
        self.judged = 0
        self.failed = 0  # runs it failed as a required evaluator
        self.sampled = 0  # entries with samples
        self.uncertain = 0  # of those, the ones whose samples disagreed

    def settings(self, entry: dict[str, Any]) -> None:
        weight = entry.get("weight", 1.0)
        self.weights.add(float(weight) if isinstance(weight, int | float) else 1.0)
        self.required = self.required or entry.get("required") is True
        passed = entry.get("passed")
        threshold = entry.get("threshold") if isinstance(passed, bool) else None
        self.thresholds.add(threshold if isinstance(threshold, int | float) else None)
        if isinstance(passed, bool):
            self.passed += passed
            self.judged += 1

    def stats(self, name: str) -> EvaluatorStats:
        weights = self.weights | {1.0} if self.plain else self.weights
        thresholds = self.thresholds | {None} if self.plain else self.thresholds
        return EvaluatorStats(
            name=name,
            type=self.type,
            runs=self.runs,
            mean=self.total / self.runs if self.runs else None,
            weight=next(iter(weights)) if len(weights) == 1 else None,
            required=self.required,
            threshold=next(iter(thresholds)) if len(thresholds) == 1 else None,
            passed=self.passed,
            judged=self.judged,
            failed_cases=self.failed,
            sampled=self.sampled,
            uncertain=self.uncertain,
        )


def _first_by(
    count: int, values: Sequence[float], names: Sequence[str], *, largest: bool = False
) -> list[int]:
    """The indexes of the ``count`` entries with the smallest (``largest``: the largest)
    value, ties by name in natural order. NaN values (unknown) are left out.

    Only the entries that can make it (up to the count-th value, with its ties) get their
    natural sort key computed, and none is kept: with every score tied, a large run would
    otherwise hold a key for each of its ids at once.
    """
    if count <= 0:
        return []
    pick = heapq.nlargest if largest else heapq.nsmallest
    best = pick(count, filterfalse(math.isnan, values))
    if not best:
        return []
    limit = best[-1]
    if len(best) < count:  # every known value makes it
        chosen = (j for j, v in enumerate(values) if v == v)
    elif largest:
        chosen = (j for j, v in enumerate(values) if v >= limit)
    else:
        chosen = (j for j, v in enumerate(values) if v <= limit)
    sign = -1.0 if largest else 1.0

    def rank(j: int) -> tuple[float, tuple[Any, ...]]:
        return sign * values[j], natural_key(names[j])

    return heapq.nsmallest(count, chosen, key=rank)  # equal entries keep their order


def _value_text(value: Any) -> str:
    """A variable's value as case ids write it (docs/eval-files.md, "Variables")."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


def _add_tokens(total: list[int], usage: Mapping[str, Any], *, reused: bool = False) -> None:
    """Add a call's usage to ``total`` ([in, out, reused in, reused out])."""
    at = 2 if reused else 0
    for offset, key in enumerate(("input_tokens", "output_tokens")):
        value = usage.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            total[at + offset] += value


def _usd(value: Any) -> float | None:
    """A record's dollar figure (None when it is not a finite number)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def judge_variance(record: Mapping[str, Any]) -> float | None:
    """The variance a run's score owes to its judges' sampling (``NoiseSplit``): over its
    judges asked more than once, ``(w / W)**2 * s**2 / k`` summed (weight ``w`` of all its
    evaluators' ``W``, the samples' variance ``s**2`` over their number ``k``). None when
    no judge of the run was sampled, or one was asked only once (its noise is unknown)."""
    entries = record.get("evaluator_results")
    if entries is None:
        raw = record.get("evaluator_raw_request")
        entries = [raw] if isinstance(raw, dict) else []
    if not isinstance(entries, list):
        return None
    weights = 0.0
    found: list[tuple[float, float, int]] = []  # (weight, variance, samples)
    for entry in entries:
        if not isinstance(entry, dict):
            continue
        weight = entry.get("weight", 1.0)
        weight = float(weight) if isinstance(weight, int | float) else 1.0
        weights += weight
        samples = entry.get("samples")
        if not isinstance(samples, list):
            continue
        spread = entry.get("spread")
        sd = spread.get("std_dev") if isinstance(spread, dict) and len(samples) > 1 else None
        if not isinstance(sd, int | float) or not math.isfinite(sd):
            return None
        found.append((weight, float(sd) ** 2, len(samples)))
    if not found or weights <= 0:
        return None
    return math.fsum((w / weights) ** 2 * v / k for w, v, k in found)


def cost_dict(cost: CostSummary | None) -> dict[str, Any] | None:
    """The summary's ``cost`` as JSON (``--summary-json``)."""
    if cost is None:
        return None
    return {
        **cost.total.to_dict(),
        "by_party": {party: spend.to_dict() for party, spend in cost.parties},
        "unpriced_runs": cost.unpriced_runs,
        "per_run_usd": dollars(cost.per_run_usd),
    }


def _tokens_dict(tokens: Tokens) -> dict[str, int]:
    data = {"input": tokens.input, "output": tokens.output}
    if tokens.reused:
        data.update(reused_input=tokens.reused_input, reused_output=tokens.reused_output)
    return data


def _iso(moment: float | None) -> str | None:
    """A moment (seconds since the epoch) as the records write theirs: ISO 8601 UTC, to the
    millisecond (``2025-06-01T10:00:00.000Z``)."""
    if moment is None:
        return None
    try:
        text = datetime.fromtimestamp(moment, UTC).isoformat(timespec="milliseconds")
    except (ValueError, OverflowError, OSError):  # before year 1 or after 9999: no date
        return None
    return text.removesuffix("+00:00") + "Z"


def _seconds(value: float | None) -> float | None:
    """Seconds to the millisecond (what the records' timestamps hold)."""
    return None if value is None else round(value, 3)


def summary_dict(summary: Summary) -> dict[str, Any]:
    """The summary as JSON-ready data (``--summary-json``; docs/results.md documents it)."""
    time = summary.time
    noise = {
        (target, case): {
            "target_variance": own,
            "judge_variance": judge,
            "judge_share": judge / (judge + own) if judge + own > 0 else None,
        }
        for target, case, judge, own in summary.case_noise
    }
    data: dict[str, Any] = {
        "total": summary.total,
        "graded": summary.graded,
        "eval_cases": summary.cases,
        "ok": summary.ok,
        "failed": summary.failed,
        "uncertain": summary.uncertain,
        "errors": summary.errors,
        "invalid": summary.invalid,
        "user_errors": summary.user_errors,
        "skipped": summary.skipped,
        "statuses": dict(summary.statuses),
        "pass_rate": summary.pass_rate,
        "mean": summary.mean,
        "median": summary.median,
        "min": summary.min,
        "max": summary.max,
        "std_dev": summary.std_dev,
        "histogram": [
            {"start": b.start, "end": b.end, "count": b.count} for b in summary.histogram
        ],
        "repeats": summary.repeats,
        "judge_failures": summary.judge_failures,
        "evaluator_errors": dict(summary.evaluator_errors),
        "errors_by_case": [
            {"eval_id": eid, "status": status, "error": message}
            for eid, status, message in summary.error_details
        ],
        "uncertain_resolved": {
            "pass": summary.uncertain_passed,
            "fail": summary.uncertain_failed,
        },
        "uncertain_runs": [
            {"run": run, "status": status, "judges": judges}
            for run, status, judges in summary.uncertain_details
        ],
        "targets": [
            {
                "target": t.name,
                "cases": t.cases,
                "runs": t.runs,
                "mean": t.mean,
                "std_error": t.std_error,
                "ci95": list(t.ci) if t.ci is not None else None,
                "pass_rate": t.pass_rate,
                "graded": t.graded,
                "ok": t.ok,
                "failed": t.failed,
                "uncertain": t.uncertain,
                "errors": t.errors,
                "invalid": t.invalid,
                "user_errors": t.user_errors,
                "skipped": t.skipped,
                "tokens": _tokens_dict(t.tokens),
                "cost": {**t.cost.to_dict(), "per_run_usd": dollars(t.cost_per_run)},
                "latency_ms": {"median": t.latency_median_ms, "p95": t.latency_p95_ms},
                "pass_at_k": {str(k): v for k, v in enumerate(t.pass_at, 1)},
                "pass_all_k": {str(k): v for k, v in enumerate(t.pass_all, 1)},
                "flaky": list(t.flaky),
                "noise": _noise_dict(t.noise),
            }
            for t in summary.targets
        ],
        "tokens": _tokens_dict(summary.all_tokens),
        "judge_tokens": (
            _tokens_dict(summary.judge_tokens) if summary.judge_tokens is not None else None
        ),
        "cost": cost_dict(summary.cost),
        "turns": (
            {
                "conversations": summary.turns.conversations,
                "turns": summary.turns.turns,
                "graded": summary.turns.graded,
                "passed": summary.turns.passed,
                "mean": summary.turns.mean,
                "stopped": summary.turns.stopped,
                "tool_calls": summary.turns.tool_calls,
                "ended": dict(summary.turns.ended),
                "user_tokens": (
                    _tokens_dict(summary.turns.user_tokens)
                    if summary.turns.user_tokens is not None
                    else None
                ),
                "replays_diverged": summary.turns.replays_diverged,
            }
            if summary.turns is not None
            else None
        ),
        "required_failures": summary.required_failures,
        "trajectory_calls": summary.trajectory_calls,
        "time": {
            "started": _iso(time.started),
            "ended": _iso(time.ended),
            "wall_seconds": _seconds(time.wall_seconds),
            "case_seconds": _seconds(time.case_seconds),
        },
        "datasets": [
            {
                "dataset": d.name,
                "runs": d.runs,
                "ok": d.ok,
                "failed": d.failed,
                "uncertain": d.uncertain,
                "errors": d.errors,
                "invalid": d.invalid,
                "user_errors": d.user_errors,
                "skipped": d.skipped,
                "seconds": _seconds(d.seconds),
            }
            for d in summary.datasets
        ],
        "vars": [
            {
                "variable": g.variable,
                "value": g.value,
                "runs": g.runs,
                "graded": g.graded,
                "ok": g.ok,
                "failed": g.failed,
                "uncertain": g.uncertain,
                "errors": g.errors,
                "invalid": g.invalid,
                "user_errors": g.user_errors,
                "skipped": g.skipped,
                "mean": g.mean,
                "pass_rate": g.pass_rate,
            }
            for g in summary.vars
        ],
        "evaluators": [
            {
                "name": e.name,
                "type": e.type,
                "runs": e.runs,
                "mean": e.mean,
                "weight": e.weight,
                "required": e.required,
                "threshold": e.threshold,
                "passed": e.passed if e.judged else None,
                "judged": e.judged,
                "failed_cases": e.failed_cases,
                "sampled": e.sampled,
                "uncertain": e.uncertain,
                "weighted": e.weighted,
            }
            for e in summary.evaluators
        ],
        "cases": [
            {
                "target": target,
                "eval_id": case,
                "runs": cs.n,
                "passes": cs.passes,
                "mean": cs.mean,
                "min": cs.min,
                "max": cs.max,
                "std_dev": cs.std_dev,
                "pass_at_k": {str(k): v for k, v in enumerate(cs.pass_at, 1)},
                "pass_all_k": {str(k): v for k, v in enumerate(cs.pass_all, 1)},
                "flaky": cs.flaky,
                "noise": noise.get((target, case)),
            }
            for target, case, cs in summary.case_stats
        ],
    }
    if summary.auto_repeat is not None:
        data["auto_repeat"] = _auto_dict(summary.auto_repeat)
    return data


def _auto_dict(auto: AutoRepeatSummary) -> dict[str, Any]:
    states = ("settled", "max", "budget", "stopped", "no_verdict")
    return {
        "rule": auto.rule.to_dict(),
        "runs": auto.runs,
        "cases": {state: auto.count(state) for state in states},
        "settled_first": auto.count("settled", runs=1),
        "by_case": [
            {
                "target": c.target,
                "eval_id": c.eval_id,
                "runs": c.runs,
                "state": c.state,
                "why": c.why,
                "passed": c.passed,
                "failed": c.failed,
                "uncertain": c.uncertain,
                "p_value": c.p_value,
            }
            for c in auto.cases
        ],
    }


def _noise_dict(noise: NoiseSplit | None) -> dict[str, Any] | None:
    if noise is None:
        return None
    return {
        "cases": noise.cases,
        "target_variance": noise.target_variance,
        "judge_variance": noise.judge_variance,
        "judge_share": noise.judge_share,
        "judge_decided": list(noise.judge_decided),
    }


def _live(record: Mapping[str, Any]) -> bool:
    """Whether a record with ``turns`` is a live conversation: a turn that says what the user
    said, or a simulated user. A single-turn case whose model called tools also records its
    rounds as a turn, without ``content`` (its question is its ``input_messages``): it is no
    conversation."""
    if isinstance(record.get("user"), dict):
        return True
    turns = record.get("turns")
    return isinstance(turns, list) and any(isinstance(t, dict) and "content" in t for t in turns)
