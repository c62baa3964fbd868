"""Asking a judge more than once (``samples``), and what its samples make together
(docs/trusting-verdicts.md, "Judge samples").

A judge is a noisy instrument: asked twice about the same answer, a score near the pass
threshold lands on either side. ``samples: N`` asks it N times; ``samples: {min, max,
margin}`` asks ``min`` times, then once more while the samples' mean is within ``margin``
of the threshold, up to ``max``. From the samples:

- the evaluator's **score** is their mean (it counts in the case's weighted mean as any
  evaluator's score does);
- each sample **passes** when its score reaches the evaluator's threshold (its own, else
  the run's pass threshold); the evaluator passes when every sample passed, fails when none
  did, and is **uncertain** when they disagree (some passed, some did not): the samples'
  mean decides no verdict on its own;
- its **spread** (lowest, highest, standard deviation) is recorded, with each sample.

What an uncertain evaluator does to its case is ``on_uncertain``'s (``results.outcome``):
by default the case's status is ``uncertain``, never silently a pass.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

#: the most samples one judge may be asked for one answer
MAX_SAMPLES = 20
#: how close to the threshold a mean is still unsettled, by default (adaptive samples)
DEFAULT_MARGIN = 0.1
#: what an uncertain verdict makes of its case: its own status (the default), a
#: failure, or a pass
OnUncertain = Literal["uncertain", "fail", "pass"]
ON_UNCERTAIN: tuple[str, ...] = ("uncertain", "fail", "pass")
#: the strictest first: among several uncertain evaluators of one case, the first of
#: their choices in this order decides
_STRICTEST = {"uncertain": 0, "fail": 1, "pass": 2}


class SampleRule(BaseModel):
    """How many times a judge is asked about one answer: at least ``min``, then once more
    while the mean of the samples so far is within ``margin`` of the pass threshold, at
    most ``max``. ``samples: N`` is ``{min: N, max: N}``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min: Annotated[int, Field(ge=1, le=MAX_SAMPLES)] = 1
    max: Annotated[int, Field(ge=1, le=MAX_SAMPLES)] = 5
    margin: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] = DEFAULT_MARGIN

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.min > self.max:
            raise ValueError(f"min ({self.min}) is more than max ({self.max})")
        return self

    @classmethod
    def fixed(cls, n: int) -> SampleRule:
        """Exactly ``n`` samples."""
        return cls(min=n, max=n)

    @property
    def single(self) -> bool:
        """One sample only: the judge is asked once, as without ``samples``."""
        return self.max == 1

    def wants_more(self, scores: Sequence[float], threshold: float) -> bool:
        """Whether to ask again after ``scores``: fewer than ``min``, or below ``max`` with
        the mean within ``margin`` of ``threshold`` (inclusive)."""
        n = len(scores)
        if n < self.min:
            return True
        if n >= self.max:
            return False
        return abs(math.fsum(scores) / n - threshold) <= self.margin + 1e-12

    def to_dict(self) -> dict[str, Any]:
        """As an eval file writes it."""
        return {"min": self.min, "max": self.max, "margin": self.margin}


def sample_rule(value: int | SampleRule | dict[str, Any] | None) -> SampleRule | None:
    """``samples`` as written (a number, a mapping or a rule) as a rule; None for none."""
    if value is None or isinstance(value, SampleRule):
        return value
    if isinstance(value, bool):
        raise ValueError("samples is a number of samples or {min, max, margin}")
    if isinstance(value, int):
        return SampleRule.fixed(value)
    return SampleRule.model_validate(value)


def stricter(a: str | None, b: str | None) -> str | None:
    """The stricter of two ``on_uncertain`` choices (None: not set)."""
    if a is None:
        return b
    if b is None:
        return a
    return a if _STRICTEST.get(a, 0) <= _STRICTEST.get(b, 0) else b


@dataclass(frozen=True, slots=True)
class Spread:
    """Where a judge's samples of one answer fell, and how they voted at ``threshold``."""

    n: int
    mean: float
    low: float
    high: float
    std_dev: float | None  # the samples' (n - 1); None for one sample
    passed: int  # samples at or above the threshold
    threshold: float

    @property
    def uncertain(self) -> bool:
        """Some samples passed and some did not."""
        return 0 < self.passed < self.n

    @property
    def variance(self) -> float:
        """The samples' variance (n - 1; 0 for one sample): the judge's own noise."""
        return 0.0 if self.std_dev is None else self.std_dev**2

    def to_dict(self) -> dict[str, Any]:
        """The record's ``spread`` and ``votes``."""
        return {
            "spread": {
                "min": self.low,
                "max": self.high,
                "std_dev": self.std_dev,
            },
            "votes": {
                "pass": self.passed,
                "fail": self.n - self.passed,
                "threshold": self.threshold,
            },
        }


def spread(scores: Sequence[float], threshold: float) -> Spread:
    """The spread and votes of one answer's samples (at least one)."""
    n = len(scores)
    if n == 0:
        raise ValueError("need at least one sample")
    mean = math.fsum(scores) / n
    sd = math.sqrt(math.fsum((s - mean) ** 2 for s in scores) / (n - 1)) if n > 1 else None
    return Spread(
        n=n,
        mean=mean,
        low=min(scores),
        high=max(scores),
        std_dev=sd,
        passed=sum(1 for s in scores if s >= threshold),
        threshold=threshold,
    )


def representative(scores: Sequence[float]) -> int:
    """The index of the sample whose score is closest to the mean (the first of ties):
    whose hits, misses and reasoning the evaluator's entry shows."""
    mean = math.fsum(scores) / len(scores)
    return min(range(len(scores)), key=lambda i: (abs(scores[i] - mean), i))
