"""What people decided about answers: reviews of runs of cases, the queue of what is worth
a person's minute first, and reviews as JSON Lines (exported, and imported: labels made
elsewhere come in the same way).

A review is of one run of a case in one store run (its case key and repeat): a verdict
(``pass`` or ``fail``), optionally a score from 0 to 1, a comment, who and when. A record
may be reviewed again: its latest review is its verdict; the earlier ones are kept.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import BaseModel, ConfigDict, ValidationError

from agentv.errors import ConfigError, Diagnostic, InputError
from agentv.results.record import RunKey, utc_timestamp
from agentv.store.db import read, write
from agentv.store.history import flaky_cases

VERDICTS = ("pass", "fail")
#: the longest comment kept (characters)
MAX_COMMENT = 20_000
#: evaluator types that are LLM judges, and the deterministic checks of the answer
JUDGES = frozenset({"llm_judge"})
CHECKS = frozenset({"contains", "icontains", "equals", "regex", "is_json"})
#: a judge's score this close to its threshold is "near the pass threshold"
NEAR = 0.1


@dataclass(frozen=True, slots=True)
class Review:
    """One review of a run of a case."""

    id: int
    run_id: int
    case_key: list[str]
    repeat: int
    verdict: str
    score: float | None
    comment: str
    reviewer: str
    created_at: str
    line: int | None = None
    """The results file's line of the record reviewed."""


def _review(row: sqlite3.Row) -> Review:
    return Review(
        id=row["id"],
        run_id=row["run_id"],
        case_key=orjson.loads(row["case_key"]),
        repeat=row["repeat"],
        verdict=row["verdict"],
        score=row["score"],
        comment=row["comment"],
        reviewer=row["reviewer"],
        created_at=row["created_at"],
        line=row["line"],
    )


def check_review(verdict: str, score: float | None, comment: str, reviewer: str) -> None:
    """``ConfigError`` saying what is wrong with a review's values."""
    if verdict not in VERDICTS:
        raise ConfigError(f"a review's verdict is 'pass' or 'fail' (got {verdict!r})")
    if score is not None and (not math.isfinite(score) or not 0 <= score <= 1):
        raise ConfigError(f"a review's score is from 0 to 1 (got {score})")
    if len(comment) > MAX_COMMENT:
        raise ConfigError(f"a review's comment is at most {MAX_COMMENT:,} characters")
    if not reviewer.strip():
        raise ConfigError("a review needs a reviewer's name (git's user.name, or --reviewer)")


def add_review(
    db: sqlite3.Connection,
    run_id: int,
    case_key: str,
    repeat: int,
    *,
    verdict: str,
    score: float | None = None,
    comment: str = "",
    reviewer: str,
    created_at: str | None = None,
) -> Review:
    """Record a review of the run of case ``case_key`` (its JSON text), ``repeat``, in
    store run ``run_id``. ``ConfigError`` for a value out of range; ``InputError`` when the
    run has no such record."""
    check_review(verdict, score, comment, reviewer)
    with write(db):
        found = db.execute(
            "SELECT line FROM records WHERE run_id = ? AND case_key = ? AND repeat = ? "
            "AND latest = 1 AND generation = (SELECT generation FROM runs WHERE id = ?)",
            (run_id, case_key, repeat, run_id),
        ).fetchone()
        if found is None:
            raise InputError(f"run {run_id} has no record of {case_key} (repeat {repeat})")
        cursor = db.execute(
            "INSERT INTO reviews (run_id, case_key, repeat, line, verdict, score, comment, "
            "reviewer, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING *",
            (
                run_id,
                case_key,
                repeat,
                found[0],
                verdict,
                score,
                comment,
                reviewer.strip(),
                created_at or utc_timestamp(),
            ),
        )
        return _review(cursor.fetchone())


def reviews_of(db: sqlite3.Connection, run_id: int, case_key: str, repeat: int) -> list[Review]:
    """A run of a case's reviews, the latest first."""
    rows = db.execute(
        "SELECT * FROM reviews WHERE run_id = ? AND case_key = ? AND repeat = ? ORDER BY id DESC",
        (run_id, case_key, repeat),
    ).fetchall()
    return [_review(r) for r in rows]


