"""Two runs side by side: which cases got better, which got worse, and by how much overall.

Each results file counts with the latest record of every run (a resumed or rerun run's
newest record supersedes the older ones). Runs are matched by (dataset, eval id, target);
a case run several times (``--repeat``) counts with the mean score of its graded runs, and
its status is that of its worst run. Errors are not scores (docs/results.md): runs that
errored or were invalid have no score; they are counted on each side, and a case none of
whose runs was graded has no score at all.

A case *regressed* when its score fell by more than ``min_delta`` or its status went from
``ok`` to ``failed``, ``error`` or ``invalid``; it *improved* when its score rose by more
than ``min_delta`` or it became ``ok``. The mean delta over the cases graded in both runs
comes with a paired bootstrap 95% interval (seeded: the same files always give the same
interval); each side's mean and pass rate are over its graded runs.

With a significance level (``compare --significance 0.05``) the comparison also says whether
the drop is real rather than noise (``Significance``; docs/trusting-verdicts.md, "Is the
drop real?"): the paired bootstrap interval of the mean change at that level must lie below
zero and, when some cases' pass / fail verdicts changed, an exact McNemar test of those
verdicts must reject "no change" at that level with more cases lost than gained. It says
too what this many paired cases can detect, and how many a drop of a given size needs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agentv.errors import Diagnostic
from agentv.results.flips import EvaluatorFlips, run_verdicts, verdict_flips
from agentv.results.reader import read_results
from agentv.results.record import GRADED, RunKey
from agentv.results.stats import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    POWER,
    bootstrap_ci,
    cases_to_detect,
    mcnemar_exact,
    min_detectable_effect,
)
from agentv.results.summary import Summary, SummaryCollector, VarGroup, natural_key

Key = tuple[str, str, str]  # (dataset, eval id, target)
#: how bad each status is, to take a repeated case's worst
_RANK = {
    "ok": 0,
    "uncertain": 1,
    "failed": 2,
    "user_error": 3,
    "error": 4,
    "invalid": 5,
    "skipped": 6,
}
_UNKNOWN = _RANK["error"]  # a status this version does not know ranks as an error
DEFAULT_MIN_DELTA = 0.05


@dataclass(frozen=True, slots=True)
class CaseResult:
    """One case of one run: the mean score of its graded runs (None when none was
    graded), its worst status, and how many runs it had (``graded`` of them)."""

    score: float | None
    status: str
    runs: int
    graded: int = 0


@dataclass(frozen=True, slots=True)
class CaseDelta:
    """A case in both runs, or in one only (``base`` or ``new`` None)."""

    key: Key
    base: CaseResult | None
    new: CaseResult | None
    verdict: str  # improved, regressed, unchanged, new, missing

    @property
    def delta(self) -> float | None:
        """The new score minus the base score (None unless graded in both runs)."""
        if self.base is None or self.new is None:
            return None
        if self.base.score is None or self.new.score is None:
            return None
        return self.new.score - self.base.score


@dataclass(frozen=True, slots=True)
class Side:
    """One results file's runs: how many, by status, and the figures of the graded ones."""

    runs: int = 0
    statuses: dict[str, int] = field(default_factory=dict)
    mean: float | None = None  # over the graded runs
    pass_rate: float | None = None  # ok runs over the graded runs
    #: US dollars (docs/results.md, "Cost"): ``usd`` spent, ``reused_usd``, and
    #: ``per_run_usd``, the mean price of the targets' answers per run that had one (spent
    #: or reused alike: what the answers cost); None when no run reported tokens
    cost: dict[str, float | None] | None = None
    #: the runs by each variable's values (``vars:``), as its summary groups them
    vars: tuple[VarGroup, ...] = ()

    @property
    def graded(self) -> int:
        """Runs that were graded (``ok``, ``failed`` or ``uncertain``)."""
        return sum(self.statuses.get(status, 0) for status in GRADED)


