"""Indexing a results file into the store: what the history, the workbench's pages and the
review queue read without opening the file again.

The results file stays the truth; the index holds, per record, where it is in the file
(line, byte offset and length, so that one record is read back alone), its key
(``EvalResult.case_key`` and the repeat: the one key every view of results matches runs
by), what a table row shows (status, score, time, the start of the answer), a fingerprint
of the prompt it was sent, and its evaluators' verdicts. Each run's figures are its
summary's (``agentv.results.summary``), fed every latest record as it is read: the store
counts nothing itself.

A file is indexed into a new *generation* of its run's rows, in batches of short
transactions; the last one makes the new generation the run's, so a reader sees the old
index or the new one whole, never half of each, and concurrent writers never wait long.
"""

from __future__ import annotations

import hashlib
import math
import os
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from agentv.results.flips import evaluator_verdicts
from agentv.results.reader import read_results
from agentv.results.record import GRADED, EvalResult, RunKey
from agentv.results.report.build import page_summary
from agentv.results.summary import Summary, SummaryCollector
from agentv.store.db import write

#: rows written per transaction while indexing
BATCH = 2_000
#: characters of each answer kept in the index (what the run page's table shows and
#: searches); the whole answer stays in the results file
ANSWER_CHARS = 400


def case_key_text(result: EvalResult) -> str:
    """A record's case key (``EvalResult.case_key``) as the store keeps it: JSON text."""
    return orjson.dumps(list(result.case_key)).decode()


def prompt_fingerprint(result: EvalResult) -> str | None:
    """What identifies the prompt a record was sent: a live conversation's plan digest,
    else a hash of its question and messages as sent (None: nothing was sent)."""
    raw = result.raw_request or {}
    digest = raw.get("plan_digest")
    if isinstance(digest, str):
        return digest
    sent = [raw.get("question"), raw.get("chat_prompt")]
    if sent == [None, None]:
        return None
    return hashlib.sha256(orjson.dumps(sent, option=orjson.OPT_SORT_KEYS)).hexdigest()[:32]


@dataclass(frozen=True, slots=True)
class Indexed:
    """What indexing a results file found: its summary (the latest record of every run),
    the records read, and the lines that were not results."""

    summary: Summary
    records: int
    bad_lines: int


def verdicts(result: EvalResult, pass_threshold: float | None) -> list[tuple[Any, ...]]:
    """(name, type, score, threshold, passed) of each evaluator that graded a record
    (``agentv.results.flips.evaluator_verdicts``), but a judge whose samples disagreed:
    it gave no pass or fail to set beside a person's."""
    return [v for v in evaluator_verdicts(result, pass_threshold) if v[4] is not None]


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _score(value: Any) -> float | None:
    return float(value) if _number(value) else None


def _row(result: EvalResult) -> tuple[Any, ...]:
    """The index columns of a record (after run, generation, seq, line, offset, size)."""
    dataset, eval_id, target = result.case_key
    answer = result.candidate_answer or ""
    graded = result.status in GRADED
    return (
        case_key_text(result),
        result.repeat or 0,
        dataset,
        eval_id,
        target,
        result.eval_file,
        result.status,
        _score(result.score) if graded else None,  # errors are not scores
        _score(result.duration_ms),
        result.attempts,
        1 if result.turns is not None else 0,
        prompt_fingerprint(result),
        answer[:ANSWER_CHARS],
    )


