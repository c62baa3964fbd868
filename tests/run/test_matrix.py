"""Repeats and a target matrix in one run: every (case, target, repeat) exactly once, each
repeat its own request (and cache entry), per-target concurrency, the side-by-side summary."""

from __future__ import annotations

import itertools
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import agentv
from support.cli import agentv_cli
from support.fakes import FakeLLMServer, RecordedRequest
from support.files import write
from support.results import rows
from support.targets import openai_target, write_targets

SUITE = """$schema: agentv-eval-v2
evalcases:
  - {id: c1, outcome: says 42, input_messages: [{role: user, content: one}], evaluators: [{type: contains, value: "42"}]}
  - {id: c2, outcome: says 4, input_messages: [{role: user, content: two}], evaluators: [{type: contains, value: "4"}]}
  - {id: c10, outcome: says 41, input_messages: [{role: user, content: ten}], evaluators: [{type: contains, value: "41"}]}
  - {id: c3, outcome: says x, input_messages: [{role: user, content: three}], evaluators: [{type: contains, value: "x"}]}
"""

MOCKS = """$schema: agentv-targets-v2.2
targets:
  - {name: a, provider: mock, response: "The answer is 42."}
  - {name: b, provider: mock, response: "I think 41."}
"""


@pytest.mark.slow
def test_repeat_on_two_targets_runs_each_case_target_and_repeat_once(repo: Path) -> None:
    write(repo, ".agentv/targets.yaml", MOCKS)
    write(repo, "evals/s.yaml", SUITE)
    proc = agentv_cli(
        repo,
        "eval",
        "evals/",
        "--target",
        "a",
        "--target",
        "b",
        "--repeat",
        "3",
        "--out",
        "r.jsonl",
    )
    assert proc.returncode == 7, proc.stderr
    records = rows(repo / "r.jsonl")
    assert len(records) == 24
    keys = Counter((r["eval_id"], r["target"], r["repeat"]) for r in records)
    assert set(keys) == set(itertools.product(["c1", "c2", "c10", "c3"], ["a", "b"], range(3)))
    assert set(keys.values()) == {1}

    # the summary sets the targets side by side (exact block, no timings in it)
    start = proc.stdout.index("Targets (mean of graded case means over 3 runs, 95% interval):")
    block = proc.stdout[start : proc.stdout.index("Wall time:")]
    assert block == (
        "Targets (mean of graded case means over 3 runs, 95% interval):\n"
        "  target  mean interval         pass  err tokens in/out   p50/p95 ms\n"
        "  a      0.500 [0.00, 1.00]    50.0%    0           0/0          0/0\n"
        "  b      0.500 [0.00, 1.00]    50.0%    0           0/0          0/0\n"
        "\n"
        "Repeats (mean over cases):\n"
        "  a: pass@1 0.500  pass@2 0.500  pass@3 0.500  pass^3 0.500\n"
        "  b: pass@1 0.500  pass@2 0.500  pass@3 0.500  pass^3 0.500\n"
        "\n"
        "Scores by case:\n"
        "  case            a            b\n"
        "  c1          1.000        0.000\n"
        "  c2          1.000        1.000\n"
        "  c3          0.000        0.000\n"
        "  c10         0.000        1.000\n"
        "\n"
    )
    assert "Top performing eval cases:\n  1. c1 [a]: 1.000\n" in proc.stdout


def test_the_python_api_runs_the_matrix_with_repeats(repo: Path) -> None:
    write(repo, ".agentv/targets.yaml", MOCKS)
    write(repo, "evals/s.yaml", SUITE)
    run = agentv.run_eval("evals/", target=["a", "b"], repeat=2, cwd=repo)
    assert len(run.results) == 16
    assert [t.name for t in run.summary.targets] == ["a", "b"]
    assert run.summary.repeats == 2
    (c10_b,) = [row for row in run.summary.case_stats if row[:2] == ("b", "c10")]
    assert (c10_b[2].n, c10_b[2].passes, c10_b[2].pass_at) == (2, 2, (1.0, 1.0))


