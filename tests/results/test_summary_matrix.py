"""The summary of a target matrix and of repeats (``--target A --target B``, ``--repeat N``):
each target's figures, each case's repeats, the case table and the ``--summary-json``
data, compared whole against values computed by hand.

Scores are binary fractions (0, 0.25, 0.5, 1) so that means are exact; where a value is
not (a third, a square root), the expected value is written as the same operations on
the same numbers, so that it is still compared with ``==``.
"""

from __future__ import annotations

import math
from typing import Any

from agentv.evaluators.base import CaseGrade, EvaluatorScore
from agentv.providers.base import Usage
from agentv.results import stats
from agentv.results.summary import (
    CASE_TABLE_MAX,
    DatasetCounts,
    EvaluatorStats,
    HistogramBin,
    Summary,
    TargetSummary,
    Timing,
    Tokens,
    summary_dict,
)
from support.results import record_collector


def run(
    target: str | None,
    eval_id: str,
    score: float,
    status: str,
    **extra: Any,
) -> dict[str, Any]:
    """A result record as the runner writes it (only what the collector reads)."""
    out: dict[str, Any] = {"eval_id": eval_id, "score": score, "status": status, **extra}
    if target is not None:
        out["target"] = target
    return out


def grade(
    *, usage: Usage | None = None, error: str | None = None, judge_failed: bool = False
) -> CaseGrade:
    entries = [EvaluatorScore("quality", "llm_judge", 0.0, [], [], error=error, usage=usage)]
    return CaseGrade(0.0, [], [], None, 1, entries, None, judge_failed, usage=usage)


# Two targets, up to three runs of each case, added interleaved as a run finishes them:
#   gpt    c1  [1.0 ok, 1.0 ok]          c2 [0.5 ok, 0.0 failed]   c10 [0.0 error, 0.5 failed]
#   claude c10 [1.0 ok, 0.0 failed, 0.5 ok]  c2 [0.5 ok, 0.0 failed]   c3 [0.0 invalid]
MATRIX = [
    run("gpt", "c1", 1.0, "ok", latency_ms=300, duration_ms=2000, usage={"input_tokens": 10}),
    run("claude", "c10", 1.0, "ok"),
    run("gpt", "c2", 0.5, "ok", latency_ms=100, usage={"input_tokens": 3, "output_tokens": 5}),
    run("claude", "c2", 0.5, "ok"),
    run("gpt", "c10", 0.0, "error", error="timeout"),
    run("claude", "c3", 0.0, "invalid", error="no such file"),
    run("gpt", "c1", 1.0, "ok", latency_ms=400),
    run("claude", "c10", 0.0, "failed"),
    run("gpt", "c2", 0.0, "failed", latency_ms=200),
    run("claude", "c2", 0.0, "failed"),
    run("gpt", "c10", 0.5, "failed"),
    run("claude", "c10", 0.5, "ok"),
]


def matrix() -> Summary:
    collector = record_collector()
    for i, record in enumerate(MATRIX):
        if i == 0:
            collector.add(record, grade(usage=Usage(7, 2), error="no verdict", judge_failed=True))
        elif i == 3:
            collector.add(record, grade(usage=Usage(1, None)))
        else:
            collector.add(record)
    return collector.summary()


