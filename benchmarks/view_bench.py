"""``make bench-view``: the run store and the workbench at 100,000 records.

Writes the synthetic results file of ``report_bench.py`` (agentv-shaped records: a
four-turn conversation with an attachment, a ``contains`` check and an ``llm_judge`` with its
prompt; a tenth of the cases ``error``, a tenth ``invalid``; two targets), then:

- imports it into a fresh store with ``agentv runs import`` (the whole process, timed):
  records per second;
- starts ``agentv view`` on that store and opens the run's page in headless chromium
  (Playwright, the system's browser): the time from navigation to its first rows shown,
  the same for a page filtered to failures and for one record's page, and the server's
  time to answer the run's page (a plain HTTP GET).

Goal: first rows within 2 s. Usage::

    python benchmarks/view_bench.py [--cases 100000] [--reps 3] [--output PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from statistics import median
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
DEFAULT_WORK = BENCH_DIR / ".work" / "view"
DEFAULT_OUTPUT = BENCH_DIR / "results" / "view.json"
CHROMIUM = os.environ.get("AGENTV_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run"]
GOAL_FIRST_ROWS_S = 2.0
AGENTV = [sys.executable, "-m", "agentv"]


def import_store(results: Path, store: Path) -> float:
    """Seconds for ``agentv runs import`` of ``results`` into a new ``store``."""
    for leftover in store.parent.glob(store.name + "*"):
        leftover.unlink()
    started = time.perf_counter()
    done = subprocess.run(
        [*AGENTV, "runs", "import", str(results), "--store", str(store)],
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"runs import failed: {done.stderr}")
    return seconds


def _first_rows(page: Any, url: str, selector: str) -> float:
    started = time.perf_counter()
    page.goto(url, wait_until="commit")
    page.wait_for_selector(selector)
    return time.perf_counter() - started


def time_workbench(store: Path, reps: int) -> dict[str, list[float]]:
    """Times to first rows in chromium, and the server's answer to a GET, ``reps`` each."""
    from playwright.sync_api import sync_playwright

    view = subprocess.Popen(
        [*AGENTV, "view", "--no-open", "--store", str(store)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    times: dict[str, list[float]] = {"first_rows": [], "failures": [], "record": [], "get": []}
    try:
        assert view.stdout is not None
        url = view.stdout.readline().split(": ", 1)[1].strip()
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page()
            _first_rows(page, url, "#runs tbody tr")  # warm: the server's first store read
            for _ in range(reps):
                times["first_rows"].append(_first_rows(page, f"{url}runs/1", "#records tbody tr"))
                times["failures"].append(
                    _first_rows(page, f"{url}runs/1?status=failed", "#records tbody tr")
                )
                times["record"].append(_first_rows(page, f"{url}runs/1/records/50000", "#answer"))
                started = time.perf_counter()
                with urllib.request.urlopen(f"{url}runs/1", timeout=60) as response:
                    response.read()
                times["get"].append(time.perf_counter() - started)
            browser.close()
    finally:
        view.terminate()
        view.wait(timeout=30)
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    sys.path.insert(0, str(BENCH_DIR))
    import report_bench

    args.work.mkdir(parents=True, exist_ok=True)
    results = args.work / f"results-{args.cases}.jsonl"
    if not results.exists():
        report_bench.write_results(results, args.cases)
    store = args.work / "runs.sqlite"
    imports = [import_store(results, store) for _ in range(args.reps)]
    records = sum(1 for _ in results.open("rb"))
    times = time_workbench(store, args.reps)
    figures = {
        "cases": args.cases,
        "records": records,
        "results_mb": round(results.stat().st_size / 1e6, 1),
        "import_s": round(median(imports), 2),
        "records_per_s": round(records / median(imports)),
        "store_mb": round(sum(p.stat().st_size for p in args.work.glob("runs.sqlite*")) / 1e6, 1),
        **{f"{k}_s": round(median(v), 3) for k, v in times.items()},
        "runs": {
            "import_s": [round(t, 2) for t in imports],
            **{k: [round(t, 3) for t in v] for k, v in times.items()},
        },
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
    }
    ok = figures["first_rows_s"] <= GOAL_FIRST_ROWS_S
    print(
        f"import: {figures['records']:,} records ({figures['results_mb']} MB) in "
        f"{figures['import_s']} s = {figures['records_per_s']:,} records/s; store "
        f"{figures['store_mb']} MB\n"
        f"first rows of the run: {figures['first_rows_s']} s ({'PASS' if ok else 'FAIL'}: goal "
        f"{GOAL_FIRST_ROWS_S} s); failures only: {figures['failures_s']} s; a record: "
        f"{figures['record_s']} s; the run's page by GET: {figures['get_s']} s"
    )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
