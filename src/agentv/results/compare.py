"""Two runs side by side: which cases got better, which got worse, and by how much overall.

Cases are matched by (dataset, eval id, target); a case run several times (``--repeat``)
counts with the mean of its runs, and its status is that of its worst run. A case
*regressed* when its score fell by more than ``min_delta`` or its status went from ``ok``
to ``failed``, ``error`` or ``invalid``; it *improved* when its score rose by more than
``min_delta`` or it became ``ok``. The mean delta over the cases in both runs comes with a
paired bootstrap 95% interval (seeded: the same files always give the same interval).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentv.results.reader import read_results
from agentv.results.stats import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, bootstrap_ci
from agentv.results.summary import natural_key

Key = tuple[str, str, str]  # (dataset, eval id, target)
#: how bad each status is, to take a repeated case's worst
_RANK = {"ok": 0, "failed": 1, "error": 2, "invalid": 3}
DEFAULT_MIN_DELTA = 0.05


@dataclass(frozen=True, slots=True)
class CaseResult:
    """One case of one run: its mean score over its runs and its worst status."""

    score: float
    status: str
    runs: int


@dataclass(frozen=True, slots=True)
class CaseDelta:
    """A case in both runs, or in one only (``base`` or ``new`` None)."""

    key: Key
    base: CaseResult | None
    new: CaseResult | None
    verdict: str  # improved, regressed, unchanged, new, missing

    @property
    def delta(self) -> float | None:
        """The new score minus the base score (None unless in both runs)."""
        if self.base is None or self.new is None:
            return None
        return self.new.score - self.base.score


@dataclass(frozen=True, slots=True)
class Comparison:
    """The comparison of two runs."""

    base_path: str
    new_path: str
    min_delta: float
    cases: tuple[CaseDelta, ...]
    counts: dict[str, int] = field(default_factory=dict)
    mean_delta: float | None = None
    ci: tuple[float, float] | None = None
    base_pass_rate: float | None = None
    new_pass_rate: float | None = None

    @property
    def regressed(self) -> tuple[CaseDelta, ...]:
        """The cases that got worse."""
        return tuple(c for c in self.cases if c.verdict == "regressed")

    @property
    def changed(self) -> tuple[CaseDelta, ...]:
        """Every case whose score or status changed, or that is in one run only."""
        return tuple(c for c in self.cases if c.verdict != "unchanged")

    def to_dict(self) -> dict[str, Any]:
        """The comparison as JSON-ready data (``agentv compare --format json``)."""
        return comparison_dict(self)


def read_cases(path: Path) -> dict[Key, CaseResult]:
    """A results file (JSON Lines or YAML) as its cases, repeats folded; ``InputError``
    naming the file and line for a line that is not a result."""
    runs: dict[Key, list[tuple[float, str]]] = {}
    for number, result in read_results(path, strict=True):
        eval_id = result.eval_id or f"#{result.line if result.line is not None else number}"
        key = (result.dataset, eval_id, result.target or "")
        score = result.score if math.isfinite(result.score) else 0.0
        runs.setdefault(key, []).append((score, result.status))
    return {
        key: CaseResult(
            score=sum(s for s, _ in items) / len(items),
            status=max((st for _, st in items), key=lambda st: _RANK.get(st, 2)),
            runs=len(items),
        )
        for key, items in runs.items()
    }


def _verdict(base: CaseResult, new: CaseResult, min_delta: float) -> str:
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


def _pass_rate(cases: Iterable[CaseResult]) -> float | None:
    items = list(cases)
    return sum(1 for c in items if c.status == "ok") / len(items) if items else None


def compare_results(
    base: Mapping[Key, CaseResult],
    new: Mapping[Key, CaseResult],
    *,
    min_delta: float = DEFAULT_MIN_DELTA,
    base_path: str = "base",
    new_path: str = "new",
) -> Comparison:
    """Compare two runs' cases (see the module docstring for the rules)."""
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
        base_pass_rate=_pass_rate(base.values()),
        new_pass_rate=_pass_rate(new.values()),
    )


def compare_files(base: Path, new: Path, *, min_delta: float = DEFAULT_MIN_DELTA) -> Comparison:
    """Compare two results files."""
    return compare_results(
        read_cases(base),
        read_cases(new),
        min_delta=min_delta,
        base_path=str(base),
        new_path=str(new),
    )


def comparison_dict(c: Comparison) -> dict[str, Any]:
    """The comparison as JSON-ready data (``agentv compare --format json``)."""

    def side(r: CaseResult | None) -> dict[str, Any] | None:
        return None if r is None else {"score": r.score, "status": r.status, "runs": r.runs}

    return {
        "base": c.base_path,
        "new": c.new_path,
        "min_delta": c.min_delta,
        "counts": c.counts,
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