# each target's figures (means over its graded cases, each case weighing the same; runs
# that errored or were invalid are counted, not scored)
GPT_SQUARES = (1.0 - 1.75 / 3) ** 2 + (0.25 - 1.75 / 3) ** 2 + (0.5 - 1.75 / 3) ** 2
GPT = TargetSummary(
    name="gpt",
    cases=3,
    runs=6,
    mean=1.75 / 3,  # case means 1.0, 0.25, 0.5 (c10's one graded run: its error is no 0.0)
    std_error=math.sqrt(GPT_SQUARES / 2) / math.sqrt(3),
    # seeded bootstrap over the three case means: 1/27 of resamples are all 0.25 and 1/27
    # all 1.0, more than the 2.5% of each tail
    ci=(0.25, 1.0),
    pass_rate=0.6,  # 3 of the 5 graded runs
    ok=3,
    failed=2,
    errors=1,
    invalid=0,
    tokens=Tokens(13, 5),
    latency_median_ms=250.0,  # 100 200 | 300 400
    latency_p95_ms=300.0 + (400.0 - 300.0) * (0.95 * 3 - 2),  # rank 2.85 of 0..3
    # k up to the fewest graded runs of a case (c10: one): c1 1, c2 1 - C(1,1)/C(2,1), c10 0
    pass_at=(1.5 / 3,),
    pass_all=(1.5 / 3,),  # 1, C(1,1)/C(2,1) = 0.5, 0
    flaky=("c2",),
)
CLAUDE = TargetSummary(
    name="claude",
    cases=3,
    runs=6,
    mean=0.375,  # case means 0.5, 0.25 (c3 was never graded)
    std_error=math.sqrt(0.03125) / math.sqrt(2),  # deviations 0.125, -0.125: 0.125
    ci=(0.25, 0.5),  # two values: a quarter of the resamples at each end
    pass_rate=0.6,
    ok=3,
    failed=2,
    errors=0,
    invalid=1,
    tokens=Tokens(0, 0),
    latency_median_ms=None,
    latency_p95_ms=None,
    # k up to the fewest graded runs of a case (c2: two): c10 1 - C(1,k)/C(3,k), c2 the same
    # of (2, 1)
    pass_at=(((1 - 1 / 3) + 0.5) / 2, (1.0 + 1.0) / 2),
    pass_all=((2 / 3 + 0.5) / 2, (1 / 3 + 0.0) / 2),  # C(2,k)/C(3,k), C(1,k)/C(2,k)
    flaky=("c2", "c10"),  # natural order, not the order they ran in
)


def test_the_matrix_summary_whole() -> None:
    s = matrix()
    # the ten graded runs: three 0.0, four 0.5, three 1.0 (the error and the invalid run
    # are counted, not scored)
    runs = [0.0] * 3 + [0.5] * 4 + [1.0] * 3
    mean = 0.5
    squares = math.fsum((score - mean) ** 2 for score in runs)
    assert s == Summary(
        total=12,
        ok=6,
        failed=4,
        errors=1,
        invalid=1,
        judge_failures=1,
        evaluator_errors=(("quality", 1),),
        mean=mean,
        median=0.5,
        min=0.0,
        max=1.0,
        std_dev=math.sqrt(squares / 9),
        histogram=(
            HistogramBin(0.0, 0.2, 3),
            HistogramBin(0.2, 0.4, 0),
            HistogramBin(0.4, 0.6, 4),
            HistogramBin(0.6, 0.8, 0),
            HistogramBin(0.8, 1.0, 3),
        ),
        # one entry per graded case and target, its graded runs' mean, named by both
        top=(
            ("c1 [gpt]", 1.0),
            ("c10 [claude]", 0.5),
            ("c10 [gpt]", 0.5),
            ("c2 [claude]", 0.25),
            ("c2 [gpt]", 0.25),
        ),
        bottom=(),
        cases=4,
        slowest=(("c1 [gpt, #1]", 2.0),),  # c1 ran more than once: which run
        error_details=(("c3", "invalid", "no such file"), ("c10", "error", "timeout")),
        tokens=(("gpt", Tokens(13, 5)),),
        judge_tokens=Tokens(8, 2),
        targets=(GPT, CLAUDE),
        repeats=3,
        case_stats=(
            (
                "claude",
                "c2",
                stats.CaseStats(
                    2, 1, 0.25, 0.0, 0.5, math.sqrt(0.25 - 2 * 0.25**2), (0.5, 1.0), (0.5, 0.0)
                ),
            ),
            (
                "claude",
                "c10",
                # squares 1 + 0 + 0.25, less 3 x 0.5^2, over 2: 0.25
                stats.CaseStats(
                    3, 2, 0.5, 0.0, 1.0, 0.5, (1 - 1 / 3, 1.0, 1.0), (2 / 3, 1 / 3, 0.0)
                ),
            ),
            ("gpt", "c1", stats.CaseStats(2, 2, 1.0, 1.0, 1.0, 0.0, (1.0, 1.0), (1.0, 1.0))),
            (
                "gpt",
                "c2",
                stats.CaseStats(
                    2, 1, 0.25, 0.0, 0.5, math.sqrt(0.25 - 2 * 0.25**2), (0.5, 1.0), (0.5, 0.0)
                ),
            ),
            ("gpt", "c10", stats.CaseStats(1, 0, 0.5, 0.5, 0.5, None, (0.0,), (0.0,))),
        ),
        # cases in natural order, a cell per target (gpt, claude); None where it did not
        # run or was never graded
        case_table=(
            ("c1", (1.0, None)),
            ("c2", (0.25, 0.25)),
            ("c3", (None, None)),
            ("c10", (0.5, 0.5)),
        ),
        # the judge's one verdict (its other entry could not grade); no settings of its own
        evaluators=(EvaluatorStats("quality", "llm_judge", 1, 0.0, 1.0, False, None, 0, 0, 0),),
        statuses=(("ok", 6), ("failed", 4), ("error", 1), ("invalid", 1)),
        time=Timing(case_seconds=2.0),  # one run says its duration; none when it was written
        datasets=(DatasetCounts("", 12, ok=6, failed=4, errors=1, invalid=1, seconds=2.0),),
    )


