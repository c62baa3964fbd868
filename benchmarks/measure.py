"""Shared measuring tools: time a whole process from outside, and the loopback fake server.

A run is one process, timed from just before it is spawned to just after it is reaped.
Its CPU time and peak RSS come from ``os.wait4``'s rusage, which covers exactly that
process (and any children it waited for), not the benchmark harness or the fake server.
A tiny launcher process does the spawning and the timing, so that the harness's own memory
cannot leak into the figure (see ``launcher.py``).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
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
FAKE_SERVER_FILE = REPO_ROOT / "tests" / "support" / "fakes" / "llm_server.py"
LAUNCHER = Path(__file__).resolve().parent / "launcher.py"


@dataclass(frozen=True)
class Measurement:
    """One whole-process run as seen from outside."""

    returncode: int
    wall_s: float
    user_s: float
    sys_s: float
    max_rss_mb: float  # peak resident set size of the child (ru_maxrss is KiB on Linux)
    timed_out: bool = False
    started_at: float = 0.0  # time.monotonic() just before the spawn (to line up with
    ended_at: float = 0.0  # the fake server's request times) and just after the reap

    @property
    def cpu_s(self) -> float:
        """User plus system CPU seconds of the child."""
        return self.user_s + self.sys_s

    def to_dict(self) -> dict[str, Any]:
        """JSON form (with the derived CPU seconds)."""
        out = {k: v for k, v in asdict(self).items() if k not in ("started_at", "ended_at")}
        return {**out, "cpu_s": round(self.cpu_s, 3)}


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

    The command is started by ``launcher.py`` (see there why), in its own session, so on
    timeout or Ctrl-C the whole process group is killed: a timed-out run is reported with
    ``timed_out=True`` instead of hanging the benchmark.
    """
    log_path.parent.mkdir(parents=True, exist_ok=True)
    result_path = log_path.with_suffix(".rusage.json")
    result_path.unlink(missing_ok=True)
    command = [sys.executable, "-I", "-S", str(LAUNCHER), str(result_path), *argv]
    with log_path.open("wb") as log:
        started_at = time.monotonic()
        proc = subprocess.Popen(
            command,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        expired = threading.Event()

        def kill() -> None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)

        def expire() -> None:
            expired.set()
            kill()

        timer = threading.Timer(timeout_s, expire)
        timer.daemon = True
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            kill()  # Ctrl-C: the command is in its own session and would outlive us
            proc.wait()
            raise
        finally:
            timer.cancel()
        ended_at = time.monotonic()
    # We reaped the launcher ourselves; tell Popen so it does not try again.
    proc.returncode = os.waitstatus_to_exitcode(status)
    try:
        figures = json.loads(result_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        # Killed before it could report (timeout, or the command could not start): only the
        # launcher's own figures are left, which include the harness's memory; such a run
        # is never used for the table.
        return Measurement(
            returncode=proc.returncode,
            wall_s=ended_at - started_at,
            user_s=usage.ru_utime,
            sys_s=usage.ru_stime,
            max_rss_mb=_rss_mb(usage.ru_maxrss),
            timed_out=expired.is_set(),
            started_at=started_at,
            ended_at=ended_at,
        )
    finally:
        result_path.unlink(missing_ok=True)
    return Measurement(
        returncode=figures["returncode"],
        wall_s=figures["wall_s"],
        user_s=figures["user_s"],
        sys_s=figures["sys_s"],
        max_rss_mb=_rss_mb(figures["ru_maxrss"]),
        timed_out=expired.is_set(),
        started_at=figures["started_at"],
        ended_at=figures["ended_at"],
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
    """Import the test suite's loopback fake LLM server (``tests/support/fakes/llm_server.py``).

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