@dataclass(frozen=True, slots=True)
class Significance:
    """Whether a comparison's drop is more than noise, at level ``alpha``
    (``compare --significance``; docs/trusting-verdicts.md, "Is the drop real?").

    The drop is *significant* when the paired bootstrap interval of the mean score change
    at level ``1 - alpha`` lies below zero and, when some verdicts changed (``lost`` or
    ``gained`` is not 0), the exact McNemar test of the paired pass / fail verdicts rejects
    "no change" at ``alpha`` with more cases lost than gained.

    Attributes:
        alpha: The significance level (0.05: 95% confidence).
        cases: The cases graded in both runs (the pairs).
        runs: The fewest graded runs any of those cases had on either side.
        interval: The paired bootstrap interval of the mean change at ``1 - alpha``.
        lost: Cases ``ok`` before and not after (graded in both).
        gained: Cases not ``ok`` before and ``ok`` after.
        p_value: The exact McNemar p-value of ``lost`` against ``gained``.
        score_drop: The mean change's interval lies below zero.
        verdict_drop: No verdict changed, or McNemar rejects with more lost than gained.
        detectable_rate: The smallest pass-rate change these pairs detect at ``alpha`` with
            80% power (None without pairs).
        detectable_score: The same for the mean score (None without pairs, or when no
            score changed: no noise to measure it by).
        detect: The drop asked about (``--detect``), if any.
        cases_for_rate: Cases needed to detect a pass-rate drop of ``detect``.
        cases_for_score: Cases needed to detect a mean score drop of ``detect`` (None when
            no score changed).
        gate: ``--fail-on-regression`` fails only on a significant drop (``--significance``
            was given; ``--detect`` alone leaves the plain rule).
    """

    alpha: float
    cases: int
    runs: int
    interval: tuple[float, float] | None
    lost: int
    gained: int
    p_value: float
    score_drop: bool
    verdict_drop: bool
    detectable_rate: float | None = None
    detectable_score: float | None = None
    detect: float | None = None
    cases_for_rate: int | None = None
    cases_for_score: int | None = None
    gate: bool = True

    @property
    def significant(self) -> bool:
        """The drop is real at ``alpha``: the mean change and the verdicts both say so."""
        return self.score_drop and self.verdict_drop

    def to_dict(self) -> dict[str, Any]:
        """As ``compare --format json`` prints it (``significance``)."""
        return {
            "alpha": self.alpha,
            "cases": self.cases,
            "runs": self.runs,
            "interval": list(self.interval) if self.interval is not None else None,
            "mcnemar": {"lost": self.lost, "gained": self.gained, "p_value": self.p_value},
            "score_drop": self.score_drop,
            "verdict_drop": self.verdict_drop,
            "significant": self.significant,
            "gate": self.gate,
            "power": POWER,
            "detectable": {"pass_rate": self.detectable_rate, "mean_score": self.detectable_score},
            "detect": (
                None
                if self.detect is None
                else {
                    "drop": self.detect,
                    "cases_for_pass_rate": self.cases_for_rate,
                    "cases_for_mean_score": self.cases_for_score,
                }
            ),
        }


def significance(
    pairs: list[tuple[CaseResult, CaseResult]],
    *,
    alpha: float,
    detect: float | None = None,
    gate: bool = True,
) -> Significance:
    """The significance of the change between paired cases (each graded in both runs),
    at level ``alpha``; ``detect``: a drop to say how many cases would detect; ``gate``:
    as ``Significance.gate``."""
    deltas = [n.score - b.score for b, n in pairs]  # type: ignore[operator]
    lost = sum(1 for b, n in pairs if b.status == "ok" and n.status != "ok")
    gained = sum(1 for b, n in pairs if b.status != "ok" and n.status == "ok")
    count = len(pairs)
    interval = bootstrap_ci(deltas, level=1.0 - alpha)
    p_value = mcnemar_exact(lost, gained)
    # the verdicts' null variance: the share of the pairs whose verdict changed (each a
    # change of 1); the scores': the mean squared change
    rate_variance = (lost + gained) / count if count else 0.0
    score_variance = math.fsum(d * d for d in deltas) / count if count else 0.0
    scored = score_variance > 0
    return Significance(
        alpha=alpha,
        cases=count,
        runs=min((min(b.graded, n.graded) for b, n in pairs), default=0),
        interval=interval,
        lost=lost,
        gained=gained,
        p_value=p_value,
        score_drop=interval is not None and interval[1] < 0,
        verdict_drop=lost + gained == 0 or (p_value <= alpha and lost > gained),
        detectable_rate=min_detectable_effect(rate_variance, count, alpha=alpha, step=1.0),
        detectable_score=(
            min_detectable_effect(score_variance, count, alpha=alpha) if scored else None
        ),
        detect=detect,
        cases_for_rate=(
            None
            if detect is None
            else cases_to_detect(detect, rate_variance, alpha=alpha, step=1.0)
        ),
        cases_for_score=(
            cases_to_detect(detect, score_variance, alpha=alpha)
            if detect is not None and scored
            else None
        ),
        gate=gate,
    )


