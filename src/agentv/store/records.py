"""A run's records, a page at a time, from the index: filtered by status and target,
searched over ids and the start of answers, sorted by any column. Only the page's rows are
read, so a run of 100,000 records shows its first rows at once; one record's whole text is
read back from the results file at its byte offset.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from agentv.results.reader import read_record_at
from agentv.results.record import EvalResult
from agentv.store.db import read
from agentv.store.runs import _like

#: the columns a page may be sorted by, and the SQL of each
SORTS = {
    "seq": "seq",
    "eval_id": "eval_id",
    "dataset": "dataset",
    "target": "target",
    "repeat": "repeat",
    "score": "score",
    "status": "status",
    "duration": "duration_ms",
    "attempts": "attempts",
}
PAGE_SIZES = (50, 100, 250, 1000)


@dataclass(frozen=True, slots=True)
class RecordRow:
    """One record as a table row shows it."""

    seq: int
    line: int
    case_key: list[str]
    repeat: int
    dataset: str
    eval_id: str
    target: str
    eval_file: str | None
    status: str
    score: float | None
    duration_ms: float | None
    attempts: int | None
    live: bool
    prompt: str | None
    answer: str
    latest: bool
    review: str | None = None
    """The latest review's verdict (``pass`` or ``fail``), when it has one."""


@dataclass(frozen=True, slots=True)
class RecordQuery:
    """Which of a run's records, in which order, which page: ``status`` and ``target``
    filters, ``search`` over ids and answers, ``reviewed`` (``yes``/``no``), every record
    or the latest of each run (``latest``, the default)."""

    status: str | None = None
    target: str | None = None
    search: str | None = None
    reviewed: str | None = None
    sort: str = "seq"
    descending: bool = False
    page: int = 1
    size: int = 100
    latest: bool = True


@dataclass(frozen=True, slots=True)
class RecordPage:
    """A page of records, and how many records match in all."""

    rows: list[RecordRow]
    matched: int
    page: int
    size: int

    @property
    def pages(self) -> int:
        """How many pages the matches make (at least one)."""
        return max(1, -(-self.matched // self.size))


_REVIEW = (
    "(SELECT verdict FROM reviews v WHERE v.run_id = r.run_id AND v.case_key = r.case_key "
    "AND v.repeat = r.repeat ORDER BY v.id DESC LIMIT 1)"
)
_COLUMNS = (
    "r.seq, r.line, r.case_key, r.repeat, r.dataset, r.eval_id, r.target, r.eval_file, "
    f"r.status, r.score, r.duration_ms, r.attempts, r.live, r.prompt, r.answer, r.latest, "
    f"{_REVIEW} AS review"
)


def _row(row: sqlite3.Row) -> RecordRow:
    return RecordRow(
        seq=row["seq"],
        line=row["line"],
        case_key=orjson.loads(row["case_key"]),
        repeat=row["repeat"],
        dataset=row["dataset"],
        eval_id=row["eval_id"],
        target=row["target"],
        eval_file=row["eval_file"],
        status=row["status"],
        score=row["score"],
        duration_ms=row["duration_ms"],
        attempts=row["attempts"],
        live=bool(row["live"]),
        prompt=row["prompt"],
        answer=row["answer"],
        latest=bool(row["latest"]),
        review=row["review"],
    )


def record_page(db: sqlite3.Connection, run_id: int, query: RecordQuery) -> RecordPage:
    """One page of a run's records."""
    where = ["r.run_id = ?", "r.generation = (SELECT generation FROM runs WHERE id = ?)"]
    args: list[Any] = [run_id, run_id]
    if query.latest:
        where.append("r.latest = 1")
    if query.status:
        where.append("r.status = ?")
        args.append(query.status)
    if query.target:
        where.append("r.target = ?")
        args.append(query.target)
    if query.search:
        where.append("(r.eval_id LIKE ? ESCAPE '\\' OR r.answer LIKE ? ESCAPE '\\')")
        args += [_like(query.search)] * 2
    if query.reviewed in ("yes", "no"):
        where.append(f"{_REVIEW} IS {'NOT ' if query.reviewed == 'yes' else ''}NULL")
    size = query.size if query.size in PAGE_SIZES else 100
    order = SORTS.get(query.sort, "seq")
    direction = "DESC" if query.descending else "ASC"
    nulls = "NULLS LAST" if not query.descending else "NULLS FIRST"
    clause = " AND ".join(where)
    with read(db):
        matched = db.execute(f"SELECT count(*) FROM records r WHERE {clause}", args).fetchone()[0]
        pages = max(1, -(-matched // size))
        page = min(max(1, query.page), pages)
        rows = db.execute(
            f"SELECT {_COLUMNS} FROM records r WHERE {clause} "
            f"ORDER BY r.{order} {direction} {nulls}, r.seq {direction} LIMIT ? OFFSET ?",
            [*args, size, (page - 1) * size],
        ).fetchall()
    return RecordPage([_row(r) for r in rows], matched, page, size)


def record_facets(db: sqlite3.Connection, run_id: int) -> tuple[list[str], list[str]]:
    """The statuses and targets among a run's latest records (the filters' choices)."""
    generation = "(SELECT generation FROM runs WHERE id = ?)"
    with read(db):
        statuses = [
            r[0]
            for r in db.execute(
                f"SELECT DISTINCT status FROM records WHERE run_id = ? AND generation = "
                f"{generation} AND latest = 1 ORDER BY status",
                (run_id, run_id),
            )
        ]
        targets = [
            r[0]
            for r in db.execute(
                f"SELECT DISTINCT target FROM records WHERE run_id = ? AND generation = "
                f"{generation} AND latest = 1 ORDER BY target",
                (run_id, run_id),
            )
        ]
    return statuses, targets


def record_row(db: sqlite3.Connection, run_id: int, seq: int) -> tuple[RecordRow, int, int] | None:
    """A record's row, and its byte offset and size in the results file."""
    row = db.execute(
        f"SELECT {_COLUMNS}, r.offset, r.size FROM records r WHERE r.run_id = ? AND r.seq = ? "
        "AND r.generation = (SELECT generation FROM runs WHERE id = ?)",
        (run_id, seq, run_id),
    ).fetchone()
    if row is None:
        return None
    return _row(row), row["offset"], row["size"]


def latest_seq(db: sqlite3.Connection, run_id: int, case_key: str, repeat: int) -> int | None:
    """The seq of the latest record of a run of a case (None: the run has none)."""
    row = db.execute(
        "SELECT seq FROM records WHERE run_id = ? AND case_key = ? AND repeat = ? AND latest = 1 "
        "AND generation = (SELECT generation FROM runs WHERE id = ?)",
        (run_id, case_key, repeat, run_id),
    ).fetchone()
    return None if row is None else int(row[0])


def load_record(path: Path, row: RecordRow, offset: int, size: int) -> EvalResult | None:
    """The whole record, read back from its results file (None when the file no longer
    holds it there: changed since it was indexed). ``InputError`` when it cannot be read."""
    result = read_record_at(path, offset, size, line=row.line)
    if (
        result is None
        or list(result.case_key) != row.case_key
        or (result.repeat or 0) != row.repeat
    ):
        return None
    return result
