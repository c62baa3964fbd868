"""Runs in the store: registered by ``agentv eval`` when it starts and completed when it
ends, imported from results files made elsewhere, and listed.

A run is addressed by its id in the store (never by a file path). Its results file may
have moved or vanished since: the run is then shown as *missing*, never an error.
"""

from __future__ import annotations

import hashlib
import os
import socket
import sqlite3
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from agentv.results.record import usd as dollars
from agentv.results.record import utc_timestamp
from agentv.store.db import read, write
from agentv.store.index import Indexed, index_results
from agentv.store.project import git_state

#: how a run's entry came to be
EVAL, IMPORT = "eval", "import"
#: a run's state: running (registered, not ended), finished, interrupted, imported
RUNNING, FINISHED, INTERRUPTED, IMPORTED = "running", "finished", "interrupted", "imported"


@dataclass(frozen=True, slots=True)
class EvalFile:
    """An eval file of a run, and the SHA-256 of its content when the run started (None:
    not known, as for an imported run)."""

    path: str
    sha256: str | None = None


@dataclass(frozen=True, slots=True)
class StoredRun:
    """A run as the store holds it: what ran, when, from which command and commit, its
    results file, and its summary's figures (``agentv.results.summary``)."""

    id: int
    """The run's id in the store (what ``agentv view`` addresses it by)."""
    uid: str
    """A unique id that stays the run's across stores (exported reviews name it)."""
    origin: str
    """``eval`` (registered by ``agentv eval``) or ``import`` (``agentv runs import``)."""
    state: str
    """``running``, ``finished``, ``interrupted``, ``imported``; ``stopped``: registered
    as running by a process that is gone."""
    started_at: str
    """When the run started (ISO 8601, UTC)."""
    ended_at: str | None
    """When it ended (None: it has not, or its process is gone)."""
    command: list[str]
    """The command line that started it."""
    cwd: str | None
    """The folder it ran in."""
    git_commit: str | None
    """The git commit checked out when it started (None: no git, or not a repository)."""
    git_dirty: bool | None
    """Whether tracked files had changes then."""
    eval_files: list[EvalFile]
    """Its eval files, each with the SHA-256 of its content when the run started."""
    targets: list[str]
    """The targets it ran on."""
    repeats: int | None
    """Runs of every case (``--repeat``; None: the files' own)."""
    pass_threshold: float | None
    """The pass threshold of its cases (None: the configs set different ones)."""
    results_path: str | None
    """Its results file."""
    missing: bool
    """The results file is not where the run left it (moved or deleted)."""
    changed: bool
    """The results file changed since it was indexed (``agentv runs import`` it again)."""
    total: int | None = None
    """Runs of cases in the results file; this and the figures below are its summary's
    (None: not indexed yet)."""
    graded: int | None = None
    """Runs graded (``ok``, ``failed`` or ``uncertain``)."""
    ok: int | None = None
    """Runs graded at or above the pass threshold."""
    failed: int | None = None
    """Runs graded below the pass threshold."""
    errors: int | None = None
    """Runs that ended ``error``."""
    invalid: int | None = None
    """Runs that could not run (``invalid``)."""
    user_errors: int | None = None
    """Simulated users that could not go on (``user_error``)."""
    skipped: int | None = None
    """Runs not sent: the budget was reached first."""
    pass_rate: float | None = None
    """``ok`` runs over the graded ones."""
    mean: float | None = None
    """The mean score of the graded runs."""
    cost_usd: float | None = None
    """US dollars its requests cost."""
    wall_seconds: float | None = None
    """From the first run of a case's start to the last one's end."""
    bad_lines: int = 0
    """Lines of the results file that are not results (left out)."""
    invocations: list[dict[str, Any]] = field(default_factory=list)
    """Each command that ran into this run (the first, then ``--resume`` and reruns)."""

    @property
    def uncertain(self) -> int | None:
        """Runs graded whose verdict hung on a judge's disagreeing samples: the graded
        runs neither ``ok`` nor ``failed`` (None: not indexed yet)."""
        if self.graded is None:
            return None
        return max(0, self.graded - (self.ok or 0) - (self.failed or 0))

    @property
    def statuses(self) -> dict[str, int]:
        """The runs of cases by status (those with any)."""
        counts = {
            "ok": self.ok,
            "failed": self.failed,
            "uncertain": self.uncertain,
            "error": self.errors,
            "invalid": self.invalid,
            "user_error": self.user_errors,
            "skipped": self.skipped,
        }
        return {k: v for k, v in counts.items() if v}

    def to_dict(self) -> dict[str, Any]:
        """The run as JSON-ready data.

        Returns:
            What ``agentv runs --format json`` prints of it.
        """
        return {
            "id": self.id,
            "uid": self.uid,
            "origin": self.origin,
            "state": self.state,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "command": self.command,
            "cwd": self.cwd,
            "git_commit": self.git_commit,
            "git_dirty": self.git_dirty,
            "eval_files": [{"path": f.path, "sha256": f.sha256} for f in self.eval_files],
            "targets": self.targets,
            "repeats": self.repeats,
            "pass_threshold": self.pass_threshold,
            "results": self.results_path,
            "missing": self.missing,
            "changed": self.changed,
            "total": self.total,
            "graded": self.graded,
            "statuses": self.statuses,
            "pass_rate": self.pass_rate,
            "mean": self.mean,
            "cost_usd": dollars(self.cost_usd),
            "wall_seconds": self.wall_seconds,
            "invocations": self.invocations,
        }


