"""File locks across holders and processes (pooled workspace slots, the repository cache)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from agentv.system.filelock import FileLock

HOLD = """
import sys, time
import pytest

from agentv.system.filelock import FileLock
lock = FileLock(__import__("pathlib").Path(sys.argv[1]))
assert lock.try_acquire()
print("held", flush=True)
time.sleep(120)
"""


def test_two_holders_exclude_each_other_until_released(tmp_path: Path) -> None:
    path = tmp_path / "locks" / "slot-0.lock"
    first, second = FileLock(path), FileLock(path)
    assert first.try_acquire() and first.held
    assert not second.try_acquire() and not second.held
    first.release()
    assert second.try_acquire()
    second.release()
    second.release()  # releasing twice is harmless


async def test_acquire_waits_for_the_holder(tmp_path: Path) -> None:
    path = tmp_path / "slot.lock"
    holder = FileLock(path)
    assert holder.try_acquire()
    waiter = FileLock(path)
    waiting = asyncio.create_task(waiter.acquire())
    await asyncio.sleep(0.2)
    assert not waiting.done()
    holder.release()
    await asyncio.wait_for(waiting, timeout=30)
    assert waiter.held
    waiter.release()


@pytest.mark.slow  # a process holds the lock
def test_a_killed_holder_leaves_nothing_locked(tmp_path: Path) -> None:
    path = tmp_path / "slot.lock"
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        assert not FileLock(path).try_acquire()
    finally:
        proc.kill()
        proc.wait(timeout=30)
    assert FileLock(path).try_acquire()
