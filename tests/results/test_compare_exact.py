"""agentv.results.compare with exact values: whole ``Comparison`` objects and ``comparison_dict``
outputs, cases read from crafted files (defaults, repeats, worst status, bad scores), the
verdict rules at their boundaries, and the paired bootstrap against its algorithm written
out again (seed 20211207, 2000 resamples, ranks 49 and 1950)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from agentv.errors import InputError
from agentv.results.compare import (
    CaseDelta,
    CaseResult,
    Comparison,
    Side,
    compare_files,
    compare_results,
    comparison_dict,
    paired_bootstrap,
    read_cases,
)
from agentv.results.flips import EvaluatorFlips

# many distinct values, so that neighbouring ranks of the sorted resample means differ
SPREAD = [0.113, -0.371, 0.229, 0.0517, -0.4103, 0.6719, 0.2903, -0.1307, 0.8311, 0.0179]


def _sorted_means(deltas: list[float], resamples: int, seed: int) -> list[float]:
    """The documented algorithm: resample the deltas with replacement (``choices``, k=n) from
    ``random.Random(seed)``, ``resamples`` times; the sorted means."""
    rng = random.Random(seed)
    n = len(deltas)
    return sorted(sum(rng.choices(deltas, k=n)) / n for _ in range(resamples))


def _interval(deltas: list[float]) -> tuple[float, float]:
    means = _sorted_means(deltas, 2000, 20211207)
    # floor(0.025 * 1999) = 49, ceil(0.975 * 1999) = 1950
    return (means[49], means[1950])


R1, R2 = {"repeat": 1}, {"repeat": 2}  # a case's second and third runs


def _write(path: Path, *records: Any) -> Path:
    path.write_text(
        "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records),
        encoding="utf-8",
    )
    return path


# -- paired_bootstrap ------------------------------------------------------------------


def test_paired_bootstrap_defaults_are_the_seeded_2000_resamples() -> None:
    means = _sorted_means(SPREAD, 2000, 20211207)
    assert means[48] != means[49] != means[50] and means[1949] != means[1950] != means[1951]
    assert paired_bootstrap(SPREAD) == (means[49], means[1950])


def test_paired_bootstrap_takes_resamples_and_seed() -> None:
    means = _sorted_means(SPREAD, 10, 7)
    # floor(0.025 * 9) = 0, ceil(0.975 * 9) = 9
    assert paired_bootstrap(SPREAD, resamples=10, seed=7) == (means[0], means[9])
    assert paired_bootstrap(SPREAD, resamples=10, seed=7) != paired_bootstrap(
        SPREAD, resamples=10, seed=8
    )
    # 41 resamples: the ranks are exact, 0.025 * 40 = 1 and 0.975 * 40 = 39
    means = _sorted_means(SPREAD, 41, 7)
    assert means[0] != means[1] != means[2] and means[38] != means[39] != means[40]
    assert paired_bootstrap(SPREAD, resamples=41, seed=7) == (means[1], means[39])


def test_paired_bootstrap_of_none_one_and_two() -> None:
    assert paired_bootstrap([]) is None
    assert paired_bootstrap([-0.25]) == (-0.25, -0.25)
    means = _sorted_means([0.25, -0.5], 2000, 20211207)
    assert paired_bootstrap([0.25, -0.5]) == (means[49], means[1950]) == (-0.5, 0.25)


# -- read_cases ------------------------------------------------------------------------


def test_read_cases_defaults_repeats_and_worst_status(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "r.jsonl",
        # 1-3: one case run three times: the mean score, the worst status, three runs
        {"dataset": "d", "eval_id": "a", "target": "t", "score": 0.75, "status": "ok"},
        {"dataset": "d", "eval_id": "a", "target": "t", "score": 0.25, "status": "failed"} | R1,
        {"dataset": "d", "eval_id": "a", "target": "t", "score": 0.5, "status": "ok"} | R2,
        # 4-5: an unknown status ranks as error (2): below invalid ...
        {"dataset": "d", "eval_id": "u", "target": "t", "score": 1, "status": "odd"},
        {"dataset": "d", "eval_id": "u", "target": "t", "score": 1, "status": "invalid"} | R1,
        # 6-7: ... above failed
        {"dataset": "d", "eval_id": "v", "target": "t", "score": 1, "status": "failed"},
        {"dataset": "d", "eval_id": "v", "target": "t", "score": 1, "status": "odd"} | R1,
        "",  # 8: a blank line is passed over
        # 9: nothing but a line field: no dataset, target, score or status
        {"line": 42},
        # 10: no eval id, no line field: the file's line number; no status but an error
        {"score": 0.5, "error": "boom"},
        # 11: an empty eval id and a null target; an empty status and no error
        {"eval_id": "", "target": None, "score": "0.25", "status": ""},
        # 12-13: scores that are not finite count as 0
        {"eval_id": "nan", "score": float("nan"), "status": "failed"},
        {"eval_id": "inf", "score": "-inf", "status": "ok"},
        # 14: an integer dataset is read as text
        {"dataset": 7, "eval_id": "n", "target": "t", "score": 1, "status": "ok"},
    )
    # errors are not scores: a case's score is the mean of its graded (ok, failed) runs
    assert read_cases(path) == {
        ("d", "a", "t"): CaseResult(score=0.5, status="failed", runs=3, graded=3),
        ("d", "u", "t"): CaseResult(score=None, status="invalid", runs=2, graded=0),
        ("d", "v", "t"): CaseResult(score=1.0, status="odd", runs=2, graded=1),
        ("", "#42", ""): CaseResult(score=0.0, status="ok", runs=1, graded=1),
        ("", "#10", ""): CaseResult(score=None, status="error", runs=1, graded=0),
        ("", "#11", ""): CaseResult(score=0.25, status="ok", runs=1, graded=1),
        ("", "nan", ""): CaseResult(score=0.0, status="failed", runs=1, graded=1),
        ("", "inf", ""): CaseResult(score=0.0, status="ok", runs=1, graded=1),
        ("7", "n", "t"): CaseResult(score=1.0, status="ok", runs=1, graded=1),
    }


def test_a_run_written_again_counts_once_with_its_latest_record(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "r.jsonl",
        {"dataset": "d", "eval_id": "a", "target": "t", "score": 0.0, "status": "error"},
        {"dataset": "d", "eval_id": "a", "target": "t", "score": 1.0, "status": "ok"} | R1,
        # a resumed run's new record of repeat 0 supersedes the error
        {"dataset": "d", "eval_id": "a", "target": "t", "score": 0.5, "status": "failed"},
    )
    assert read_cases(path) == {
        ("d", "a", "t"): CaseResult(score=0.75, status="failed", runs=2, graded=2)
    }


def test_an_unknown_status_ties_with_error_and_the_first_is_kept(tmp_path: Path) -> None:
    path = _write(
        tmp_path / "r.jsonl",
        {"eval_id": "a", "score": 1, "status": "odd"},
        {"eval_id": "a", "score": 0, "status": "error"} | R1,
        {"eval_id": "b", "score": 0, "status": "error"},
        {"eval_id": "b", "score": 1, "status": "odd"} | R1,
    )
    assert read_cases(path) == {
        ("", "a", ""): CaseResult(score=None, status="odd", runs=2),
        ("", "b", ""): CaseResult(score=None, status="error", runs=2),
    }


# (a null score is read as 0, with a warning: tests/evalfile/test_numbers_as_numbers.py)
@pytest.mark.parametrize("score", ["high", [1], {"a": 1}])
def test_a_score_that_is_not_a_number_names_the_file_and_line(tmp_path: Path, score: Any) -> None:
    path = _write(
        tmp_path / "r.jsonl",
        {"eval_id": "a", "score": 1, "status": "ok"},
        {"eval_id": "b", "score": score, "status": "ok"},
    )
    with pytest.raises(InputError) as caught:
        read_cases(path)
    assert str(caught.value).startswith(f"{path}:2: not a result (score: ")


# -- compare_results -------------------------------------------------------------------


def _r(score: float, status: str, runs: int = 1) -> CaseResult:
    """A case of ``runs`` runs all ending ``status`` (no score unless graded)."""
    graded = status in ("ok", "failed")
    return CaseResult(score if graded else None, status, runs, runs if graded else 0)


BASE = {
    ("d10", "a", "t"): _r(0.5, "ok"),  # -> 0.25 ok: -0.25, exactly -min_delta: unchanged
    ("d2", "c10", "t"): _r(0.5, "ok", 2),  # -> 0.75 ok: +0.25, exactly min_delta: unchanged
    ("d2", "c2", "b"): _r(0.5, "ok"),  # -> 0.125 ok: -0.375, regressed
    ("d2", "c2", "a"): _r(0.5, "failed"),  # -> 0.875 failed: +0.375, improved
    ("d2", "c3", "t"): _r(0.5, "ok"),  # -> 0.5 failed: ok lost, regressed
    ("d2", "c4", "t"): _r(0.5, "failed"),  # -> 0.5 ok: ok gained, improved
    ("d2", "c5", "t"): _r(0.5, "failed"),  # -> error: no score, neither ok: unchanged
    ("d2", "c6", "t"): _r(0.875, "ok"),  # -> 1.0 ok: +0.125, unchanged
    ("d2", "c7", "t"): _r(0.75, "failed"),  # -> 0.25 ok: -0.5 wins over ok gained: regressed
    ("d2", "c8", "t"): _r(0.25, "ok"),  # -> 0.75 failed: ok lost wins over +0.5: regressed
    ("d2", "gone", "t"): _r(1.0, "ok"),  # missing
}
NEW = {
    ("d2", "c1", "t"): _r(0.0, "invalid"),  # new
    ("d10", "a", "t"): _r(0.25, "ok"),
    ("d2", "c10", "t"): _r(0.75, "ok", 3),
    ("d2", "c2", "b"): _r(0.125, "ok"),
    ("d2", "c2", "a"): _r(0.875, "failed"),
    ("d2", "c3", "t"): _r(0.5, "failed"),
    ("d2", "c4", "t"): _r(0.5, "ok"),
    ("d2", "c5", "t"): _r(0.5, "error"),
    ("d2", "c6", "t"): _r(1.0, "ok"),
    ("d2", "c7", "t"): _r(0.25, "ok"),
    ("d2", "c8", "t"): _r(0.75, "failed"),
}
# in natural order: d2 before d10, c2 before c10, then the target
ORDER = [
    (("d2", "c1", "t"), "new"),
    (("d2", "c2", "a"), "improved"),
    (("d2", "c2", "b"), "regressed"),
    (("d2", "c3", "t"), "regressed"),
    (("d2", "c4", "t"), "improved"),
    (("d2", "c5", "t"), "unchanged"),
    (("d2", "c6", "t"), "unchanged"),
    (("d2", "c7", "t"), "regressed"),
    (("d2", "c8", "t"), "regressed"),
    (("d2", "c10", "t"), "unchanged"),
    (("d2", "gone", "t"), "missing"),
    (("d10", "a", "t"), "unchanged"),
]
# the paired deltas in that order (c5 has no score in the new run: not paired)
PAIRED = [0.375, -0.375, 0.0, 0.0, 0.125, -0.5, 0.5, 0.25, -0.25]


def test_compare_results_whole() -> None:
    c = compare_results(BASE, NEW, min_delta=0.25, base_path="b.jsonl", new_path="n.jsonl")
    cases = tuple(CaseDelta(k, BASE.get(k), NEW.get(k), v) for k, v in ORDER)
    assert c == Comparison(
        base_path="b.jsonl",
        new_path="n.jsonl",
        min_delta=0.25,
        cases=cases,
        counts={"improved": 2, "regressed": 4, "unchanged": 4, "new": 1, "missing": 1},
        mean_delta=0.125 / 9,
        ci=_interval(PAIRED),
        base_pass_rate=7 / 11,
        new_pass_rate=6 / 9,  # of the nine graded cases (c1 invalid, c5 error)
    )
    assert [d.delta for d in c.cases] == [None, *PAIRED[:4], None, *PAIRED[4:8], None, PAIRED[8]]
    assert c.regressed == (cases[2], cases[3], cases[7], cases[8])
    assert c.changed == tuple(d for d in cases if d.verdict != "unchanged")
    assert [d.key[1] for d in c.changed] == ["c1", "c2", "c2", "c3", "c4", "c7", "c8", "gone"]


def test_comparison_dict_whole() -> None:
    c = compare_results(BASE, NEW, min_delta=0.25, base_path="b.jsonl", new_path="n.jsonl")
    lo, hi = _interval(PAIRED)

    def side(score: float | None, status: str, runs: int = 1) -> dict[str, Any]:
        return {
            "score": score,
            "status": status,
            "runs": runs,
            "graded": 0 if score is None else runs,
        }

    def row(ds: str, eid: str, tgt: str, verdict: str, base: Any, new: Any, delta: Any) -> Any:
        return {
            "dataset": ds,
            "eval_id": eid,
            "target": tgt,
            "verdict": verdict,
            "base": base,
            "new": new,
            "delta": delta,
        }

    assert comparison_dict(c) == {
        "base": "b.jsonl",
        "new": "n.jsonl",
        "min_delta": 0.25,
        "counts": {"improved": 2, "regressed": 4, "unchanged": 4, "new": 1, "missing": 1},
        "runs": {"base": NO_RUNS, "new": NO_RUNS},  # cases given, not files: no run counts
        "mean_delta": 0.125 / 9,
        "ci95": [lo, hi],
        "pass_rate": {"base": 7 / 11, "new": 6 / 9, "change": 6 / 9 - 7 / 11},
        "changed": [
            row("d2", "c1", "t", "new", None, side(None, "invalid"), None),
            row("d2", "c2", "a", "improved", side(0.5, "failed"), side(0.875, "failed"), 0.375),
            row("d2", "c2", "b", "regressed", side(0.5, "ok"), side(0.125, "ok"), -0.375),
            row("d2", "c3", "t", "regressed", side(0.5, "ok"), side(0.5, "failed"), 0.0),
            row("d2", "c4", "t", "improved", side(0.5, "failed"), side(0.5, "ok"), 0.0),
            row("d2", "c7", "t", "regressed", side(0.75, "failed"), side(0.25, "ok"), -0.5),
            row("d2", "c8", "t", "regressed", side(0.25, "ok"), side(0.75, "failed"), 0.5),
            row("d2", "gone", "t", "missing", side(1.0, "ok"), None, None),
        ],
    }


NO_RUNS = {"runs": 0, "graded": 0, "statuses": {}, "mean": None}


def test_default_min_delta_and_paths() -> None:
    base = {("d", "a", "t"): _r(0.5, "ok"), ("d", "b", "t"): _r(0.5, "ok")}
    new = {("d", "a", "t"): _r(0.5625, "ok"), ("d", "b", "t"): _r(0.53125, "ok")}
    c = compare_results(base, new)
    assert c == Comparison(
        base_path="base",
        new_path="new",
        min_delta=0.05,
        cases=(
            CaseDelta(("d", "a", "t"), base[("d", "a", "t")], new[("d", "a", "t")], "improved"),
            CaseDelta(("d", "b", "t"), base[("d", "b", "t")], new[("d", "b", "t")], "unchanged"),
        ),
        counts={"improved": 1, "regressed": 0, "unchanged": 1, "new": 0, "missing": 0},
        mean_delta=(0.0625 + 0.03125) / 2,
        ci=_interval([0.0625, 0.03125]),
        base_pass_rate=1.0,
        new_pass_rate=1.0,
    )


def test_nothing_in_common_and_nothing_at_all() -> None:
    base = {("d", "a", "t"): _r(0.5, "failed"), ("d", "b", "t"): _r(1.0, "ok")}
    gone = compare_results(base, {})
    assert gone == Comparison(
        base_path="base",
        new_path="new",
        min_delta=0.05,
        cases=(
            CaseDelta(("d", "a", "t"), base[("d", "a", "t")], None, "missing"),
            CaseDelta(("d", "b", "t"), base[("d", "b", "t")], None, "missing"),
        ),
        counts={"improved": 0, "regressed": 0, "unchanged": 0, "new": 0, "missing": 2},
        mean_delta=None,
        ci=None,
        base_pass_rate=0.5,
        new_pass_rate=None,
    )
    assert comparison_dict(gone) == {
        "base": "base",
        "new": "new",
        "min_delta": 0.05,
        "counts": {"improved": 0, "regressed": 0, "unchanged": 0, "new": 0, "missing": 2},
        "runs": {"base": NO_RUNS, "new": NO_RUNS},
        "mean_delta": None,
        "ci95": None,
        "pass_rate": {"base": 0.5, "new": None, "change": None},
        "changed": [
            {
                "dataset": "d",
                "eval_id": eid,
                "target": "t",
                "verdict": "missing",
                "base": {"score": score, "status": status, "runs": 1, "graded": 1},
                "new": None,
                "delta": None,
            }
            for eid, score, status in (("a", 0.5, "failed"), ("b", 1.0, "ok"))
        ],
    }
    added = comparison_dict(compare_results({}, base))
    assert added["pass_rate"] == {"base": None, "new": 0.5, "change": None}
    assert [(x["verdict"], x["base"], x["delta"]) for x in added["changed"]] == [
        ("new", None, None),
        ("new", None, None),
    ]
    assert comparison_dict(compare_results({}, {})) == {
        "base": "base",
        "new": "new",
        "min_delta": 0.05,
        "counts": {"improved": 0, "regressed": 0, "unchanged": 0, "new": 0, "missing": 0},
        "runs": {"base": NO_RUNS, "new": NO_RUNS},
        "mean_delta": None,
        "ci95": None,
        "pass_rate": {"base": None, "new": None, "change": None},
        "changed": [],
    }


def test_compare_files_whole(tmp_path: Path) -> None:
    base = _write(
        tmp_path / "base.jsonl",
        {"dataset": "d", "eval_id": "a", "target": "t", "score": 0.5, "status": "ok"},
    )
    new = _write(
        tmp_path / "new.jsonl",
        {"dataset": "d", "eval_id": "a", "target": "t", "score": 0.25, "status": "ok"},
        {"dataset": "d", "eval_id": "a", "target": "t", "score": 0.5, "status": "ok"} | R1,
    )
    key = ("d", "a", "t")
    assert compare_files(base, new) == Comparison(
        base_path=str(base),
        new_path=str(new),
        min_delta=0.05,
        cases=(CaseDelta(key, _r(0.5, "ok"), _r(0.375, "ok", 2), "regressed"),),
        counts={"improved": 0, "regressed": 1, "unchanged": 0, "new": 0, "missing": 0},
        mean_delta=-0.125,
        ci=(-0.125, -0.125),
        base_pass_rate=1.0,
        new_pass_rate=1.0,
        base=Side(runs=1, statuses={"ok": 1}, mean=0.5, pass_rate=1.0),
        new=Side(runs=2, statuses={"ok": 2}, mean=0.375, pass_rate=1.0),
        # the run both files hold: its case's own verdict, a pass on both sides
        flips=(EvaluatorFlips("case verdict", 1),),
        sources=tuple(sorted([base, new])),
    )
    assert compare_files(base, new, min_delta=0.125).cases == (
        CaseDelta(key, _r(0.5, "ok"), _r(0.375, "ok", 2), "unchanged"),
    )
