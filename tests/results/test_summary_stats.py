"""The summary's figures and its ERRORS block in full: an empty, a missing and a multi-line
error message; exact statistics (no approximations where the value is exact); every
field of ``Summary`` compared whole."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from agentv.cli.summary import render_summary
from agentv.evaluators.base import CaseGrade, EvaluatorScore
from agentv.providers.base import Usage
from agentv.results import stats
from agentv.results.summary import (
    DatasetCounts,
    EvaluatorStats,
    HistogramBin,
    Summary,
    TargetSummary,
    Timing,
    Tokens,
    natural_key,
)
from support.results import record_collector


def rec(eval_id: str | None, score: float, status: str, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"score": score, "status": status, **extra}
    if eval_id is not None:
        out["eval_id"] = eval_id
    return out


def errors_block(summary: Summary) -> str:
    text = render_summary(summary, results_path=None)
    return text[: text.index("\n\n" + "=" * 50 + "\nEVALUATION SUMMARY")]


def test_empty_missing_and_multi_line_error_messages() -> None:
    collector = record_collector()
    collector.add(rec("empty", 0.0, "error", error=""))
    collector.add(rec("missing", 0.0, "invalid"))
    collector.add(rec("none", 0.0, "error", error=None))
    collector.add(rec("lines", 0.0, "error", error="\nfirst line\n\n  indented\nlast\n\n"))
    collector.add(rec("ok", 1.0, "ok", error="ignored: the case passed"))
    s = collector.summary()
    assert s.error_details == (
        ("empty", "error", ""),
        ("lines", "error", "\nfirst line\n\n  indented\nlast\n\n"),
        ("missing", "invalid", ""),
        ("none", "error", ""),
    )
    rule = "=" * 50
    assert errors_block(s) == "\n".join(
        [
            "",
            rule,
            "ERRORS",
            rule,
            "",
            "❌ empty [error]",
            "",
            "",
            "❌ lines [error]",
            "   first line",
            "",
            "     indented",
            "   last",
            "",
            "❌ missing [invalid]",
            "",
            "",
            "❌ none [error]",
            "",
            "",
        ]
    )


def test_a_message_of_only_spaces_prints_no_line_of_spaces() -> None:
    collector = record_collector()
    collector.add(rec("blank", 0.0, "error", error="   "))
    collector.add(rec("tabs", 0.0, "error", error=" \t\n  \n"))
    collector.add(rec("padded", 0.0, "invalid", error="  \n  first  \n \n  second\t\n   "))
    rule = "=" * 50
    assert errors_block(collector.summary()) == "\n".join(
        [
            "",
            rule,
            "ERRORS",
            rule,
            "",
            "❌ blank [error]",
            "",
            "",
            "❌ padded [invalid]",
            "     first",
            "",
            "     second",
            "",
            "❌ tabs [error]",
            "",
            "",
        ]
    )


def test_every_field_of_a_summary() -> None:
    collector = record_collector()
    judged = CaseGrade(
        0.5,
        [],
        [],
        None,
        1,
        [
            EvaluatorScore(
                "quality", "llm_judge", 0.0, [], [], error="no verdict", usage=Usage(7, None, 10)
            ),
            EvaluatorScore("shape", "regex", 1.0, [], []),
        ],
        None,
        True,
        usage=Usage(7, None, 10),
    )
    plain = CaseGrade(1.0, [], [], None, 1, None, None, False, usage=None)
    collector.add(rec("c10", 1.0, "ok", duration_ms=2500, target="a"), plain)
    collector.add(
        rec("c2", 0.5, "failed", duration_ms=100, target="a", usage={"input_tokens": 3}), judged
    )
    collector.add(rec("c1", 0.25, "failed", target="a", usage={"output_tokens": 4}))
    collector.add(rec(None, 0.0, "invalid", eval_file="e.yaml", line=3, error="bad", target="a"))
    collector.add(rec(None, 0.0, "invalid", error="worse", target="a"))
    collector.add(
        rec(
            "c3",
            0.75,
            "error",
            duration_ms=0,
            error="judge down",
            target="a",
            usage={"input_tokens": 1, "output_tokens": 2},
        ),
        # the default judge (no evaluator list), as grading records it
        CaseGrade(
            0.75,
            [],
            [],
            None,
            1,
            None,
            EvaluatorScore(
                "llm_judge", "llm_judge", 0.0, [], [], error="judge down", usage=Usage(1, 1)
            ).call_record(),
            True,
            error="judge down",
        ),
    )
    collector.add(rec("c4", 1.0, "ok", duration_ms=None, target="a", usage={}))
    assert len(collector) == 7
    s = collector.summary()
    scores = [1.0, 0.5, 0.25, 1.0]  # the graded runs only: errors are not scores
    mean = sum(scores) / 4
    assert s == Summary(
        total=7,
        ok=2,
        failed=2,
        errors=1,
        invalid=2,
        judge_failures=2,
        evaluator_errors=(("llm_judge", 1), ("quality", 1)),
        mean=mean,
        median=0.75,
        min=0.25,
        max=1.0,
        std_dev=math.sqrt(sum((x - mean) ** 2 for x in scores) / 3),
        histogram=(
            HistogramBin(0.0, 0.2, 0),
            HistogramBin(0.2, 0.4, 1),
            HistogramBin(0.4, 0.6, 1),
            HistogramBin(0.6, 0.8, 0),
            HistogramBin(0.8, 1.0, 2),
        ),
        top=(("c4", 1.0), ("c10", 1.0), ("c2", 0.5), ("c1", 0.25)),
        bottom=(),
        cases=7,
        slowest=(("c10", 2.5), ("c2", 0.1)),  # c3 took no time: not one of the slowest
        error_details=(
            ("?:?", "invalid", "worse"),
            ("c3", "error", "judge down"),
            ("e.yaml:3", "invalid", "bad"),
        ),
        tokens=(("a", Tokens(4, 6)),),
        judge_tokens=Tokens(8, 1),
        targets=(
            TargetSummary(
                name="a",
                cases=7,
                runs=7,
                mean=mean,
                std_error=math.sqrt(sum((x - mean) ** 2 for x in scores) / 3) / math.sqrt(4),
                ci=stats.mean_ci(scores),  # seeded bootstrap (tests/results/test_stats.py)
                pass_rate=2 / 4,
                ok=2,
                failed=2,
                errors=1,
                invalid=2,
                tokens=Tokens(4, 6),
                latency_median_ms=None,
                latency_p95_ms=None,
                pass_at=(2 / 4,),
                pass_all=(2 / 4,),
                flaky=(),
            ),
        ),
        repeats=1,
        case_stats=(),
        case_table=tuple(
            (case, (score,))
            for case, score in [
                ("?:?", None),  # never graded
                ("c1", 0.25),
                ("c2", 0.5),
                ("c3", None),
                ("c4", 1.0),
                ("c10", 1.0),
                ("e.yaml:3", None),
            ]
        ),
        required_failures=0,
        # the list's evaluators that graded (`quality` could not): no settings of their own
        evaluators=(
            EvaluatorStats(
                name="shape",
                type="regex",
                runs=1,
                mean=1.0,
                weight=1.0,
                required=False,
                threshold=None,
                passed=0,
                judged=0,
                failed_cases=0,
            ),
        ),
        statuses=(("ok", 2), ("failed", 2), ("error", 1), ("invalid", 2)),
        # no record says when it was written; the durations known: 2.5 s, 0.1 s and 0 s
        time=Timing(started=None, ended=None, case_seconds=2.5 + 0.1),
        datasets=(
            DatasetCounts(name="", runs=7, ok=2, failed=2, errors=1, invalid=2, seconds=2.6),
        ),
    )
    assert (s.passed, s.graded, s.pass_rate) == (2, 4, 2 / 4)
    assert s.time.wall_seconds is None and s.trajectory_calls == 0
    assert not s.weighted


def test_summary_of_nothing_and_of_one() -> None:
    assert record_collector().summary() == Summary(total=0)
    assert Summary(total=0).pass_rate is None
    one = record_collector()
    one.add(rec("only", 0.3, "failed"))
    s = one.summary()
    assert (s.mean, s.median, s.min, s.max, s.std_dev) == (0.3, 0.3, 0.3, 0.3, None)
    assert (s.top, s.bottom, s.slowest, s.tokens, s.judge_tokens) == (
        (("only", 0.3),),
        (),
        (),
        (),
        None,
    )
    assert s.pass_rate == 0.0


def test_median_of_even_and_odd_counts_exact() -> None:
    for scores, median in (([0.5, 0.0, 1.0, 0.25], 0.375), ([0.75, 0.25, 0.5], 0.5)):
        c = record_collector()
        for i, score in enumerate(scores):
            c.add(rec(f"c{i}", score, "ok"))
        assert c.summary().median == median


def test_scores_clamped_to_zero_and_one() -> None:
    c = record_collector()
    for i, score in enumerate([-0.5, 1.5, math.nan, 0.0, 1.0]):
        c.add(rec(f"c{i}", score, "failed"))
    c.add({"eval_id": "no-score", "status": "error"})  # not graded: no score at all
    s = c.summary()
    assert s.top == (
        ("c1", 1.0),
        ("c4", 1.0),
        ("c0", 0.0),
        ("c2", 0.0),
        ("c3", 0.0),
    )
    assert (s.min, s.max, s.mean) == (0.0, 1.0, 2 / 5)


def test_histogram_bin_edges_exact() -> None:
    c = record_collector()
    for i, score in enumerate([0.2, 0.2 + 2e-9, 0.4, 0.6, 0.6 + 2e-9, 0.8, 0.8 + 2e-9, 1.0]):
        c.add(rec(f"c{i}", score, "ok"))
    assert [(b.label, b.count) for b in c.summary().histogram] == [
        ("0.0-0.2", 1),  # 0.2
        ("0.2-0.4", 2),  # just above 0.2, 0.4
        ("0.4-0.6", 1),  # 0.6
        ("0.6-0.8", 2),  # just above 0.6, 0.8
        ("0.8-1.0", 2),  # just above 0.8, 1.0
    ]


def test_top_and_bottom_lists_at_the_size_limits() -> None:
    six = record_collector()
    for i in range(6):
        six.add(rec(f"c{i}", i / 10, "failed"))
    s = six.summary()
    assert [eid for eid, _ in s.top] == ["c5", "c4", "c3", "c2", "c1", "c0"]
    assert s.bottom == ()
    seven = record_collector()
    for i in range(7):
        seven.add(rec(f"c{i}", i / 10, "failed"))
    s = seven.summary()
    assert [eid for eid, _ in s.top] == ["c6", "c5", "c4"]
    assert [eid for eid, _ in s.bottom] == ["c0", "c1", "c2"]


def test_slowest_five_ties_by_id_and_unknown_durations_left_out() -> None:
    c = record_collector()
    for i, ms in enumerate([100, 300, 300, None, 50, 200, 10, 400]):
        c.add(rec(f"c{i}", 1.0, "ok", duration_ms=ms))
    assert c.summary().slowest == (
        ("c7", 0.4),
        ("c1", 0.3),
        ("c2", 0.3),
        ("c5", 0.2),
        ("c0", 0.1),
    )


def test_evaluator_errors_most_first_then_by_name() -> None:
    c = record_collector()

    def grade(*names: str) -> CaseGrade:
        entries = [EvaluatorScore(n, "regex", 0.0, [], [], error="x") for n in names]
        return CaseGrade(0.0, [], [], None, 1, entries, None, False)

    c.add(rec("a", 0.0, "error"), grade("rx10", "rx2"))
    c.add(rec("b", 0.0, "error"), grade("rx2", "zed"))
    c.add(rec("c", 0.0, "error"), grade("zed", "Alpha"))
    assert c.summary().evaluator_errors == (
        ("rx2", 2),
        ("zed", 2),
        ("Alpha", 1),
        ("rx10", 1),
    )


def test_natural_key_in_full() -> None:
    assert natural_key("Case10b2") == ((1, "case"), (0, 10), (1, "b"), (0, 2), (1, ""))
    assert natural_key("") == ((1, ""),)
    assert sorted(["b", "A", "a10", "a9", "a09x"], key=natural_key) == [
        "A",
        "a9",
        "a09x",
        "a10",
        "b",
    ]


def test_histogram_labels() -> None:
    assert HistogramBin(0.0, 0.2, 5).label == "0.0-0.2"
    assert HistogramBin(0.8, 1.0, 0).label == "0.8-1.0"


def test_render_with_an_empty_error_keeps_the_layout(tmp_path: Path) -> None:
    c = record_collector()
    c.add(rec("x", 0.0, "invalid", error=""))
    text = render_summary(c.summary(), results_path=tmp_path / "r.jsonl")
    assert text.startswith("\n" + "=" * 50 + "\nERRORS\n" + "=" * 50 + "\n\n❌ x [invalid]\n\n\n")
    assert text.endswith(f"Results written to: {tmp_path / 'r.jsonl'}")


def test_judge_failures_are_counted_and_errors_listed_in_natural_id_order() -> None:
    c = record_collector()
    verdict = EvaluatorScore("llm_judge", "llm_judge", 0.0, [], [], error="no verdict")
    failed_judge = CaseGrade(
        0.0, [], [], None, 1, None, verdict.call_record(), True, error="no verdict"
    )
    for eval_id in ("c10", "c2", "c1"):
        c.add(rec(eval_id, 0.0, "error", error=f"{eval_id} broke"), failed_judge)
    s = c.summary()
    assert (s.judge_failures, s.evaluator_errors) == (3, (("llm_judge", 3),))
    assert s.error_details == (
        ("c1", "error", "c1 broke"),
        ("c2", "error", "c2 broke"),
        ("c10", "error", "c10 broke"),
    )


def test_negative_zero_counts_as_zero() -> None:
    c = record_collector()
    c.add(rec("z", -0.0, "failed"))
    s = c.summary()
    assert math.copysign(1.0, s.min) == 1.0 and s.top == (("z", 0.0),)
    assert "Min score: 0.000" in render_summary(s, results_path=None)
