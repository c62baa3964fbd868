"""End-of-run statistics and their printed form, against hand-computed values."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from agentv.cli.progress import status_line
from agentv.cli.summary import RunFacts, render_summary
from agentv.evaluators.base import CaseGrade, EvaluatorScore
from agentv.providers.base import Usage
from agentv.results.summary import SummaryCollector, Tokens, natural_key
from support.results import record_collector


def record(
    eval_id: str,
    score: float,
    status: str | None = None,
    *,
    error: str | None = None,
    duration_s: float | None = None,
    target: str = "t",
    usage: dict[str, int] | None = None,
) -> dict[str, Any]:
    """A result record with what the collector reads (status by score at 0.8 unless given)."""
    rec: dict[str, Any] = {"eval_id": eval_id, "score": score, "target": target}
    rec["status"] = status or ("ok" if score >= 0.8 else "failed")
    if error is not None:
        rec["error"] = error
    if duration_s is not None:
        rec["duration_ms"] = duration_s * 1000
    if usage is not None:
        rec["usage"] = usage
    return rec


def _collect(*scores: float) -> SummaryCollector:
    collector = record_collector()
    for i, score in enumerate(scores):
        collector.add(record(f"case-{i}", score))
    return collector


def _grade(
    *entries: tuple[str, str | None], judge_failed: bool = False, usage: Usage | None = None
) -> CaseGrade:
    """A graded case's evaluator entries (judges when ``judge_failed``; ``usage`` is the
    first entry's tokens)."""
    kind = "llm_judge" if judge_failed else "regex"
    scores = [EvaluatorScore(name, kind, 0.0, [], [], error=err) for name, err in entries]
    if scores:
        scores[0].usage = usage
    return CaseGrade(0.0, [], [], None, 1, scores, None, judge_failed, usage=usage)


def test_statistics_odd_count() -> None:
    s = _collect(0.2, 0.8, 1.0, 0.0, 0.5).summary()
    assert (s.total, s.ok, s.failed, s.errors, s.invalid) == (5, 2, 3, 0, 0)
    assert s.passed == 2 and s.pass_rate == pytest.approx(0.4)
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


def test_ids_sort_naturally() -> None:
    assert sorted(["c10", "c2", "C1", "c1b", "c"], key=natural_key) == [
        "c",
        "C1",
        "c1b",
        "c2",
        "c10",
    ]
    # one number against several: the text after the number counts before the next number
    assert sorted(["c1b2", "c1", "c1a10", "c1a9"], key=natural_key) == [
        "c1",
        "c1a9",
        "c1a10",
        "c1b2",
    ]


def test_top_and_bottom_ties_by_natural_eval_id() -> None:
    collector = record_collector()
    for eval_id, score in [("c10", 1.0), ("c2", 0.0), ("c1", 1.0), ("c3", 0.5), ("c11", 0.0)]:
        collector.add(record(eval_id, score))
    for eval_id in ("x1", "x2"):
        collector.add(record(eval_id, 0.75))
    s = collector.summary()
    assert s.top == (("c1", 1.0), ("c10", 1.0), ("x1", 0.75))  # c10 after c1, not c2
    assert s.bottom == (("c2", 0.0), ("c11", 0.0), ("c3", 0.5))  # c2 before c11


def test_every_score_equal_lists_the_first_ids_both_ways() -> None:
    collector = record_collector()
    for eval_id in ("c10", "c9", "b2", "c1", "a10", "a9", "a1x"):
        collector.add(record(eval_id, 0.5))
    s = collector.summary()
    assert s.top == (("a1x", 0.5), ("a9", 0.5), ("a10", 0.5))
    assert s.bottom == s.top


def test_a_small_suite_is_listed_once() -> None:
    s = _collect(0.3, 0.9, 0.5).summary()
    assert s.top == (("case-1", 0.9), ("case-2", 0.5), ("case-0", 0.3))
    assert s.bottom == ()


