"""Running the real CLI from tests, shared by the suites that drive whole runs."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any


def agentv_cli(
    project: Path,
    *args: str,
    timeout: float = 300,
    memory_mb: int | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python -m agentv ARGS`` in ``project``, as a user runs it in CI (``timeout``: a
    hang guard only). ``memory_mb`` caps the process's address space: a command that tried
    to build what a hostile file describes would die of ``MemoryError`` instead of saying
    what is wrong. ``env`` is added to the environment."""

    def cap() -> None:
        if memory_mb is not None:
            limit = memory_mb * 1024 * 1024
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return subprocess.run(
        [sys.executable, "-m", "agentv", *args],
        cwd=project,
        env={**os.environ, "CI": "1", **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=cap if memory_mb is not None else None,
    )


def agentv_cli_peak(
    project: Path, *args: str, timeout: float = 300
) -> tuple[subprocess.CompletedProcess[str], int]:
    """``agentv_cli`` and the peak resident memory (KiB) of that one process.

    Measured with ``os.wait4`` on its pid: ``RUSAGE_CHILDREN`` of the test process would
    also count any earlier child that happens to be reaped meanwhile (``subprocess`` reaps
    abandoned children when it starts a new one)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentv", *args],
            cwd=project,
            env={**os.environ, "CI": "1"},
            stdout=out,
            stderr=err,
        )
        guard = threading.Timer(timeout, proc.kill)  # a hang guard only
        guard.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            guard.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        done = subprocess.CompletedProcess(
            proc.args,
            proc.returncode,
            out.read().decode("utf-8", "replace"),
            err.read().decode("utf-8", "replace"),
        )
    return done, usage.ru_maxrss


def rows(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of a results file."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
