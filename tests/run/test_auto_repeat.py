"""--repeat auto on a suite of settled and coin-flip cases (offline: mock targets and mock
judges whose scores are drawn per request): the coin flips get the repeats, each stops as
the rule says, the budget stops the rounds, and a resumed run continues the same plan."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import agentv
from support.cli import agentv_cli, invoke_cli
from support.files import write

STEADY = ["steady-1", "steady-2", "poor-1"]
COINS = ["coin-1", "coin-2", "coin-3"]


def _verdict(score: float) -> str:
    return json.dumps({"score": score, "hits": [], "misses": [], "reasoning": f"{score}"})


def _project(root: Path, *, flipper: str = "", workers: int = 3) -> None:
    """Cases that settle at once (a judge that always gives 1.0, or always 0.2) and coin
    flips (a judge that draws 0.75 or 0.85 for each request: near the 0.8 threshold,
    passing half the time); ``flipper``: more settings of the coin flips' target."""
    write(root, ".git/HEAD", "ref: refs/heads/main\n")
    write(
        root,
        ".agentv/targets.yaml",
        f"""$schema: agentv-targets-v2.2
targets:
  - name: default
    provider: mock
    response: "fine"
    judge_target: high
  - name: poor
    provider: mock
    response: "poor"
    judge_target: low
  - name: flipper
    provider: mock
    response: "heads or tails"
    judge_target: coin
    workers: {workers}
{flipper}
  - {{name: high, provider: mock, response: '{_verdict(1.0)}'}}
  - {{name: low, provider: mock, response: '{_verdict(0.2)}'}}
  - name: coin
    provider: mock
    seed: 7
    responses: ['{_verdict(0.75)}', '{_verdict(0.85)}']
""",
    )
    cases = []
    for case in [*STEADY, *COINS]:
        target = "flipper" if case.startswith("coin") else "poor" if case == "poor-1" else None
        execution = f"\n    execution: {{target: {target}}}" if target else ""
        cases.append(
            f"  - id: {case}\n    outcome: Answers.\n"
            f"    input_messages: [{{role: user, content: 'Question {case}?'}}]{execution}\n"
        )
    write(root, "evals/auto.yaml", "$schema: agentv-eval-v2\nevalcases:\n" + "".join(cases))