def test_statuses_errors_evaluators_judges_tokens_and_slowest() -> None:
    collector = record_collector()
    usage = {"input_tokens": 100, "output_tokens": 20, "total_tokens": 120}
    collector.add(record("ok", 1.0, duration_s=1.5, usage=usage, target="gpt"))
    collector.add(record("broken", 0.0, "error", error="provider said no", duration_s=0.1))
    judged = _grade(("judge", "no verdict"), judge_failed=True, usage=Usage(7, 3, 10))
    collector.add(
        record("judged", 0.0, "error", error="evaluator 'judge' ...", duration_s=9.0), judged
    )
    collector.add(
        record("bad-regex", 0.5, "error", error="..."), _grade(("rx", "bad"), ("ok", None))
    )
    collector.add(
        {
            "dataset": "d",
            "status": "invalid",
            "score": 0.0,
            "error": "unknown key",
            "eval_file": "e.yaml",
            "line": 7,
        }
    )
    for i in range(5):
        collector.add(
            record(f"fast-{i}", 1.0, duration_s=0.01 * (i + 1), usage=usage, target="claude")
        )
    s = collector.summary()
    assert (s.total, s.ok, s.failed, s.errors, s.invalid) == (10, 6, 0, 3, 1)
    assert s.judge_failures == 1
    assert s.evaluator_errors == (("judge", 1), ("rx", 1))
    assert s.error_details == (
        ("bad-regex", "error", "..."),
        ("broken", "error", "provider said no"),
        ("e.yaml:7", "invalid", "unknown key"),
        ("judged", "error", "evaluator 'judge' ..."),
    )
    assert s.tokens == (("gpt", Tokens(100, 20)), ("claude", Tokens(500, 100)))
    assert s.judge_tokens == Tokens(7, 3)
    assert [eid for eid, _ in s.slowest] == ["judged", "ok", "broken", "fast-4", "fast-3"]
    assert s.slowest[0] == ("judged", 9.0)


def test_slowest_leaves_out_unknown_durations_and_ties_by_natural_id() -> None:
    collector = record_collector()
    collector.add(record("c10", 1.0, duration_s=2.0))
    collector.add(record("untimed", 1.0))
    collector.add(record("c9", 1.0, duration_s=2.0))
    collector.add(record("c1", 1.0, duration_s=0.5))
    # fewer timed cases than places: every timed one, the unknown one left out
    assert collector.summary().slowest == (("c9", 2.0), ("c10", 2.0), ("c1", 0.5))
    for i in range(20):
        collector.add(record(f"z{i}", 1.0, duration_s=2.0))
    # more ties at the top than places: the first ids in natural order
    assert [eid for eid, _ in collector.summary().slowest] == ["c9", "c10", "z0", "z1", "z2"]


def test_empty_summary() -> None:
    s = record_collector().summary()
    assert s.total == 0 and s.mean is None and s.histogram == ()
    assert render_summary(s, results_path=Path("r.jsonl")) == "\nNo results to summarize"


def test_render_full_text_at_80_columns() -> None:
    collector = record_collector()
    usage = {"input_tokens": 1200, "output_tokens": 340}
    collector.add(record("c1", 1.0, duration_s=2.0, usage=usage, target="gpt"))
    collector.add(record("c10", 0.5, duration_s=4.25, usage=usage, target="gpt"))
    collector.add(
        record("c2", 0.0, "error", error="Timed out\nafter 3 tries", duration_s=0.5, target="gpt")
    )
    collector.add(
        record(
            "c3",
            0.25,
            "error",
            error="evaluator 'judge' could not grade: empty reply",
            target="gpt",
        ),
        _grade(("judge", "empty reply"), judge_failed=True, usage=Usage(50, 5, 55)),
    )
    facts = RunFacts(
        pass_threshold=0.8,
        retries={"gpt": {429: 12, 500: 2}},
        cache_hits=3,
        judge_cache_hits=1,
        requests=2,
        wall_seconds=75.4,
    )
    text = render_summary(
        collector.summary(),
        results_path=Path("out/r.jsonl"),
        prompts_dir=Path("dumps"),
        facts=facts,
    )
    rule = "=" * 50
    expected = f"""
{rule}
ERRORS
{rule}

❌ c2 [error]
   Timed out
   after 3 tries

❌ c3 [error]
   evaluator 'judge' could not grade: empty reply


{rule}
EVALUATION SUMMARY
{rule}
Total eval cases: 4
Passed: 1  Failed: 1  Errors: 2  Invalid: 0
Pass rate: 50.0% (1 of 2 graded runs; 2 not graded, pass threshold 0.80)
Evaluator errors: judge x1
Judge failures: 1
Mean score: 0.750 (over 2 graded runs)
Median score: 0.750
Min score: 0.500
Max score: 1.000
Std deviation: 0.354

Score distribution:
  0.0-0.2: 0
  0.2-0.4: 0
  0.4-0.6: 1
  0.6-0.8: 0
  0.8-1.0: 1

Eval cases by score:
  1. c1: 1.000
  2. c10: 0.500

Slowest eval cases:
  1. c10: 4.25s
  2. c1: 2.00s
  3. c2: 0.50s

Tokens:
  gpt: in 2,400 / out 680
  judges: in 50 / out 5
Retries:
  gpt: 14 (429 x12, HTTP 500 x2)
Cache: 3 target answers and 1 judge answer reused, 2 target requests sent
Wall time: 0:01:15

Results written to: {Path("out/r.jsonl")}
Prompt payloads saved to: {Path("dumps")}"""
    assert text == expected
    assert max(len(line) for line in text.splitlines()) <= 80


