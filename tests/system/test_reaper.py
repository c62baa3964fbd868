"""On Linux each call of the process runner runs under a reaper, a child subreaper
(docs/reliability.md, "No orphaned agents"): a process its command starts that leaves its
session (``setsid``), drops the call's tag and loses its parent still dies when the call
ends, and when agentv itself is killed outright. Real processes, real signals; each
hidden process writes its pid to a file so the test can look for it afterwards."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentv.system.process import run_process
from support.agents import pid_alive, wait_gone

#: every test here starts processes (left out of `make test-fast`); Linux only
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux /proc"),
]

PY = sys.executable

# Starts a sleeper that hides (a session of its own, no tag, and its parent gone once
# this program exits), writes its pid, then ``sleep``s for argv[2] seconds.
HIDER = """
import os, subprocess, sys, time
env = {k: v for k, v in os.environ.items() if k != "AGENTV_PROCESS_TAG"}
sleep = [sys.executable, "-c", "import time; time.sleep(300)"]
middle = subprocess.Popen(
    [sys.executable, "-c", "import subprocess, sys; p = subprocess.Popen(sys.argv[1:], "
     "start_new_session=True); open(%r, 'w').write(str(p.pid))" % sys.argv[1], *sleep],
    env=env,
)
middle.wait()  # the sleeper's parent is gone: nothing links it to this program any more
time.sleep(float(sys.argv[2]))
"""


def _hidden(pid_file: Path) -> int:
    return int(pid_file.read_text())


async def test_a_process_that_hid_dies_when_its_call_ends(tmp_path: Path) -> None:
    pid_file = tmp_path / "hidden.pid"
    result = await run_process([PY, "-c", HIDER, str(pid_file), "0"], timeout=60)
    pid = _hidden(pid_file)
    try:
        assert result.ok, result.stderr
        assert wait_gone(pid), "the hidden process outlived its call"
    finally:
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)


DRIVER = """
import asyncio, sys
from agentv.system import process
process._watchdog._broken = True  # the reaper alone
asyncio.run(process.run_process([sys.executable, "-c", sys.argv[1], sys.argv[2], "300"]))
"""


def test_a_process_that_hid_dies_when_agentv_is_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "hidden.pid"
    driver = subprocess.Popen([PY, "-c", DRIVER, HIDER, str(pid_file)])
    pid = None
    try:
        for _ in range(600):
            if pid_file.exists() and pid_file.read_text().strip():
                pid = _hidden(pid_file)
                break
            if driver.poll() is not None:
                break
            time.sleep(0.05)
        assert pid is not None, "the hidden process was not started"
        driver.send_signal(signal.SIGKILL)
        driver.wait(30)
        assert wait_gone(pid), "the hidden process outlived agentv"
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
        if pid is not None and pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
