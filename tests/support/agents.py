"""Fake agent programs on PATH, and watching the processes agents leave behind."""

from __future__ import annotations

import os
import stat
import sys
import time
from pathlib import Path

from support.paths import SUPPORT

#: stand-ins for the ``codex``, ``claude`` and VS Code's ``code`` executables (their
#: docstrings say what they do), installed on PATH by ``install_script``
FAKE_CODEX = SUPPORT / "fakes" / "codex_cli.py"
FAKE_CLAUDE = SUPPORT / "fakes" / "claude_cli.py"
FAKE_CODE = SUPPORT / "fakes" / "vscode_cli.py"


def install_script(bin_dir: Path, name: str, source: Path) -> Path:
    """Install the Python file ``source`` as the executable ``bin_dir/name``."""
    target = bin_dir / name
    target.write_text(f"#!{sys.executable}\n" + source.read_text(encoding="utf-8"), "utf-8")
    target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return target


def pid_alive(pid: int) -> bool:
    """True while ``pid`` is a running (not zombie) process."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    # The state follows the parenthesised command name; Z = zombie (exited, not reaped).
    return stat_line.rsplit(")", 1)[1].split()[0] != "Z"


def wait_gone(pid: int, within: float = 30.0) -> bool:
    """Wait until ``pid`` is gone; False if still alive after ``within`` seconds (a hang
    guard: it returns as soon as the process is gone)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    return not pid_alive(pid)
