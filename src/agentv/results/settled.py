"""Whether a case's pass / fail verdict is settled by its runs so far (``--repeat auto``;
docs/trusting-verdicts.md, "Repeats where the verdict is unsettled").

A case's runs vote: ``ok`` passes, ``failed`` fails, ``uncertain`` (its judge's samples
disagreed) does not vote. A run is *clear* when it voted and its score is at least
``margin`` from its pass threshold on its own side. The verdict is **settled** when

- every run so far is clear and they all voted the same way (one clear run settles a case:
  a score far from the threshold is taken to stay on its side), or
- the votes are lopsided enough that a fair coin would rarely give them: the exact
  two-sided sign test of the passes against the failures (``stats.mcnemar_exact``, the
  same binomial tail) gives a p-value of at most ``1 - confidence``.

Otherwise it is unsettled, and the higher its p-value the more unsettled (a perfect split
first, then the runs nearest the threshold). A run that could not be graded (``error``,
``invalid``, ``user_error``) stops the case's repeats: more runs would not make it a
verdict; ``skipped`` runs (the budget) are not runs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from agentv.results.record import FAILED, OK, SKIPPED, UNCERTAIN
from agentv.results.stats import mcnemar_exact

#: the defaults of ``--repeat auto``
DEFAULT_MAX_REPEAT = 10
DEFAULT_CONFIDENCE = 0.95
DEFAULT_MARGIN = 0.1
#: the most runs ``--max-repeat`` allows (as ``--repeat``)
MAX_REPEAT_LIMIT = 1000


@dataclass(frozen=True, slots=True)
class AutoRule:
    """How ``--repeat auto`` spends repeats: at most ``max`` runs of a case, more only
    while its verdict is not settled at ``confidence`` (``margin``: how far from the
    threshold a run's score is clear)."""

    max: int = DEFAULT_MAX_REPEAT
    confidence: float = DEFAULT_CONFIDENCE
    margin: float = DEFAULT_MARGIN

    def __post_init__(self) -> None:
        if not 1 <= self.max <= MAX_REPEAT_LIMIT:
            raise ValueError(f"max_repeat is from 1 to {MAX_REPEAT_LIMIT} (got {self.max})")
        if not 0 < self.confidence < 1:
            raise ValueError(f"the confidence is between 0 and 1 (got {self.confidence})")
        if not 0 <= self.margin <= 1:
            raise ValueError(f"the margin is from 0 to 1 (got {self.margin})")

    def to_dict(self) -> dict[str, Any]:
        """As a record's ``auto_repeat`` says it."""
        return {"max": self.max, "confidence": self.confidence, "margin": self.margin}

    @classmethod
    def from_record(cls, data: Mapping[str, Any]) -> AutoRule | None:
        """The rule a record's ``auto_repeat`` names (None when it names none that holds)."""
        try:
            return cls(
                max=int(data["max"]),
                confidence=float(data["confidence"]),
                margin=float(data["margin"]),
            )
        except (KeyError, TypeError, ValueError):
            return None


@dataclass(frozen=True, slots=True)
class Outcome:
    """One run of a case, as its verdict counts it."""

    status: str
    score: float
    threshold: float

    def clear(self, margin: float) -> bool:
        """It voted, with a score at least ``margin`` from the threshold on its side."""
        slack = 1e-9  # a score written as 0.9 against 0.8 + 0.1
        if self.status == OK:
            return self.score >= self.threshold + margin - slack
        if self.status == FAILED:
            return self.score <= self.threshold - margin + slack
        return False


@dataclass(frozen=True, slots=True)
class Verdict:
    """Where a case's verdict stands after its runs.

    ``state``: ``settled``, ``unsettled`` (wants another run), ``max`` (unsettled at the
    most runs allowed) or ``no_verdict`` (a run could not be graded).
    """

    runs: int
    passed: int
    failed: int
    uncertain: int
    p_value: float
    state: str
    clear: bool  # every run clear, all the same way
    distance: float  # how far the runs' mean score is from the threshold

    @property
    def wants_more(self) -> bool:
        """Another run could settle it."""
        return self.state == "unsettled"

    def votes(self) -> str:
        """``3 passed, 2 failed, 1 uncertain (p = 1)``."""
        out = f"{self.passed} passed, {self.failed} failed"
        if self.uncertain:
            out += f", {self.uncertain} uncertain"
        return out + f" (p = {self.p_value:.3g})"

    def why(self) -> str:
        """Why it stands where it does, for the summary."""
        if self.state == "no_verdict":
            return "no more repeats: a run could not be graded"
        if self.state == "settled":
            how = "every run clear of the threshold" if self.clear else "the votes decide"
            return f"settled ({how}): {self.votes()}"
        if self.state == "max":
            return f"unsettled at the maximum: {self.votes()}"
        return f"unsettled: {self.votes()}"

    def reason(self) -> str:
        """Why one more run is made after these, for its record."""
        text = f"unsettled after {self.runs} run(s): {self.votes()}"
        if not (self.passed and self.failed):  # the votes agree: a run was not clear
            text += "; not every run clear of the threshold"
        return text


def verdict(outcomes: Iterable[Outcome], rule: AutoRule) -> Verdict:
    """Where the verdict of a case with these runs stands under ``rule``."""
    runs = [o for o in outcomes if o.status != SKIPPED]
    passed = sum(1 for o in runs if o.status == OK)
    failed = sum(1 for o in runs if o.status == FAILED)
    uncertain = sum(1 for o in runs if o.status == UNCERTAIN)
    graded = passed + failed + uncertain
    p_value = mcnemar_exact(passed, failed)
    clear = bool(runs) and (passed == 0 or failed == 0)
    clear = clear and all(o.clear(rule.margin) for o in runs)
    scored = [o for o in runs if o.status in (OK, FAILED, UNCERTAIN)]
    distance = (
        abs(math.fsum(o.score - o.threshold for o in scored) / len(scored)) if scored else 0.0
    )
    if graded < len(runs):
        state = "no_verdict"
    elif clear or (passed + failed and p_value <= 1 - rule.confidence + 1e-12):
        state = "settled"
    elif len(runs) >= rule.max:
        state = "max"
    else:
        state = "unsettled"
    return Verdict(len(runs), passed, failed, uncertain, p_value, state, clear, distance)


def unsettled_first(item: tuple[Any, Verdict]) -> tuple[float, float, int]:
    """A sort key: the most unsettled first (the highest p-value, then the mean nearest
    the threshold, then the fewest runs)."""
    _, found = item
    return (-found.p_value, found.distance, found.runs)