_INSERT_RECORD = (
    "INSERT INTO records (run_id, generation, seq, line, offset, size, case_key, repeat, "
    "dataset, eval_id, target, eval_file, status, score, duration_ms, attempts, live, prompt, "
    "answer, latest) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)"
)
_INSERT_VERDICT = (
    "INSERT INTO verdicts (run_id, generation, seq, name, type, score, threshold, passed) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)


def index_results(
    db: sqlite3.Connection, run_id: int, path: Path, *, pass_threshold: float | None = None
) -> Indexed:
    """Index the results file at ``path`` as the records of run ``run_id``, replacing its
    earlier index whole once done; the run's figures become the file's summary's.
    ``InputError`` when the file cannot be read."""
    with write(db):
        generation = db.execute(
            "UPDATE runs SET next_generation = next_generation + 1 WHERE id = ? "
            "RETURNING next_generation - 1",
            (run_id,),
        ).fetchone()[0]
    stat = os.stat(path)
    reader = read_results(path)
    whole = SummaryCollector()
    files: set[str] = set()
    seen: dict[RunKey, int] = {}
    superseded: list[int] = []
    records: list[tuple[Any, ...]] = []
    judged: list[tuple[Any, ...]] = []
    seq = 0
    for found in reader.located():
        seq += 1
        result = found.result
        key = result.run_key
        earlier = seen.get(key)
        if earlier is not None:
            superseded.append(earlier)
        seen[key] = seq
        files.add(result.eval_file or "")
        if not superseded:  # else the summary is made again below, of the latest records
            whole.add(result)
        records.append(
            (run_id, generation, seq, found.line, found.offset, found.size, *_row(result))
        )
        judged.extend((run_id, generation, seq, *v) for v in verdicts(result, pass_threshold))
        if len(records) >= BATCH:
            _insert(db, records, judged)
    _insert(db, records, judged)
    by_file: dict[str, SummaryCollector] = {}
    if superseded or len(files) > 1:
        # the file again: the latest records only, and each eval file's apart (a run of
        # one eval file has that file's figures in its whole summary)
        whole = SummaryCollector() if superseded else whole
        latest = set(seen.values())
        for n, found in enumerate(read_results(path).located(), 1):
            if n not in latest:
                continue
            if superseded:
                whole.add(found.result)
            if len(files) > 1:
                name = found.result.eval_file or ""
                collector = by_file.get(name)
                if collector is None:
                    collector = by_file[name] = SummaryCollector()
                collector.add(found.result)
        for start in range(0, len(superseded), BATCH):
            chunk = superseded[start : start + BATCH]
            with write(db):
                db.executemany(
                    "UPDATE records SET latest = 0 WHERE run_id = ? AND generation = ? AND seq = ?",
                    [(run_id, generation, s) for s in chunk],
                )
    summary = whole.summary()
    if len(files) == 1:
        each = {next(iter(files)): summary}
    else:
        each = {name: c.summary() for name, c in by_file.items()}
    groups = _groups(summary, each)
    with write(db):
        current = db.execute("SELECT generation FROM runs WHERE id = ?", (run_id,)).fetchone()
        if current is not None and current[0] < generation:  # a later indexing may have won
            _figures(db, run_id, generation, summary, len(reader.diagnostics), stat)
            db.executemany(
                "INSERT INTO run_groups (run_id, generation, kind, name, runs, graded, ok, "
                "failed, errors, pass_rate, mean, cost_usd) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(run_id, generation, *g) for g in groups],
            )
    forget_old(db, run_id)
    return Indexed(summary, seq, len(reader.diagnostics))


def _insert(db: sqlite3.Connection, records: list[Any], judged: list[Any]) -> None:
    if not records and not judged:
        return
    with write(db):
        db.executemany(_INSERT_RECORD, records)
        db.executemany(_INSERT_VERDICT, judged)
    records.clear()
    judged.clear()


def _groups(whole: Summary, files: dict[str, Summary]) -> Iterable[tuple[Any, ...]]:
    """(kind, name, runs, graded, ok, failed, errors, pass rate, mean, cost) of each target
    (its answers' cost) and each eval file (everything its runs cost), as their summaries
    say."""
    priced = whole.cost is not None
    for t in whole.targets:
        cost = t.cost.usd if priced else None
        yield (
            "target",
            t.name,
            t.runs,
            t.graded,
            t.ok,
            t.failed,
            t.errors,
            t.pass_rate,
            t.mean,
            cost,
        )
    for name, s in files.items():
        if not name:
            continue
        yield (
            "eval_file",
            name,
            s.total,
            s.graded,
            s.ok,
            s.failed,
            s.errors,
            s.pass_rate,
            s.mean,
            s.cost.total.usd if s.cost is not None else None,
        )


def _figures(
    db: sqlite3.Connection,
    run_id: int,
    generation: int,
    summary: Summary,
    bad_lines: int,
    stat: os.stat_result,
) -> None:
    """Make ``generation`` the run's index, with its summary's figures."""
    data = summary.to_dict()
    db.execute(
        "UPDATE runs SET generation = ?, total = ?, graded = ?, ok = ?, failed = ?, errors = ?, "
        "invalid = ?, user_errors = ?, skipped = ?, pass_rate = ?, mean = ?, cost_usd = ?, "
        "wall_seconds = ?, summary = ?, bad_lines = ?, results_size = ?, results_mtime = ? "
        "WHERE id = ?",
        (
            generation,
            summary.total,
            summary.graded,
            summary.ok,
            summary.failed,
            summary.errors,
            summary.invalid,
            summary.user_errors,
            summary.skipped,
            summary.pass_rate,
            summary.mean,
            summary.cost.total.usd if summary.cost is not None else None,
            data["time"]["wall_seconds"],  # as --summary-json says it
            orjson.dumps(page_summary(data)).decode(),
            bad_lines,
            stat.st_size,
            stat.st_mtime,
            run_id,
        ),
    )


def forget_old(db: sqlite3.Connection, run_id: int) -> None:
    """Delete the rows of a run's earlier generations, a batch a transaction."""
    for table in ("records", "verdicts", "run_groups"):
        while True:
            with write(db):
                gone = db.execute(
                    f"DELETE FROM {table} WHERE rowid IN (SELECT {table}.rowid FROM {table} "
                    f"JOIN runs ON runs.id = {table}.run_id WHERE {table}.run_id = ? "
                    f"AND {table}.generation < runs.generation LIMIT ?)",
                    (run_id, BATCH * 5),
                ).rowcount
            if gone < BATCH * 5:
                break
