"""``make bench-report``: the HTML report of a 100,000-case results file.

Writes a synthetic results file shaped like agentv's records (a four-turn conversation
with an attached file, the answer, a ``contains`` evaluator and an ``llm_judge`` with its
prompt, token usage, ``lm_provider_request`` repeating the messages, as agentv writes
them; a tenth of the cases ``error`` and a tenth ``invalid``, two targets), builds the
report with ``agentv report`` (the whole process, timed), and opens it in headless
chromium (Playwright, the system's browser) to time the first rows, a search, a status
filter and opening a case. Goals: first rows within 3 s; the report under 1.5 times the
results file's size.

Usage::

    python benchmarks/report_bench.py [--cases 100000] [--reps 3] [--output PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from statistics import median
from typing import Any

import orjson

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
DEFAULT_WORK = BENCH_DIR / ".work" / "report"
DEFAULT_OUTPUT = BENCH_DIR / "results" / "report.json"
CHROMIUM = os.environ.get("AGENTV_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
GOAL_FIRST_ROWS_S = 3.0
#: the statuses of cases 0, 1, 2, ... in turn: 60% ok, 20% failed, 10% error, 10% invalid
_STATUS_CYCLE = ("ok",) * 6 + ("failed", "failed", "error", "invalid")
GOAL_SIZE_RATIO = 1.5

SYSTEM = "You are a careful assistant for a logistics company. Answer briefly and cite the file."
ATTACHMENT = "order_id,warehouse,status,eta_days\n" + "".join(
    f"{1000 + n},WH-{n % 7},{'late' if n % 5 == 0 else 'on time'},{n % 9}\n" for n in range(24)
)
JUDGE_SYSTEM = (
    "You are an expert evaluator. Your goal is to grade the candidate_answer based on how well "
    "it achieves the expected_outcome for the original task. You must respond with a single "
    'JSON object: {"score": <0.0-1.0>, "hits": [...], "misses": [...], "reasoning": "..."}'
)


def make_record(
    n: int,
    *,
    target: str = "gpt",
    status: str | None = None,
    repeat: int = 0,
    answer: str | None = None,
    dataset: str = "logistics",
) -> dict[str, Any]:
    """A record shaped like agentv's: ``ok`` / ``failed`` graded cases (by ``n`` unless
    ``status`` says), ``error`` (the target failed) and ``invalid`` (nothing was sent)."""
    if status is None:
        status = _STATUS_CYCLE[n % len(_STATUS_CYCLE)]
    eval_id = f"case-{n:06d}"
    stamp = f"2025-06-01T{10 + n // 360000 % 10:02d}:{n // 6000 % 60:02d}:{n // 100 % 60:02d}.{n % 1000:03d}Z"
    if status == "invalid":
        return {
            "eval_id": eval_id,
            "dataset": dataset,
            "status": "invalid",
            "passed": False,
            "score": 0.0,
            "hits": [],
            "misses": ["Invalid: judge target 'grader' is not in targets.yaml"],
            "candidate_answer": "",
            "expected_aspect_count": 0,
            "target": target,
            "timestamp": stamp,
            "repeat": repeat,
            "attempts": 0,
            "eval_file": "/repo/evals/logistics.yaml",
            "line": 4 + 9 * n,
            "error": "judge target 'grader' is not in targets.yaml",
        }
    question_turn = f"Which orders from warehouse WH-{n % 7} are late, and by how much? (case {n})"
    chat = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Here is today's export.\n=== orders.csv ===\n{ATTACHMENT}"},
        {"role": "assistant", "content": "Thanks, I have the export. What would you like to know?"},
        {"role": "user", "content": question_turn},
    ]
    question = (
        f"@[System]:\n{SYSTEM}\n\n@[User]:\nHere is today's export.\n"
        f'<file path="orders.csv">\n{ATTACHMENT}</file>\n\n@[Assistant]:\n'
        f"Thanks, I have the export. What would you like to know?\n\n@[User]:\n{question_turn}"
    )
    raw_request = {
        "question": question,
        "guidelines": "",
        "guideline_paths": [],
        "input_files": ["/repo/evals/orders.csv"],
        "chat_prompt": chat,
        "model": "gpt-4o-mini",
        "temperature": 0.0,
    }
    record: dict[str, Any] = {"eval_id": eval_id, "dataset": dataset}
    if status == "error":
        error = "openai: request timed out after 120 s (3 attempts)"
        record.update(
            status="error",
            passed=False,
            score=0.0,
            hits=[],
            misses=[f"Error: {error}"],
            candidate_answer=f"Error occurred: {error}",
            expected_aspect_count=0,
            target=target,
            timestamp=stamp,
            repeat=repeat,
            raw_aspects=[],
            lm_provider_request={"chat_prompt": chat, "guideline_paths": [], "error": error},
            raw_request=raw_request,
            duration_ms=120000.0 + n % 1000,
            attempts=3,
            eval_file="/repo/evals/logistics.yaml",
            line=4 + 9 * n,
            error=error,
        )
        return record
    late = [f"{1000 + k}" for k in range(24) if k % 5 == 0 and k % 7 == n % 7]
    if answer is None:
        answer = (
            f"From orders.csv, warehouse WH-{n % 7} has {len(late)} late order(s): "
            f"{', '.join(late) or 'none'}. Each is marked late with an ETA of {n % 9} days; "
            "the others ship on time. I would contact the carrier for the late ones today."
        )
    passed = status == "ok"
    judge_score = 0.9 if passed else 0.4
    score = (1.0 + judge_score) / 2 if passed else judge_score / 2
    judge_prompt = (
        "[[ ## expected_outcome ## ]]\nLists the late orders of the warehouse with their ETA.\n\n"
        f"[[ ## question ## ]]\n{question}\n\n[[ ## reference_answer ## ]]\n"
        f"The late orders are {', '.join(late) or 'none'}.\n\n[[ ## candidate_answer ## ]]\n{answer}"
    )
    hits = ["names the late orders", "gives the ETA"] if passed else ["names the warehouse"]
    misses = [] if passed else ["misses the late orders", "no ETA"]
    record.update(
        status=status,
        passed=passed,
        score=score,
        hits=["answer contains 'late'", *hits],
        misses=misses,
        candidate_answer=answer,
        expected_aspect_count=len(hits) + len(misses) + 1,
        target=target,
        timestamp=stamp,
        repeat=repeat,
        reasoning=f"quality: {'complete and correct' if passed else 'misses the point'}",
        lm_provider_request={"chat_prompt": chat, "guideline_paths": []},
        raw_request=raw_request,
        evaluator_results=[
            {
                "name": "mentions-late",
                "type": "contains",
                "score": 1.0,
                "hits": ["answer contains 'late'"],
                "misses": [],
            },
            {
                "name": "quality",
                "type": "llm_judge",
                "score": judge_score,
                "hits": hits,
                "misses": misses,
                "reasoning": "complete and correct" if passed else "misses the point",
                "evaluator_raw_request": {
                    "id": f"00000000-0000-0000-0000-{n:012d}",
                    "provider": "openai",
                    "prompt": judge_prompt,
                    "system_prompt": JUDGE_SYSTEM,
                    "target": target,
                },
                "usage": {"input_tokens": 610, "output_tokens": 48, "total_tokens": 658},
                "latency_ms": 812.5,
            },
        ],
        usage={"input_tokens": 420 + n % 50, "output_tokens": 61, "total_tokens": 481 + n % 50},
        latency_ms=950.25 + n % 300,
        duration_ms=1802.5 + n % 900,
        attempts=1,
        eval_file="/repo/evals/logistics.yaml",
        line=4 + 9 * n,
    )
    return record


def write_results(path: Path, cases: int, targets: tuple[str, ...] = ("gpt", "claude")) -> Path:
    """``cases`` records (each case on each of ``targets`` in turn), one line each."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as handle:
        for n in range(cases):
            handle.write(orjson.dumps(make_record(n, target=targets[n % len(targets)])) + b"\n")
    return path


