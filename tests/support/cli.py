"""Running the ``agentv`` command line from tests, the three ways the suite needs.

- ``invoke_cli(*args)``: in this process, through typer's ``CliRunner`` (fast: no start-up
  of a new interpreter). For what a command prints and its exit code.
- ``agentv_cli(project, *args)``: ``python -m agentv`` as a process, as a user runs it in
  CI. For what only a real process shows: signals, resource limits, the environment,
  locks held by another run, output written by an exiting interpreter.
- ``start_agentv(project, *args)``: the same process left running, for a test that stops
  it (Ctrl-C, SIGKILL) or watches it while it works.
- ``agentv_cli_peak(project, *args)``: ``agentv_cli`` and the peak resident memory of that
  agentv process, for a test that holds a run to a memory bound.

A process always gets ``CI=1`` (plain output, no live view) on top of the test's
environment, which ``tests/conftest.py`` has cleaned of every real credential.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from typer.testing import CliRunner, Result

from agentv.cli.app import _register, app


def invoke_cli(*args: str, env: Mapping[str, str] | None = None) -> Result:
    """Run ``agentv ARGS`` in this process, with every command registered.

    Args:
        *args: the command line after ``agentv``.
        env: variables set for the command's duration (typer's ``CliRunner``).

    Returns:
        typer's ``Result``: ``exit_code``, ``stdout``, ``stderr``, ``output`` (both).

    Raises:
        Exception: whatever escaped the command other than its exit: a user would have
            seen a traceback, so the test fails with it (as it does when one is printed).
    """
    _register()  # what `main()` does before running a command; at once for all of them
    result = CliRunner().invoke(app, list(args), env=dict(env) if env else None)
    escaped = result.exception
    if escaped is not None and not isinstance(escaped, SystemExit):
        raise escaped
    assert "Traceback" not in result.stderr, result.stderr  # one printed, not raised
    return result


def agentv_command(*args: str) -> list[str]:
    """The argument list of ``python -m agentv ARGS`` with this interpreter."""
    return [sys.executable, "-m", "agentv", *args]


def agentv_env(env: Mapping[str, str] | None = None, unset: Iterable[str] = ()) -> dict[str, str]:
    """The environment of an ``agentv`` process: the test's, ``CI=1``, then ``env``, without
    the variables named in ``unset``."""
    full = {**os.environ, "CI": "1", **(env or {})}
    for name in unset:
        full.pop(name, None)
    return full


def agentv_cli(
    project: Path,
    *args: str,
    timeout: float = 300,
    memory_mb: int | None = None,
    file_size: int | None = None,
    env: Mapping[str, str] | None = None,
    unset: Iterable[str] = (),
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m agentv ARGS`` in ``project`` as a process and wait for it to end.

    Args:
        project: the working directory.
        *args: the command line after ``agentv``.
        timeout: a hang guard only (seconds); the test fails when it runs out.
        memory_mb: a cap on the process's address space: a command that tried to build what
            a hostile file describes dies of ``MemoryError`` instead of saying what is wrong.
        file_size: a cap on the size of each file the process writes (bytes), as a full
            disk would stop a write.
        env: variables added to the environment (``agentv_env``).
        unset: variables removed from it.

    Returns:
        The ended process, its output as text (``stdout``, ``stderr``).
    """

    def cap() -> None:
        if memory_mb is not None:
            limit = memory_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
        if file_size is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size, file_size))

    return subprocess.run(
        agentv_command(*args),
        cwd=project,
        env=agentv_env(env, unset),
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=cap if memory_mb is not None or file_size is not None else None,
    )


def start_agentv(
    project: Path,
    *args: str,
    env: Mapping[str, str] | None = None,
    unset: Iterable[str] = (),
    **popen: Any,
) -> subprocess.Popen[Any]:
    """Start ``python -m agentv ARGS`` in ``project`` and return at once.

    Args:
        project: the working directory.
        *args: the command line after ``agentv``.
        env: variables added to the environment (``agentv_env``).
        unset: variables removed from it.
        **popen: passed to ``subprocess.Popen`` (default: stdout and stderr piped, as
            text).

    Returns:
        The running process; the test waits for it (or kills it) itself.
    """
    options: dict[str, Any] = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, "text": True}
    options.update(popen)
    env_ = agentv_env(env, unset)
    return subprocess.Popen(agentv_command(*args), cwd=project, env=env_, **options)


#: runs agentv in this interpreter and, as it exits, writes its VmHWM (the high-water mark
#: of this process image's resident memory, in KiB) to the file named first
_PEAK_RUNNER = """
import atexit, runpy, sys
out = sys.argv.pop(1)
def report():
    with open("/proc/self/status") as status:
        peak = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    with open(out, "w") as file:
        file.write(peak)
atexit.register(report)
sys.argv[0] = "agentv"
runpy.run_module("agentv", run_name="__main__", alter_sys=True)
"""


def agentv_cli_peak(
    project: Path, *args: str, timeout: float = 300
) -> tuple[subprocess.CompletedProcess[str], int]:
    """``agentv_cli`` and the peak resident memory (KiB) of that agentv process (Linux).

    The peak is read from ``/proc/self/status`` as agentv exits: the ``ru_maxrss`` of a
    child (through ``wait4`` or ``RUSAGE_CHILDREN``) starts from the parent's own peak,
    because the child is forked from the test process before it runs agentv, so it would
    measure the test worker.

    Args:
        project: the working directory.
        *args: the command line after ``agentv``.
        timeout: a hang guard only (seconds).

    Returns:
        The ended process (as ``agentv_cli`` returns it) and agentv's peak in KiB.
    """
    with tempfile.TemporaryDirectory() as scratch:
        peak_file = Path(scratch) / "peak"
        proc = subprocess.run(
            [sys.executable, "-c", _PEAK_RUNNER, str(peak_file), *args],
            cwd=project,
            env=agentv_env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert peak_file.exists(), f"agentv ended without reporting its memory: {proc.stderr}"
        return proc, int(peak_file.read_text())
