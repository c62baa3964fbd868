"""The run store's database: one SQLite file, opened in WAL mode, migrated on open.

Several processes use one store at once: ``agentv eval`` runs registering theirs, an
``agentv runs import``, an open ``agentv view``. SQLite in WAL mode lets readers go on
while one writer writes; every write here is a short transaction begun with ``BEGIN
IMMEDIATE`` (it takes the write lock at once, so two writers queue instead of failing
half-way), and ``busy_timeout`` makes a writer wait for the lock rather than fail. Large
writes (a results file's index) are cut into batches, each its own transaction
(docs/run-history.md, "The store").

The schema has a version (``meta.schema_version``); ``MIGRATIONS[n]`` takes a store from
version n to n + 1, each in its own transaction, so an older store is brought up to date
the first time a newer agentv opens it. A store newer than this agentv is refused.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from agentv.errors import InputError, SetupError

#: how long a writer waits for another's transaction before giving up (milliseconds)
BUSY_TIMEOUT_MS = 60_000

_V1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    uid TEXT NOT NULL UNIQUE,
    origin TEXT NOT NULL,
    state TEXT NOT NULL,
    started_at TEXT NOT NULL,
    ended_at TEXT,
    updated_at TEXT NOT NULL,
    command TEXT,
    cwd TEXT,
    host TEXT,
    pid INTEGER,
    git_commit TEXT,
    git_dirty INTEGER,
    eval_files TEXT NOT NULL DEFAULT '[]',
    targets TEXT NOT NULL DEFAULT '[]',
    repeats INTEGER,
    pass_threshold REAL,
    invocations TEXT NOT NULL DEFAULT '[]',
    results_path TEXT,
    results_size INTEGER,
    results_mtime REAL,
    generation INTEGER NOT NULL DEFAULT 0,
    next_generation INTEGER NOT NULL DEFAULT 1,
    total INTEGER,
    graded INTEGER,
    ok INTEGER,
    failed INTEGER,
    errors INTEGER,
    invalid INTEGER,
    user_errors INTEGER,
    skipped INTEGER,
    pass_rate REAL,
    mean REAL,
    cost_usd REAL,
    wall_seconds REAL,
    summary TEXT,
    bad_lines INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX runs_by_start ON runs (started_at);
CREATE INDEX runs_by_results ON runs (results_path);
CREATE TABLE run_groups (
    run_id INTEGER NOT NULL,
    generation INTEGER NOT NULL,
    kind TEXT NOT NULL,
    name TEXT NOT NULL,
    runs INTEGER NOT NULL,
    graded INTEGER NOT NULL,
    ok INTEGER NOT NULL,
    failed INTEGER NOT NULL,
    errors INTEGER NOT NULL,
    pass_rate REAL,
    mean REAL,
    cost_usd REAL,
    PRIMARY KEY (run_id, generation, kind, name)
);
CREATE TABLE records (
    run_id INTEGER NOT NULL,
    generation INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    line INTEGER NOT NULL,
    offset INTEGER NOT NULL,
    size INTEGER NOT NULL,
    case_key TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    dataset TEXT NOT NULL,
    eval_id TEXT NOT NULL,
    target TEXT NOT NULL,
    eval_file TEXT,
    status TEXT NOT NULL,
    score REAL,
    duration_ms REAL,
    attempts INTEGER,
    cost_usd REAL,
    live INTEGER NOT NULL,
    prompt TEXT,
    answer TEXT NOT NULL,
    latest INTEGER NOT NULL,
    PRIMARY KEY (run_id, generation, seq)
);
CREATE INDEX records_by_case ON records (case_key, repeat);
CREATE TABLE verdicts (
    run_id INTEGER NOT NULL,
    generation INTEGER NOT NULL,
    seq INTEGER NOT NULL,
    name TEXT NOT NULL,
    type TEXT NOT NULL,
    score REAL,
    threshold REAL NOT NULL,
    passed INTEGER NOT NULL
);
CREATE INDEX verdicts_by_record ON verdicts (run_id, generation, seq);
CREATE TABLE reviews (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL,
    case_key TEXT NOT NULL,
    repeat INTEGER NOT NULL,
    line INTEGER,
    verdict TEXT NOT NULL CHECK (verdict IN ('pass', 'fail')),
    score REAL,
    comment TEXT NOT NULL DEFAULT '',
    reviewer TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX reviews_by_record ON reviews (run_id, case_key, repeat);
"""

#: ``MIGRATIONS[n]``: the SQL that takes a store at version n to version n + 1
MIGRATIONS: tuple[str, ...] = (_V1,)
SCHEMA_VERSION = len(MIGRATIONS)


def connect(path: Path, *, create: bool = True) -> sqlite3.Connection:
    """Open (``create``: and create) the store at ``path``, migrated to ``SCHEMA_VERSION``.

    ``InputError`` when the file is not a store (or a newer agentv's), ``SetupError`` when
    it cannot be opened or created."""
    path = Path(path)
    if not create and not path.exists():
        raise InputError(
            f"no run store at {path}; runs are registered there by agentv eval, or add "
            "results files with agentv runs import"
        )
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # autocommit: each transaction is begun and ended here, explicitly
        db = sqlite3.connect(
            path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
        )
    except (sqlite3.Error, OSError) as exc:
        raise SetupError(f"cannot open the run store {path}: {exc}") from None
    try:
        db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        _wal(db)
        db.execute("PRAGMA synchronous = NORMAL")  # WAL: durable at each checkpoint
        _migrate(db, path)
    except sqlite3.DatabaseError as exc:
        db.close()
        raise InputError(
            f"{path} is not an agentv run store ({exc}); give another --store, or move the "
            "file away to start a new store"
        ) from None
    except BaseException:
        db.close()
        raise
    db.row_factory = sqlite3.Row
    return db


def _wal(db: sqlite3.Connection) -> None:
    """Put the store in WAL mode (kept in the file once set). Switching needs a moment
    without other connections: a store busy being created by another process is retried."""
    for attempt in range(50):
        try:
            mode = db.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == 49:
                raise
            time.sleep(0.1)
            continue
        if str(mode).lower() == "wal":
            return
        time.sleep(0.1)


def _version(db: sqlite3.Connection) -> int:
    known = db.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
    ).fetchone()
    if known is None:
        return 0
    row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row is not None else 0


def _migrate(db: sqlite3.Connection, path: Path) -> None:
    """Bring the store to ``SCHEMA_VERSION``, one migration a transaction."""
    if _version(db) == SCHEMA_VERSION:
        return
    while True:
        with write(db):  # the version is read again under the write lock
            version = _version(db)
            if version > SCHEMA_VERSION:
                raise InputError(
                    f"the run store {path} was written by a newer agentv (schema "
                    f"{version}, this agentv knows {SCHEMA_VERSION}); upgrade agentv"
                )
            if version == SCHEMA_VERSION:
                return
            if version == 0 and db.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]:
                raise sqlite3.DatabaseError("it holds tables of something else")
            for statement in MIGRATIONS[version].split(";"):
                if statement.strip():
                    db.execute(statement)
            db.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('schema_version', ?)",
                (str(version + 1),),
            )


@contextmanager
def write(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One write transaction, begun ``IMMEDIATE`` (the write lock taken first: writers
    queue, none fails half-way), committed at the end of the block, rolled back on an
    error."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


@contextmanager
def read(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One read transaction: every query in the block sees the same state of the store
    (a writer's transaction is seen whole or not at all)."""
    db.execute("BEGIN")
    try:
        yield db
    finally:
        db.execute("COMMIT")
