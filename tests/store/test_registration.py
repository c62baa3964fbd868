"""``agentv eval`` registers its run in the store when it starts and completes the entry
when it ends; ``--resume`` and reruns update the run they add to; two runs registering at
once, with the workbench open, both land whole."""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from support.cli import agentv_cli, start_agentv
from support.files import write
from support.results import rows

#: every test here runs agentv as a process: left out of `make test-fast`
pytestmark = pytest.mark.slow

EVAL = """\
$schema: agentv-eval-v2
dataset: capitals
evalcases:
  - id: france
    outcome: Names Paris.
    input_messages:
      - {role: user, content: What is the capital of France?}
    execution:
      evaluators: [{type: contains, value: Paris}]
  - id: japan
    outcome: Names Tokyo.
    input_messages:
      - {role: user, content: What is the capital of Japan?}
    execution:
      evaluators: [{type: contains, value: Tokyo}]
"""
TARGETS = """\
$schema: agentv-targets-v2.2
targets:
  - name: default
    provider: mock
    response: Paris.
    delay_ms: {delay}
"""


def listed(project: Path, *args: str) -> list[dict]:
    done = agentv_cli(project, "runs", "--format", "json", *args)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_run_is_registered_and_completed(repo: Path) -> None:
    write(repo, "evals/capitals.yaml", EVAL)
    write(repo, ".agentv/targets.yaml", TARGETS.format(delay=0))
    done = agentv_cli(repo, "eval", "evals/", "--out", "results.jsonl", "--repeat", "2")
    assert done.returncode == 7, done.stderr
    (run,) = listed(repo)
    digest = hashlib.sha256(EVAL.encode()).hexdigest()
    assert {
        k: run[k] for k in ("id", "origin", "state", "targets", "repeats", "pass_threshold")
    } == {
        "id": 1,
        "origin": "eval",
        "state": "finished",
        "targets": ["default"],
        "repeats": 2,
        "pass_threshold": 0.8,
    }
    assert run["command"] == ["agentv", "eval", "evals/", "--out", "results.jsonl", "--repeat", "2"]
    assert run["eval_files"] == [{"path": str(repo / "evals" / "capitals.yaml"), "sha256": digest}]
    assert run["results"] == str(repo / "results.jsonl")
    assert (run["total"], run["statuses"], run["pass_rate"], run["mean"]) == (
        4,
        {"ok": 2, "failed": 2},
        0.5,
        0.5,
    )
    assert run["git_commit"] is None  # the folder holds a .git marker, not a repository
    # the summary --summary-json writes for the file is the run's
    summary = agentv_cli(repo, "eval", "evals/", "--out", "again.jsonl", "--summary-json", "s.json")
    assert summary.returncode == 7  # one case fails
    figures = json.loads((repo / "s.json").read_text())
    newest = listed(repo)[0]
    assert (newest["total"], newest["pass_rate"], newest["mean"], newest["wall_seconds"]) == (
        figures["total"],
        figures["pass_rate"],
        figures["mean"],
        figures["time"]["wall_seconds"],
    )


def test_resume_and_rerun_update_the_run_they_add_to(repo: Path) -> None:
    write(repo, "evals/capitals.yaml", EVAL)
    write(repo, ".agentv/targets.yaml", TARGETS.format(delay=0))
    assert agentv_cli(repo, "eval", "evals/", "--out", "r.jsonl").returncode == 7
    # as if the run had stopped after its first record
    lines = (repo / "r.jsonl").read_text().splitlines(keepends=True)
    (repo / "r.jsonl").write_text(lines[0])
    assert agentv_cli(repo, "runs", "import", "r.jsonl").returncode == 0
    assert listed(repo)[0]["total"] == 1
    resumed = agentv_cli(repo, "eval", "evals/", "--resume", "r.jsonl")
    assert resumed.returncode == 7, resumed.stderr
    assert listed(repo)[0]["statuses"] == {"ok": 1, "failed": 1}
    write(repo, ".agentv/targets.yaml", TARGETS.format(delay=0).replace("Paris.", "Paris, Tokyo."))
    rerun = agentv_cli(repo, "eval", "evals/", "--rerun-failed", "r.jsonl")
    assert rerun.returncode == 0, rerun.stderr
    (run,) = listed(repo)
    assert len(rows(repo / "r.jsonl")) == 3  # one record, one resumed, one rerun
    assert (run["id"], run["state"], run["total"], run["statuses"]) == (1, "finished", 2, {"ok": 2})
    assert [i["command"][2:] for i in run["invocations"]] == [
        ["evals/", "--out", "r.jsonl"],
        ["evals/", "--resume", "r.jsonl"],
        ["evals/", "--rerun-failed", "r.jsonl"],
    ]