@dataclass(frozen=True, slots=True)
class RunStart:
    """What ``agentv eval`` knows of its run when it starts."""

    command: Sequence[str]
    cwd: Path
    eval_files: Sequence[Path]
    targets: Sequence[str]
    results_path: Path
    repeats: int | None = None
    pass_threshold: float | None = None
    appending: bool = False
    """The run adds to a results file (``--resume``, a rerun into it): the run that wrote
    the file is updated, not a new one registered."""


def file_sha256(path: Path) -> str | None:
    """The SHA-256 of a file's content (None when it cannot be read)."""
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            while block := handle.read(1 << 20):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def _invocation(start: RunStart, now: str) -> dict[str, Any]:
    git = git_state(start.cwd)
    return {
        "at": now,
        "command": list(start.command),
        "git_commit": git.commit,
        "git_dirty": git.dirty,
    }


def start_run(db: sqlite3.Connection, start: RunStart) -> int:
    """Register a run that starts (or, ``appending``, the run its results file belongs
    to, as running again); its id."""
    now = utc_timestamp()
    results = str(start.results_path.resolve())
    invocation = _invocation(start, now)
    files = [{"path": str(p), "sha256": file_sha256(p)} for p in dict.fromkeys(start.eval_files)]
    with write(db):
        if start.appending:
            row = db.execute(
                "SELECT id, invocations FROM runs WHERE results_path = ? ORDER BY id DESC LIMIT 1",
                (results,),
            ).fetchone()
            if row is not None:
                before = orjson.loads(row["invocations"])
                db.execute(
                    "UPDATE runs SET state = ?, updated_at = ?, ended_at = NULL, pid = ?, "
                    "host = ?, invocations = ? WHERE id = ?",
                    (
                        RUNNING,
                        now,
                        os.getpid(),
                        socket.gethostname(),
                        _json([*before, invocation]),
                        row["id"],
                    ),
                )
                return int(row["id"])
        cursor = db.execute(
            "INSERT INTO runs (uid, origin, state, started_at, updated_at, command, cwd, host, "
            "pid, git_commit, git_dirty, eval_files, targets, repeats, pass_threshold, "
            "invocations, results_path) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                uuid.uuid4().hex,
                EVAL,
                RUNNING,
                now,
                now,
                _json(list(start.command)),
                str(start.cwd),
                socket.gethostname(),
                os.getpid(),
                invocation["git_commit"],
                invocation["git_dirty"],
                _json(files),
                _json(list(dict.fromkeys(start.targets))),
                start.repeats,
                start.pass_threshold,
                _json([invocation]),
                results,
            ),
        )
        return int(cursor.lastrowid or 0)


def finish_run(db: sqlite3.Connection, run_id: int, *, interrupted: bool = False) -> Indexed | None:
    """Complete a run's entry when it ends: its results file indexed, its figures the
    file's summary's (None when the file is not there). ``InputError`` when the file
    cannot be read."""
    row = db.execute(
        "SELECT results_path, pass_threshold FROM runs WHERE id = ?", (run_id,)
    ).fetchone()
    if row is None:
        return None
    path = Path(row["results_path"]) if row["results_path"] else None
    indexed = None
    if path is not None and path.is_file():
        indexed = index_results(db, run_id, path, pass_threshold=row["pass_threshold"])
    now = utc_timestamp()
    with write(db):
        db.execute(
            "UPDATE runs SET state = ?, ended_at = ?, updated_at = ? WHERE id = ?",
            (INTERRUPTED if interrupted else FINISHED, now, now, run_id),
        )
    return indexed


