"""Locks held on files, across the processes of a machine (a run's workers, two runs at
once, Ray workers on one node): a repository cache being filled, a pooled workspace slot in
use. The kernel lets go of a lock when its holder dies, however it dies, so a killed run
never leaves a slot locked for ever.

POSIX ``flock`` locks are held by an open file, not by a process: two holders in one
process exclude each other as two processes do.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: workspaces are for POSIX systems
    fcntl = None  # type: ignore[assignment]

#: how often a lock held by another is tried again (seconds)
POLL_S = 0.05


class FileLock:
    """An exclusive lock on the file at ``path`` (created when missing)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """Whether this lock holds its file now."""
        return self._fd is not None

    def try_acquire(self) -> bool:
        """Take the lock if nobody holds it; False when another holder has it."""
        if self._fd is not None:
            return True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        if fcntl is None:  # pragma: no cover
            self._fd = fd
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    async def acquire(self) -> None:
        """Take the lock, waiting (cancellably) while another holder has it."""
        while not self.try_acquire():
            await asyncio.sleep(POLL_S)

    def release(self) -> None:
        """Let go of the lock (nothing when it is not held)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)  # closing the file releases its flock

    async def __aenter__(self) -> FileLock:
        await self.acquire()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()
