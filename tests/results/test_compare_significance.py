"""compare --significance: a drop fails the gate only when it is more than noise (the
paired bootstrap interval below zero and the exact McNemar test rejecting), with what this
many cases can detect and how many a given drop needs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import agentv
from agentv.results.stats import NormalDist, bootstrap_ci
from support.cli import invoke_cli


def _file(path: Path, verdicts: list[bool], *, runs: int = 1) -> Path:
    """A results file of ``len(verdicts)`` cases, each passed (1.0, ok) or failed (0.0)
    on every one of its ``runs``."""
    lines = []
    for i, passed in enumerate(verdicts):
        for repeat in range(runs):
            record = {
                "eval_id": f"case-{i:02d}",
                "dataset": "d",
                "target": "t",
                "repeat": repeat,
                "score": 1.0 if passed else 0.0,
                "status": "ok" if passed else "failed",
            }
            lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _drop(tmp_path: Path, dropped: int, cases: int = 50) -> tuple[Path, Path]:
    """Every case passes before; ``dropped`` of them fail after."""
    base = _file(tmp_path / "base.jsonl", [True] * cases)
    new = _file(tmp_path / "new.jsonl", [i >= dropped for i in range(cases)])
    return base, new


def _gate(base: Path, new: Path, *extra: str) -> tuple[int, str, str]:
    result = invoke_cli("compare", str(base), str(new), "--fail-on-regression", *extra)
    return result.exit_code, result.stdout, result.stderr


def test_one_case_lost_among_50_is_noise(tmp_path: Path) -> None:
    base, new = _drop(tmp_path, 1)
    # the plain rule fails on any regressed case
    assert _gate(base, new)[0] == 1
    code, out, err = _gate(base, new, "--significance", "0.05")
    assert code == 0
    assert (
        err
        == "1 case(s) regressed, but the drop is not significant at 0.05 (--significance): not failing\n"
    )
    c = agentv.compare(base, new, significance=0.05)
    sig = c.significance
    assert sig is not None
    assert (sig.cases, sig.runs, sig.lost, sig.gained) == (50, 1, 1, 0)
    assert sig.p_value == 1.0  # 2 * P(X <= 0) for one discordant pair is 1
    # the bootstrap keeps resamples without the lost case: the interval reaches 0
    assert sig.interval == bootstrap_ci([-1.0] + [0.0] * 49, level=0.95)
    assert sig.interval is not None and sig.interval[1] == 0.0
    assert (sig.score_drop, sig.verdict_drop, sig.significant, c.fails) == (
        False,
        False,
        False,
        False,
    )
    assert "Drop significant at 0.05: no" in out


def test_twenty_cases_lost_among_50_fail(tmp_path: Path) -> None:
    base, new = _drop(tmp_path, 20)
    code, out, err = _gate(base, new, "--significance", "0.05")
    assert code == 1
    assert err == "20 case(s) regressed and the drop is significant at 0.05\n"
    sig = agentv.compare(base, new, significance=0.05).significance
    assert sig is not None
    assert sig.p_value == pytest.approx(2 / 2**20, rel=1e-12)  # 2 * P(X <= 0) of 20 pairs
    assert sig.interval is not None and sig.interval[1] < 0
    assert sig.significant
    assert f"verdicts: 20 lost, 0 gained, exact McNemar p = {2 / 2**20:.4g}" in out
    assert "Drop significant at 0.05: yes" in out


def test_lost_and_gained_alike_is_no_drop(tmp_path: Path) -> None:
    # 10 cases lost, 10 gained: the mean does not move, McNemar sees a fair coin
    base = _file(tmp_path / "base.jsonl", [i < 10 for i in range(50)])
    new = _file(tmp_path / "new.jsonl", [10 <= i < 20 for i in range(50)])
    c = agentv.compare(base, new, significance=0.05)
    sig = c.significance
    assert sig is not None
    assert (sig.lost, sig.gained, sig.p_value) == (10, 10, 1.0)
    assert not sig.significant and not c.fails
    assert len(c.regressed) == 10


def test_scores_that_fall_without_a_verdict_changing(tmp_path: Path) -> None:
    # every case still passes, each a little lower: the bootstrap alone decides
    def scores(path: Path, score: float) -> Path:
        lines = [
            json.dumps(
                {
                    "eval_id": f"c{i}",
                    "dataset": "d",
                    "target": "t",
                    "score": score + i / 1000,
                    "status": "ok",
                }
            )
            for i in range(30)
        ]
        path.write_text("\n".join(lines) + "\n")
        return path

    c = agentv.compare(
        scores(tmp_path / "a.jsonl", 0.95), scores(tmp_path / "b.jsonl", 0.85), significance=0.05
    )
    sig = c.significance
    assert sig is not None
    assert (sig.lost, sig.gained, sig.verdict_drop) == (0, 0, True)
    assert sig.interval is not None and sig.interval[1] == pytest.approx(-0.1)
    assert sig.significant and c.fails


def test_what_the_pairs_can_detect_by_hand(tmp_path: Path) -> None:
    base, new = _drop(tmp_path, 10)
    sig = agentv.compare(base, new, significance=0.05, detect=0.05).significance
    assert sig is not None
    z = NormalDist().inv_cdf(0.975) + NormalDist().inv_cdf(0.8)  # 1.959964 + 0.841621
    # the verdicts changed for 10 of 50 pairs: null variance 0.2, and so for the scores
    assert sig.detectable_rate == pytest.approx(z * math.sqrt(0.2 / 50), rel=1e-12)
    assert sig.detectable_score == pytest.approx(z * math.sqrt(0.2 / 50), rel=1e-12)
    # a drop of 0.05: z**2 * 0.2 / 0.05**2 cases
    assert sig.cases_for_rate == math.ceil(z * z * 0.2 / 0.0025) == 628
    assert sig.cases_for_score == 628
    out = _gate(base, new, "--significance", "0.05", "--detect", "0.05")[1]
    assert (
        f"Detectable with 80% power among 50 paired cases (1 run each): a pass-rate change of "
        f"{z * math.sqrt(0.2 / 50):.3f}, a mean score change of {z * math.sqrt(0.2 / 50):.3f}"
    ) in out
    assert (
        "At 0.05 with 80% power: a pass-rate drop of 0.05 needs 628 cases, a mean score drop "
        "of 0.05 needs 628 cases"
    ) in out


def test_detect_alone_keeps_the_plain_gate(tmp_path: Path) -> None:
    base, new = _drop(tmp_path, 1)
    code = _gate(base, new, "--detect", "0.1")[0]
    assert code == 1  # one regressed case fails, as without --detect
    data = json.loads(
        invoke_cli("compare", str(base), str(new), "--detect", "0.1", "--format", "json").stdout
    )
    sig = data["significance"]
    assert (sig["alpha"], sig["gate"], sig["significant"]) == (0.05, False, False)
    assert sig["mcnemar"] == {"lost": 1, "gained": 0, "p_value": 1.0}
    # one pair changed: the floor z**2 * step / n holds the pass-rate effect up
    z = NormalDist().inv_cdf(0.975) + NormalDist().inv_cdf(0.8)
    assert sig["detectable"]["pass_rate"] == pytest.approx(
        max(z * math.sqrt(1 / 50 / 50), z * z / 50), rel=1e-12
    )
    assert sig["detect"]["cases_for_pass_rate"] == math.ceil(z * z * 0.1 / 0.01 - 1e-9)


def test_repeats_are_paired_by_case(tmp_path: Path) -> None:
    base = _file(tmp_path / "base.jsonl", [True] * 40, runs=3)
    new = _file(tmp_path / "new.jsonl", [i >= 15 for i in range(40)], runs=3)
    sig = agentv.compare(base, new, significance=0.01).significance
    assert sig is not None
    assert (sig.cases, sig.runs, sig.lost) == (40, 3, 15)
    assert sig.significant


def test_out_of_range_levels_are_refused(tmp_path: Path) -> None:
    base, new = _drop(tmp_path, 1)
    with pytest.raises(agentv.ConfigError, match="significance must be between 0 and 1"):
        agentv.compare(base, new, significance=1.5)
    result = invoke_cli("compare", str(base), str(new), "--significance", "0")
    assert result.exit_code == 2