def labels_of(db: sqlite3.Connection, results: Iterable[Path]) -> dict[RunKey, str]:
    """The people's verdicts of the runs of cases recorded in the results files
    ``results`` (the latest review of each; a run reviewed in several stored runs of one
    file: the latest of all), by run (dataset, eval id, target, repeat)."""
    paths = sorted({str(Path(p).resolve()) for p in results})
    if not paths:
        return {}
    marks = ", ".join("?" * len(paths))
    with read(db):
        rows = db.execute(
            "SELECT h.case_key, h.repeat, h.verdict FROM reviews h JOIN runs u ON "
            f"u.id = h.run_id WHERE u.results_path IN ({marks}) ORDER BY h.id",
            paths,
        ).fetchall()
    found: dict[RunKey, str] = {}
    for case_key, repeat, verdict in rows:
        key = orjson.loads(case_key)
        if isinstance(key, list) and len(key) == 3:
            found[(str(key[0]), str(key[1]), str(key[2]), int(repeat))] = verdict
    return found


@dataclass(frozen=True, slots=True)
class ReviewCounts:
    """A run's reviewed records: how many, and how many of them a person passed."""

    reviewed: int
    passed: int


def review_counts(db: sqlite3.Connection, run_id: int) -> ReviewCounts:
    """How many of a run's records were reviewed (their latest review's verdict)."""
    row = db.execute(
        "SELECT count(*), coalesce(sum(verdict = 'pass'), 0) FROM reviews WHERE id IN "
        "(SELECT max(id) FROM reviews WHERE run_id = ? GROUP BY case_key, repeat)",
        (run_id,),
    ).fetchone()
    return ReviewCounts(row[0], row[1])


# --- JSON Lines ---------------------------------------------------------------------------


class ReviewLine(BaseModel):
    """One review as a line of JSON (``agentv reviews export`` / ``import``). The run is
    named by its ``run`` uid or its ``results`` file; the case by its ``case_key``, or by
    ``dataset``, ``eval_id`` and ``target``."""

    model_config = ConfigDict(extra="forbid")

    run: str | None = None
    results: str | None = None
    case_key: list[str] | None = None
    dataset: str = ""
    eval_id: str | None = None
    target: str = ""
    repeat: int = 0
    verdict: Literal["pass", "fail"]
    score: float | None = None
    comment: str = ""
    reviewer: str
    time: str | None = None


def export_reviews(db: sqlite3.Connection, *, run_id: int | None = None) -> Iterator[str]:
    """Every review (``run_id``: of that run), oldest first, each as a line of JSON."""
    sql = (
        "SELECT v.*, u.uid, u.results_path, r.dataset, r.eval_id, r.target FROM reviews v "
        "JOIN runs u ON u.id = v.run_id LEFT JOIN records r ON r.run_id = v.run_id AND "
        "r.generation = u.generation AND r.case_key = v.case_key AND r.repeat = v.repeat "
        "AND r.latest = 1"
    )
    args: tuple[int, ...] = ()
    if run_id is not None:
        sql += " WHERE v.run_id = ?"
        args = (run_id,)
    with read(db):
        rows = db.execute(sql + " ORDER BY v.id", args).fetchall()
    for row in rows:
        key = orjson.loads(row["case_key"])
        line = {
            "run": row["uid"],
            "results": row["results_path"],
            "case_key": key,
            "dataset": row["dataset"] if row["dataset"] is not None else key[0],
            "eval_id": row["eval_id"] if row["eval_id"] is not None else key[1],
            "target": row["target"] if row["target"] is not None else key[2],
            "repeat": row["repeat"],
            "verdict": row["verdict"],
            "score": row["score"],
            "comment": row["comment"],
            "reviewer": row["reviewer"],
            "time": row["created_at"],
        }
        yield json.dumps(line, ensure_ascii=False)


