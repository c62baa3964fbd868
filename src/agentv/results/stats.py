"""Statistics over repeated and compared runs: pure functions, standard library only.

- ``pass_at_k(n, c, k)``: the chance that at least one of ``k`` answers drawn from ``n``
  (of which ``c`` passed) passes, by the unbiased estimator of Chen et al. 2021,
  ``1 - C(n - c, k) / C(n, k)``;
- ``pass_hat_k(n, c, k)`` (pass^k): the chance that all ``k`` drawn answers pass,
  ``C(c, k) / C(n, k)``;
- ``standard_error``: the sample standard deviation over the square root of ``n``;
- ``bootstrap_ci``: a percentile bootstrap interval of the mean, resampling with a seeded
  generator so that the same values always give the same interval;
- ``agreement`` and ``cohen_kappa``: how often two raters of the same items (an evaluator and
  a person) gave the same pass / fail verdict, and that agreement beyond what chance gives;
- ``binomial_at_most`` / ``binomial_at_least``: exact tails of a fair coin's binomial, in
  whole numbers (``math.comb``), for the exact tests below;
- ``mcnemar_exact``: the exact McNemar test of paired pass / fail verdicts (a sign test over
  the pairs that changed);
- ``normal_quantile``, ``min_detectable_effect`` and ``cases_to_detect``: what a paired
  comparison of this many cases can see (docs/trusting-verdicts.md, "Is the drop real?").
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from statistics import NormalDist

#: resamples of the bootstrap: the interval's ends move by well under 0.01 beyond this
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 20211207
CONFIDENCE = 0.95


def mean(values: Sequence[float]) -> float | None:
    """The arithmetic mean (None for no values)."""
    return math.fsum(values) / len(values) if values else None


def std_dev(values: Sequence[float]) -> float | None:
    """The sample standard deviation (n - 1); None for fewer than two values."""
    n = len(values)
    if n < 2:
        return None
    m = math.fsum(values) / n
    return math.sqrt(math.fsum((v - m) ** 2 for v in values) / (n - 1))


def standard_error(values: Sequence[float]) -> float | None:
    """The standard error of the mean; None for fewer than two values."""
    sd = std_dev(values)
    return None if sd is None else sd / math.sqrt(len(values))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k: at least one of ``k`` answers out of ``n`` (``c`` passing) passes."""
    _check(n, c, k)
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k: all ``k`` answers drawn from ``n`` (``c`` passing) pass."""
    _check(n, c, k)
    return math.comb(c, k) / math.comb(n, k)


def _check(n: int, c: int, k: int) -> None:
    if not (0 <= c <= n and 1 <= k <= n):
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n (got n={n}, c={c}, k={k})")


def bootstrap_ci(
    values: Sequence[float],
    *,
    level: float = CONFIDENCE,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> tuple[float, float] | None:
    """The percentile bootstrap interval of the mean at ``level`` (None for no values; the
    value itself, twice, for one)."""
    n = len(values)
    if n == 0:
        return None
    if n == 1:
        return (values[0], values[0])
    rng = random.Random(seed)
    data = list(values)
    choices = rng.choices
    means = sorted(sum(choices(data, k=n)) / n for _ in range(resamples))
    tail = (1.0 - level) / 2
    low = means[math.floor(tail * (resamples - 1))]
    high = means[math.ceil((1.0 - tail) * (resamples - 1))]
    return (low, high)


#: above this many values, ``mean_ci`` uses the normal approximation (the bootstrap's cost
#: grows with resamples x values; at this size the two agree to well under 0.01)
BOOTSTRAP_MAX_VALUES = 500


def mean_ci(values: Sequence[float]) -> tuple[float, float] | None:
    """A 95% interval of the mean: the seeded bootstrap up to ``BOOTSTRAP_MAX_VALUES``
    values, mean +/- 1.96 standard errors above."""
    if len(values) <= BOOTSTRAP_MAX_VALUES:
        return bootstrap_ci(values)
    m, se = mean(values), standard_error(values)
    assert m is not None and se is not None
    return (m - 1.959964 * se, m + 1.959964 * se)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile (0..1) by linear interpolation between closest ranks."""
    if not values:
        return None
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = math.floor(pos)
    hi = math.ceil(pos)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


@dataclass(frozen=True, slots=True)
class CaseStats:
    """One case's repeats on one target."""

    n: int
    passes: int
    mean: float
    min: float
    max: float
    std_dev: float | None
    pass_at: tuple[float, ...]  # pass@k for k = 1..n
    pass_all: tuple[float, ...]  # pass^k for k = 1..n

    @property
    def flaky(self) -> bool:
        """Some repeats passed and some did not."""
        return 0 < self.passes < self.n


def case_stats(scores: Sequence[float], passed: Sequence[bool]) -> CaseStats:
    """The statistics of one case's ``n`` repeats (their scores and whether each passed)."""
    n = len(scores)
    if n == 0 or len(passed) != n:
        raise ValueError("need one pass flag per score, and at least one score")
    c = sum(1 for p in passed if p)
    return CaseStats(
        n=n,
        passes=c,
        mean=math.fsum(scores) / n,
        min=min(scores),
        max=max(scores),
        std_dev=std_dev(scores),
        pass_at=tuple(pass_at_k(n, c, k) for k in range(1, n + 1)),
        pass_all=tuple(pass_hat_k(n, c, k) for k in range(1, n + 1)),
    )


