"""What a change of grading did to the verdicts: which runs of which evaluator went from
pass to fail or back (``agentv regrade``, ``agentv compare``; docs/trusting-verdicts.md,
"What a judge change did").

Two sets of records are paired by run (dataset, eval id, target, repeat). Each evaluator
of a graded run has a verdict: ``pass`` or ``fail`` (its own ``passed`` when its entry says,
else its score against its threshold: its own, else the run's pass threshold), or
``uncertain`` (a judge whose samples disagreed). The case's own verdict counts too, as the
evaluator ``case verdict`` (``ok`` is a pass, ``failed`` a fail, ``uncertain`` uncertain).
A *flip* is a run whose verdict of an evaluator is not the same on both sides.

When people reviewed those runs (the run store's labels, docs/run-history.md), each flip
says whether it moved towards the person's verdict (the new verdict is theirs, the old
was not) or away from it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from agentv.results.record import DEFAULT_PASS_THRESHOLD, GRADED, EvalResult, RunKey

#: the name the case's own verdict is counted under
CASE_VERDICT = "case verdict"


def evaluator_verdicts(
    result: EvalResult, pass_threshold: float | None = None
) -> list[tuple[str, str, float, float, bool | None]]:
    """``(name, type, score, threshold, passed)`` of each evaluator that graded a record
    (``passed`` None: a judge whose samples disagreed). A record without an evaluator list
    was graded by the default judge, whose verdict is the record's. Nothing for a record
    that was not graded."""
    if result.status not in GRADED:
        return []
    default = pass_threshold if pass_threshold is not None else DEFAULT_PASS_THRESHOLD
    entries = result.evaluator_results
    if entries is None:
        raw = result.evaluator_raw_request
        if not raw:
            return []
        passed = None if raw.get("uncertain") else result.status == "ok"
        return [("llm_judge", "llm_judge", _score(result.score) or 0.0, default, passed)]
    found: list[tuple[str, str, float, float, bool | None]] = []
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("error") is not None:
            continue
        score = _score(entry.get("score"))
        if score is None:
            continue
        own = entry.get("threshold")
        threshold = float(own) if _number(own) else default
        passed = entry.get("passed")
        if entry.get("uncertain") is True:
            passed = None  # its samples disagreed: no pass or fail
        elif not isinstance(passed, bool):
            passed = score >= threshold
        name = str(entry.get("name") or entry.get("type") or "?")
        found.append((name, str(entry.get("type") or "?"), score, threshold, passed))
    return found


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _score(value: Any) -> float | None:
    return float(value) if _number(value) else None


def _word(passed: bool | None) -> str:
    return "uncertain" if passed is None else "pass" if passed else "fail"


def run_verdicts(result: EvalResult, pass_threshold: float | None = None) -> dict[str, str]:
    """Every verdict of a record by evaluator name (``pass``, ``fail``, ``uncertain``), the
    case's own under ``CASE_VERDICT``; empty for a record that was not graded."""
    if result.status not in GRADED:
        return {}
    found = {v[0]: _word(v[4]) for v in evaluator_verdicts(result, pass_threshold)}
    found[CASE_VERDICT] = {"ok": "pass", "failed": "fail"}.get(result.status, "uncertain")
    return found


@dataclass(frozen=True, slots=True)
class Flip:
    """One run whose verdict of one evaluator changed, and what a person said of it."""

    key: RunKey
    before: str
    after: str
    human: str | None = None  # the person's verdict (``pass`` / ``fail``), when reviewed

    @property
    def towards(self) -> bool | None:
        """True: the new verdict is the person's and the old was not; False: the old was
        and the new is not; None: no review, or neither side is theirs."""
        if self.human is None:
            return None
        if self.after == self.human and self.before != self.human:
            return True
        if self.before == self.human and self.after != self.human:
            return False
        return None

    def to_dict(self) -> dict[str, Any]:
        """As ``--format json`` prints it."""
        dataset, eval_id, target, repeat = self.key
        return {
            "dataset": dataset,
            "eval_id": eval_id,
            "target": target,
            "repeat": repeat,
            "before": self.before,
            "after": self.after,
            "human": self.human,
            "towards_human": self.towards,
        }


@dataclass(frozen=True, slots=True)
class EvaluatorFlips:
    """One evaluator's verdicts on both sides: how many runs had one on both, and the
    runs that flipped."""

    name: str
    compared: int
    flips: tuple[Flip, ...] = ()

    def count(self, before: str, after: str) -> int:
        """Flips from ``before`` to ``after``."""
        return sum(1 for f in self.flips if f.before == before and f.after == after)

    @property
    def towards(self) -> int:
        """Flips that moved towards the people's verdict."""
        return sum(1 for f in self.flips if f.towards is True)

    @property
    def away(self) -> int:
        """Flips that moved away from it."""
        return sum(1 for f in self.flips if f.towards is False)

    @property
    def reviewed(self) -> int:
        """Flips of runs that people reviewed."""
        return sum(1 for f in self.flips if f.human is not None)

    def to_dict(self) -> dict[str, Any]:
        """As ``--format json`` prints it."""
        return {
            "evaluator": self.name,
            "compared": self.compared,
            "flipped": len(self.flips),
            "pass_to_fail": self.count("pass", "fail"),
            "fail_to_pass": self.count("fail", "pass"),
            "reviewed": self.reviewed,
            "towards_human": self.towards,
            "away_from_human": self.away,
            "flips": [f.to_dict() for f in self.flips],
        }


class FlipTally:
    """Flips counted as pairs of runs come (a regrade streams its records): each
    evaluator's runs compared, in the order first met, and the runs that flipped."""

    def __init__(self) -> None:
        self._compared: dict[str, int] = {}
        self._flips: dict[str, list[Flip]] = {}

    def add(self, key: RunKey, before: Mapping[str, str], after: Mapping[str, str]) -> None:
        """One run's verdicts by evaluator before and after (``run_verdicts``)."""
        for name, was in before.items():
            now = after.get(name)
            if now is None:
                continue
            self._compared[name] = self._compared.get(name, 0) + 1
            if now != was:
                self._flips.setdefault(name, []).append(Flip(key, was, now))

    def result(self) -> tuple[EvaluatorFlips, ...]:
        """Each evaluator's flips, the case's own verdict last; runs in natural order."""
        from agentv.results.summary import natural_key

        def order(f: Flip) -> tuple[Any, ...]:
            return (natural_key(f.key[0]), natural_key(f.key[1]), *f.key[2:])

        names = sorted(self._compared, key=lambda n: n == CASE_VERDICT)  # stable: order met
        return tuple(
            EvaluatorFlips(
                name, self._compared[name], tuple(sorted(self._flips.get(name, []), key=order))
            )
            for name in names
        )


def verdict_flips(
    before: Mapping[RunKey, Mapping[str, str]], after: Mapping[RunKey, Mapping[str, str]]
) -> tuple[EvaluatorFlips, ...]:
    """Each evaluator's flips between the runs of ``before`` and ``after`` (each a run's
    verdicts by evaluator, ``run_verdicts``): ``FlipTally.result``."""
    tally = FlipTally()
    for key, old in before.items():
        new = after.get(key)
        if new is not None:
            tally.add(key, old, new)
    return tally.result()


def with_labels(
    found: Iterable[EvaluatorFlips], labels: Mapping[RunKey, str]
) -> tuple[EvaluatorFlips, ...]:
    """``found`` with each flip's human verdict from ``labels`` (by run)."""
    return tuple(
        replace(e, flips=tuple(replace(f, human=labels.get(f.key)) for f in e.flips)) for e in found
    )
