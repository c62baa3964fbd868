"""Each estimator against values computed by hand."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from agentv.results.stats import (
    BOOTSTRAP_MAX_VALUES,
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    CONFIDENCE,
    CaseStats,
    bootstrap_ci,
    case_stats,
    mean,
    mean_ci,
    pass_at_k,
    pass_hat_k,
    percentile,
    standard_error,
    std_dev,
)


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 2, 1, 0.4),  # 1 - C(3,1)/C(5,1) = 1 - 3/5
        (5, 2, 2, 0.7),  # 1 - C(3,2)/C(5,2) = 1 - 3/10
        (5, 2, 3, 0.9),  # 1 - C(3,3)/C(5,3) = 1 - 1/10
        (5, 2, 4, 1.0),  # only 3 fail: any 4 include a pass
        (3, 3, 1, 1.0),  # all pass
        (3, 0, 3, 0.0),  # none pass
        (1, 1, 1, 1.0),  # N = 1
        (1, 0, 1, 0.0),
        (10, 1, 5, 0.5),  # 1 - C(9,5)/C(10,5) = 1 - 126/252
    ],
)
def test_pass_at_k(n: int, c: int, k: int, expected: float) -> None:
    assert pass_at_k(n, c, k) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (5, 2, 1, 0.4),  # C(2,1)/C(5,1)
        (5, 2, 2, 0.1),  # C(2,2)/C(5,2) = 1/10
        (5, 2, 3, 0.0),  # fewer passes than draws
        (3, 3, 3, 1.0),
        (3, 0, 1, 0.0),
        (1, 1, 1, 1.0),
        (4, 3, 2, 0.5),  # C(3,2)/C(4,2) = 3/6
    ],
)
def test_pass_hat_k(n: int, c: int, k: int, expected: float) -> None:
    assert pass_hat_k(n, c, k) == pytest.approx(expected)


def test_estimators_refuse_impossible_counts() -> None:
    for n, c, k in [(3, 4, 1), (3, 1, 0), (3, 1, 4), (0, 0, 1)]:
        with pytest.raises(ValueError):
            pass_at_k(n, c, k)


def test_mean_deviation_and_standard_error() -> None:
    values = [1.0, 2.0, 3.0, 4.0]
    assert mean(values) == 2.5
    # squared deviations 2.25 0.25 0.25 2.25 -> 5 / 3
    assert std_dev(values) == pytest.approx(math.sqrt(5 / 3))
    assert standard_error(values) == pytest.approx(math.sqrt(5 / 3) / 2)
    assert mean([]) is None and std_dev([1.0]) is None and standard_error([1.0]) is None


def test_percentile_interpolates() -> None:
    assert percentile([10.0, 20.0, 30.0, 40.0], 0.5) == 25.0
    assert percentile([5.0, 1.0, 3.0], 0.95) == pytest.approx(4.8)  # 3 + (5 - 3) * 0.9
    assert percentile([], 0.5) is None


def test_bootstrap_is_seeded_and_sensible() -> None:
    values = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0, 1.0, 0.9, 0.1, 0.5]
    first = bootstrap_ci(values)
    assert first == bootstrap_ci(values)  # the same results give the same interval
    assert first is not None
    low, high = first
    m = mean(values)
    assert m is not None and low < m < high
    # about two standard errors either side of the mean, for a sample this size
    se = standard_error(values)
    assert se is not None and 2.5 * se < high - low < 5 * se
    assert bootstrap_ci(values, seed=1) != first  # a different seed, a different draw
    assert bootstrap_ci([0.7] * 5) == (0.7, 0.7)  # no spread, no interval
    assert bootstrap_ci([0.3]) == (0.3, 0.3) and bootstrap_ci([]) is None


def test_case_stats_and_flaky() -> None:
    stats = case_stats([1.0, 0.0, 0.5], [True, False, False])
    assert (stats.n, stats.passes, stats.min, stats.max) == (3, 1, 0.0, 1.0)
    assert stats.mean == pytest.approx(0.5)
    assert stats.std_dev == pytest.approx(0.5)
    assert stats.pass_at == pytest.approx((1 / 3, 2 / 3, 1.0))
    assert stats.pass_all == pytest.approx((1 / 3, 0.0, 0.0))
    assert stats.flaky
    assert not case_stats([1.0, 1.0], [True, True]).flaky
    assert not case_stats([0.0], [False]).flaky
    with pytest.raises(ValueError):
        case_stats([1.0], [True, False])


def test_impossible_counts_are_named_in_the_error() -> None:
    for n, c, k in [(3, 4, 1), (3, -1, 1), (3, 1, 0), (3, 1, 4), (0, 0, 1)]:
        message = f"need 0 <= c <= n and 1 <= k <= n (got n={n}, c={c}, k={k})"
        for estimator in (pass_at_k, pass_hat_k):
            with pytest.raises(ValueError) as info:
                estimator(n, c, k)
            assert str(info.value) == message
    # the edges are allowed
    assert (pass_at_k(3, 0, 1), pass_at_k(3, 3, 3), pass_hat_k(3, 3, 3)) == (0.0, 1.0, 1.0)


def test_exact_means_and_deviations() -> None:
    assert mean([0.25, 0.5, 1.0, 0.25]) == 0.5
    assert mean([0.1] * 10) == 0.1  # summed exactly (fsum): sum() gives 0.09999999999999999
    assert std_dev([0.0, 1.0]) == math.sqrt(0.5)
    assert std_dev([0.5, 0.5, 0.5]) == 0.0
    assert standard_error([0.0, 1.0]) == math.sqrt(0.5) / math.sqrt(2)
    assert std_dev([]) is None and standard_error([]) is None


def reference_bootstrap(values: list[float], level: float, resamples: int, seed: int) -> Any:
    """The documented percentile bootstrap, written out again: ``resamples`` means of
    ``len(values)`` draws with replacement from ``random.Random(seed)``, sorted; the ends
    are the floor and ceiling ranks of the tails over ``resamples - 1``."""
    rng = random.Random(seed)
    n = len(values)
    means = sorted(sum(rng.choices(values, k=n)) / n for _ in range(resamples))
    tail = (1 - level) / 2
    return means[math.floor(tail * (resamples - 1))], means[math.ceil((1 - tail) * (resamples - 1))]


def test_bootstrap_interval_is_the_documented_one() -> None:
    values = [0.0, 0.1, 0.35, 0.5, 0.55, 0.9, 1.0, 0.2]
    default = bootstrap_ci(values)
    assert default == reference_bootstrap(values, 0.95, 2000, 20211207)
    assert (BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, CONFIDENCE) == (2000, 20211207, 0.95)
    assert bootstrap_ci(values, level=0.5) == reference_bootstrap(values, 0.5, 2000, 20211207)
    assert bootstrap_ci(values, resamples=101, seed=7) == reference_bootstrap(values, 0.95, 101, 7)
    assert bootstrap_ci(values, level=0.8, resamples=11, seed=3) == reference_bootstrap(
        values, 0.8, 11, 3
    )
    # five resamples at 50%: the ends are ranks floor(0.25 x 4) = 1 and ceil(0.75 x 4) = 3
    small = bootstrap_ci(values, level=0.5, resamples=5, seed=3)
    assert small == reference_bootstrap(values, 0.5, 5, 3)
    rng = random.Random(3)
    means = sorted(sum(rng.choices(values, k=8)) / 8 for _ in range(5))
    assert small == (means[1], means[3]) and means[0] < means[1]
    # the values are not reordered or changed
    assert values == [0.0, 0.1, 0.35, 0.5, 0.55, 0.9, 1.0, 0.2]
    assert bootstrap_ci((0.25, 0.75)) == (0.25, 0.75)  # a tuple does as well as a list
    assert bootstrap_ci([0.4, 0.6]) == (0.4, 0.6)  # each end drawn twice in a quarter of draws


def test_mean_ci_bootstraps_up_to_500_values_then_uses_the_normal_interval() -> None:
    assert BOOTSTRAP_MAX_VALUES == 500
    five_hundred = [i % 5 / 4 for i in range(500)]  # 0, 0.25, 0.5, 0.75, 1 a hundred times each
    assert mean_ci(five_hundred) == bootstrap_ci(five_hundred)
    more = [*five_hundred, 0.5]
    m = mean(more)
    se = standard_error(more)
    assert m == 0.5 and se is not None
    assert mean_ci(more) == (0.5 - 1.959964 * se, 0.5 + 1.959964 * se)
    assert mean_ci([]) is None
    assert mean_ci([0.3]) == (0.3, 0.3)


def test_percentile_ends_and_one_value() -> None:
    values = [4.0, 1.0, 3.0, 2.0]
    assert (percentile(values, 0.0), percentile(values, 1.0)) == (1.0, 4.0)
    assert percentile(values, 1 / 3) == 2.0  # rank 1 exactly
    assert percentile(values, 0.5) == 2.5
    assert percentile([7.0], 0.95) == 7.0
    assert values == [4.0, 1.0, 3.0, 2.0]


def test_case_stats_exact() -> None:
    assert case_stats([0.5, 1.0, 0.0, 0.5], [False, True, False, True]) == CaseStats(
        n=4,
        passes=2,
        mean=0.5,
        min=0.0,
        max=1.0,
        std_dev=math.sqrt(0.5 / 3),  # squares 0 + 0.25 + 0.25 + 0
        # 1 - C(2,k)/C(4,k): 1 - 2/4, 1 - 1/6, 1, 1
        pass_at=(1 - 2 / 4, 1 - 1 / 6, 1.0, 1.0),
        # C(2,k)/C(4,k): 2/4, 1/6, 0, 0
        pass_all=(2 / 4, 1 / 6, 0.0, 0.0),
    )
    assert case_stats([0.25], [True]) == CaseStats(1, 1, 0.25, 0.25, 0.25, None, (1.0,), (1.0,))
    for scores, passed in [([], []), ([1.0], [True, False]), ([1.0, 0.0], [True])]:
        with pytest.raises(ValueError) as info:
            case_stats(scores, passed)
        assert str(info.value) == "need one pass flag per score, and at least one score"


# --- exact tests and the minimal detectable effect, by hand ----------------------------------


def test_binomial_tails_of_a_fair_coin() -> None:
    from agentv.results.stats import binomial_at_least, binomial_at_most

    # 10 tosses: C(10,0..2) = 1 + 10 + 45 = 56 of 1024
    assert binomial_at_most(2, 10) == 56 / 1024
    assert binomial_at_least(8, 10) == 56 / 1024  # the other end, by symmetry
    assert binomial_at_least(9, 10) == 11 / 1024
    assert binomial_at_most(-1, 5) == 0.0
    assert binomial_at_most(5, 5) == 1.0
    assert binomial_at_least(0, 3) == 1.0


@pytest.mark.parametrize(
    ("b", "c", "expected"),
    [
        # 2 * P(X <= 1), X ~ Bin(10, 1/2) = 2 * (1 + 10) / 1024
        (9, 1, 22 / 1024),
        (1, 9, 22 / 1024),  # two-sided: the same either way
        # 2 * P(X <= 0), X ~ Bin(6, 1/2) = 2 / 64: six cases all one way
        (6, 0, 2 / 64),
        (5, 0, 2 / 32),  # five are not enough at 0.05
        (1, 0, 1.0),  # one case changed: 2 * 1/2
        (3, 3, 1.0),  # as many each way: capped at 1
        (0, 0, 1.0),  # nothing changed
        # 2 * (1 + 20 + 190) / 2^20: a table of 18 against 2
        (18, 2, 2 * 211 / 2**20),
    ],
)
def test_mcnemar_exact_on_fixed_tables(b: int, c: int, expected: float) -> None:
    from agentv.results.stats import mcnemar_exact

    assert mcnemar_exact(b, c) == pytest.approx(expected, rel=1e-12)


def test_normal_quantiles() -> None:
    from agentv.results.stats import normal_quantile

    assert normal_quantile(0.975) == pytest.approx(1.959964, abs=1e-6)
    assert normal_quantile(0.8) == pytest.approx(0.841621, abs=1e-6)
    assert normal_quantile(0.5) == 0.0
    with pytest.raises(ValueError):
        normal_quantile(1.0)


def test_min_detectable_effect_by_hand() -> None:
    from agentv.results.stats import min_detectable_effect

    # 50 cases, one run each, 10 of them changed verdict (7 one way, 3 the other):
    # null variance = 10 / 50 = 0.2; z * sqrt(0.2 / 50) = 2.801585 * 0.0632456 = 0.177187;
    # the floor z^2 * 1 / 50 = 7.848879 / 50 = 0.156978 is lower
    assert min_detectable_effect(0.2, 50, alpha=0.05, step=1.0) == pytest.approx(0.177187, abs=1e-5)
    # nothing changed: the floor, z^2 / 50
    assert min_detectable_effect(0.0, 50, alpha=0.05, step=1.0) == pytest.approx(0.156978, abs=1e-5)
    # 4 runs a case: pass rates move in quarters, the floor is z^2 * 0.25 / 50
    assert min_detectable_effect(0.0, 50, alpha=0.05, step=0.25) == pytest.approx(
        0.039244, abs=1e-5
    )
    # scores (no step): z * sqrt(v / n) alone; alpha 0.01 uses z(0.995) = 2.575829
    assert min_detectable_effect(0.04, 100, alpha=0.01) == pytest.approx(
        (2.575829 + 0.841621) * 0.02, abs=1e-5
    )
    assert min_detectable_effect(0.2, 0, alpha=0.05) is None


def test_cases_to_detect_by_hand() -> None:
    from agentv.results.stats import cases_to_detect

    # a drop of 0.05 with null variance 0.2: 7.848879 * 0.2 / 0.0025 = 627.91 -> 628
    assert cases_to_detect(0.05, 0.2, alpha=0.05, step=1.0) == 628
    # no change seen: a drop of 0.05 needs at least that much variance (0.05 * 1):
    # 7.848879 * 0.05 / 0.0025 = 156.98 -> 157
    assert cases_to_detect(0.05, 0.0, alpha=0.05, step=1.0) == 157
    # scores with variance 0.01: 7.848879 * 0.01 / 0.0025 = 31.4 -> 32
    assert cases_to_detect(0.05, 0.01, alpha=0.05) == 32
    with pytest.raises(ValueError):
        cases_to_detect(0.0, 0.2, alpha=0.05)