def test_registration_can_be_turned_off(repo: Path) -> None:
    write(repo, "evals/capitals.yaml", EVAL)
    write(repo, ".agentv/targets.yaml", TARGETS.format(delay=0))
    write(repo, ".agentv/config.yaml", "$schema: agentv-config-v2\nregister_runs: false\n")
    assert agentv_cli(repo, "eval", "evals/", "--out", "r.jsonl").returncode == 7
    assert not (repo / ".agentv" / "runs.sqlite").exists()
    assert agentv_cli(repo, "validate", ".agentv/config.yaml").returncode == 0


def test_a_store_that_cannot_be_written_leaves_the_run_alone(repo: Path) -> None:
    write(repo, "evals/capitals.yaml", EVAL)
    write(repo, ".agentv/targets.yaml", TARGETS.format(delay=0))
    write(repo, "not-a-store.sqlite", "plain text, not a database\n" * 50)
    done = agentv_cli(repo, "eval", "evals/", "--out", "r.jsonl", "--store", "not-a-store.sqlite")
    assert done.returncode == 7
    assert "warning: the run is not registered in the run store: " in done.stderr
    assert len(rows(repo / "r.jsonl")) == 2


def test_two_runs_register_at_once_with_the_workbench_open(repo: Path) -> None:
    cases = "".join(
        f"  - id: c{n}\n    outcome: x\n    input_messages: [{{role: user, content: q{n}}}]\n"
        f"    execution: {{evaluators: [{{type: contains, value: Paris}}]}}\n"
        for n in range(150)
    )
    write(repo, "evals/a.yaml", f"$schema: agentv-eval-v2\ndataset: a\nevalcases:\n{cases}")
    write(repo, "evals/b.yaml", f"$schema: agentv-eval-v2\ndataset: b\nevalcases:\n{cases}")
    write(repo, ".agentv/targets.yaml", TARGETS.format(delay=5))
    view = start_agentv(repo, "view", "--no-open")
    try:
        assert view.stdout is not None
        url = view.stdout.readline().split(": ", 1)[1].strip()
        runs = [
            start_agentv(
                repo,
                *("eval", f"evals/{name}.yaml", "--out", f"{name}.jsonl", "-q"),
                stdout=subprocess.DEVNULL,
            )
            for name in ("a", "b")
        ]
        pages = 0
        while any(p.poll() is None for p in runs):  # the workbench reads while they write
            with urllib.request.urlopen(url, timeout=30) as response:
                assert response.status == 200
            pages += 1
            time.sleep(0.05)
        for p in runs:
            assert p.wait(timeout=120) == 0, p.stderr.read() if p.stderr else ""
            if p.stderr:
                assert p.stderr.read() == ""
                p.stderr.close()
        found = {Path(r["results"]).name: r for r in listed(repo)}
        assert set(found) == {"a.jsonl", "b.jsonl"}
        for name, run in found.items():
            assert (run["state"], run["total"], run["statuses"]) == (
                "finished",
                150,
                {"ok": 150},
            ), name
        for run_id in (found["a.jsonl"]["id"], found["b.jsonl"]["id"]):
            with urllib.request.urlopen(f"{url}runs/{run_id}?size=1000", timeout=30) as response:
                page = response.read().decode()
            assert 'data-matched="150"' in page
        assert pages > 0
    finally:
        view.terminate()
        view.wait(timeout=30)
        for stream in (view.stdout, view.stderr):
            if stream is not None:
                stream.close()
