"""Running the real CLI from tests, shared by the suites that drive whole runs."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
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


def rows(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of a results file."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