def test_render_of_a_clean_run_omits_the_error_blocks() -> None:
    text = render_summary(_collect(0.5).summary(), results_path=None)
    assert "ERRORS" not in text and "Evaluator errors" not in text
    assert "Std deviation" not in text and "Slowest" not in text and "Results written" not in text
    assert text.startswith("\n" + "=" * 50 + "\nEVALUATION SUMMARY\n")
    assert "Total eval cases: 1\nPassed: 0  Failed: 1  Errors: 0  Invalid: 0\n" in text


def test_dry_run_says_so() -> None:
    text = render_summary(_collect(1.0).summary(), results_path=None, facts=RunFacts(dry_run=True))
    assert "EVALUATION SUMMARY (dry run: no target or judge was called)" in text


def test_progress_status_line_fits_80_columns() -> None:
    line = status_line(80, 123, 400, (100, 20, 3), mean=0.712, elapsed=73, eta="0:02:10")
    assert line == (
        "[####-----------] 123/400 30% ✓100 ✗20 !3 mean 0.712 elapsed 0:01:13 ETA 0:02:10"
    )
    assert len(line) <= 80
    # narrower: the least useful parts go first, the counts stay
    assert status_line(40, 123, 400, (100, 20, 3), mean=0.7, elapsed=73, eta="0:02:10") == (
        "[####----------] 123/400 30% ✓100 ✗20 !3"
    )
    wide = status_line(120, 0, 10, (0, 0, 0), elapsed=0, eta="--:--")
    assert wide.startswith("Running evals [") and wide.endswith("ETA --:--")


def test_a_hundred_thousand_cases_stay_cheap() -> None:
    collector = record_collector()
    n = 100_000
    for i in range(n):
        collector.add(record(f"case-{i:06d}", (i % 1000) / 999, duration_s=i * 1e-4))
    s = collector.summary()
    assert s.total == n and sum(b.count for b in s.histogram) == n
    assert s.max == 1.0 and s.min == 0.0
    assert s.mean == pytest.approx(0.5)
    assert s.top[0] == ("case-000999", 1.0)  # the lowest id among the perfect scores
    assert s.bottom[0] == ("case-000000", 0.0)  # the lowest id among the zeros
    assert s.slowest[0][0] == "case-099999"


def test_runs_are_told_from_cases_and_named_by_target_and_repeat() -> None:
    collector = record_collector()
    for target in ("gpt", "claude"):
        for repeat in range(3):
            for case, secs in (("a", 1.0), ("b", 2.0 + repeat)):
                rec = record(case, 1.0, duration_s=secs if target == "gpt" else 0.5, target=target)
                rec["repeat"] = repeat
                collector.add(rec)
    s = collector.summary()
    assert (s.total, s.cases) == (12, 2)
    # the same id three times over: the slowest say which run each is
    assert [eid for eid, _ in s.slowest] == [
        "b [gpt, #3]",
        "b [gpt, #2]",
        "b [gpt, #1]",
        "a [gpt, #1]",
        "a [gpt, #2]",
    ]
    text = render_summary(s, results_path=None)
    assert "\nRuns: 12 of 2 eval cases (2 targets x 3 repeats)\n" in text
    assert "\nPass rate: 100.0% (12 of 12 runs)\n" in text
    assert "Total eval cases" not in text


def test_a_run_with_nothing_graded_shows_no_score_statistics() -> None:
    collector = record_collector()
    collector.add(
        {"eval_id": "x", "status": "invalid", "score": 0.0, "error": "bad", "duration_ms": 0}
    )
    collector.add(record("y", 0.0, "error", error="HTTP 500", duration_s=1.25))
    s = collector.summary()
    assert (s.mean, s.median, s.min, s.max, s.std_dev) == (None,) * 5
    assert s.histogram == () and s.top == () and s.bottom == ()
    assert s.slowest == (("y", 1.25),)  # the invalid case took no time: not listed
    text = render_summary(s, results_path=None)
    assert "Scores: none (no run was graded: every run errored or was invalid)" in text
    for gone in ("Mean score", "Median", "Score distribution", "by score", "0.00s"):
        assert gone not in text