def import_results(db: sqlite3.Connection, path: Path) -> tuple[int, bool, Indexed]:
    """Index a results file made elsewhere or before: a new run (``imported``), or the run
    already registered with this file, indexed again. (run id, whether it is new, what
    was indexed); ``InputError`` when it is not a results file."""
    from agentv.results.reader import read_results

    resolved = path.resolve()
    read_results(resolved)  # refused in words before anything is registered
    now = utc_timestamp()
    with write(db):
        row = db.execute(
            "SELECT id FROM runs WHERE results_path = ? ORDER BY id DESC LIMIT 1",
            (str(resolved),),
        ).fetchone()
        created = row is None
        if created:
            cursor = db.execute(
                "INSERT INTO runs (uid, origin, state, started_at, ended_at, updated_at, "
                "results_path) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (uuid.uuid4().hex, IMPORT, IMPORTED, now, now, now, str(resolved)),
            )
            run_id = int(cursor.lastrowid or 0)
        else:
            run_id = int(row["id"])
        threshold = db.execute(
            "SELECT pass_threshold FROM runs WHERE id = ?", (run_id,)
        ).fetchone()[0]
    try:
        indexed = index_results(db, run_id, resolved, pass_threshold=threshold)
    except BaseException:
        if created:  # nothing half-registered is left behind
            with write(db):
                db.execute("DELETE FROM runs WHERE id = ?", (run_id,))
        raise
    if created:
        _describe_import(db, run_id, indexed)
    return run_id, created, indexed


def _describe_import(db: sqlite3.Connection, run_id: int, indexed: Indexed) -> None:
    """An imported run's when, eval files, targets and repeats, as its records say."""
    summary = indexed.summary
    time = summary.to_dict()["time"] if summary.total else {}
    with write(db):
        files = [
            {"path": r[0], "sha256": None}
            for r in db.execute(
                "SELECT DISTINCT eval_file FROM records JOIN runs ON runs.id = records.run_id "
                "AND runs.generation = records.generation WHERE run_id = ? "
                "AND eval_file IS NOT NULL ORDER BY eval_file",
                (run_id,),
            )
        ]
        db.execute(
            "UPDATE runs SET started_at = coalesce(?, started_at), "
            "ended_at = coalesce(?, ended_at), eval_files = ?, targets = ?, repeats = ? "
            "WHERE id = ?",
            (
                time.get("started"),
                time.get("ended"),
                _json(files),
                _json([t.name for t in summary.targets]),
                summary.repeats if summary.total else None,
                run_id,
            ),
        )


@dataclass(frozen=True, slots=True)
class RunFilter:
    """Which runs to list: by eval file (a part of its path), target, the day they
    started (``since`` / ``until``, ``YYYY-MM-DD``, both included) and a search over ids,
    commands, files and targets; newest first, ``limit`` at most."""

    eval_file: str | None = None
    target: str | None = None
    since: str | None = None
    until: str | None = None
    search: str | None = None
    limit: int | None = None


