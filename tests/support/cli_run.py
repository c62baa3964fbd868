"""Running the real CLI from tests, shared by the suites that drive whole runs."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
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

    Read from ``/proc/self/status`` as agentv exits: the ``ru_maxrss`` of a child (through
    ``wait4`` or ``RUSAGE_CHILDREN``) starts from the parent's own peak, because the child
    is forked from the test process before it runs agentv, so it measures the test worker."""
    with tempfile.TemporaryDirectory() as scratch:
        peak_file = Path(scratch) / "peak"
        proc = subprocess.run(
            [sys.executable, "-c", _PEAK_RUNNER, str(peak_file), *args],
            cwd=project,
            env={**os.environ, "CI": "1"},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert peak_file.exists(), f"agentv ended without reporting its memory: {proc.stderr}"
        return proc, int(peak_file.read_text())


def rows(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of a results file."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
