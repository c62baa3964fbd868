"""The run store: results files indexed with their summary's figures, records paged and
read back by offset, a missing or changed file said, case histories and flaky cases,
reviews, their JSON Lines and the queue, the schema's version."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import agentv
from agentv.errors import InputError
from agentv.results.summary import summary_dict
from agentv.store import RecordQuery, RunFilter, RunStore
from agentv.store.db import SCHEMA_VERSION


def rec(eval_id: str, status: str = "ok", score: float = 1.0, **more: Any) -> dict[str, Any]:
    data = {
        "eval_id": eval_id,
        "dataset": "ds",
        "target": "t",
        "status": status,
        "score": score,
        "candidate_answer": f"answer of {eval_id}",
        "raw_request": {"question": f"question of {eval_id}"},
        "eval_file": "/project/evals/a.yaml",
        "timestamp": "2025-06-01T10:00:00.000Z",
        "duration_ms": 100.0,
    }
    return {**data, **more}


def write(path: Path, records: list[dict[str, Any]], *, append: bool = False) -> Path:
    with path.open("a" if append else "w", encoding="utf-8") as handle:
        for r in records:
            handle.write(json.dumps(r) + "\n")
    return path


def key(eval_id: str) -> str:
    return json.dumps(["ds", eval_id, "t"], separators=(",", ":"))


def test_an_imported_run_has_its_summary_figures(tmp_path: Path) -> None:
    results = write(
        tmp_path / "r.jsonl",
        [
            rec("a"),
            rec("b", "failed", 0.25),
            rec("c", "error", 0.0, error="boom"),
            rec("d", repeat=1),
        ],
    )
    with RunStore(tmp_path / "s.sqlite") as store:
        run_id, new, indexed = store.import_results(results)
        run = store.run(run_id)
        summary = store.summary(run_id)
    expected = agentv.read_results(results).summary
    assert new and indexed.records == 4 and indexed.bad_lines == 0
    assert run is not None
    assert (run.total, run.graded, run.ok, run.failed, run.errors) == (4, 3, 2, 1, 1)
    assert (run.pass_rate, run.mean) == (expected.pass_rate, expected.mean)
    assert run.statuses == {"ok": 2, "failed": 1, "error": 1}
    assert (run.origin, run.state, run.missing, run.changed) == ("import", "imported", False, False)
    assert run.targets == ["t"]
    assert [f.path for f in run.eval_files] == ["/project/evals/a.yaml"]
    assert run.started_at == "2025-06-01T09:59:59.900Z"
    whole = summary_dict(expected)
    assert summary == {k: v for k, v in whole.items() if k not in ("errors_by_case", "cases")} | {
        "targets": [{k: v for k, v in t.items() if k != "flaky"} for t in whole["targets"]]
    }


def test_records_are_paged_filtered_sorted_and_read_back(tmp_path: Path) -> None:
    records = [rec(f"c{n}", "ok" if n % 3 else "failed", n / 10) for n in range(10)]
    records.append(rec("hostile", candidate_answer="<script>x()</script> and 100%_done"))
    results = write(tmp_path / "r.jsonl", records)
    with RunStore(tmp_path / "s.sqlite") as store:
        run_id, _, _ = store.import_results(results)
        page = store.records(run_id, RecordQuery(size=50))
        assert (page.matched, page.pages, len(page.rows)) == (11, 1, 11)
        failed = store.records(run_id, RecordQuery(status="failed"))
        assert [r.eval_id for r in failed.rows] == ["c0", "c3", "c6", "c9"]
        by_score = store.records(run_id, RecordQuery(sort="score", descending=True, size=50))
        assert [r.eval_id for r in by_score.rows[:3]] == ["hostile", "c9", "c8"]
        found = store.records(run_id, RecordQuery(search="100%_d"))
        assert [r.eval_id for r in found.rows] == ["hostile"]
        assert store.records(run_id, RecordQuery(search="100%x")).matched == 0
        second = store.records(run_id, RecordQuery(size=50, page=2))
        assert second.page == 1  # past the last page: the last
        row, result = store.record(run_id, found.rows[0].seq)  # type: ignore[misc]
    assert result is not None
    assert result.candidate_answer == "<script>x()</script> and 100%_done"
    assert (row.line, row.status, row.answer) == (11, "ok", result.candidate_answer)


def test_a_resumed_file_is_indexed_again_with_its_latest_records(tmp_path: Path) -> None:
    results = write(tmp_path / "r.jsonl", [rec("a", "error", 0.0, error="down"), rec("b")])
    with RunStore(tmp_path / "s.sqlite") as store:
        run_id, _, _ = store.import_results(results)
        write(results, [rec("a", "ok", 0.9)], append=True)
        assert store.run(run_id).changed  # type: ignore[union-attr]
        again, new, indexed = store.import_results(results)
        assert (again, new, indexed.records) == (run_id, False, 3)
        run = store.run(run_id)
        assert run is not None and not run.changed
        assert (run.total, run.ok, run.errors, run.mean) == (2, 2, 0, 0.95)
        latest = store.records(run_id, RecordQuery())
        assert [(r.eval_id, r.seq, r.status) for r in latest.rows] == [
            ("b", 2, "ok"),
            ("a", 3, "ok"),
        ]
        every = store.records(run_id, RecordQuery(latest=False))
        assert [(r.eval_id, r.latest) for r in every.rows] == [
            ("a", False),
            ("b", True),
            ("a", True),
        ]
        assert store.latest_seq(run_id, key("a"), 0) == 3
        # one generation of rows is kept
        count = store.db.execute("SELECT count(*) FROM records").fetchone()[0]
    assert count == 3


def test_a_missing_results_file_is_shown_never_a_crash(tmp_path: Path) -> None:
    results = write(tmp_path / "r.jsonl", [rec("a")])
    with RunStore(tmp_path / "s.sqlite") as store:
        run_id, _, _ = store.import_results(results)
        results.rename(tmp_path / "moved.jsonl")
        (run,) = store.runs()
        assert (run.id, run.missing, run.total) == (run_id, True, 1)
        row, result = store.record(run_id, 1)  # type: ignore[misc]
        assert (row.eval_id, result) == ("a", None)
        # a file rewritten with other content: the index no longer matches it
        write(results, [rec("zzz-other-case-with-a-longer-id")])
        row, result = store.record(run_id, 1)  # type: ignore[misc]
        assert result is None
        assert store.run(run_id).changed  # type: ignore[union-attr]


def test_runs_are_listed_newest_first_and_filtered(tmp_path: Path) -> None:
    with RunStore(tmp_path / "s.sqlite") as store:
        for n, (stamp, target, file) in enumerate(
            [
                ("2025-01-01T10:00:00.000Z", "gpt", "/p/evals/a.yaml"),
                ("2025-02-01T10:00:00.000Z", "claude", "/p/evals/b.yaml"),
                ("2025-03-01T10:00:00.000Z", "gpt", "/p/evals/b.yaml"),
            ]
        ):
            path = write(
                tmp_path / f"r{n}.jsonl",
                [rec("a", target=target, eval_file=file, timestamp=stamp, duration_ms=0)],
            )
            store.import_results(path)
        ids = lambda **f: [r.id for r in store.runs(RunFilter(**f))]  # noqa: E731
        assert ids() == [3, 2, 1]
        assert ids(target="gpt") == [3, 1]
        assert ids(eval_file="b.yaml") == [3, 2]
        assert ids(since="2025-02-01") == [3, 2]
        assert ids(until="2025-02-01") == [2, 1]
        assert ids(search="r1.jsonl") == [2]
        assert ids(search=" 3 ") == [3]  # its id
        assert ids(search=store.run(1).uid) == [1]  # type: ignore[union-attr]
        assert ids(limit=1) == [3]
        assert ids(eval_file="%") == []  # wildcards are text


def test_case_history_and_flaky_cases(tmp_path: Path) -> None:
    with RunStore(tmp_path / "s.sqlite") as store:
        store.import_results(write(tmp_path / "1.jsonl", [rec("a"), rec("b")]))
        store.import_results(write(tmp_path / "2.jsonl", [rec("a", "failed", 0.2), rec("b")]))
        # the same case, another prompt: a changed eval file is not flakiness
        changed = rec("b", "failed", 0.0, raw_request={"question": "another question"})
        store.import_results(write(tmp_path / "3.jsonl", [changed]))
        history = store.case_history(key("a"))
        assert [(r.run_id, r.status, r.score) for r in history.runs] == [
            (1, "ok", 1.0),
            (2, "failed", 0.2),
        ]
        assert history.flaky
        assert not store.case_history(key("b")).flaky
        assert [(f.case_key, f.runs, f.passes) for f in store.flaky()] == [(["ds", "a", "t"], 2, 1)]
        assert store.flaky(run_id=3) == []


def test_reviews_export_and_import(tmp_path: Path) -> None:
    results = write(tmp_path / "r.jsonl", [rec("a"), rec("b", "failed", 0.1)])
    with RunStore(tmp_path / "s.sqlite") as store:
        run_id, _, _ = store.import_results(results)
        store.review(
            run_id, key("a"), 0, verdict="pass", score=0.9, comment="good\n<b>", reviewer="ann"
        )
        store.review(run_id, key("b"), 0, verdict="fail", reviewer="bob")
        with pytest.raises(agentv.ConfigError, match="verdict is 'pass' or 'fail'"):
            store.review(run_id, key("a"), 0, verdict="maybe", reviewer="ann")
        with pytest.raises(agentv.ConfigError, match="score is from 0 to 1"):
            store.review(run_id, key("a"), 0, verdict="pass", score=1.5, reviewer="ann")
        with pytest.raises(InputError, match="has no record"):
            store.review(run_id, key("zz"), 0, verdict="pass", reviewer="ann")
        lines = list(store.export_reviews())
        assert store.review_counts(run_id).reviewed == 2
        uid = store.run(run_id).uid  # type: ignore[union-attr]
    first = json.loads(lines[0])
    assert first == {
        "run": uid,
        "results": str(results.resolve()),
        "case_key": ["ds", "a", "t"],
        "dataset": "ds",
        "eval_id": "a",
        "target": "t",
        "repeat": 0,
        "verdict": "pass",
        "score": 0.9,
        "comment": "good\n<b>",
        "reviewer": "ann",
        "time": first["time"],
    }
    # into another store that indexed the same results file
    elsewhere = [
        json.dumps(
            {
                "results": str(results),
                "eval_id": "b",
                "dataset": "ds",
                "target": "t",
                "verdict": "pass",
            }
        ),
        "not json",
        json.dumps(
            {
                "results": str(tmp_path / "other.jsonl"),
                "eval_id": "a",
                "verdict": "pass",
                "reviewer": "x",
            }
        ),
        json.dumps(
            {
                "results": str(results),
                "eval_id": "a",
                "verdict": "pass",
                "reviewer": "x",
                "colour": 1,
            }
        ),
    ]
    with RunStore(tmp_path / "other.sqlite") as other:
        other_id, _, _ = other.import_results(results)
        done = other.import_reviews(tmp_path / "in.jsonl", [*lines, *elsewhere], reviewer="carol")
        again = other.import_reviews(tmp_path / "in.jsonl", lines)
        got = [(r.verdict, r.reviewer, r.comment) for r in other.reviews_of(other_id, key("a"), 0)]
        b = [(r.verdict, r.reviewer) for r in other.reviews_of(other_id, key("b"), 0)]
    assert (done.added, done.duplicates) == (3, 0)
    assert [(d.line, d.message) for d in done.diagnostics] == [
        (4, "not a review (not JSON)"),
        (5, f"no run in the store is {str(tmp_path / 'other.jsonl')!r}"),
        (6, "not a review (colour: extra inputs are not permitted)"),
    ]
    assert (again.added, again.duplicates) == (0, 2)
    assert got == [("pass", "ann", "good\n<b>")]
    assert b == [("pass", "carol"), ("fail", "bob")]


def test_the_review_queue_orders_by_what_is_worth_a_look(tmp_path: Path) -> None:
    def graded(eval_id: str, judge: float, check: float, status: str) -> dict[str, Any]:
        return rec(
            eval_id,
            status,
            (judge + check) / 2,
            evaluator_results=[
                {"name": "j", "type": "llm_judge", "score": judge},
                {"name": "c", "type": "contains", "score": check},
            ],
        )

    with RunStore(tmp_path / "s.sqlite") as store:
        store.import_results(write(tmp_path / "1.jsonl", [graded("flips", 1.0, 1.0, "ok")]))
        run_id, _, _ = store.import_results(
            write(
                tmp_path / "2.jsonl",
                [
                    graded("calm", 1.0, 1.0, "ok"),
                    graded("fails", 0.0, 0.0, "failed"),
                    graded("flips", 0.0, 0.0, "failed"),
                    graded("near", 0.85, 1.0, "ok"),
                    graded("disagree", 0.2, 1.0, "failed"),
                ],
            )
        )
        order = [(i.eval_id, i.reason, i.run_id) for i in store.queue()]
        assert order == [
            ("disagree", "disagree", 2),
            ("near", "near", 2),
            ("flips", "flaky", 2),
            ("flips", "flaky", 1),
            ("fails", "failed", 2),
        ]
        store.review(run_id, key("disagree"), 0, verdict="fail", reviewer="ann")
        assert [i.eval_id for i in store.queue(run_id)] == ["near", "flips", "fails"]


def test_the_schema_is_versioned_and_other_files_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    RunStore(path).close()
    db = sqlite3.connect(path)
    assert db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (
        str(SCHEMA_VERSION),
    )
    assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    with pytest.raises(InputError, match=r"written by a newer agentv \(schema 99"):
        RunStore(path)
    other = tmp_path / "other.sqlite"
    db = sqlite3.connect(other)
    db.execute("CREATE TABLE notes (x)")
    db.commit()
    db.close()
    with pytest.raises(InputError, match="is not an agentv run store"):
        RunStore(other)
    text = tmp_path / "text.sqlite"
    text.write_text("hello, this is not a database at all" * 100)
    with pytest.raises(InputError, match="is not an agentv run store"):
        RunStore(text)
    with pytest.raises(InputError, match="no run store at"):
        RunStore(tmp_path / "none.sqlite", create=False)


def test_a_file_that_is_not_results_is_not_registered(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("hello\n")
    with RunStore(tmp_path / "s.sqlite") as store:
        with pytest.raises(InputError, match="not found"):
            store.import_results(tmp_path / "absent.jsonl")
        run_id, _, indexed = store.import_results(bad)
        assert indexed.bad_lines == 1
        assert store.run(run_id).total == 0  # type: ignore[union-attr]


def test_uncertain_runs_among_a_stored_runs_statuses(tmp_path: Path) -> None:
    records = [rec("a"), rec("b", "uncertain", 0.78, uncertain=["judge"]), rec("c", "failed", 0.1)]
    with RunStore(tmp_path / "s.sqlite") as store:
        run_id, _, _ = store.import_results(write(tmp_path / "r.jsonl", records))
        stored = store.run(run_id)
        assert stored is not None
        assert (stored.graded, stored.uncertain) == (3, 1)
        assert stored.statuses == {"ok": 1, "failed": 1, "uncertain": 1}
        assert stored.to_dict()["statuses"] == {"ok": 1, "failed": 1, "uncertain": 1}