@dataclass(frozen=True, slots=True)
class Comparison:
    """The comparison of two runs, case by case (``compare``).

    A case *regressed* when its score fell by more than ``min_delta`` or it stopped being
    ``ok``; it *improved* when its score rose by more than ``min_delta`` or it became ``ok``.

    Attributes:
        base_path: The results file before.
        new_path: The results file after.
        min_delta: The smallest change of a case's score that counts.
        cases: Every case, in natural order of dataset, eval id and target, with its
            verdict (improved, regressed, unchanged, new, missing).
        counts: How many cases have each verdict.
        mean_delta: The mean score change over the cases graded in both runs.
        ci: The 95% interval of ``mean_delta`` (a paired bootstrap), when there is one.
        base_pass_rate: The share of ``ok`` among the graded runs before.
        new_pass_rate: The share of ``ok`` among the graded runs after.
        base: The runs of the file before: how many, by status, their figures.
        new: The runs of the file after.
        significance: With a significance level: whether the drop is more than noise,
            and what this many cases can detect.
        flips: Per evaluator, the runs whose verdict flipped.
        sources: The results files whose answers the two files hold.
        notes: Records of either file read with something put right (a null score read
            as 0), as warnings with their file and line.
    """

    base_path: str
    new_path: str
    min_delta: float
    cases: tuple[CaseDelta, ...]
    counts: dict[str, int] = field(default_factory=dict)
    mean_delta: float | None = None
    """Over the cases graded in both runs."""
    ci: tuple[float, float] | None = None
    base_pass_rate: float | None = None
    new_pass_rate: float | None = None
    base: Side = field(default_factory=Side)
    new: Side = field(default_factory=Side)
    significance: Significance | None = None
    flips: tuple[EvaluatorFlips, ...] = ()
    """Per evaluator (and the case's own verdict), the runs in both files whose pass /
    fail verdict changed, with the people's verdicts where the run store has them."""
    sources: tuple[Path, ...] = ()
    """The results files whose answers the two files hold: both, and those their
    regraded records name (where people's reviews of these answers are found)."""
    notes: tuple[Diagnostic, ...] = ()

    @property
    def fails(self) -> bool:
        """What ``--fail-on-regression`` fails on: a case regressed and, with a
        significance level, the drop is significant."""
        if not self.regressed:
            return False
        sig = self.significance
        return sig is None or not sig.gate or sig.significant

    @property
    def by_variable(self) -> tuple[tuple[str, str, VarGroup | None, VarGroup | None], ...]:
        """Each variable's values in both runs side by side: ``(variable, value, base,
        new)``, a value in one run only with None for the other."""
        base = {(g.variable, g.value): g for g in self.base.vars}
        new = {(g.variable, g.value): g for g in self.new.vars}
        keys = list(dict.fromkeys([*base, *new]))
        return tuple(
            (name, value, base.get((name, value)), new.get((name, value))) for name, value in keys
        )

    @property
    def regressed(self) -> tuple[CaseDelta, ...]:
        """The cases that got worse."""
        return tuple(c for c in self.cases if c.verdict == "regressed")

    @property
    def changed(self) -> tuple[CaseDelta, ...]:
        """Every case whose score or status changed, or that is in one run only."""
        return tuple(c for c in self.cases if c.verdict != "unchanged")

    def to_dict(self) -> dict[str, Any]:
        """The comparison as JSON-ready data.

        Returns:
            What ``agentv compare --format json`` prints.
        """
        return comparison_dict(self)


@dataclass
class ResultsSide:
    """A results file read for comparing: its cases, its runs, each run's verdicts by
    evaluator (``agentv.results.flips``), and the results files its regraded records
    grade the answers of (``regraded_from``)."""

    cases: dict[Key, CaseResult]
    side: Side
    verdicts: dict[RunKey, dict[str, str]] = field(default_factory=dict)
    sources: set[Path] = field(default_factory=set)
    notes: list[Diagnostic] = field(default_factory=list)  # records read with a repair


