"""``agentv calibrate``: each evaluator's agreement with people, against a hand computation
on a fixed table of labels (Cohen's kappa included)."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from agentv.results.stats import agreement, cohen_kappa
from agentv.store import RunStore
from agentv.store.calibrate import CASE_VERDICT, MIN_LABELS


def record(n: int, judge: float, check: bool, status: str) -> dict[str, Any]:
    """A graded record with a judge (score ``judge``, threshold 0.8) and a contains
    check (passed or not)."""
    return {
        "eval_id": f"case-{n}",
        "dataset": "d",
        "target": "t",
        "status": status,
        "score": 1.0 if status == "ok" else 0.0,
        "evaluator_results": [
            {"name": "answer-judge", "type": "llm_judge", "score": judge},
            {"name": "says-yes", "type": "contains", "score": 1.0 if check else 0.0},
        ],
        "raw_request": {"question": f"q{n}"},
    }


#: (judge passes, human says pass) for 15 labels: 8 both pass, 2 judge pass / human fail,
#: 1 judge fail / human pass, 4 both fail
JUDGE_TABLE = [(True, True)] * 8 + [(True, False)] * 2 + [(False, True)] + [(False, False)] * 4


def build(tmp_path: Path) -> tuple[RunStore, int]:
    records, humans = [], []
    for n, (judge_pass, human_pass) in enumerate(JUDGE_TABLE):
        # the check agrees with people on every label but the first two
        check = human_pass if n >= 2 else not human_pass
        records.append(
            record(n, 0.9 if judge_pass else 0.3, check, "ok" if judge_pass else "failed")
        )
        humans.append("pass" if human_pass else "fail")
    results = tmp_path / "labels.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    store = RunStore(tmp_path / "runs.sqlite")
    run_id, _, _ = store.import_results(results)
    for n, verdict in enumerate(humans):
        key = json.dumps(["d", f"case-{n}", "t"], separators=(",", ":"))
        store.review(run_id, key, 0, verdict=verdict, reviewer="ann")
    return store, run_id


def test_calibration_equals_the_hand_computation(tmp_path: Path) -> None:
    store, _ = build(tmp_path)
    with store:
        found = store.calibrate()
    assert found.reviewed == 15
    judge, check, case = found.evaluators
    # the judge: po = 12/15, pe = (10 * 9 + 5 * 6) / 225 = 8/15, kappa = (4/15) / (7/15)
    assert (judge.name, judge.type, judge.n) == ("answer-judge", "llm_judge", 15)
    assert (
        judge.both_pass,
        judge.evaluator_pass_human_fail,
        judge.evaluator_fail_human_pass,
        judge.both_fail,
    ) == (8, 2, 1, 4)
    assert judge.agreement == 0.8
    assert judge.kappa == float(Fraction(4, 7))
    # the check: wrong on labels 0 and 1 (both human pass): 7 both pass, 2 check fail /
    # human pass, 6 both fail; po = 13/15, pe = (7 * 9 + 8 * 6) / 225 = 111/225
    assert (check.name, check.type) == ("says-yes", "contains")
    assert (
        check.both_pass,
        check.evaluator_pass_human_fail,
        check.evaluator_fail_human_pass,
        check.both_fail,
    ) == (7, 0, 2, 6)
    assert check.agreement == float(Fraction(13, 15))
    expected = (Fraction(13, 15) - Fraction(111, 225)) / (1 - Fraction(111, 225))
    assert check.kappa == float(expected)
    # the cases' own verdicts are the judge's here (ok exactly when the judge passed)
    assert (case.name, case.type, case.n, case.kappa) == (CASE_VERDICT, "case", 15, judge.kappa)
    for a in found.evaluators:
        assert a.warning == f"only 15 label(s): review at least {MIN_LABELS} for figures to trust"
    assert found.to_dict()["evaluators"][0] == {
        "evaluator": "answer-judge",
        "type": "llm_judge",
        "n": 15,
        "agreement": 0.8,
        "kappa": float(Fraction(4, 7)),
        "confusion": {
            "both_pass": 8,
            "evaluator_pass_human_fail": 2,
            "evaluator_fail_human_pass": 1,
            "both_fail": 4,
        },
        "warning": "only 15 label(s): review at least 20 for figures to trust",
    }


def test_the_latest_review_counts_and_twenty_labels_need_no_warning(tmp_path: Path) -> None:
    records = [record(n, 0.9, True, "ok") for n in range(20)]
    results = tmp_path / "r.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    with RunStore(tmp_path / "runs.sqlite") as store:
        run_id, _, _ = store.import_results(results)
        for n in range(20):
            key = json.dumps(["d", f"case-{n}", "t"], separators=(",", ":"))
            store.review(run_id, key, 0, verdict="fail", reviewer="ann")
            if n < 15:  # changed their mind: pass
                store.review(run_id, key, 0, verdict="pass", reviewer="ann")
        judge = store.calibrate().evaluators[0]
    assert (judge.n, judge.both_pass, judge.evaluator_pass_human_fail) == (20, 15, 5)
    assert judge.warning is None
    # the judge passed everything: pe = 15/20, po = 15/20, kappa = 0
    assert judge.kappa == 0.0


def test_judges_come_first_then_names(tmp_path: Path) -> None:
    rec = {
        "eval_id": "x",
        "status": "ok",
        "score": 1.0,
        "evaluator_results": [
            {"name": "a-check", "type": "regex", "score": 1.0},
            {"name": "z-judge", "type": "llm_judge", "score": 1.0},
            {"name": "b-code", "type": "code", "score": 0.5, "threshold": 0.4, "passed": True},
        ],
    }
    results = tmp_path / "r.jsonl"
    results.write_text(json.dumps(rec) + "\n", encoding="utf-8")
    with RunStore(tmp_path / "runs.sqlite") as store:
        run_id, _, _ = store.import_results(results)
        store.review(run_id, '["","x",""]', 0, verdict="pass", reviewer="ann")
        names = [a.name for a in store.calibrate().evaluators]
    assert names == ["z-judge", "a-check", "b-code", CASE_VERDICT]


@pytest.mark.parametrize(
    ("table", "kappa"),
    [
        ((20, 5, 10, 15), Fraction(2, 5)),  # po 35/50, pe 1/2
        ((5, 0, 0, 5), Fraction(1)),
        ((0, 5, 5, 0), Fraction(-1)),
        ((10, 0, 0, 0), None),  # every verdict pass on both sides: undefined
        ((0, 0, 0, 0), None),
    ],
)
def test_cohen_kappa_by_hand(table: tuple[int, int, int, int], kappa: Fraction | None) -> None:
    assert cohen_kappa(*table) == (None if kappa is None else float(kappa))
    n = sum(table)
    assert agreement(*table) == (float(Fraction(table[0] + table[3], n)) if n else None)