def _counting_reply() -> Any:
    counter = itertools.count(1)

    def reply(rec: RecordedRequest) -> str:
        return f"Answer {next(counter)}: 42"

    return reply


@pytest.mark.slow
def test_each_repeat_is_its_own_request_and_cache_entry(repo: Path) -> None:
    with FakeLLMServer(reply=_counting_reply()) as server:
        keyed = {"api_key": "test-key-123456", "max_retries": 0}
        write_targets(
            repo,
            *(openai_target(server.url, name, model=f"{name}-model", **keyed) for name in "xy"),
        )
        write(repo, "evals/s.yaml", SUITE)
        args = ("eval", "evals/", "--target", "x", "--target", "y", "--repeat", "3", "--cache")
        first = agentv_cli(repo, *args, "--out", "a.jsonl")
        assert first.returncode == 7, first.stderr
        assert len(server.requests) == 24
        a = {
            (r["eval_id"], r["target"], r["repeat"]): r["candidate_answer"]
            for r in rows(repo / "a.jsonl")
        }
        assert len(set(a.values())) == 24  # a distinct answer for every run
        second = agentv_cli(repo, *args, "--out", "b.jsonl")
        assert len(server.requests) == 24  # nothing new was sent
        b = {
            (r["eval_id"], r["target"], r["repeat"]): r["candidate_answer"]
            for r in rows(repo / "b.jsonl")
        }
        assert a == b  # each repeat got its own cached answer back
        assert "24 target answers and 0 judge answers reused" in second.stdout


def _peak(received: list[float], window: float) -> int:
    """The most requests received within ``window`` seconds of each other."""
    received = sorted(received)
    return max(sum(1 for t in received if start <= t < start + window) for start in received)


@pytest.mark.slow
def test_a_slow_target_does_not_hold_up_a_fast_one(repo: Path) -> None:
    with FakeLLMServer(delay_ms=400) as slow, FakeLLMServer(delay_ms=100) as fast:
        write_targets(
            repo,
            openai_target(slow.url, "slow", max_retries=0, workers=1),
            openai_target(fast.url, "fast", max_retries=0, workers=2),
        )
        write(repo, "evals/s.yaml", SUITE)
        proc = agentv_cli(
            repo, "eval", "evals/", "--target", "slow", "--target", "fast", "--out", "r.jsonl"
        )
        assert proc.returncode == 7, proc.stderr
        order = [r["target"] for r in rows(repo / "r.jsonl")]  # completion order
        assert sorted(order) == ["fast"] * 4 + ["slow"] * 4
        # the fast target's four cases are done before the slow one's second
        assert [i for i, t in enumerate(order) if t == "fast"][-1] < [
            i for i, t in enumerate(order) if t == "slow"
        ][1]
        # and neither has more requests in flight than its own `workers`
        assert _peak([r.received_at for r in slow.requests], 0.35) == 1
        assert _peak([r.received_at for r in fast.requests], 0.08) <= 2


@pytest.mark.slow
def test_judge_requests_count_against_the_judge_targets_own_limit(repo: Path) -> None:
    verdict = '{"score": 1, "hits": [], "misses": [], "reasoning": "ok"}'
    with FakeLLMServer(delay_ms=20) as model, FakeLLMServer(delay_ms=200, reply=verdict) as judge:
        write_targets(
            repo,
            openai_target(model.url, "m", max_retries=0, workers=4, judge_target="j"),
            openai_target(judge.url, "j", model="j", max_retries=0, workers=1),
        )
        write(
            repo,
            "evals/judged.yaml",
            "$schema: agentv-eval-v2\nevalcases:\n"
            + "".join(
                f"  - {{id: j{i}, outcome: ok, input_messages: [{{role: user, content: q{i}}}]}}\n"
                for i in range(6)
            ),
        )
        proc = agentv_cli(repo, "eval", "evals/", "--target", "m", "--out", "r.jsonl")
        assert proc.returncode == 0, proc.stderr
        assert len(judge.requests) == 6
        # the candidate target runs four at a time; its judge, one at a time
        assert _peak([r.received_at for r in judge.requests], 0.18) == 1
        assert _peak([r.received_at for r in model.requests], 0.015) >= 2
