"""agentv compare: every category from crafted results files, the JSON and markdown
outputs, a deterministic interval, and --fail-on-regression's exit codes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentv.results.compare import compare_files, paired_bootstrap
from support.cli import invoke_cli


def _line(eval_id: str, score: float, status: str, target: str = "t", **extra: Any) -> str:
    rec = {"eval_id": eval_id, "dataset": "d", "target": target, "score": score, "status": status}
    return json.dumps({**rec, **extra})


def _write(path: Path, *lines: str) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    base = _write(
        tmp_path / "base.jsonl",
        _line("up", 0.5, "failed"),
        _line("down", 0.9, "ok"),
        _line("same", 0.8, "ok"),
        _line("tiny", 0.5, "failed"),  # +0.03: below min-delta, unchanged
        _line("broke", 0.85, "ok"),  # ok -> error: regressed even if the score barely moves
        _line("gone", 1.0, "ok"),
        _line("rep", 1.0, "ok", repeat=0),
        _line("rep", 0.0, "failed", repeat=1),  # a repeated case: the mean of its runs, 0.5
        _line("up", 0.5, "failed", target="u"),  # another target: another case
    )
    new = _write(
        tmp_path / "new.jsonl",
        _line("up", 1.0, "ok"),
        _line("down", 0.5, "failed"),
        _line("same", 0.8, "ok"),
        _line("tiny", 0.53, "failed"),
        _line("broke", 0.85, "error", error="boom"),
        _line("added", 0.7, "failed"),
        _line("rep", 1.0, "ok", repeat=0),
        _line("rep", 1.0, "ok", repeat=1),  # 1.0: improved by 0.5
        _line("up", 0.5, "failed", target="u"),
    )
    return base, new


def test_every_category(runs: tuple[Path, Path]) -> None:
    c = compare_files(*runs)
    verdicts = {(d.key[1], d.key[2]): d.verdict for d in c.cases}
    assert verdicts == {
        ("up", "t"): "improved",
        ("down", "t"): "regressed",
        ("same", "t"): "unchanged",
        ("tiny", "t"): "unchanged",
        ("broke", "t"): "regressed",
        ("gone", "t"): "missing",
        ("added", "t"): "new",
        ("rep", "t"): "improved",
        ("up", "u"): "unchanged",
    }
    assert c.counts == {"improved": 2, "regressed": 2, "unchanged": 3, "new": 1, "missing": 1}
    # paired deltas over the 6 cases graded in both runs (broke errored: no score, not
    # paired): +0.5 -0.4 0 +0.03 +0.5 0
    assert c.mean_delta == pytest.approx(0.63 / 6)
    # over the graded runs: 5 of 9 passed, then 4 of 8 (broke's error is counted apart)
    assert (c.base_pass_rate, c.new_pass_rate) == (pytest.approx(5 / 9), pytest.approx(4 / 8))
    assert (c.base.runs, c.base.graded, c.new.runs, c.new.graded) == (9, 9, 9, 8)
    assert c.new.statuses == {"ok": 4, "failed": 4, "error": 1}
    assert (c.base.mean, c.new.mean) == (pytest.approx(6.05 / 9), pytest.approx(6.03 / 8))


def test_the_interval_is_deterministic_and_sensible() -> None:
    deltas = [0.5, -0.4, 0.0, 0.03, 0.0, 0.5, 0.0]
    first = paired_bootstrap(deltas)
    assert first == paired_bootstrap(deltas)
    assert first is not None and first[0] < sum(deltas) / 7 < first[1]
    assert paired_bootstrap([0.2]) == (0.2, 0.2) and paired_bootstrap([]) is None


def test_json_output(runs: tuple[Path, Path]) -> None:
    result = invoke_cli("compare", str(runs[0]), str(runs[1]), "--format", "json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["counts"] == {"improved": 2, "regressed": 2, "unchanged": 3, "new": 1, "missing": 1}
    assert data["min_delta"] == 0.05
    assert data["pass_rate"]["change"] == pytest.approx(4 / 8 - 5 / 9)
    assert data["runs"]["new"] == {
        "runs": 9,
        "graded": 8,
        "statuses": {"ok": 4, "failed": 4, "error": 1},
        "mean": pytest.approx(6.03 / 8),
    }
    down = next(x for x in data["changed"] if x["eval_id"] == "down")
    assert down == {
        "dataset": "d",
        "eval_id": "down",
        "target": "t",
        "verdict": "regressed",
        "base": {"score": 0.9, "status": "ok", "runs": 1, "graded": 1},
        "new": {"score": 0.5, "status": "failed", "runs": 1, "graded": 1},
        "delta": pytest.approx(-0.4),
    }
    assert {x["eval_id"] for x in data["changed"]} == {
        "up",
        "down",
        "broke",
        "gone",
        "added",
        "rep",
    }
    assert data["ci95"][0] < data["mean_delta"] < data["ci95"][1]


def test_markdown_output(runs: tuple[Path, Path]) -> None:
    result = invoke_cli("compare", str(runs[0]), str(runs[1]), "--format", "markdown")
    assert result.exit_code == 0
    text = result.stdout
    assert text.startswith("### agentv: comparison\n\n- Improved: 2  Regressed: 2  Unchanged: 3")
    assert "- Runs: 9 runs (9 graded) -> 9 runs (8 graded, 1 error)" in text
    assert "- Mean score (graded runs): 0.672 -> 0.754" in text
    assert "- Pass rate (graded runs): 55.6% -> 50.0%" in text
    assert "| `d/broke [t]` | 0.850 ok | - error | - | regressed |" in text
    assert "**2 regressed**" in text
    assert "| case | base | new | delta | verdict |\n|---|---|---|---|---|\n" in text
    assert "| `d/down [t]` | 0.900 ok | 0.500 failed | -0.400 | regressed |" in text
    assert "| `d/gone [t]` | 1.000 ok | - | - | missing |" in text


def test_fail_on_regression_exit_codes(runs: tuple[Path, Path], tmp_path: Path) -> None:
    base, new = runs
    failing = invoke_cli("compare", str(base), str(new), "--fail-on-regression")
    assert failing.exit_code == 1
    assert "d/down [t]" in failing.stdout
    # against itself nothing regressed
    same = invoke_cli("compare", str(base), str(base), "--fail-on-regression")
    assert same.exit_code == 0 and "Regressed: 0" in same.stdout
    # a drop of more than --min-delta regresses; one within it does not
    small_base = _write(tmp_path / "b2.jsonl", _line("x", 0.5, "failed"))
    small_new = _write(tmp_path / "n2.jsonl", _line("x", 0.44, "failed"))
    args = ["compare", str(small_base), str(small_new), "--fail-on-regression"]
    assert invoke_cli(*args).exit_code == 1  # -0.06 against the default 0.05
    assert invoke_cli(*args, "--min-delta", "0.1").exit_code == 0


def test_a_broken_results_file_is_named_with_its_line(tmp_path: Path) -> None:
    good = _write(tmp_path / "good.jsonl", _line("x", 1.0, "ok"))
    bad = _write(tmp_path / "bad.jsonl", _line("x", 1.0, "ok"), "{not json")
    result = invoke_cli("compare", str(good), str(bad))
    assert result.exit_code == 1
    assert f"{bad}:2: not a result (not JSON)" in result.stderr
