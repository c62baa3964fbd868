"""How far each evaluator agrees with people (``agentv calibrate``): over the reviewed runs
of cases, each evaluator's pass / fail verdict against the person's (their latest review),
as a confusion matrix, the share of agreement and Cohen's kappa
(``agentv.results.stats``). Judges first, then the other evaluators by name, then the
case's own verdict (``ok`` or ``failed``); fewer than ``MIN_LABELS`` labels get a warning.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from agentv.results.stats import agreement, cohen_kappa
from agentv.results.summary import natural_key
from agentv.store.db import read
from agentv.store.reviews import JUDGES

#: fewer human labels than this make agreement figures too loose to trust
MIN_LABELS = 20
#: the name of the row of the cases' own verdicts
CASE_VERDICT = "case verdict"


@dataclass(frozen=True, slots=True)
class Agreement:
    """One evaluator against people: the confusion matrix of its verdicts and theirs
    (``both_pass``, ``evaluator_pass_human_fail``, ``evaluator_fail_human_pass``,
    ``both_fail``), ``n`` labels, ``agreement`` (the share alike) and ``kappa`` (Cohen's;
    None when undefined: every verdict the same on both sides)."""

    name: str
    type: str
    n: int
    both_pass: int
    evaluator_pass_human_fail: int
    evaluator_fail_human_pass: int
    both_fail: int
    agreement: float | None
    kappa: float | None

    @property
    def warning(self) -> str | None:
        """Why the figures are not to be trusted yet (None: enough labels)."""
        if self.n < MIN_LABELS:
            return f"only {self.n} label(s): review at least {MIN_LABELS} for figures to trust"
        return None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data (``agentv calibrate --format json``)."""
        return {
            "evaluator": self.name,
            "type": self.type,
            "n": self.n,
            "agreement": self.agreement,
            "kappa": self.kappa,
            "confusion": {
                "both_pass": self.both_pass,
                "evaluator_pass_human_fail": self.evaluator_pass_human_fail,
                "evaluator_fail_human_pass": self.evaluator_fail_human_pass,
                "both_fail": self.both_fail,
            },
            "warning": self.warning,
        }


@dataclass(frozen=True, slots=True)
class Calibration:
    """Every evaluator's agreement with people, and how many runs of cases were
    reviewed (``calibrate``).

    Attributes:
        evaluators: One ``Agreement`` per evaluator, judges first: its labels, the share
            of agreement, Cohen's kappa and the confusion matrix.
        reviewed: Runs of cases that people reviewed.
    """

    evaluators: tuple[Agreement, ...]
    reviewed: int

    def to_dict(self) -> dict[str, Any]:
        """The agreement as JSON-ready data.

        Returns:
            What ``agentv calibrate --format json`` prints.
        """
        return {
            "reviewed": self.reviewed,
            "min_labels": MIN_LABELS,
            "evaluators": [a.to_dict() for a in self.evaluators],
        }


_LATEST_REVIEWS = (
    "SELECT run_id, case_key, repeat, verdict FROM reviews WHERE id IN "
    "(SELECT max(id) FROM reviews GROUP BY run_id, case_key, repeat)"
)
_REVIEWED = (
    f"FROM ({_LATEST_REVIEWS}) h JOIN runs u ON u.id = h.run_id JOIN records r ON "
    "r.run_id = h.run_id AND r.generation = u.generation AND r.case_key = h.case_key AND "
    "r.repeat = h.repeat AND r.latest = 1"
)


def calibrate(db: sqlite3.Connection, *, run_id: int | None = None) -> Calibration:
    """Agreement of every evaluator with the reviews of the store (``run_id``: of one
    run's records)."""
    only = " AND r.run_id = ?" if run_id is not None else ""
    args = (run_id,) if run_id is not None else ()
    tables: dict[tuple[str, str], list[int]] = {}
    with read(db):
        reviewed = db.execute(f"SELECT count(*) {_REVIEWED} WHERE 1 = 1{only}", args).fetchone()[0]
        rows = db.execute(
            f"SELECT v.name, v.type, v.passed, h.verdict {_REVIEWED} JOIN verdicts v ON "
            "v.run_id = r.run_id AND v.generation = r.generation AND v.seq = r.seq "
            f"WHERE 1 = 1{only}",
            args,
        ).fetchall()
        cases = db.execute(
            f"SELECT r.status = 'ok', h.verdict {_REVIEWED} WHERE r.status IN ('ok', 'failed')"
            f"{only}",
            args,
        ).fetchall()
    for name, kind, passed, verdict in rows:
        _tally(tables.setdefault((name, kind), [0, 0, 0, 0]), bool(passed), verdict == "pass")
    ordered = sorted(
        tables.items(), key=lambda kv: (kv[0][1] not in JUDGES, natural_key(kv[0][0]), kv[0][1])
    )
    found = [_agreement(name, kind, table) for (name, kind), table in ordered]
    if cases:
        table = [0, 0, 0, 0]
        for ok, verdict in cases:
            _tally(table, bool(ok), verdict == "pass")
        found.append(_agreement(CASE_VERDICT, "case", table))
    return Calibration(tuple(found), reviewed)


def _tally(table: list[int], evaluator: bool, human: bool) -> None:
    """Count one label in [both pass, evaluator only, human only, both fail]."""
    table[(0 if human else 1) if evaluator else (2 if human else 3)] += 1


def _agreement(name: str, kind: str, table: list[int]) -> Agreement:
    both_pass, evaluator_only, human_only, both_fail = table
    return Agreement(
        name=name,
        type=kind,
        n=sum(table),
        both_pass=both_pass,
        evaluator_pass_human_fail=evaluator_only,
        evaluator_fail_human_pass=human_only,
        both_fail=both_fail,
        agreement=agreement(*table),
        kappa=cohen_kappa(*table),
    )
