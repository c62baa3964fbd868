"""Running the real CLI from tests, shared by the suites that drive whole runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def agentv_cli(project: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python -m agentv ARGS`` in ``project``, as a user runs it in CI (``timeout``: a
    hang guard only)."""
    return subprocess.run(
        [sys.executable, "-m", "agentv", *args],
        cwd=project,
        env={**os.environ, "CI": "1"},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def rows(path: Path) -> list[dict[str, Any]]:
    """The JSON lines of a results file."""
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
