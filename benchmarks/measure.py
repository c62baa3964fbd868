"""Shared measuring tools: time a whole process from outside, and the loopback fake server.

A run is one child process, timed from just before it is spawned to just after it is
reaped. Its CPU time and peak RSS come from ``os.wait4``'s rusage, which covers exactly
that child (and any children it waited for), not the benchmark harness or the fake server.
"""

from __future__ import annotations

import importlib.util
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
FAKE_SERVER_FILE = REPO_ROOT / "tests" / "fakes" / "llm_server.py"


@dataclass(frozen=True)
class Measurement:
    """One whole-process run as seen from outside."""

    returncode: int
    wall_s: float
    user_s: float
    sys_s: float
    max_rss_mb: float  # peak resident set size of the child (ru_maxrss is KiB on Linux)
    timed_out: bool = False

    @property
    def cpu_s(self) -> float:
        """User plus system CPU seconds of the child."""
        return self.user_s + self.sys_s

    def to_dict(self) -> dict[str, Any]:
        """JSON form (with the derived CPU seconds)."""
        return {**asdict(self), "cpu_s": round(self.cpu_s, 3)}


def _rss_mb(ru_maxrss: int) -> float:
    # Linux reports KiB, macOS bytes.
    return ru_maxrss / 1024 / 1024 if sys.platform == "darwin" else ru_maxrss / 1024


def measure(
    argv: Sequence[str],
    *,
    cwd: Path,
    log_path: Path,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 600.0,
) -> Measurement:
    """Run ``argv`` to completion and measure it; stdout and stderr go to ``log_path``.

    The child gets its own session, so on timeout the whole process group is killed and
    the run is reported with ``timed_out=True`` instead of hanging the benchmark.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        start = time.perf_counter()
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        expired = threading.Event()

        def kill() -> None:
            expired.set()
            try:
                os.killpg(proc.pid, 9)
            except ProcessLookupError:
                pass

        timer = threading.Timer(timeout_s, kill)
        timer.daemon = True
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - start
    # We reaped the child ourselves; tell Popen so it does not try again.
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Measurement(
        returncode=proc.returncode,
        wall_s=wall,
        user_s=usage.ru_utime,
        sys_s=usage.ru_stime,
        max_rss_mb=_rss_mb(usage.ru_maxrss),
        timed_out=expired.is_set(),
    )


def log_tail(path: Path, lines: int = 15) -> str:
    """The last lines of a run's log, for failure messages."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.rstrip().splitlines()[-lines:])


def median(values: Sequence[float]) -> float:
    """The median (of an odd or even number of values)."""
    return float(statistics.median(values))


def summarize(runs: Sequence[Measurement]) -> dict[str, float]:
    """Medians over repetitions of one scenario, plus the spread of the wall time."""
    walls = [r.wall_s for r in runs]
    return {
        "wall_s": round(median(walls), 3),
        "wall_min_s": round(min(walls), 3),
        "wall_max_s": round(max(walls), 3),
        "cpu_s": round(median([r.cpu_s for r in runs]), 3),
        "max_rss_mb": round(median([r.max_rss_mb for r in runs]), 1),
    }


def load_fake_server_module() -> ModuleType:
    """Import the test suite's loopback fake LLM server (``tests/fakes/llm_server.py``).

    It is loaded from its file so the benchmarks need neither the tests on ``sys.path``
    nor a second copy of the server.
    """
    if not FAKE_SERVER_FILE.exists():
        raise RuntimeError(f"the fake LLM server is missing: {FAKE_SERVER_FILE}")
    name = "agentv_bench_llm_server"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, FAKE_SERVER_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def max_in_flight(received_at: Sequence[float], delay_s: float) -> int:
    """Most requests the server held at once, given arrival times and a fixed answer delay."""
    times = sorted(received_at)
    best = 0
    lo = 0
    for hi, t in enumerate(times):
        while times[lo] <= t - delay_s:
            lo += 1
        best = max(best, hi - lo + 1)
    return best
