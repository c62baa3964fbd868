"""``agentv runs``, ``runs import``, ``calibrate`` and ``reviews export/import`` as a user
runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.cli import agentv_cli

#: every test here runs agentv as a process: left out of `make test-fast`
pytestmark = pytest.mark.slow


def results(path: Path, *ids: str) -> Path:
    path.write_text(
        "".join(
            json.dumps(
                {
                    "eval_id": i,
                    "dataset": "ds",
                    "target": "gpt",
                    "status": "ok",
                    "score": 1.0,
                    "eval_file": str(path.parent / "evals" / "a.yaml"),
                    "timestamp": "2025-06-01T10:00:00.000Z",
                    "evaluator_results": [{"name": "j", "type": "llm_judge", "score": 0.9}],
                }
            )
            + "\n"
            for i in ids
        ),
        encoding="utf-8",
    )
    return path


def test_runs_import_list_and_json(repo: Path) -> None:
    empty = agentv_cli(repo, "runs")
    assert (empty.returncode, empty.stdout) == (
        0,
        "No runs yet: agentv eval registers each run, and agentv runs import adds results "
        "files made before.\n",
    )
    results(repo / "one.jsonl", "a", "b")
    (repo / "bad.jsonl").write_text("{}\n")
    done = agentv_cli(repo, "runs", "import", "one.jsonl", "missing.jsonl")
    assert done.returncode == 1
    assert done.stdout == "one.jsonl: imported as run 1 (2 records)\n"
    assert done.stderr == (
        f"error: results file not found: {repo / 'missing.jsonl'}; give a results file "
        "written by agentv eval (JSON Lines, or YAML for .yaml/.yml)\n"
    )
    assert (repo / ".agentv" / "runs.sqlite").is_file()
    again = agentv_cli(repo, "runs", "import", "one.jsonl")
    assert again.stdout == "one.jsonl: indexed again: run 1 (2 records)\n"
    listed = agentv_cli(repo, "runs", "--format", "json")
    (run,) = json.loads(listed.stdout)
    assert {
        k: run[k] for k in ("id", "origin", "state", "targets", "total", "statuses", "missing")
    } == {
        "id": 1,
        "origin": "import",
        "state": "imported",
        "targets": ["gpt"],
        "total": 2,
        "statuses": {"ok": 2},
        "missing": False,
    }
    (repo / "one.jsonl").unlink()
    table = agentv_cli(repo, "runs", "--target", "gpt")
    assert table.returncode == 0
    lines = table.stdout.splitlines()
    assert lines[0].split() == [
        "id",
        "started",
        "(UTC)",
        "state",
        "eval",
        "files",
        "targets",
        "runs",
        "pass",
        "rate",
        "mean",
        "cost",
        "results",
    ]
    assert lines[1].split() == [
        "1",
        "2025-06-01",
        "10:00:00",
        "imported",
        "a.yaml",
        "gpt",
        "2",
        "100.0%",
        "1.000",
        "-",
        "one.jsonl",
        "(missing)",
    ]
    assert agentv_cli(repo, "runs", "--target", "claude").stdout.startswith("No runs yet")
    bad_day = agentv_cli(repo, "runs", "--since", "June")
    assert (bad_day.returncode, bad_day.stderr) == (
        1,
        "error: since is a day written YYYY-MM-DD (got 'June')\n",
    )


def test_a_store_named_in_the_config_is_used(repo: Path) -> None:
    (repo / ".agentv").mkdir()
    (repo / ".agentv" / "config.yaml").write_text(
        "$schema: agentv-config-v2\nrun_store: history/store.sqlite\n"
    )
    results(repo / "one.jsonl", "a")
    (repo / "sub").mkdir()
    assert agentv_cli(repo / "sub", "runs", "import", "../one.jsonl").returncode == 0
    assert (repo / "history" / "store.sqlite").is_file()
    assert not (repo / ".agentv" / "runs.sqlite").exists()
    other = agentv_cli(repo, "runs", "--store", "elsewhere.sqlite")
    assert other.stdout.startswith("No runs yet")


def test_calibrate_and_reviews_round_trip(repo: Path) -> None:
    results(repo / "one.jsonl", "a", "b")
    assert agentv_cli(repo, "runs", "import", "one.jsonl").returncode == 0
    nothing = agentv_cli(repo, "calibrate")
    assert nothing.stdout.startswith("No reviewed runs yet")
    labels = repo / "labels.jsonl"
    labels.write_text(
        json.dumps(
            {
                "results": "one.jsonl",
                "dataset": "ds",
                "eval_id": "a",
                "target": "gpt",
                "verdict": "pass",
            }
        )
        + "\n"
        + json.dumps(
            {
                "results": "one.jsonl",
                "dataset": "ds",
                "eval_id": "b",
                "target": "gpt",
                "verdict": "fail",
            }
        )
        + "\nnope\n"
    )
    imported = agentv_cli(repo, "reviews", "import", "labels.jsonl", "--reviewer", "ann")
    assert imported.returncode == 0
    assert imported.stdout == "2 review(s) added, 0 already there, 1 line(s) left out\n"
    assert "labels.jsonl:3" in imported.stderr and "not a review (not JSON)" in imported.stderr
    found = json.loads(agentv_cli(repo, "calibrate", "--format", "json").stdout)
    assert found["reviewed"] == 2
    judge = found["evaluators"][0]
    assert (judge["evaluator"], judge["n"], judge["agreement"], judge["kappa"]) == (
        "j",
        2,
        0.5,
        0.0,
    )
    assert judge["confusion"] == {
        "both_pass": 1,
        "evaluator_pass_human_fail": 1,
        "evaluator_fail_human_pass": 0,
        "both_fail": 0,
    }
    table = agentv_cli(repo, "calibrate").stdout.splitlines()
    assert table[0] == "Reviewed runs of cases: 2"
    assert table[3].split()[:5] == ["j", "llm_judge", "2", "50.0%", "0.000"]
    assert (
        table[-1]
        == "warning: case verdict: only 2 label(s): review at least 20 for figures to trust"
    )
    exported = agentv_cli(repo, "reviews", "export")
    lines = [json.loads(line) for line in exported.stdout.splitlines()]
    assert [(x["eval_id"], x["verdict"], x["reviewer"]) for x in lines] == [
        ("a", "pass", "ann"),
        ("b", "fail", "ann"),
    ]
    written = agentv_cli(repo, "reviews", "export", "-o", "out.jsonl")
    assert written.stdout == "2 review(s) written to out.jsonl\n"
    assert (repo / "out.jsonl").read_text() == exported.stdout
