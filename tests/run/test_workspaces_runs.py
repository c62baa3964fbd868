"""Workspaces across a run's machinery: a target matrix, ``--resume``, the budget, Claude Code
as the agent, a dry run, and Ctrl-C (docs/eval-files.md, "Workspaces"). Ray:
tests/run/executors/test_ray_executor.py."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agentv.system.filelock import FileLock
from support.agents import FAKE_CLAUDE, install_script
from support.cli import agentv_cli
from support.files import write
from support.gitrepo import commit, git
from support.paths import ROOT
from support.results import rows

pytestmark = pytest.mark.slow  # agentv, git and the agents run as processes

PY = shlex.quote(sys.executable)
CALC = "def add(a, b):\n    return a - b\n"
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"

# A coding agent: logs each call (outside its workspace: these runs are not sandboxed),
# waits when asked (until the test interrupts the run), fixes calc.py, and says where it
# worked.
AGENT = """\
import os, sys, time
from pathlib import Path

log, prompt = sys.argv[1], sys.argv[2]
with open(log, "a") as fh:
    fh.write(f"{os.environ.get('AGENT_NAME', '?')}|{prompt}|{os.getcwd()}\\n")
if "wait" in prompt:
    time.sleep(120)
calc = Path("calc.py")
calc.write_text(calc.read_text().replace("a - b", "a + b"))
print(f"fixed in {os.getcwd()}")
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("AGENTV_WORKSPACE_ROOT", str(tmp_path / "workspaces"))
    (tmp_path / ".git").mkdir()
    write(tmp_path, "agent.py", AGENT)
    log = tmp_path / "calls.log"
    agent = f"{PY} {tmp_path / 'agent.py'} {log} {{PROMPT}}"
    write(
        tmp_path,
        ".agentv/targets.yaml",
        f"""$schema: agentv-targets-v2.2
targets:
  - name: alpha
    provider: cli
    command_template: {agent}
    env: {{AGENT_NAME: alpha}}
    workers: 1
  - name: beta
    provider: cli
    command_template: {agent}
    env: {{AGENT_NAME: beta}}
    workers: 1
  - name: claude
    provider: claude-code
    executable: {tmp_path / "bin" / "claude"}
    model: claude-sonnet-4-5
    allowed_tools: [Bash, Edit]
    workers: 1
""",
    )
    (tmp_path / "bin").mkdir()
    install_script(tmp_path / "bin", "claude", FAKE_CLAUDE)
    commit(tmp_path / "calc", {"calc.py": CALC, "test_calc.py": TEST}, "one")
    git(tmp_path / "calc", "tag", "v1")
    return tmp_path


def suite(project: Path, cases: str, commit_ref: str = "v1") -> Path:
    return write(
        project,
        "evals/fix.yaml",
        f"""$schema: agentv-eval-v2
workspace:
  repos: [{{path: ., repo: ../calc, commit: {commit_ref}}}]
  isolation: none
evalcases:
{cases}""",
    )


def case(case_id: str, prompt: str) -> str:
    return f"""  - id: {case_id}
    outcome: fixed
    input_messages: [{{role: user, content: {prompt}}}]
    evaluators:
      - {{name: tests, type: command, command: {PY} -m pytest -q -p no:cacheprovider}}
"""


def calls(project: Path) -> list[list[str]]:
    log = project / "calls.log"
    return [line.split("|") for line in log.read_text().splitlines()] if log.exists() else []


def run(project: Path, *args: str) -> tuple[int, list[dict[str, Any]]]:
    done = agentv_cli(project, "eval", "evals/fix.yaml", "--quiet", *args)
    out = args[args.index("--resume") + 1] if "--resume" in args else args[args.index("--out") + 1]
    records = rows(project / out)
    return done.returncode, sorted(records, key=lambda r: (r["eval_id"], r["target"]))


def test_a_matrix_gives_each_target_its_own_identical_workspace(project: Path) -> None:
    suite(project, case("fix", "please fix"))
    code, records = run(project, "--target", "alpha", "--target", "beta", "--out", "r.jsonl")
    assert code == 0
    alpha, beta = records
    sha = git(project / "calc", "rev-parse", "v1")
    for record in (alpha, beta):
        assert record["status"] == "ok"
        assert record["workspace"]["repos"][0]["commit"] == sha
        assert record["workspace"]["changes"]["modified"] == ["calc.py"]
        assert record["workspace"]["digest"] == alpha["workspace"]["digest"]
    (a_name, _, a_cwd), (b_name, _, b_cwd) = sorted(calls(project))
    assert (a_name, b_name) == ("alpha", "beta")
    assert a_cwd != b_cwd  # a folder each, both gone
    assert not Path(a_cwd).exists() and not Path(b_cwd).exists()


