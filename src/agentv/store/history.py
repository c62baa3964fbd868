"""A case across runs: its score history, and whether it is *flaky*: its verdict (``ok``
or ``failed``) changed between runs of the same prompt on the same target (a case's key
holds its target; the prompt is the fingerprint of what was sent, so a case whose eval
file changed in between is not called flaky for it). Repeats within a run count as runs.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

import orjson

from agentv.results.record import GRADED
from agentv.store.db import read

_CURRENT = "JOIN runs u ON u.id = r.run_id AND u.generation = r.generation"


@dataclass(frozen=True, slots=True)
class CaseRun:
    """One run of a case in the history: which store run, when, its record's verdict."""

    run_id: int
    started_at: str
    seq: int
    repeat: int
    status: str
    score: float | None
    prompt: str | None
    review: str | None


@dataclass(frozen=True, slots=True)
class CaseHistory:
    """A case's runs, oldest first, and whether it is flaky."""

    case_key: list[str]
    runs: list[CaseRun]
    flaky: bool

    def to_dict(self) -> dict[str, object]:
        """JSON-ready data."""
        return {
            "case_key": self.case_key,
            "flaky": self.flaky,
            "runs": [
                {
                    "run": r.run_id,
                    "started_at": r.started_at,
                    "repeat": r.repeat,
                    "status": r.status,
                    "score": r.score,
                    "prompt": r.prompt,
                    "review": r.review,
                }
                for r in self.runs
            ],
        }


def case_history(db: sqlite3.Connection, case_key: str) -> CaseHistory:
    """Every latest record of the case ``case_key`` (its JSON text) in the store."""
    with read(db):
        rows = db.execute(
            "SELECT r.run_id, u.started_at, r.seq, r.repeat, r.status, r.score, r.prompt, "
            "(SELECT verdict FROM reviews v WHERE v.run_id = r.run_id AND v.case_key = "
            "r.case_key AND v.repeat = r.repeat ORDER BY v.id DESC LIMIT 1) AS review "
            f"FROM records r {_CURRENT} WHERE r.case_key = ? AND r.latest = 1 "
            "ORDER BY u.started_at, r.run_id, r.repeat",
            (case_key,),
        ).fetchall()
    runs = [CaseRun(*row) for row in rows]
    verdicts: dict[str | None, set[str]] = {}
    for run in runs:
        if run.status in GRADED and run.prompt is not None:
            verdicts.setdefault(run.prompt, set()).add(run.status)
    flaky = any(len(found) > 1 for found in verdicts.values())
    return CaseHistory(orjson.loads(case_key), runs, flaky)


@dataclass(frozen=True, slots=True)
class FlakyCase:
    """A case whose verdict changed between runs of one prompt: how many graded runs of
    that prompt, how many passed."""

    case_key: list[str]
    runs: int
    passes: int


def flaky_cases(db: sqlite3.Connection, *, run_id: int | None = None) -> list[FlakyCase]:
    """The flaky cases of the store (``run_id``: those that ran in that run), most runs
    first."""
    restrict = ""
    args: tuple[int, ...] = ()
    if run_id is not None:
        restrict = (
            "AND r.case_key IN (SELECT case_key FROM records WHERE run_id = ? AND "
            "generation = (SELECT generation FROM runs WHERE id = ?))"
        )
        args = (run_id, run_id)
    with read(db):
        rows = db.execute(
            "SELECT r.case_key, count(*) AS n, sum(r.status = 'ok') AS passes "
            f"FROM records r {_CURRENT} WHERE r.latest = 1 "
            "AND r.status IN ('ok', 'failed', 'uncertain') "
            f"AND r.prompt IS NOT NULL {restrict} GROUP BY r.case_key, r.prompt "
            "HAVING passes > 0 AND passes < n ORDER BY n DESC, r.case_key",
            args,
        ).fetchall()
    found: dict[str, FlakyCase] = {}
    for key, n, passes in rows:
        if key not in found:  # a case flaky under two prompts is listed once
            found[key] = FlakyCase(orjson.loads(key), n, passes)
    return list(found.values())