def test_a_record_read_as_it_is_sums_up_as_its_model() -> None:
    """The run hands the summary each record as it made it (``add_record``, no model
    built): every figure equals the one of the same records as ``EvalResult`` models,
    absent fields included (their defaults)."""
    from agentv.results.record import EvalResult

    records = [
        {
            **record("a", 1.0, duration_s=1.5, usage={"input_tokens": 10, "output_tokens": 2}),
            "timestamp": "2025-06-01T10:00:02.000Z",
            "dataset": "weather",
            "trajectory": [{"name": "f", "arguments": {}}, {"name": "g", "arguments": {}}],
        },
        {**record("b", 0.25, target="u", duration_s=0.5), "timestamp": "2025-06-01T10:00:01Z"},
        {"eval_id": 7, "score": 1, "status": "ok", "dataset": "numbers"},  # an id as a number
        {"eval_id": "old", "score": 0.5},  # the original AgentV's: no status
        {"eval_id": "older", "error": "the target failed"},
        record("c", 0.0, "error", error="the target failed"),
        {"eval_id": None, "eval_file": "e.yaml", "line": 7, "status": "invalid", "error": "x"},
        {"eval_id": "d", "status": "skipped", "skip_reason": "budget", "target": "t"},
        {
            **record("live", 0.5, "failed", duration_s=2.0),
            "repeat": 1,
            "latency_ms": 120.0,
            "cached": True,
            "turns": [
                {"turn": 1, "status": "ok", "score": 1.0, "tool_calls": [{"name": "f"}]},
                {"turn": 2, "status": "failed", "score": 0.0},
                {"turn": 3, "status": "error"},
            ],
            "stopped": {"turn": 2, "reason": "turn 2 failed"},
            "user": {"ended": "goal", "usage": {"input_tokens": 3, "output_tokens": 1}},
            "cost": {"target": {"usd": 0.5}, "judge": {"usd": 0.25, "reused_usd": 0.1}},
            "evaluator_results": [
                {"name": "j", "type": "llm_judge", "score": 0.5, "error": "no verdict"}
            ],
            "failed_required": ["j"],
        },
    ]
    read, built = SummaryCollector(), SummaryCollector()
    for rec in records:
        read.add_record(rec)
        built.add(EvalResult.model_validate(rec))
    assert read.summary() == built.summary()
    summary = read.summary()
    assert summary.turns is not None and summary.total == len(records)
    assert summary.time.started == summary.time.ended - 1.5  # a ran 1.5 s, ending last
    assert summary.trajectory_calls == 2 and summary.statuses[:3] == (
        ("ok", 3),
        ("failed", 2),
        ("error", 2),
    )
    assert [d.name for d in summary.datasets] == ["weather", "", "numbers"]


def test_the_time_span_of_records_written_at_any_time() -> None:
    """Timestamps without a zone are UTC; one that is not a time is left out; a span that
    starts before year 1 has no start date (its length is still known); a duration that is
    not finite is unknown. The JSON stays valid JSON."""
    import json

    collector = SummaryCollector()
    collector.add_record(
        {"eval_id": "a", "status": "ok", "score": 1.0, "timestamp": "2025-06-01T10:00:00.500"}
    )
    collector.add_record(
        {"eval_id": "b", "status": "ok", "score": 1.0, "timestamp": "2025-06-01T10:00:03Z"}
        | {"duration_ms": 4000}
    )
    collector.add_record({"eval_id": "c", "status": "ok", "score": 1.0, "timestamp": "soon"})
    collector.add_record({"eval_id": "d", "status": "error", "duration_ms": float("inf")})
    time = collector.summary().to_dict()["time"]
    assert time == {
        "started": "2025-06-01T09:59:59.000Z",  # b's: 4 s before it was written
        "ended": "2025-06-01T10:00:03.000Z",
        "wall_seconds": 4.0,
        "case_seconds": 4.0,
    }
    early = SummaryCollector()
    early.add_record(
        {"eval_id": "e", "status": "ok", "score": 1.0, "timestamp": "0001-01-01T00:00:01Z"}
        | {"duration_ms": 2000}
    )
    data = early.summary().to_dict()
    assert data["time"] == {
        "started": None,
        "ended": "0001-01-01T00:00:01.000Z",
        "wall_seconds": 2.0,
        "case_seconds": 2.0,
    }
    json.dumps(data, allow_nan=False)
