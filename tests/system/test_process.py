"""``run_process``: timeouts and cancellation kill the whole process group; output capture."""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import sys
import time
from pathlib import Path

import pytest

from agentv.system.process import run_process
from support.agents import pid_alive, wait_gone

#: every test here starts processes: left out of `make test-fast`
pytestmark = pytest.mark.slow

PY = sys.executable

# A child that starts a grandchild (same process group) sleeping 60 s, reports its pid,
# then sleeps itself.
SPAWNER = """
import subprocess, sys, time
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
with open(sys.argv[1], "w") as fh:
    fh.write(str(grandchild.pid))
time.sleep(60)
"""


def _read_pid(path: Path) -> int:
    deadline = time.monotonic() + 30  # a hang guard: over at once when it holds
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.02)
    raise AssertionError("the child never reported its grandchild's pid")


@pytest.mark.parametrize("form", ["argv", "shell"])
async def test_timeout_kills_the_whole_process_group(tmp_path: Path, form: str) -> None:
    script = tmp_path / "spawner.py"
    script.write_text(SPAWNER)
    pid_file = tmp_path / "grandchild.pid"
    if form == "argv":
        command: list[str] | str = [PY, str(script), str(pid_file)]
    else:  # a shell that runs the spawner: killing only the shell would orphan both
        command = f"{shlex.quote(PY)} {shlex.quote(str(script))} {shlex.quote(str(pid_file))}"
    started = time.monotonic()
    result = await run_process(command, timeout=1.0)
    assert result.timed_out
    assert not result.ok
    assert time.monotonic() - started < 30
    grandchild = _read_pid(pid_file)
    assert wait_gone(grandchild), f"grandchild {grandchild} survived the timeout"
    assert wait_gone(result.pid)


async def test_cancelling_the_caller_kills_the_group(tmp_path: Path) -> None:
    script = tmp_path / "spawner.py"
    script.write_text(SPAWNER)
    pid_file = tmp_path / "grandchild.pid"
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(run_process([PY, str(script), str(pid_file)]), timeout=1.5)
    grandchild = _read_pid(pid_file)
    assert wait_gone(grandchild), f"grandchild {grandchild} survived the cancellation"


async def test_output_is_capped_keeping_the_tail() -> None:
    code = "import sys; sys.stdout.write('a' * 100000 + 'THE END'); sys.stderr.write('e' * 5000)"
    result = await run_process([PY, "-c", code], max_output=1000)
    assert result.ok
    assert result.stdout.endswith("THE END")
    assert len(result.stdout) == 1000
    assert result.stdout_truncated
    assert result.stderr_truncated and len(result.stderr) == 1000


async def test_stdin_lines_and_exit_code() -> None:
    code = (
        "import sys\n"
        "data = sys.stdin.read()\n"
        "print(data.upper())\n"
        "sys.stderr.write('first\\n\\nsecond')\n"
        "sys.exit(5)\n"
    )
    lines: list[tuple[str, str]] = []
    result = await run_process(
        [PY, "-c", code], stdin="héllo\nworld", on_line=lambda s, t: lines.append((s, t))
    )
    assert result.exit_code == 5
    assert result.describe_exit() == "exited with code 5"
    assert result.stdout == "HÉLLO\nWORLD\n"
    assert ("stdout", "HÉLLO") in lines and ("stdout", "WORLD") in lines
    # the partial last line is delivered too
    assert [t for s, t in lines if s == "stderr"] == ["first", "", "second"]
    assert result.stderr_tail() == "first\n\nsecond"


async def test_killed_by_signal_is_described() -> None:
    result = await run_process([PY, "-c", "import os, signal; os.kill(os.getpid(), 9)"])
    assert result.exit_code == -signal.SIGKILL
    assert result.describe_exit() == "was killed by signal SIGKILL"


async def test_background_child_holding_the_pipes_does_not_hang_the_call() -> None:
    started = time.monotonic()
    result = await run_process("sleep 60 & echo $!")
    assert result.ok
    assert time.monotonic() - started < 20
    leftover = int(result.stdout.split()[0])
    assert wait_gone(leftover)


async def test_keep_children_leaves_a_detached_launcher_child_running() -> None:
    result = await run_process("sleep 60 >/dev/null 2>&1 & echo $!", keep_children=True)
    leftover = int(result.stdout.split()[0])
    try:
        assert pid_alive(leftover)
    finally:
        os.kill(leftover, signal.SIGKILL)


async def test_env_replaces_and_cwd_applies(tmp_path: Path) -> None:
    code = "import os; print(os.getcwd()); print(os.environ.get('ONLY_THIS'))"
    result = await run_process(
        [PY, "-c", code], cwd=tmp_path, env={"ONLY_THIS": "yes", "PATH": os.environ["PATH"]}
    )
    assert result.stdout.splitlines() == [str(tmp_path), "yes"]


async def test_start_failures_raise_os_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        await run_process([str(tmp_path / "no-such-program")])
    with pytest.raises(NotADirectoryError, match="does not exist"):
        await run_process([PY, "-c", "pass"], cwd=tmp_path / "missing")
