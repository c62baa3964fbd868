"""Agents live no longer than agentv (issue 16): after SIGKILL or SIGTERM of `agentv eval`
no process its agents started survives, and a grandchild that left the process group
(``setsid``) dies at a case timeout. Real processes, real signals; each process writes
its pid to a file so the test can look for it afterwards."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentv.system.process import run_process
from support.agents import pid_alive, wait_gone
from support.cli import agentv_cli, start_agentv
from support.files import write

#: every test here starts processes (left out of `make test-fast`) and reads Linux's /proc
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc"),
]

PY = sys.executable

# An agent: writes its pid, starts a child (same group) and, with --setsid, a second one
# that leaves the group, writes their pids, then sleeps.
AGENT = """
import os, subprocess, sys, time
folder, name, mode = sys.argv[1], sys.argv[2], sys.argv[3]
def note(kind, pid):
    with open(os.path.join(folder, f"{name}.{kind}.pid"), "w") as fh:
        fh.write(str(pid))
sleep = [sys.executable, "-c", "import time; time.sleep(300)"]
child = subprocess.Popen(sleep)
note("child", child.pid)
if mode == "setsid":
    escaped = subprocess.Popen(sleep, start_new_session=True)
    note("setsid", escaped.pid)
note("agent", os.getpid())
time.sleep(300)
"""


def pids_in(folder: Path, expected: int, within: float = 60) -> list[int]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        files = sorted(folder.glob("*.pid"))
        if len(files) >= expected and all(f.read_text().strip() for f in files):
            return [int(f.read_text()) for f in files]
        time.sleep(0.05)
    raise AssertionError(f"only {len(list(folder.glob('*.pid')))} of {expected} pid files")


def kill_all(pids: list[int]) -> None:
    for pid in pids:
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)


#: the command line of a run of the sleepy suite
SLEEPY = ("eval", "evals/sleepy.yaml", "--workers", "3")


def sleeping_suite(repo: Path, pid_dir: Path, cases: int, mode: str) -> None:
    script = write(repo, "agent.py", AGENT)
    write(
        repo,
        ".agentv/targets.yaml",
        "$schema: agentv-targets-v2.2\ntargets:\n"
        "  - name: default\n    provider: cli\n"
        f"    command_template: {shlex.quote(PY)} {shlex.quote(str(script))} "
        f"{shlex.quote(str(pid_dir))} {{EVAL_ID}} {mode}\n",
    )
    body = "".join(
        f"  - id: case-{i}\n    outcome: x\n    input_messages: [{{role: user, content: hi}}]\n"
        "    execution: {evaluators: [{type: contains, value: x}]}\n"
        for i in range(cases)
    )
    write(repo, "evals/sleepy.yaml", f"$schema: agentv-eval-v2\nevalcases:\n{body}")


def test_after_sigkill_of_agentv_no_agent_process_survives(repo: Path, tmp_path: Path) -> None:
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    sleeping_suite(repo, pid_dir, cases=3, mode="plain")
    agentv = start_agentv(repo, *SLEEPY, stdout=subprocess.DEVNULL, text=False)
    pids: list[int] = []
    try:
        pids = pids_in(pid_dir, expected=6)  # 3 agents and 3 children
        agentv.send_signal(signal.SIGKILL)
        agentv.wait(10)
        survivors = [pid for pid in pids if not wait_gone(pid)]
        assert not survivors, f"{len(survivors)} of {len(pids)} agent processes outlived agentv"
    finally:
        if agentv.poll() is None:
            agentv.kill()
            agentv.wait()
        kill_all(pids)


def test_after_sigterm_of_agentv_no_agent_process_survives_setsid_ones_included(
    repo: Path, tmp_path: Path
) -> None:
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    sleeping_suite(repo, pid_dir, cases=2, mode="setsid")
    agentv = start_agentv(repo, *SLEEPY, stdout=subprocess.DEVNULL, text=False)
    pids: list[int] = []
    try:
        pids = pids_in(pid_dir, expected=6)  # 2 agents, 2 children, 2 that left the group
        agentv.send_signal(signal.SIGTERM)
        assert agentv.wait(30) == 143
        survivors = [pid for pid in pids if not wait_gone(pid)]
        assert not survivors, f"{len(survivors)} of {len(pids)} agent processes outlived agentv"
    finally:
        if agentv.poll() is None:
            agentv.kill()
            agentv.wait()
        kill_all(pids)


async def test_a_setsid_grandchild_dies_at_the_case_timeout(tmp_path: Path) -> None:
    script = write(tmp_path, "agent.py", AGENT)
    command = [PY, str(script), str(tmp_path), "case", "setsid"]
    pids: list[int] = []
    try:
        result = await run_process(command, timeout=2.0)
        assert result.timed_out
        pids = pids_in(tmp_path, expected=3)
        survivors = [pid for pid in pids if not wait_gone(pid)]
        assert not survivors, "a process of the agent outlived its timeout"
    finally:
        kill_all(pids)


DRIVER = """
import asyncio, sys
from agentv.system import process
if sys.argv[2] == "pdeathsig":
    process._watchdog._broken = True  # PR_SET_PDEATHSIG alone