def test_summary_json_of_the_matrix() -> None:
    runs = [0.0] * 3 + [0.5] * 4 + [1.0] * 3  # the graded runs
    sd = math.sqrt(0.25 - 2 * 0.25**2)
    # c2 went the same way on both targets: one pass in two runs
    c2 = {
        "eval_id": "c2",
        "runs": 2,
        "passes": 1,
        "mean": 0.25,
        "min": 0.0,
        "max": 0.5,
        "std_dev": sd,
        "pass_at_k": {"1": 0.5, "2": 1.0},
        "pass_all_k": {"1": 0.5, "2": 0.0},
        "flaky": True,
        "noise": None,
    }
    assert summary_dict(matrix()) == {
        "total": 12,
        "graded": 10,
        "eval_cases": 4,
        "ok": 6,
        "failed": 4,
        "uncertain": 0,
        "errors": 1,
        "invalid": 1,
        "user_errors": 0,
        "skipped": 0,
        "statuses": {"ok": 6, "failed": 4, "error": 1, "invalid": 1},
        "pass_rate": 0.6,
        "mean": 0.5,
        "median": 0.5,
        "min": 0.0,
        "max": 1.0,
        "std_dev": math.sqrt(math.fsum((v - 0.5) ** 2 for v in runs) / 9),
        "histogram": [
            {"start": 0.0, "end": 0.2, "count": 3},
            {"start": 0.2, "end": 0.4, "count": 0},
            {"start": 0.4, "end": 0.6, "count": 4},
            {"start": 0.6, "end": 0.8, "count": 0},
            {"start": 0.8, "end": 1.0, "count": 3},
        ],
        "repeats": 3,
        "judge_failures": 1,
        "evaluator_errors": {"quality": 1},
        "errors_by_case": [
            {"eval_id": "c3", "status": "invalid", "error": "no such file"},
            {"eval_id": "c10", "status": "error", "error": "timeout"},
        ],
        "uncertain_resolved": {"pass": 0, "fail": 0},
        "uncertain_runs": [],
        "targets": [
            {
                "target": "gpt",
                "cases": 3,
                "runs": 6,
                "mean": 1.75 / 3,
                "std_error": math.sqrt(GPT_SQUARES / 2) / math.sqrt(3),
                "ci95": [0.25, 1.0],
                "pass_rate": 0.6,
                "graded": 5,
                "ok": 3,
                "failed": 2,
                "uncertain": 0,
                "errors": 1,
                "invalid": 0,
                "user_errors": 0,
                "skipped": 0,
                "tokens": {"input": 13, "output": 5},
                "cost": {"usd": 0.0, "per_run_usd": None},
                "latency_ms": {"median": 250.0, "p95": 300.0 + 100.0 * (0.95 * 3 - 2)},
                "pass_at_k": {"1": 0.5},
                "pass_all_k": {"1": 0.5},
                "flaky": ["c2"],
                "noise": None,
            },
            {
                "target": "claude",
                "cases": 3,
                "runs": 6,
                "mean": 0.375,
                "std_error": math.sqrt(0.03125) / math.sqrt(2),
                "ci95": [0.25, 0.5],
                "pass_rate": 0.6,
                "graded": 5,
                "ok": 3,
                "failed": 2,
                "uncertain": 0,
                "errors": 0,
                "invalid": 1,
                "user_errors": 0,
                "skipped": 0,
                "tokens": {"input": 0, "output": 0},
                "cost": {"usd": 0.0, "per_run_usd": None},
                "latency_ms": {"median": None, "p95": None},
                "pass_at_k": {"1": ((1 - 1 / 3) + 0.5) / 2, "2": 1.0},
                "pass_all_k": {"1": (2 / 3 + 0.5) / 2, "2": (1 / 3) / 2},
                "flaky": ["c2", "c10"],
                "noise": None,
            },
        ],
        "tokens": {"input": 13, "output": 5},  # every target's answers (the judge's apart)
        "judge_tokens": {"input": 8, "output": 2},
        "cost": None,
        "turns": None,  # no live conversation
        "required_failures": 0,
        "trajectory_calls": 0,
        "time": {"started": None, "ended": None, "wall_seconds": None, "case_seconds": 2.0},
        "datasets": [
            {
                "dataset": "",
                "runs": 12,
                "ok": 6,
                "failed": 4,
                "uncertain": 0,
                "errors": 1,
                "invalid": 1,
                "user_errors": 0,
                "skipped": 0,
                "seconds": 2.0,
            }
        ],
        "vars": [],  # no run was made from `vars:`
        "evaluators": [
            {
                "name": "quality",
                "type": "llm_judge",
                "runs": 1,
                "mean": 0.0,
                "weight": 1.0,
                "required": False,
                "threshold": None,
                "passed": None,
                "judged": 0,
                "failed_cases": 0,
                "sampled": 0,
                "uncertain": 0,
                "weighted": False,
            }
        ],
        "cases": [
            {"target": "claude", **c2},
            {
                "target": "claude",
                "eval_id": "c10",
                "runs": 3,
                "passes": 2,
                "mean": 0.5,
                "min": 0.0,
                "max": 1.0,
                "std_dev": 0.5,
                "pass_at_k": {"1": 1 - 1 / 3, "2": 1.0, "3": 1.0},
                "pass_all_k": {"1": 2 / 3, "2": 1 / 3, "3": 0.0},
                "flaky": True,
                "noise": None,
            },
            {
                "target": "gpt",
                "eval_id": "c1",
                "runs": 2,
                "passes": 2,
                "mean": 1.0,
                "min": 1.0,
                "max": 1.0,
                "std_dev": 0.0,
                "pass_at_k": {"1": 1.0, "2": 1.0},
                "pass_all_k": {"1": 1.0, "2": 1.0},
                "flaky": False,
                "noise": None,
            },
            {"target": "gpt", **c2},
            {
                "target": "gpt",
                "eval_id": "c10",
                "runs": 1,
                "passes": 0,
                "mean": 0.5,
                "min": 0.5,
                "max": 0.5,
                "std_dev": None,
                "pass_at_k": {"1": 0.0},
                "pass_all_k": {"1": 0.0},
                "flaky": False,
                "noise": None,
            },
        ],
    }