def agreement(both_pass: int, a_only: int, b_only: int, both_fail: int) -> float | None:
    """The share of items two raters gave the same verdict (None for no items): the
    counts of a 2 x 2 table, ``a_only`` passed by the first rater only, ``b_only`` by the
    second only."""
    n = both_pass + a_only + b_only + both_fail
    return float(Fraction(both_pass + both_fail, n)) if n else None


def cohen_kappa(both_pass: int, a_only: int, b_only: int, both_fail: int) -> float | None:
    """Cohen's kappa of a 2 x 2 table (as ``agreement``): ``(po - pe) / (1 - pe)``, the
    observed agreement ``po`` beyond the agreement ``pe`` expected by chance from each
    rater's own pass rate. 1 is full agreement, 0 no better than chance, below 0 worse.
    None when it is undefined: no items, or both raters gave one verdict to every item
    (``pe`` is 1). Computed in exact fractions."""
    n = both_pass + a_only + b_only + both_fail
    if not n:
        return None
    observed = Fraction(both_pass + both_fail, n)
    a_pass, b_pass = both_pass + a_only, both_pass + b_only
    chance = Fraction(a_pass * b_pass + (n - a_pass) * (n - b_pass), n * n)
    if chance == 1:
        return None
    return float((observed - chance) / (1 - chance))


# --- exact tests and what a comparison can detect ---------------------------------------------

#: the power ``min_detectable_effect`` and ``cases_to_detect`` assume (the usual 80%)
POWER = 0.8


def binomial_at_most(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2): the whole-number sum of C(n, i) for i <= k over
    2**n, divided once (exact up to the last rounding)."""
    if n < 0:
        raise ValueError(f"need n >= 0 (got n={n})")
    if k < 0:
        return 0.0
    if k >= n:
        return 1.0
    return sum(math.comb(n, i) for i in range(k + 1)) / 2**n


def binomial_at_least(k: int, n: int) -> float:
    """P(X >= k) for X ~ Binomial(n, 1/2) (``binomial_at_most`` from the other end)."""
    return binomial_at_most(n - k, n)


def mcnemar_exact(b: int, c: int) -> float:
    """The two-sided exact McNemar p-value of a paired 2 x 2 table whose discordant cells
    are ``b`` (passed before, failed after) and ``c`` (failed before, passed after).

    Under "no change" each discordant pair goes either way with chance 1/2, so ``b`` is
    Binomial(b + c, 1/2): p = min(1, 2 * P(X <= min(b, c))). The concordant pairs do not
    enter. 1.0 when no pair changed."""
    if b < 0 or c < 0:
        raise ValueError(f"need b, c >= 0 (got b={b}, c={c})")
    n = b + c
    if n == 0:
        return 1.0
    return min(1.0, 2 * binomial_at_most(min(b, c), n))


def normal_quantile(q: float) -> float:
    """The standard normal distribution's ``q`` quantile (``z``; 0.975 gives 1.959964)."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"a quantile is strictly between 0 and 1 (got {q})")
    return NormalDist().inv_cdf(q)


def _z_sum(alpha: float, power: float) -> float:
    """z(1 - alpha / 2) + z(power): a two-sided test at ``alpha`` with ``power``."""
    if not 0.0 < alpha < 1.0 or not 0.0 < power < 1.0:
        raise ValueError(f"need 0 < alpha < 1 and 0 < power < 1 (got {alpha}, {power})")
    return normal_quantile(1.0 - alpha / 2) + normal_quantile(power)


def min_detectable_effect(
    null_variance: float,
    n: int,
    *,
    alpha: float,
    power: float = POWER,
    step: float | None = None,
) -> float | None:
    """The smallest paired mean change a two-sided test at ``alpha`` finds with ``power``
    among ``n`` paired cases (normal approximation; None for no case).

    ``null_variance`` is the mean of the squared paired differences (their variance when
    nothing changed): with one run a case and pass / fail differences (-1, 0, 1), the
    share of the cases whose verdict changed. The effect is ``z * sqrt(null_variance / n)``
    with ``z = z(1 - alpha / 2) + z(power)``. ``step``: the smallest change one case can
    make (1 / runs for pass rates); a mean change d needs differences whose squares add up
    to at least ``d * step`` per case, so the effect is never below ``z**2 * step / n``,
    whatever few changes these two runs happened to have."""
    if n <= 0:
        return None
    z = _z_sum(alpha, power)
    effect = z * math.sqrt(max(0.0, null_variance) / n)
    if step is not None:
        effect = max(effect, z * z * step / n)
    return effect


def cases_to_detect(
    drop: float,
    null_variance: float,
    *,
    alpha: float,
    power: float = POWER,
    step: float | None = None,
) -> int:
    """How many paired cases a two-sided test at ``alpha`` needs to find a mean change of
    ``drop`` with ``power``: ``ceil(z**2 * v / drop**2)``, ``v`` the null variance (with
    ``step``, at least ``drop * step``: the least a change of ``drop`` makes it) and ``z``
    as in ``min_detectable_effect``; 1 at least."""
    if not drop > 0:
        raise ValueError(f"the drop to detect is more than 0 (got {drop})")
    z = _z_sum(alpha, power)
    variance = max(0.0, null_variance)
    if step is not None:
        variance = max(variance, drop * step)
    return max(1, math.ceil(z * z * variance / (drop * drop) - 1e-9))