else:
    process._parent_death_hook = lambda: None  # the watchdog alone
    watch = process._watchdog.watch

    def watched(pgid):  # the test kills the runner once the child is watched, not before
        watch(pgid)
        open(sys.argv[3], "w").close()

    process._watchdog.watch = watched
code = "import os, time; open(%r, 'w').write(str(os.getpid())); time.sleep(300)" % sys.argv[1]
asyncio.run(process.run_process([sys.executable, "-c", code]))
"""


@pytest.mark.parametrize("binding", ["pdeathsig", "watchdog"])
def test_a_child_dies_when_its_runner_is_killed(tmp_path: Path, binding: str) -> None:
    # Each of the two bindings is enough on its own: PR_SET_PDEATHSIG, and the watchdog.
    pid_file = tmp_path / "child.pid"
    watched = tmp_path / "watched"
    driver = subprocess.Popen([PY, "-c", DRIVER, str(pid_file), binding, str(watched)])
    pids: list[int] = []
    try:
        pids = pids_in(tmp_path, expected=1, within=30)
        if binding == "watchdog":
            deadline = time.monotonic() + 30
            while not watched.exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        driver.send_signal(signal.SIGKILL)
        driver.wait(30)
        assert wait_gone(pids[0]), f"the child outlived its runner ({binding})"
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        kill_all(pids)


# A program that starts a child in its group and one that leaves it (setsid), writes their
# pids, and exits at once with 0: its work is done, its leftovers are not.
LEAVER = """
import os, subprocess, sys
folder = sys.argv[1]
sleep = [sys.executable, "-c", "import time; time.sleep(300)"]
for kind, new_session in (("child", False), ("setsid", True)):
    pid = subprocess.Popen(sleep, start_new_session=new_session).pid
    with open(os.path.join(folder, f"{kind}.pid"), "w") as fh:
        fh.write(str(pid))
print('{"score": 1}')
"""


async def test_what_a_child_leaves_running_dies_when_it_exits(tmp_path: Path) -> None:
    script = write(tmp_path, "leaver.py", LEAVER)
    pids: list[int] = []
    try:
        result = await run_process([PY, str(script), str(tmp_path)], timeout=60)
        assert result.ok and result.stdout.strip() == '{"score": 1}'
        pids = pids_in(tmp_path, expected=2)
        survivors = [pid for pid in pids if not wait_gone(pid)]
        assert not survivors, "a process the child started outlived it"
    finally:
        kill_all(pids)


def test_agents_and_code_evaluators_leave_nothing_running(repo: Path, tmp_path: Path) -> None:
    # The same through a run: a cli agent and a code evaluator, each leaving two sleepers.
    agent_dir, grader_dir = tmp_path / "agent", tmp_path / "grader"
    agent_dir.mkdir()
    grader_dir.mkdir()
    script = write(repo, "leaver.py", LEAVER)
    write(
        repo,
        ".agentv/targets.yaml",
        "$schema: agentv-targets-v2.2\ntargets:\n  - name: default\n    provider: cli\n"
        f"    command_template: {shlex.quote(PY)} {shlex.quote(str(script))} "
        f"{shlex.quote(str(agent_dir))}\n",
    )
    grader = f"{shlex.quote(PY)} {shlex.quote(str(script))} {shlex.quote(str(grader_dir))}"
    write(
        repo,
        "evals/e.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n  - id: c\n    outcome: x\n"
        "    input_messages: [{role: user, content: hi}]\n"
        f"    evaluators: [{{type: code, script: {json.dumps(grader)}}}]\n",
    )
    pids: list[int] = []
    try:
        proc = agentv_cli(repo, "eval", "evals", "--out", "r.jsonl")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        pids = pids_in(agent_dir, expected=2) + pids_in(grader_dir, 2)
        survivors = [pid for pid in pids if not wait_gone(pid)]
        assert not survivors, f"{len(survivors)} of {len(pids)} leftovers outlived their case"
    finally:
        kill_all(pids)
