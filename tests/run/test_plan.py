"""A finished plan: ``plan_run`` decides thresholds, resume, rerun and totals, and nothing
changes the plan afterwards; ``prepare_run``'s summary is what the run then does."""

from __future__ import annotations

import asyncio
import json
from dataclasses import FrozenInstanceError
from pathlib import Path
from typing import Any

import pytest

import agentv
from agentv.run.plan import CaseJob, plan_run
from agentv.run.resume import read_state
from agentv.targets import TargetPool
from support.files import write

TARGETS = (
    "$schema: agentv-targets-v2.2\ntargets:\n"
    "  - {name: default, provider: mock, response: 'The answer is 42.'}\n"
    "  - {name: other, provider: mock, response: 'The answer is 7.', workers: 5}\n"
)


def _suite(repo: Path, folder: str, ids: list[str], *, first: str = "question") -> Path:
    lines = ["$schema: agentv-eval-v2", "evalcases:"]
    for n, case in enumerate(ids):
        content = first if n == 0 else f"question {case}"
        lines.append(
            f"  - {{id: {case}, outcome: ok, input_messages: [{{role: user, content: "
            f"'{content}'}}], evaluators: [{{type: contains, value: '42'}}]}}"
        )
    return write(repo, f"{folder}/s.yaml", "\n".join(lines) + "\n")


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _jobs(plan: Any) -> list[tuple[str, str, int, float | None]]:
    return [
        (job.case.id, job.target.name, job.repeat, job.pass_threshold)
        for lane in plan.lanes()
        for job in lane.jobs()
        if isinstance(job, CaseJob)
    ]


def test_plan_run_returns_a_finished_plan_that_nothing_changes(repo: Path) -> None:
    write(repo, ".agentv/targets.yaml", TARGETS)
    # one folder's config sets its threshold; the other's cases have the run's
    write(repo, "strict/.agentv/config.yaml", "$schema: agentv-config-v2\npass_threshold: 0.9\n")
    strict = _suite(repo, "strict", ["a", "b"])
    plain = _suite(repo, "plain", ["c"])
    pool = TargetPool(cwd=repo)
    try:
        plan = plan_run([strict, plain], pool, cli_target=["default", "other"], repeat=2)
        assert (plan.planned, plan.total) == (12, 12)
        assert plan.thresholds == frozenset({0.9, 0.8})
        assert sorted(_jobs(plan)) == sorted(
            (case, target, r, 0.9 if case in "ab" else 0.8)
            for case in "abc"
            for target in ("default", "other")
            for r in (0, 1)
        )
        with pytest.raises(FrozenInstanceError):
            plan.total = 0  # type: ignore[misc]
        with pytest.raises(FrozenInstanceError):
            plan.resume = None  # type: ignore[misc]
        with pytest.raises(FrozenInstanceError):
            plan.lanes()[0].target = None  # type: ignore[misc]

        # the caller's threshold wins over every config's
        given = plan_run([strict, plain], pool, pass_threshold=0.5)
        assert given.thresholds == frozenset({0.5})
        assert {t for *_, t in _jobs(given)} == {0.5}
    finally:
        asyncio.run(pool.aclose())


def test_a_resumed_plan_is_decided_once_and_stays(repo: Path) -> None:
    write(repo, ".agentv/targets.yaml", TARGETS)
    suite = _suite(repo, "evals", ["a", "b", "c", "d"])
    out = repo / "r.jsonl"
    agentv.run_eval(suite, out=out, cwd=repo)
    rows = _rows(out)
    rows[1]["status"] = "error"  # b: retried
    del rows[2]  # c: never recorded
    out.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    _suite(repo, "evals", ["a", "b", "c", "d"], first="changed")  # a: its prompt changed
    pool = TargetPool(cwd=repo)
    try:
        plan = plan_run([suite], pool, resume=read_state(out, repair=False), retry_errors=True)
        expected = [("a", "default", 0, 0.8), ("b", "default", 0, 0.8), ("c", "default", 0, 0.8)]
        assert (plan.planned, plan.total, plan.changed_since, plan.retried) == (4, 3, 1, 1)
        for _ in range(2):  # walking its jobs again decides nothing anew
            assert _jobs(plan) == expected
            assert (plan.total, plan.changed_since, plan.retried) == (3, 1, 1)

        rerun = plan_run([suite], pool, rerun={("s", "d", "default"): {0}})
        assert (rerun.planned, rerun.total, rerun.changed_since) == (4, 1, 0)
        assert _jobs(rerun) == [("d", "default", 0, 0.8)]
    finally:
        asyncio.run(pool.aclose())


def test_a_prepared_runs_summary_is_what_the_run_does(repo: Path) -> None:
    write(repo, ".agentv/targets.yaml", TARGETS)
    ids = [f"c{i}" for i in range(6)]
    suite = _suite(repo, "evals", ids)
    out = repo / "r.jsonl"
    agentv.run_eval(suite, out=out, cwd=repo)
    rows = _rows(out)
    rows[1]["status"] = "error"  # c1: retried
    rows[4]["status"] = "invalid"  # c4: retried
    del rows[5]  # c5: never recorded
    partial = '{"eval_id": "c9", "dataset": "s", "stat'  # a killed run's last line
    out.write_text("".join(json.dumps(r) + "\n" for r in rows) + partial, encoding="utf-8")
    _suite(repo, "evals", ids, first="changed")  # c0: its prompt changed

    prepared = agentv.prepare_run("evals/", resume="r.jsonl", retry_errors=True, cwd=repo)
    summary = (
        prepared.total,
        prepared.changed_since,
        prepared.retried,
        prepared.set_aside,
        prepared.out,
        prepared.append,
        prepared.output_format,
        prepared.targets,
        prepared.pass_threshold,
        prepared.cache,
        prepared.finished,
    )
    targets = [("default [provider=mock]", 3)]
    assert summary == (4, 1, 2, len(partial), out, True, "jsonl", targets, 0.8, False, 0)
    run = asyncio.run(prepared.run())
    assert (run.ran, prepared.finished, run.out) == (4, 4, out)
    assert sorted(r.eval_id for r in run.results) == ["c0", "c1", "c4", "c5"]
    assert (out.parent / "r.jsonl.partial").read_text(encoding="utf-8") == partial + "\n"

    # resumed again: nothing left, and the prepared run says so before anything runs
    again = agentv.prepare_run("evals/", resume="r.jsonl", cwd=repo)
    try:
        assert (again.total, again.changed_since, again.retried, again.set_aside) == (0, 0, 0, 0)
    finally:
        again.close()
