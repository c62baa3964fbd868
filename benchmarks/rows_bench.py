"""Cases from data at scale: rows per second from CSV, JSON Lines and Parquet into sent
requests on the mock target, and peak memory, at 1,000,000 rows by default.

For each format the same rows (``question``, ``answer``) are written once into
``benchmarks/.work/rows/<N>/``, with an eval file whose template makes one case a row
(a user message, a ``contains`` evaluator). Then, each as one whole process measured from
outside (``measure.py``):

- ``agentv validate`` of the file: every row read, filled, built and checked;
- ``agentv eval --target mock``: every row sent to the mock target, graded and recorded.
  The run counts only when the results file has one ``ok`` record per row. The time to
  its first record (polled from outside) shows how soon the first request left.

    .venv/bin/python benchmarks/rows_bench.py                  # 1,000,000 rows, about 25 min
    .venv/bin/python benchmarks/rows_bench.py --rows 20000     # a quick look
    .venv/bin/python benchmarks/rows_bench.py --formats parquet --no-eval
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from measure import REPO_ROOT, measure

WORK = REPO_ROOT / "benchmarks" / ".work" / "rows"
AGENTV = REPO_ROOT / ".venv" / "bin" / "agentv"
FORMATS = ("csv", "jsonl", "parquet")
#: the run, as S1 of run.py runs its suites
EVAL = (str(AGENTV), "eval", "--target", "mock", "--workers", "50", "--quiet")

TARGETS = """\
$schema: agentv-targets-v2.2
targets:
  - name: mock
    provider: mock
    response: "The answer is 42."
"""

SUITE = """\
$schema: agentv-eval-v2
dataset: rows-{fmt}
target: mock
rows:
  path: data.{fmt}
template:
  outcome: Answers {{{{ answer }}}}.
  input_messages:
    - role: user
      content: "{{{{ question }}}}"
  evaluators:
    - type: contains
      value: "{{{{ answer }}}}"
"""


def question(i: int) -> str:
    return f"Question {i}: what is six times seven, in the context of row {i}?"


def write_suite(rows: int, formats: tuple[str, ...]) -> Path:
    """The suite folder for ``rows`` rows (written once, reused)."""
    folder = WORK / str(rows)
    (folder / ".git").mkdir(parents=True, exist_ok=True)  # its own repository root
    (folder / ".agentv").mkdir(exist_ok=True)
    (folder / ".agentv" / "targets.yaml").write_text(TARGETS, encoding="utf-8")
    for fmt in formats:
        (folder / f"{fmt}.yaml").write_text(SUITE.format(fmt=fmt), encoding="utf-8")
        data = folder / f"data.{fmt}"
        if data.exists():
            continue
        partial = data.with_suffix(".partial")
        if fmt == "csv":
            with partial.open("w", encoding="utf-8", newline="") as f:
                out = csv.writer(f)
                out.writerow(["question", "answer"])
                out.writerows((question(i), "42") for i in range(1, rows + 1))
        elif fmt == "jsonl":
            with partial.open("w", encoding="utf-8") as f:
                for i in range(1, rows + 1):
                    f.write(json.dumps({"question": question(i), "answer": "42"}) + "\n")
        else:
            import pyarrow as pa
            import pyarrow.parquet as pq

            step = 100_000
            schema = pa.schema([("question", pa.string()), ("answer", pa.string())])
            with pq.ParquetWriter(partial, schema) as writer:
                for start in range(1, rows + 1, step):
                    end = min(rows + 1, start + step)
                    writer.write_table(
                        pa.table(
                            {
                                "question": [question(i) for i in range(start, end)],
                                "answer": ["42"] * (end - start),
                            },
                            schema=schema,
                        )
                    )
        partial.rename(data)
    return folder


def first_record(path: Path, started: float, done: threading.Event, out: dict[str, float]) -> None:
    """Poll ``path`` until it holds a record: the seconds from the spawn to then."""
    while not done.is_set():
        try:
            if path.stat().st_size > 0:
                out["first_record_s"] = time.monotonic() - started
                return
        except FileNotFoundError:
            pass
        time.sleep(0.01)


def check_results(path: Path, rows: int) -> str | None:
    """None when the results file has one ok record per row, each id once."""
    ids = set()
    with path.open(encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            if record["status"] != "ok":
                return f"record {record.get('eval_id')} is {record['status']}"
            ids.add(record["eval_id"])
    if len(ids) != rows:
        return f"{len(ids)} distinct records for {rows} rows"
    return None


def bench(rows: int, formats: tuple[str, ...], run_eval: bool) -> list[dict[str, Any]]:
    folder = write_suite(rows, formats)
    env = {**os.environ, "CI": "1"}
    logs = WORK / "logs"
    table: list[dict[str, Any]] = []
    for fmt in formats:
        size_mb = (folder / f"data.{fmt}").stat().st_size / 2**20
        m = measure(
            [str(AGENTV), "validate", f"{fmt}.yaml"],
            cwd=folder,
            log_path=logs / f"validate-{fmt}.log",
            env=env,
            timeout_s=3600,
        )
        table.append(
            {
                "format": fmt,
                "command": "validate",
                "rows": rows,
                "data_mb": round(size_mb, 1),
                "ok": m.returncode == 0,
                "wall_s": round(m.wall_s, 2),
                "rows_per_s": round(rows / m.wall_s),
                "peak_rss_mb": round(m.max_rss_mb),
            }
        )
        print(json.dumps(table[-1]), flush=True)
        if not run_eval:
            continue
        out = folder / f"results-{fmt}.jsonl"
        out.unlink(missing_ok=True)
        found: dict[str, float] = {}
        done = threading.Event()
        watcher = threading.Thread(
            target=first_record, args=(out, time.monotonic(), done, found), daemon=True
        )
        watcher.start()
        m = measure(
            [*EVAL, f"{fmt}.yaml", "--out", str(out)],
            cwd=folder,
            log_path=logs / f"eval-{fmt}.log",
            env=env,
            timeout_s=7200,
        )
        done.set()
        problem = check_results(out, rows) if m.returncode == 0 else f"exit {m.returncode}"
        table.append(
            {
                "format": fmt,
                "command": "eval --target mock",
                "rows": rows,
                "ok": problem is None,
                "problem": problem,
                "wall_s": round(m.wall_s, 2),
                "rows_per_s": round(rows / m.wall_s),
                "cpu_s": round(m.cpu_s, 1),
                "peak_rss_mb": round(m.max_rss_mb),
                "first_record_s": round(found.get("first_record_s", float("nan")), 2),
            }
        )
        print(json.dumps(table[-1]), flush=True)
        out.unlink(missing_ok=True)
    return table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--formats", default=",".join(FORMATS))
    parser.add_argument("--no-eval", action="store_true", help="validate only")
    parser.add_argument(
        "--output", type=Path, default=REPO_ROOT / "benchmarks" / "results" / "rows.json"
    )
    args = parser.parse_args()
    formats = tuple(f for f in args.formats.split(",") if f)
    table = bench(args.rows, formats, not args.no_eval)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(table, indent=2) + "\n", encoding="utf-8")
    return 0 if all(row["ok"] for row in table) else 1


if __name__ == "__main__":
    raise SystemExit(main())