@dataclass
class ImportedReviews:
    """What ``import_reviews`` did: reviews ``added``, ``duplicates`` (already in the
    store) and the lines it could not use (``diagnostics``, each with its line)."""

    added: int = 0
    duplicates: int = 0
    diagnostics: list[Diagnostic] = field(default_factory=list)


def import_reviews(
    db: sqlite3.Connection, path: Path, lines: Iterable[str], *, reviewer: str | None = None
) -> ImportedReviews:
    """Add the reviews of a JSON Lines file (``path`` names it in messages); ``reviewer``
    stands for a line's own when it has none. A line that is not a review, or whose run
    or case is not in the store, is reported and left out."""
    done = ImportedReviews()

    def bad(number: int, message: str, hint: str | None = None) -> None:
        done.diagnostics.append(
            Diagnostic(path, message, severity="warning", line=number, hint=hint)
        )

    for number, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            data = json.loads(text)
            if isinstance(data, dict) and reviewer and not data.get("reviewer"):
                data["reviewer"] = reviewer
            line = ReviewLine.model_validate(data)
        except (ValueError, ValidationError) as exc:
            first = exc.errors(include_url=False)[0] if isinstance(exc, ValidationError) else None
            what = (
                f"{'.'.join(map(str, first['loc'])) or 'the line'}: {first['msg'].lower()}"
                if first
                else "not JSON"
            )
            bad(number, f"not a review ({what})", "export reviews with agentv reviews export")
            continue
        run_id = _run_of(db, line)
        if run_id is None:
            bad(
                number,
                f"no run in the store is {line.run or line.results!r}",
                "agentv runs import the results file first",
            )
            continue
        key = _case_of(db, run_id, line)
        if key is None:
            bad(number, f"run {run_id} has no record of {line.eval_id or line.case_key!r}")
            continue
        created = line.time or utc_timestamp()
        exists = db.execute(
            "SELECT 1 FROM reviews WHERE run_id = ? AND case_key = ? AND repeat = ? AND "
            "verdict = ? AND reviewer = ? AND created_at = ?",
            (run_id, key, line.repeat, line.verdict, line.reviewer.strip(), created),
        ).fetchone()
        if exists:
            done.duplicates += 1
            continue
        try:
            add_review(
                db,
                run_id,
                key,
                line.repeat,
                verdict=line.verdict,
                score=line.score,
                comment=line.comment,
                reviewer=line.reviewer,
                created_at=created,
            )
        except (ConfigError, InputError) as exc:
            bad(number, str(exc))
            continue
        done.added += 1
    return done


def _run_of(db: sqlite3.Connection, line: ReviewLine) -> int | None:
    if line.run:
        row = db.execute("SELECT id FROM runs WHERE uid = ?", (line.run,)).fetchone()
        if row is not None:
            return int(row[0])
    if line.results:
        resolved = str(Path(line.results).resolve())
        row = db.execute(
            "SELECT id FROM runs WHERE results_path = ? ORDER BY id DESC LIMIT 1", (resolved,)
        ).fetchone()
        if row is not None:
            return int(row[0])
    return None


def _case_of(db: sqlite3.Connection, run_id: int, line: ReviewLine) -> str | None:
    """The store's case key of a review line's record in the run."""
    where = "run_id = ? AND latest = 1 AND repeat = ? AND generation = (SELECT generation FROM runs WHERE id = ?)"
    if line.case_key is not None:
        key = orjson.dumps(line.case_key).decode()
        row = db.execute(
            f"SELECT case_key FROM records WHERE {where} AND case_key = ?",
            (run_id, line.repeat, run_id, key),
        ).fetchone()
    elif line.eval_id is not None:
        row = db.execute(
            f"SELECT case_key FROM records WHERE {where} AND dataset = ? AND eval_id = ? "
            "AND target = ?",
            (run_id, line.repeat, run_id, line.dataset, line.eval_id, line.target),
        ).fetchone()
    else:
        return None
    return None if row is None else str(row[0])


# --- the review queue -------------------------------------------------------------------------