def read_side(path: Path, *, pass_threshold: float | None = None) -> ResultsSide:
    """A results file (JSON Lines or YAML) as its cases, repeats folded, from the latest
    record of every run, and its runs' figures (its summary's: ``agentv.results.summary``);
    ``InputError`` naming the file and line for a line that is not a result.
    ``pass_threshold``: what an evaluator's score is weighed at when its record says
    neither its own threshold nor whether it passed (default 0.8)."""
    runs: dict[Key, list[tuple[float, str]]] = {}
    collector = SummaryCollector()
    verdicts: dict[RunKey, dict[str, str]] = {}
    sources: set[Path] = set()
    reader = read_results(path, strict=True)
    for _, result in reader.latest():
        score = result.score if math.isfinite(result.score) else 0.0
        runs.setdefault(result.case_key, []).append((score, result.status))
        collector.add(result)
        found = run_verdicts(result, pass_threshold)
        if found:
            verdicts[result.run_key] = found
        if result.regraded_from:
            sources.add(path.parent / result.regraded_from)
    reader.check_named(len(collector))  # mappings of another kind: refused
    cases = {}
    for key, items in runs.items():
        scored = [s for s, st in items if st in GRADED]
        cases[key] = CaseResult(
            score=sum(scored) / len(scored) if scored else None,
            status=max((st for _, st in items), key=lambda st: _RANK.get(st, _UNKNOWN)),
            runs=len(items),
            graded=len(scored),
        )
    return ResultsSide(cases, side_of(collector.summary()), verdicts, sources, reader.notes)


def side_of(summary: Summary) -> Side:
    """A run's figures for comparing, as its summary says them."""
    cost = summary.cost
    return Side(
        runs=summary.total,
        # the worst statuses last, as the cases' statuses are ranked
        statuses=dict(sorted(summary.statuses, key=lambda kv: _RANK.get(kv[0], _UNKNOWN))),
        mean=summary.mean,
        pass_rate=summary.pass_rate,
        vars=summary.vars,
        cost=(
            None
            if cost is None
            else {
                "usd": cost.total.usd,
                "reused_usd": cost.total.reused_usd,
                "per_run_usd": cost.per_run_usd,
            }
        ),
    )


def read_cases(path: Path) -> dict[Key, CaseResult]:
    """A results file as its cases (``read_side``'s ``cases``)."""
    return read_side(path).cases


def _verdict(base: CaseResult, new: CaseResult, min_delta: float) -> str:
    delta = 0.0  # a side never graded: only the statuses can tell
    if base.score is not None and new.score is not None:
        delta = new.score - base.score
    if delta < -min_delta or (base.status == "ok" and new.status != "ok"):
        return "regressed"
    if delta > min_delta or (base.status != "ok" and new.status == "ok"):
        return "improved"
    return "unchanged"