def _launch(playwright: Any) -> Any:
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)


def time_in_browser(report: Path, browser: Any = None) -> dict[str, float]:
    """Seconds to the first rows (from the start of navigation, measured outside the
    page), to the load event, to a search, to a status filter and to a case's detail.
    ``browser``: a launched Playwright browser (default: chromium, launched here)."""
    if browser is None:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as playwright:
            launched = _launch(playwright)
            try:
                return time_in_browser(report, launched)
            finally:
                launched.close()
    figures: dict[str, float] = {}
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        page = context.new_page()
        requested: list[str] = []

        def route(r: Any) -> None:
            if r.request.url.startswith("file://"):
                r.continue_()
            else:
                requested.append(r.request.url)
                r.abort()

        page.route("**/*", route)
        start = time.perf_counter()
        page.goto(report.resolve().as_uri(), wait_until="commit", timeout=120_000)
        page.wait_for_selector("#rows tr", timeout=120_000)
        figures["first_rows_s"] = time.perf_counter() - start
        figures["first_rows_in_page_s"] = (
            float(page.get_attribute("body", "data-first-rows-ms") or "nan") / 1000
        )
        page.wait_for_load_state("load", timeout=300_000)
        figures["loaded_s"] = time.perf_counter() - start
        total = page.get_attribute("#count", "data-total")

        start = time.perf_counter()
        page.fill("#search", "case-000042")
        page.wait_for_function(
            "t => document.getElementById('count').dataset.shown !== t", arg=total
        )
        figures["search_s"] = time.perf_counter() - start
        page.fill("#search", "")
        page.wait_for_function(
            "t => document.getElementById('count').dataset.shown === t", arg=total
        )
        start = time.perf_counter()
        page.select_option("#filter-status", "error")
        page.wait_for_function(
            "t => document.getElementById('count').dataset.shown !== t", arg=total
        )
        figures["filter_s"] = time.perf_counter() - start
        start = time.perf_counter()
        page.click("#rows tr:nth-child(3)")
        page.wait_for_selector("#detail-body .message")
        figures["detail_s"] = time.perf_counter() - start
        if requested:
            raise RuntimeError(f"the report asked for {requested[:3]}")
    finally:
        context.close()
    return figures


