"""End-of-run statistics and their printed form, against hand-computed values."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from agentv.cli.summary import render_summary
from agentv.summary import SummaryCollector


def _collect(*scores: float) -> SummaryCollector:
    collector = SummaryCollector()
    for i, score in enumerate(scores):
        collector.add(f"case-{i}", score)
    return collector


def test_statistics_odd_count() -> None:
    s = _collect(0.2, 0.8, 1.0, 0.0, 0.5).summary()
    assert s.total == 5 and s.errors == 0 and s.passed == 5
    assert s.mean == pytest.approx(0.5)
    assert s.median == 0.5
    assert (s.min, s.max) == (0.0, 1.0)
    # deviations -0.3 0.3 0.5 -0.5 0 -> squares sum 0.68; / (5 - 1) = 0.17
    assert s.std_dev == pytest.approx(math.sqrt(0.17))


def test_median_of_an_even_count_averages_the_middle_two() -> None:
    assert _collect(1.0, 0.0, 0.25, 0.5).summary().median == pytest.approx(0.375)


def test_std_dev_needs_two_results() -> None:
    assert _collect(0.7).summary().std_dev is None
    assert _collect(0.0, 1.0).summary().std_dev == pytest.approx(math.sqrt(0.5))


def test_histogram_puts_boundaries_in_the_lower_bin() -> None:
    s = _collect(0.0, 0.2, 0.2000001, 0.4, 0.59, 0.6, 0.8, 0.81, 1.0).summary()
    assert [(b.label, b.count) for b in s.histogram] == [
        ("0.0-0.2", 2),  # 0.0, 0.2
        ("0.2-0.4", 2),  # 0.2000001, 0.4
        ("0.4-0.6", 2),  # 0.59, 0.6
        ("0.6-0.8", 1),  # 0.8
        ("0.8-1.0", 2),  # 0.81, 1.0
    ]


def test_out_of_range_scores_are_clamped() -> None:
    s = _collect(-0.5, 1.5, float("nan")).summary()
    assert (s.min, s.max) == (0.0, 1.0)
    assert sum(b.count for b in s.histogram) == 3


def test_top_and_bottom_ties_by_eval_id() -> None:
    collector = SummaryCollector()
    for eval_id, score in [("c", 1.0), ("f", 0.0), ("a", 1.0), ("d", 0.5), ("e", 0.0), ("b", 1.0)]:
        collector.add(eval_id, score)
    s = collector.summary()
    # Descending by score, ties by id: a b c d e f
    assert s.top == (("a", 1.0), ("b", 1.0), ("c", 1.0))
    # Lowest first, ties by id: e f d
    assert s.bottom == (("e", 0.0), ("f", 0.0), ("d", 0.5))


def test_few_results_appear_in_both_lists() -> None:
    s = _collect(0.3, 0.9).summary()
    assert s.top == (("case-1", 0.9), ("case-0", 0.3))
    assert s.bottom == tuple(reversed(s.top))


def test_errors_judge_failures_and_slowest() -> None:
    collector = SummaryCollector()
    collector.add("ok", 1.0, duration_s=1.5)
    collector.add("broken", 0.0, error="provider said no", duration_s=0.1)
    collector.add("judged", 0.0, judge_failed=True, duration_s=9.0)
    collector.add("untimed", 0.5)
    for i in range(5):
        collector.add(f"fast-{i}", 1.0, duration_s=0.01 * (i + 1))
    s = collector.summary()
    assert (s.total, s.errors, s.passed, s.judge_failures) == (9, 1, 8, 1)
    assert s.error_details == (("broken", "provider said no"),)
    assert [eid for eid, _ in s.slowest] == ["judged", "ok", "broken", "fast-4", "fast-3"]
    assert s.slowest[0] == ("judged", 9.0)


def test_empty_summary() -> None:
    s = SummaryCollector().summary()
    assert s.total == 0 and s.mean is None and s.histogram == ()
    assert render_summary(s, results_path=Path("r.jsonl")) == "\nNo results to summarize"


def test_render_full_text() -> None:
    collector = SummaryCollector()
    collector.add("alpha", 1.0, duration_s=2.0)
    collector.add("beta", 0.5, duration_s=4.25)
    collector.add("gamma", 0.0, error="Timed out\nafter 3 tries", duration_s=0.5)
    collector.add("delta", 0.25, judge_failed=True)
    text = render_summary(
        collector.summary(), results_path=Path("out/r.jsonl"), prompts_dir=Path("dumps")
    )
    rule = "=" * 50
    expected = f"""
{rule}
ERRORS
{rule}

❌ gamma
   Timed out
   after 3 tries


{rule}
EVALUATION SUMMARY
{rule}
Total eval cases: 4
Failed: 1
Passed: 3
Judge failures: 1
Mean score: 0.438
Median score: 0.375
Min score: 0.000
Max score: 1.000
Std deviation: 0.427

Score distribution:
  0.0-0.2: 1
  0.2-0.4: 1
  0.4-0.6: 1
  0.6-0.8: 0
  0.8-1.0: 1

Top performing eval cases:
  1. alpha: 1.000
  2. beta: 0.500
  3. delta: 0.250

Lowest performing eval cases:
  1. gamma: 0.000
  2. delta: 0.250
  3. beta: 0.500

Slowest eval cases:
  1. beta: 4.25s
  2. alpha: 2.00s
  3. gamma: 0.50s

Results written to: {Path("out/r.jsonl")}
Prompt payloads saved to: {Path("dumps")}"""
    assert text == expected


def test_render_without_errors_or_timings_omits_those_blocks() -> None:
    text = render_summary(_collect(0.5).summary(), results_path=None)
    assert "ERRORS" not in text and "Failed:" not in text and "Passed:" not in text
    assert "Std deviation" not in text and "Slowest" not in text and "Results written" not in text
    assert text.startswith("\n" + "=" * 50 + "\nEVALUATION SUMMARY\n")
    assert "Total eval cases: 1\nMean score: 0.500\n" in text


def test_a_hundred_thousand_cases_stay_cheap() -> None:
    collector = SummaryCollector()
    n = 100_000
    for i in range(n):
        collector.add(f"case-{i:06d}", (i % 1000) / 999, duration_s=i * 1e-4)
    s = collector.summary()
    assert s.total == n and sum(b.count for b in s.histogram) == n
    assert s.max == 1.0 and s.min == 0.0
    assert s.mean == pytest.approx(0.5)
    assert s.top[0] == ("case-000999", 1.0)  # the lowest id among the perfect scores
    assert s.bottom[0] == ("case-000000", 0.0)  # the lowest id among the zeros
    assert s.slowest[0][0] == "case-099999"