def paired_bootstrap(
    deltas: list[float], *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> tuple[float, float] | None:
    """95% percentile interval of the mean paired delta (the cases resampled together).

    The paired deltas are one sample, so this is ``stats.bootstrap_ci`` of them (same
    seed, resamples and ranks: floor(0.025 * (R - 1)) and ceil(0.975 * (R - 1)))."""
    return bootstrap_ci(deltas, resamples=resamples, seed=seed)


def compare_results(
    base: Mapping[Key, CaseResult],
    new: Mapping[Key, CaseResult],
    *,
    min_delta: float = DEFAULT_MIN_DELTA,
    base_path: str = "base",
    new_path: str = "new",
    base_side: Side | None = None,
    new_side: Side | None = None,
    alpha: float | None = None,
    detect: float | None = None,
    gate: bool = True,
) -> Comparison:
    """Compare two runs' cases (see the module docstring for the rules); ``alpha``: a
    significance level (``Significance``), ``detect``: a drop to size the suite for,
    ``gate``: the significance decides ``Comparison.fails``."""
    deltas: list[CaseDelta] = []
    for key in sorted(
        set(base) | set(new), key=lambda k: (natural_key(k[0]), natural_key(k[1]), k[2])
    ):
        b, n = base.get(key), new.get(key)
        if b is None:
            verdict = "new"
        elif n is None:
            verdict = "missing"
        else:
            verdict = _verdict(b, n, min_delta)
        deltas.append(CaseDelta(key, b, n, verdict))
    paired = [delta for d in deltas if (delta := d.delta) is not None]
    counts = {v: 0 for v in ("improved", "regressed", "unchanged", "new", "missing")}
    for d in deltas:
        counts[d.verdict] += 1
    return Comparison(
        base_path=base_path,
        new_path=new_path,
        min_delta=min_delta,
        cases=tuple(deltas),
        counts=counts,
        mean_delta=sum(paired) / len(paired) if paired else None,
        ci=paired_bootstrap(paired),
        base_pass_rate=base_side.pass_rate if base_side is not None else _case_rate(base),
        new_pass_rate=new_side.pass_rate if new_side is not None else _case_rate(new),
        base=base_side or Side(),
        new=new_side or Side(),
        significance=(
            None
            if alpha is None
            else significance(
                [(d.base, d.new) for d in deltas if d.delta is not None],  # type: ignore[misc]
                alpha=alpha,
                detect=detect,
                gate=gate,
            )
        ),
    )


def _case_rate(cases: Mapping[Key, CaseResult]) -> float | None:
    """Without the runs: the graded cases that passed over the graded cases."""
    graded = [c for c in cases.values() if c.score is not None]
    return sum(1 for c in graded if c.status == "ok") / len(graded) if graded else None


def compare_files(
    base: Path,
    new: Path,
    *,
    min_delta: float = DEFAULT_MIN_DELTA,
    alpha: float | None = None,
    detect: float | None = None,
    gate: bool = True,
    pass_threshold: float | None = None,
) -> Comparison:
    """Compare two results files (``alpha``, ``detect``, ``gate``: as
    ``compare_results``; ``pass_threshold``: as ``read_side``), with each evaluator's
    flipped verdicts."""
    before = read_side(base, pass_threshold=pass_threshold)
    after = read_side(new, pass_threshold=pass_threshold)
    found = compare_results(
        before.cases,
        after.cases,
        min_delta=min_delta,
        base_path=str(base),
        new_path=str(new),
        base_side=before.side,
        new_side=after.side,
        alpha=alpha,
        detect=detect,
        gate=gate,
    )
    return replace(
        found,
        flips=verdict_flips(before.verdicts, after.verdicts),
        sources=tuple(sorted({base, new, *before.sources, *after.sources})),
        notes=(*before.notes, *after.notes),
    )


def comparison_dict(c: Comparison) -> dict[str, Any]:
    """The comparison as JSON-ready data (``agentv compare --format json``)."""

    def side(r: CaseResult | None) -> dict[str, Any] | None:
        if r is None:
            return None
        return {"score": r.score, "status": r.status, "runs": r.runs, "graded": r.graded}

    def runs(s: Side) -> dict[str, Any]:
        return {"runs": s.runs, "graded": s.graded, "statuses": s.statuses, "mean": s.mean}

    data = {
        "base": c.base_path,
        "new": c.new_path,
        "min_delta": c.min_delta,
        "counts": c.counts,
        "runs": {"base": runs(c.base), "new": runs(c.new)},
        "mean_delta": c.mean_delta,
        "ci95": list(c.ci) if c.ci is not None else None,
        "pass_rate": {
            "base": c.base_pass_rate,
            "new": c.new_pass_rate,
            "change": (
                c.new_pass_rate - c.base_pass_rate
                if c.new_pass_rate is not None and c.base_pass_rate is not None
                else None
            ),
        },
        "changed": [
            {
                "dataset": d.key[0],
                "eval_id": d.key[1],
                "target": d.key[2],
                "verdict": d.verdict,
                "base": side(d.base),
                "new": side(d.new),
                "delta": d.delta,
            }
            for d in c.changed
        ],
    }
    if c.significance is not None:
        data["significance"] = c.significance.to_dict()
    if any(e.flips for e in c.flips):  # only when some verdict flipped
        data["flips"] = [e.to_dict() for e in c.flips if e.flips]
    if c.base.cost is not None or c.new.cost is not None:  # only when a run reported tokens
        data["cost"] = {"base": c.base.cost, "new": c.new.cost}
    if c.base.vars or c.new.vars:  # only when runs were made from `vars:`
        data["vars"] = [
            {
                "variable": name,
                "value": value,
                "base": _group(b),
                "new": _group(n),
                "mean_change": (
                    n.mean - b.mean
                    if b is not None and n is not None and b.mean is not None and n.mean is not None
                    else None
                ),
            }
            for name, value, b, n in c.by_variable
        ]
    return data


def _group(g: VarGroup | None) -> dict[str, Any] | None:
    if g is None:
        return None
    return {"runs": g.runs, "graded": g.graded, "mean": g.mean, "pass_rate": g.pass_rate}