def test_resume_runs_again_the_cases_whose_workspace_changed(project: Path) -> None:
    suite(project, case("one", "please fix") + case("two", "please fix"))
    code, first = run(project, "--target", "alpha", "--out", "r.jsonl")
    assert code == 0 and len(calls(project)) == 2
    code, same = run(project, "--target", "alpha", "--resume", "r.jsonl")
    assert code == 0 and same == first and len(calls(project)) == 2  # nothing to do
    # the repository moves on and the file pins the new commit: every run is done again
    later = commit(project / "calc", {"README.md": "v2\n"}, "two")
    suite(project, case("one", "please fix") + case("two", "please fix"), commit_ref=later)
    code, resumed = run(project, "--target", "alpha", "--resume", "r.jsonl")
    assert code == 0 and len(calls(project)) == 4
    latest = {r["eval_id"]: r for r in resumed}  # the latest record of each run
    assert {k: r["workspace"]["repos"][0]["commit"] for k, r in latest.items()} == {
        "one": later,
        "two": later,
    }


def test_claude_code_in_a_workspace_under_a_budget(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(
        "FAKE_CLAUDE_EVENTS", str(ROOT / "tests" / "data" / "claude_code" / "fix_calc.jsonl")
    )
    monkeypatch.setenv("FAKE_CLAUDE_RECORD", str(project / "claude.jsonl"))
    suite(project, case("a", "please fix") + case("b", "please fix") + case("c", "please fix"))
    code, records = run(project, "--target", "claude", "--budget-usd", "0.001", "--out", "r.jsonl")
    assert code == 4  # the budget stopped the run
    ok = [r for r in records if r["status"] == "ok"]
    skipped = [r for r in records if r["status"] == "skipped"]
    assert (len(ok), len(skipped)) == (1, 2)
    (done,) = ok
    # the recorded session's answer, tokens and own price, and what it did to the
    # workspace: the edit it replayed, graded by the repository's test
    assert done["candidate_answer"] == "Fixed add() in calc.py: it now returns a + b."
    assert done["cost"]["target"] == {"usd": 0.005632}
    assert [s["name"] for s in done["trajectory"]] == ["Bash", "Edit", "Bash"]
    assert done["workspace"]["changes"]["modified"] == ["calc.py"]
    assert done["evaluator_results"][0]["score"] == 1.0
    sent = [json.loads(line) for line in (project / "claude.jsonl").read_text().splitlines()]
    assert len(sent) == 1  # the budget sent nothing more
    assert sent[0]["cwd"] != str(project) and not Path(sent[0]["cwd"]).exists()


def test_a_dry_run_still_makes_the_workspaces(project: Path) -> None:
    suite(project, case("fix", "please fix"))
    code, (record,) = run(project, "--target", "alpha", "--dry-run", "--out", "r.jsonl")
    assert code == 0  # a failed case does not fail the run (only --threshold does)
    assert calls(project) == []  # the mock answered
    assert record["workspace"]["changes"]["modified"] == []
    assert record["workspace"]["repos"][0]["ref"] == "v1"
    assert record["evaluator_results"][0]["score"] == 0.0  # nobody fixed it


@pytest.mark.parametrize("mode", ["temp", "pooled"])
def test_ctrl_c_removes_temp_workspaces_and_unlocks_pooled_slots(project: Path, mode: str) -> None:
    path = suite(project, case("slow", "please wait"))
    path.write_text(
        path.read_text().replace("  isolation: none\n", f"  isolation: none\n  mode: {mode}\n")
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentv",
            "eval",
            "evals/fix.yaml",
            "--target",
            "alpha",
            "--quiet",
            "--out",
            "r.jsonl",
        ],
        cwd=project,
        env={**os.environ, "CI": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60  # a hang guard only
        while not calls(project):
            assert time.monotonic() < deadline and proc.poll() is None, proc.stderr
            time.sleep(0.1)
        ((_, _, workspace),) = calls(project)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    folder = Path(workspace)
    if mode == "temp":
        assert not folder.exists()
    else:
        assert folder.is_dir()  # a slot stays, unlocked, for the next run
        lock = FileLock(folder.with_name(folder.name + ".lock"))
        assert lock.try_acquire()
        lock.release()