def _records(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _by_case(records: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for record in sorted(records, key=lambda r: (r["eval_id"], r["repeat"])):
        found.setdefault(record["eval_id"], []).append(record)
    return found


def _sign_test(passed: int, failed: int) -> float:
    """The two-sided exact sign test, written out again: 2 * P(X <= min) for X ~ B(n, 1/2)."""
    n = passed + failed
    tail = sum(math.comb(n, i) for i in range(min(passed, failed) + 1)) / 2**n
    return min(1.0, 2 * tail)


def _runs_the_rule_gives(statuses: list[str], *, most: int = 10, alpha: float = 0.05) -> int:
    """How many runs a coin flip (every run within the margin: never clear) gets when its
    runs end as ``statuses``: the first count whose votes settle it, else the maximum."""
    for n in range(1, most + 1):
        passed = statuses[:n].count("ok")
        if _sign_test(passed, n - passed) <= alpha:
            return n
    return most


def test_the_coin_flips_get_the_repeats(tmp_path: Path) -> None:
    _project(tmp_path)
    run = agentv.run_eval("evals", cwd=tmp_path, out=tmp_path / "r.jsonl", repeat="auto")
    cases = _by_case(_records(tmp_path / "r.jsonl"))
    for case in STEADY:  # clear of the threshold at once: one run each
        assert len(cases[case]) == 1
        assert cases[case][0]["auto_repeat"] == {
            "max": 10,
            "confidence": 0.95,
            "margin": 0.1,
            "threshold": 0.8,
            "reason": "first run",
        }
    for case in COINS:
        runs = cases[case]
        statuses = [r["status"] for r in runs]
        assert [r["repeat"] for r in runs] == list(range(len(runs)))
        assert {r["score"] for r in runs} <= {0.75, 0.85}
        # as many runs as the rule gives for what these runs drew, no more, no fewer
        assert len(runs) == _runs_the_rule_gives(statuses) > 1, case
        for n, record in enumerate(runs[1:], 1):  # each says what it was made after
            passed = statuses[:n].count("ok")
            said = record["auto_repeat"]["reason"]
            assert said.startswith(
                f"unsettled after {n} run(s): {passed} passed, {n - passed} failed "
                f"(p = {_sign_test(passed, n - passed):.3g})"
            )
    assert run.rounds == max(len(cases[c]) for c in COINS)
    auto = run.summary.auto_repeat
    assert auto is not None
    assert auto.runs == len(STEADY) + sum(len(cases[c]) for c in COINS)
    assert auto.count("settled", runs=1) == len(STEADY)
    by_id = {c.eval_id: c for c in auto.cases}
    for case in COINS:
        expected = (
            "settled"
            if _sign_test(
                [r["status"] for r in cases[case]].count("ok"),
                [r["status"] for r in cases[case]].count("failed"),
            )
            <= 0.05
            else "max"
        )
        assert (by_id[case].runs, by_id[case].state) == (len(cases[case]), expected)


@pytest.mark.slow
def test_the_summary_says_how_many_runs_and_why(tmp_path: Path) -> None:
    _project(tmp_path)
    done = agentv_cli(
        tmp_path,
        "eval",
        "evals",
        "--repeat",
        "auto",
        "--max-repeat",
        "4",
        "--out",
        "r.jsonl",
        "--summary-json",
        "s.json",
    )
    assert done.returncode == 7, done.stdout + done.stderr  # the poor case fails
    cases = _by_case(_records(tmp_path / "r.jsonl"))
    lengths = {case: len(cases[case]) for case in COINS}
    assert all(n == 4 for n in lengths.values())  # 4 votes never settle at 0.95: p >= 0.125
    assert (
        "Auto repeats (--repeat auto: at most 4, confidence 0.95, margin 0.1): 15 runs of 6 "
        "cases: 3 settled after one run, 3 unsettled at the maximum"
    ) in done.stdout
    for case in COINS:
        passed = [r["status"] for r in cases[case]].count("ok")
        assert (
            f"  {case} [flipper]: 4 runs, unsettled at the maximum: {passed} passed, "
            f"{4 - passed} failed (p = {_sign_test(passed, 4 - passed):.3g})"
        ) in done.stdout
    data = json.loads((tmp_path / "s.json").read_text())["auto_repeat"]
    assert data["rule"] == {"max": 4, "confidence": 0.95, "margin": 0.1}
    assert data["runs"] == 15 and data["settled_first"] == 3
    assert data["cases"] == {"settled": 3, "max": 3, "budget": 0, "stopped": 0, "no_verdict": 0}


def test_the_budget_stops_the_rounds(tmp_path: Path) -> None:
    # every answer of the coin flips' target costs $1: 4 output tokens at $250,000 a million
    _project(
        tmp_path,
        flipper="    report_usage: true\n    price: {input_per_mtok: 0, output_per_mtok: 250000}",
        workers=1,
    )
    run = agentv.run_eval(
        "evals", cwd=tmp_path, out=tmp_path / "r.jsonl", repeat="auto", budget_usd=4.5
    )
    records = _records(tmp_path / "r.jsonl")
    coins = [r for r in records if r["eval_id"] in COINS]
    # round 1: three answers ($3); round 2, one at a time: the first answer is graded
    # ($4), the second answer is sent ($5) but its judge finds the budget reached, the
    # third is not sent: both recorded skipped; no round after
    assert [(r["repeat"], r["status"]) for r in coins] == [
        (0, coins[0]["status"]),
        (0, coins[1]["status"]),
        (0, coins[2]["status"]),
        (1, coins[3]["status"]),
        (1, "skipped"),
        (1, "skipped"),
    ]
    assert coins[3]["status"] in ("ok", "failed")
    assert [r.get("cost", {}).get("target", {}).get("usd") for r in coins] == [1.0] * 5 + [None]
    assert run.budget_reached and run.spent_usd == pytest.approx(5.0)
    assert run.rounds == 2
    auto = run.summary.auto_repeat
    assert auto is not None
    states = {c.eval_id: (c.runs, c.state) for c in auto.cases if c.eval_id in COINS}
    # two runs near the threshold settle nothing: every coin flip was left by the budget
    assert states == {
        coins[3]["eval_id"]: (2, "budget"),
        coins[4]["eval_id"]: (1, "budget"),
        coins[5]["eval_id"]: (1, "budget"),
    }


@pytest.mark.slow
def test_a_killed_run_resumed_makes_the_same_runs(tmp_path: Path) -> None:
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    for root in (whole, killed):
        _project(root, flipper="    delay_ms: 120", workers=1)
    done = agentv_cli(whole, "eval", "evals", "--repeat", "auto", "--out", "r.jsonl")
    assert done.returncode == 7, done.stdout + done.stderr  # some runs fail

    out = killed / "r.jsonl"
    proc = subprocess.Popen(
        [sys.executable, "-m", "agentv", "eval", "evals", "--repeat", "auto", "--out", str(out)],
        cwd=killed,
        env={**os.environ, "CI": "1"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60  # a hang guard
    while time.monotonic() < deadline:  # killed in the second round or later
        if out.exists() and out.read_text(encoding="utf-8").count("\n") >= 8:
            break
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    before = len(_records(out))
    resumed = agentv_cli(killed, "eval", "evals", "--resume", "r.jsonl")
    assert resumed.returncode == 7, resumed.stdout + resumed.stderr
    if before < len(_records(whole / "r.jsonl")):
        assert "whose verdict is not settled (--repeat auto)" in resumed.stdout
    # the summary is the whole file's, with the runs each case got
    assert "Auto repeats (--repeat auto: at most 10, confidence 0.95, margin 0.1)" in (
        resumed.stdout
    )

    def runs(path: Path) -> list[tuple[str, int, str, float, str]]:
        return sorted(
            (r["eval_id"], r["repeat"], r["status"], r["score"], r["auto_repeat"]["reason"])
            for r in _records(path)
        )

    assert runs(out) == runs(whole / "r.jsonl")
    again = agentv_cli(killed, "eval", "evals", "--resume", "r.jsonl")
    assert "Nothing to do" in again.stdout


def test_what_does_not_go_with_auto(tmp_path: Path) -> None:
    _project(tmp_path)
    with pytest.raises(agentv.ConfigError, match="max_repeat goes with repeat='auto'"):
        agentv.prepare_run("evals", cwd=tmp_path, max_repeat=3)
    with pytest.raises(agentv.ConfigError, match="use executor='local'"):
        agentv.prepare_run("evals", cwd=tmp_path, repeat="auto", executor="ray")
    with pytest.raises(agentv.ConfigError, match="max_repeat is from 1 to 1000"):
        agentv.prepare_run("evals", cwd=tmp_path, repeat="auto", max_repeat=0)
    bad = invoke_cli("eval", str(tmp_path / "evals"), "--repeat", "often")
    assert bad.exit_code == 2
    assert "a number of runs from 1 to 1000, or auto (not 'often')" in " ".join(
        bad.stderr.replace("│", " ").split()
    )