def test_summary_json_of_a_plain_run_and_of_an_empty_one() -> None:
    collector = record_collector()
    collector.add(run("t", "a", 1.0, "ok"))
    collector.add(run("t", "b", 0.25, "failed", latency_ms=120))
    assert summary_dict(collector.summary()) == {
        "total": 2,
        "graded": 2,
        "eval_cases": 2,
        "ok": 1,
        "failed": 1,
        "uncertain": 0,
        "errors": 0,
        "invalid": 0,
        "user_errors": 0,
        "skipped": 0,
        "statuses": {"ok": 1, "failed": 1},
        "pass_rate": 0.5,
        "mean": 0.625,
        "median": 0.625,
        "min": 0.25,
        "max": 1.0,
        "std_dev": math.sqrt(2 * 0.375**2),
        "histogram": [
            {"start": 0.0, "end": 0.2, "count": 0},
            {"start": 0.2, "end": 0.4, "count": 1},
            {"start": 0.4, "end": 0.6, "count": 0},
            {"start": 0.6, "end": 0.8, "count": 0},
            {"start": 0.8, "end": 1.0, "count": 1},
        ],
        "repeats": 1,
        "judge_failures": 0,
        "evaluator_errors": {},
        "errors_by_case": [],
        "uncertain_resolved": {"pass": 0, "fail": 0},
        "uncertain_runs": [],
        "targets": [
            {
                "target": "t",
                "cases": 2,
                "runs": 2,
                "mean": 0.625,
                "std_error": math.sqrt(2 * 0.375**2) / math.sqrt(2),
                # two values: half the resamples hold one of each, a quarter each end
                "ci95": [0.25, 1.0],
                "pass_rate": 0.5,
                "graded": 2,
                "ok": 1,
                "failed": 1,
                "uncertain": 0,
                "errors": 0,
                "invalid": 0,
                "user_errors": 0,
                "skipped": 0,
                "tokens": {"input": 0, "output": 0},
                "cost": {"usd": 0.0, "per_run_usd": None},
                "latency_ms": {"median": 120.0, "p95": 120.0},
                "pass_at_k": {"1": 0.5},
                "pass_all_k": {"1": 0.5},
                "flaky": [],
                "noise": None,
            }
        ],
        "tokens": {"input": 0, "output": 0},
        "judge_tokens": None,
        "cost": None,
        "turns": None,
        "required_failures": 0,
        "trajectory_calls": 0,
        "time": {"started": None, "ended": None, "wall_seconds": None, "case_seconds": 0.0},
        "datasets": [
            {
                "dataset": "",
                "runs": 2,
                "ok": 1,
                "failed": 1,
                "uncertain": 0,
                "errors": 0,
                "invalid": 0,
                "user_errors": 0,
                "skipped": 0,
                "seconds": 0.0,
            }
        ],
        "vars": [],
        "evaluators": [],
        "cases": [],
    }
    assert summary_dict(record_collector().summary()) == {
        "total": 0,
        "graded": 0,
        "eval_cases": 0,
        "ok": 0,
        "failed": 0,
        "uncertain": 0,
        "errors": 0,
        "invalid": 0,
        "user_errors": 0,
        "skipped": 0,
        "statuses": {},
        "pass_rate": None,
        "mean": None,
        "median": None,
        "min": None,
        "max": None,
        "std_dev": None,
        "histogram": [],
        "repeats": 1,
        "judge_failures": 0,
        "evaluator_errors": {},
        "errors_by_case": [],
        "uncertain_resolved": {"pass": 0, "fail": 0},
        "uncertain_runs": [],
        "targets": [],
        "tokens": {"input": 0, "output": 0},
        "judge_tokens": None,
        "cost": None,
        "turns": None,
        "required_failures": 0,
        "trajectory_calls": 0,
        "time": {"started": None, "ended": None, "wall_seconds": None, "case_seconds": 0.0},
        "datasets": [],
        "vars": [],
        "evaluators": [],
        "cases": [],
    }