def _like(text: str) -> str:
    """``text`` as a LIKE pattern matching it anywhere (its wildcards escaped)."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def list_runs(db: sqlite3.Connection, which: RunFilter | None = None) -> list[StoredRun]:
    """The runs, newest first."""
    which = which or RunFilter()
    where, args = [], []
    if which.eval_file:
        where.append(
            "EXISTS (SELECT 1 FROM json_each(runs.eval_files) "
            "WHERE json_extract(value, '$.path') LIKE ? ESCAPE '\\')"
        )
        args.append(_like(which.eval_file))
    if which.target:
        where.append("EXISTS (SELECT 1 FROM json_each(runs.targets) WHERE value = ?)")
        args.append(which.target)
    if which.since:
        where.append("started_at >= ?")
        args.append(which.since)
    if which.until:
        where.append("substr(started_at, 1, 10) <= ?")
        args.append(which.until)
    if which.search:
        where.append(
            "(CAST(id AS TEXT) = ? OR uid = ? OR command LIKE ? ESCAPE '\\' "
            "OR eval_files LIKE ? ESCAPE '\\' OR targets LIKE ? ESCAPE '\\' "
            "OR results_path LIKE ? ESCAPE '\\' OR git_commit LIKE ? ESCAPE '\\')"
        )
        pattern = _like(which.search)
        term = which.search.strip()
        args += [term, term, pattern, pattern, pattern, pattern, pattern]
    sql = "SELECT * FROM runs"
    if where:
        sql += " WHERE " + " AND ".join(where)
    sql += " ORDER BY started_at DESC, id DESC"
    if which.limit is not None:
        sql += " LIMIT ?"
        args.append(which.limit)
    with read(db):
        return [stored_run(row) for row in db.execute(sql, args).fetchall()]


def get_run(db: sqlite3.Connection, run_id: int) -> StoredRun | None:
    """One run, by its id in the store."""
    row = db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone()
    return stored_run(row) if row is not None else None


def _alive(pid: int | None, host: str | None) -> bool:
    """Whether the process that registered a running run may still be running it."""
    if pid is None or host != socket.gethostname():
        return True  # another machine's: it cannot be told from here
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def stored_run(row: sqlite3.Row) -> StoredRun:
    """A row of ``runs`` as a ``StoredRun`` (its results file looked at now)."""
    path = row["results_path"]
    missing = changed = False
    if path:
        try:
            stat = os.stat(path)
        except OSError:
            missing = True
        else:
            known = row["results_size"]
            changed = known is not None and (
                stat.st_size != known or stat.st_mtime != row["results_mtime"]
            )
    state = row["state"]
    if state == RUNNING and not _alive(row["pid"], row["host"]):
        state = "stopped"
    if state == RUNNING:
        changed = False  # a file being written changes: that is no news
    dirty = row["git_dirty"]
    return StoredRun(
        id=row["id"],
        uid=row["uid"],
        origin=row["origin"],
        state=state,
        started_at=row["started_at"],
        ended_at=row["ended_at"],
        command=orjson.loads(row["command"]) if row["command"] else [],
        cwd=row["cwd"],
        git_commit=row["git_commit"],
        git_dirty=None if dirty is None else bool(dirty),
        eval_files=[EvalFile(f["path"], f.get("sha256")) for f in orjson.loads(row["eval_files"])],
        targets=list(orjson.loads(row["targets"])),
        repeats=row["repeats"],
        pass_threshold=row["pass_threshold"],
        results_path=path,
        missing=missing,
        changed=changed,
        total=row["total"],
        graded=row["graded"],
        ok=row["ok"],
        failed=row["failed"],
        errors=row["errors"],
        invalid=row["invalid"],
        user_errors=row["user_errors"],
        skipped=row["skipped"],
        pass_rate=row["pass_rate"],
        mean=row["mean"],
        cost_usd=row["cost_usd"],
        wall_seconds=row["wall_seconds"],
        bad_lines=row["bad_lines"],
        invocations=orjson.loads(row["invocations"]),
    )


def run_summary(db: sqlite3.Connection, run_id: int) -> dict[str, Any] | None:
    """The run's summary JSON as indexed (``Summary.to_dict`` less its lists of cases)."""
    row = db.execute("SELECT summary FROM runs WHERE id = ?", (run_id,)).fetchone()
    return orjson.loads(row[0]) if row is not None and row[0] else None


@dataclass(frozen=True, slots=True)
class TrendPoint:
    """One run's figures for one target or eval file: its pass rate, mean and cost, as
    the run's summary says them."""

    run_id: int
    started_at: str
    runs: int
    pass_rate: float | None
    mean: float | None
    cost_usd: float | None


def trends(
    db: sqlite3.Connection, *, run_ids: Sequence[int] | None = None
) -> dict[tuple[str, str], list[TrendPoint]]:
    """Per target (``("target", name)``) and per eval file (``("eval_file", path)``), its
    figures in each run that ran it, oldest first (``run_ids``: those runs only)."""
    sql = (
        "SELECT g.kind, g.name, g.run_id, u.started_at, g.runs, g.pass_rate, g.mean, g.cost_usd "
        "FROM run_groups g JOIN runs u ON u.id = g.run_id AND u.generation = g.generation"
    )
    args: list[Any] = []
    if run_ids is not None:
        sql += " WHERE g.run_id IN (SELECT value FROM json_each(?))"
        args.append(_json(list(run_ids)))
    found: dict[tuple[str, str], list[TrendPoint]] = {}
    with read(db):
        for row in db.execute(sql + " ORDER BY g.kind DESC, g.name, u.started_at, u.id", args):
            found.setdefault((row[0], row[1]), []).append(TrendPoint(*row[2:]))
    return found
