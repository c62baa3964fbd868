"""Each estimator against values computed by hand."""

from __future__ import annotations

import math

import pytest

from agentv.stats import (
    bootstrap_ci,
    case_stats,
    mean,
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