#: why a record is in the queue, in the queue's order
REASONS = {
    "uncertain": "a judge's samples disagreed about pass or fail",
    "disagree": "a judge and a deterministic check disagree",
    "near": "a judge's score is near its pass threshold",
    "flaky": "the case flips across repeats or runs",
    "failed": "a failure nobody has reviewed",
}


@dataclass(frozen=True, slots=True)
class QueueItem:
    """A record worth a person's look, and why."""

    run_id: int
    seq: int
    case_key: list[str]
    repeat: int
    dataset: str
    eval_id: str
    target: str
    status: str
    score: float | None
    reason: str
    started_at: str


def _in(names: frozenset[str]) -> str:
    return "(" + ", ".join(f"'{n}'" for n in sorted(names)) + ")"


def review_queue(
    db: sqlite3.Connection, *, run_id: int | None = None, limit: int = 200
) -> list[QueueItem]:
    """Unreviewed records in the order they are worth a look: the verdict hangs on a judge
    whose samples disagreed (``uncertain``: a person can decide); a judge and a deterministic
    check of the answer disagree; a judge's score is within ``NEAR`` of its threshold; the
    case is flaky; the record failed. Newest runs first within each reason; each record
    once, under its first reason."""
    unreviewed = (
        "NOT EXISTS (SELECT 1 FROM reviews v WHERE v.run_id = r.run_id AND "
        "v.case_key = r.case_key AND v.repeat = r.repeat)"
    )
    base = (
        "SELECT r.run_id, r.seq, r.case_key, r.repeat, r.dataset, r.eval_id, r.target, "
        "r.status, r.score, u.started_at FROM records r JOIN runs u ON u.id = r.run_id AND "
        f"u.generation = r.generation WHERE r.latest = 1 AND {unreviewed}"
    )
    args: list[Any] = []
    if run_id is not None:
        base += " AND r.run_id = ?"
        args.append(run_id)
    verdict = (
        "FROM verdicts {a} WHERE {a}.run_id = r.run_id AND {a}.generation = r.generation "
        "AND {a}.seq = r.seq"
    )
    flaky = [orjson.dumps(f.case_key).decode() for f in flaky_cases(db, run_id=run_id)]
    conditions = {
        "uncertain": ("r.status = 'uncertain'", []),
        "disagree": (
            f"EXISTS (SELECT 1 {verdict.format(a='j')} AND j.type IN {_in(JUDGES)} AND EXISTS "
            f"(SELECT 1 {verdict.format(a='d')} AND d.type IN {_in(CHECKS)} "
            "AND d.passed != j.passed))",
            [],
        ),
        "near": (
            f"EXISTS (SELECT 1 {verdict.format(a='j')} AND j.type IN {_in(JUDGES)} "
            f"AND abs(j.score - j.threshold) <= {NEAR})",
            [],
        ),
        "flaky": (
            "r.status IN ('ok', 'failed', 'uncertain') AND r.case_key IN "
            "(SELECT value FROM json_each(?))",
            [json.dumps(flaky)],
        ),
        "failed": ("r.status = 'failed'", []),
    }
    items: list[QueueItem] = []
    seen: set[tuple[int, int]] = set()
    with read(db):
        for reason, (condition, more) in conditions.items():
            if len(items) >= limit:
                break
            rows = db.execute(
                f"{base} AND {condition} ORDER BY u.started_at DESC, r.run_id DESC, r.seq LIMIT ?",
                [*args, *more, limit],
            ).fetchall()
            for row in rows:
                if (row[0], row[1]) in seen or len(items) >= limit:
                    continue
                seen.add((row[0], row[1]))
                items.append(
                    QueueItem(
                        run_id=row[0],
                        seq=row[1],
                        case_key=orjson.loads(row[2]),
                        repeat=row[3],
                        dataset=row[4],
                        eval_id=row[5],
                        target=row[6],
                        status=row[7],
                        score=row[8],
                        reason=reason,
                        started_at=row[9],
                    )
                )
    return items