def run(cases: int, reps: int, work: Path, browser: Any = None) -> dict[str, Any]:
    """Generate (once per size), build and open; figures are medians over ``reps``."""
    results = work / f"results-{cases}.jsonl"
    marker = work / f"results-{cases}.done"
    if not marker.exists():
        write_results(results, cases)
        marker.write_text(str(results.stat().st_size))
    report = work / f"results-{cases}.html"
    builds, browsers = [], []
    for _ in range(reps):
        report.unlink(missing_ok=True)
        start = time.perf_counter()
        subprocess.run(
            [
                str(Path(sys.executable).with_name("agentv")),
                "report",
                str(results),
                "-o",
                str(report),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        builds.append(time.perf_counter() - start)
        browsers.append(time_in_browser(report, browser))
    jsonl_bytes = results.stat().st_size
    html_bytes = report.stat().st_size
    figures = {
        "cases": cases,
        "jsonl_bytes": jsonl_bytes,
        "html_bytes": html_bytes,
        "size_ratio": html_bytes / jsonl_bytes,
        "build_s": median(builds),
        **{key: median([b[key] for b in browsers]) for key in browsers[0]},
        "reps": reps,
    }
    figures["goals"] = {
        "first_rows_within_3s": figures["first_rows_s"] <= GOAL_FIRST_ROWS_S,
        "size_under_1_5x": figures["size_ratio"] < GOAL_SIZE_RATIO,
    }
    return figures


def table(f: dict[str, Any]) -> str:
    """The figures as the README's table rows."""
    mib = 1024 * 1024
    ok = {True: "met", False: "FAIL"}
    return "\n".join(
        [
            f"cases                     {f['cases']:,}",
            f"results file (JSONL)      {f['jsonl_bytes'] / mib:,.1f} MiB",
            f"report (HTML)             {f['html_bytes'] / mib:,.1f} MiB   "
            f"ratio {f['size_ratio']:.2f}  (goal < {GOAL_SIZE_RATIO}: {ok[f['goals']['size_under_1_5x']]})",
            f"agentv report (build)     {f['build_s']:.2f} s",
            f"first rows                {f['first_rows_s']:.2f} s   "
            f"(in page {f['first_rows_in_page_s']:.2f} s; goal <= {GOAL_FIRST_ROWS_S} s: "
            f"{ok[f['goals']['first_rows_within_3s']]})",
            f"whole file loaded         {f['loaded_s']:.2f} s",
            f"search (one id)           {f['search_s']:.2f} s",
            f"filter (status = error)   {f['filter_s']:.2f} s",
            f"open a case               {f['detail_s']:.2f} s",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    figures = run(args.cases, args.reps, args.work)
    figures["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version()}
    print(table(figures))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"written to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