def test_repeats_on_one_target_rank_cases_by_their_mean_unnamed() -> None:
    """One target, two runs of each of eight cases: one entry per case (not per run),
    named by the case alone; the lowest three listed too."""
    collector = record_collector()
    scores = {
        "c1": (1.0, 0.5),  # 0.75
        "c2": (0.0, 0.0),  # 0.0
        "c3": (1.0, 1.0),  # 1.0
        "c4": (0.5, 0.0),  # 0.25
        "c5": (0.25, 0.25),  # 0.25
        "c6": (1.0, 0.0),  # 0.5
        "c7": (0.5, 0.5),  # 0.5
        "c10": (1.0, 1.0),  # 1.0
    }
    for repeat in range(2):
        for case, pair in scores.items():
            score = pair[repeat]
            collector.add(run("only", case, score, "ok" if score >= 0.75 else "failed"))
    s = collector.summary()
    assert (s.repeats, s.top, s.bottom) == (
        2,
        (("c3", 1.0), ("c10", 1.0), ("c1", 0.75)),
        (("c2", 0.0), ("c4", 0.25), ("c5", 0.25)),
    )
    (target,) = s.targets
    assert (target.name, target.cases, target.runs, target.flaky) == (
        "only",
        8,
        16,
        ("c1", "c6"),
    )
    # passes (at 0.75): c1 1, c3 2, c6 1, c10 2, the rest 0
    # pass@1 and pass@2 by case: c1 .5 1, c3 1 1, c6 .5 1, c10 1 1, the rest 0 0
    assert target.pass_at == (3.0 / 8, 4.0 / 8)
    # pass^1 and pass^2: c1 .5 0, c3 1 1, c6 .5 0, c10 1 1, the rest 0 0
    assert target.pass_all == (3.0 / 8, 2.0 / 8)
    assert [name for _, name, _ in s.case_stats] == [
        "c1",
        "c2",
        "c3",
        "c4",
        "c5",
        "c6",
        "c7",
        "c10",
    ]
    assert s.case_table == tuple(
        (case, ((a + b) / 2,))
        for case, (a, b) in sorted(scores.items(), key=lambda kv: int(kv[0][1:]))
    )


