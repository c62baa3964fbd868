"""Helpers for agent target tests (import with ``from agent_helpers import ...``)."""

from __future__ import annotations

import os
import stat
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent


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


def wait_gone(pid: int, within: float = 5.0) -> bool:
    """Wait until ``pid`` is gone; False if still alive after ``within`` seconds."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.05)
    return not pid_alive(pid)
