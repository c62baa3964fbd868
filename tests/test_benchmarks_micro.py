"""benchmarks/micro.py, where the speed claims that tests no longer make are measured:
it runs at tiny sizes and reports every figure."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

#: every test here runs the benchmarks as a process: left out of `make test-fast`
pytestmark = pytest.mark.slow

MICRO = Path(__file__).resolve().parents[1] / "benchmarks" / "micro.py"


def test_micro_benchmarks_report_their_figures() -> None:
    done = subprocess.run(
        [sys.executable, str(MICRO), "--quick", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    assert set(figures["evaluations_per_second"]) == {"contains", "regex", "is_json + schema"}
    assert all(rate > 0 for rate in figures["evaluations_per_second"].values())
    concurrency = figures["concurrency"]
    assert (concurrency["requests"], concurrency["delay_ms"]) == (10, 200.0)
    assert 1 < concurrency["most_in_flight"] <= 10  # the requests overlapped
    assert concurrency["wall_s"] >= 0.2 and 0 < concurrency["efficiency"] <= 1