def test_two_targets_without_repeats() -> None:
    """One run each: entries named by case and target, no per-case statistics; a record
    without a target counts under "?"."""
    collector = record_collector()
    collector.add(run("b", "c2", 0.5, "failed", latency_ms=10))
    collector.add(run("a", "c2", 1.0, "ok"))
    collector.add(run(None, "c1", 0.25, "failed"))
    s = collector.summary()
    assert (s.repeats, s.case_stats, s.top, s.bottom) == (
        1,
        (),
        (("c2 [a]", 1.0), ("c2 [b]", 0.5), ("c1 [?]", 0.25)),
        (),
    )
    assert s.case_table == (("c1", (None, None, 0.25)), ("c2", (0.5, 1.0, None)))
    assert [(t.name, t.cases, t.runs, t.mean, t.ci, t.pass_at, t.pass_all) for t in s.targets] == [
        ("b", 1, 1, 0.5, (0.5, 0.5), (0.0,), (0.0,)),
        ("a", 1, 1, 1.0, (1.0, 1.0), (1.0,), (1.0,)),
        ("?", 1, 1, 0.25, (0.25, 0.25), (0.0,), (0.0,)),
    ]
    assert [(t.std_error, t.latency_median_ms, t.latency_p95_ms) for t in s.targets] == [
        (None, 10.0, 10.0),
        (None, None, None),
        (None, None, None),
    ]


def test_the_case_table_holds_at_most_fifty_cases() -> None:
    collector = record_collector()
    for i in range(CASE_TABLE_MAX):
        collector.add(run("t", f"c{i}", 1.0, "ok"))
    table = collector.summary().case_table
    assert table == tuple((f"c{i}", (1.0,)) for i in range(CASE_TABLE_MAX))
    collector.add(run("t", "one-more", 1.0, "ok"))
    assert collector.summary().case_table == ()


def test_two_targets_one_run_each_are_named_by_target() -> None:
    collector = record_collector()
    collector.add(run("a", "c1", 1.0, "ok"))
    collector.add(run("b", "c1", 0.5, "failed"))
    s = collector.summary()
    assert (s.repeats, s.top, s.case_table) == (
        1,
        (("c1 [a]", 1.0), ("c1 [b]", 0.5)),
        (("c1", (1.0, 0.5)),),
    )
