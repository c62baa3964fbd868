"""`make demo` runs the example suite offline; make sure it keeps working."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from support.cli import agentv_cli

#: every test here runs agentv as a process: left out of `make test-fast`
pytestmark = pytest.mark.slow

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_example_suite_runs_offline_and_passes(tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(EXAMPLES, project / "examples")
    (project / ".git").mkdir()
    out = project / "results.jsonl"
    proc = agentv_cli(project, "eval", "examples/", "--out", str(out))
    assert proc.returncode == 7, proc.stderr
    rows = {r["eval_id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert set(rows) == {
        "review-inventory",
        "debug-missing-email",
        "brainstorm-cli-names",
        "umbrella-from-forecast",
        "remembers-the-traveller",
    }
    for row in rows.values():
        assert "error" not in row, row["error"]
        assert row["target"] == "default"
        for entry in row.get("evaluator_results", []):
            assert "error" not in entry, entry
    # The deterministic checks pass on the demo agent's answers.
    review = {e["name"]: e["score"] for e in rows["review-inventory"]["evaluator_results"]}
    assert review["mentions-empty-list"] == 1.0
    tool = {e["name"]: e["score"] for e in rows["umbrella-from-forecast"]["evaluator_results"]}
    assert tool == {"says-umbrella": 1.0, "cites-forecast": 1.0}
    debug = rows["debug-missing-email"]
    assert 'user.get("email")' in debug["candidate_answer"]
    ideas = {e["name"]: e["score"] for e in rows["brainstorm-cli-names"]["evaluator_results"]}
    assert ideas["five-ideas"] == 1.0
    # the live conversation: the agent's own answer to turn 2 reached it in turn 3
    trip = rows["remembers-the-traveller"]
    assert [t["status"] for t in trip["turns"]] == ["ok", "ok", "ok"]
    assert "Ao 26" in trip["turns"][1]["answer"] and "Ao 26" in trip["turns"][2]["answer"]
    assert trip["raw_request"]["chat_prompt"][4] == {
        "role": "assistant",
        "content": trip["turns"][1]["answer"],
    }
    assert "EVALUATION SUMMARY" in proc.stdout and "Results written to:" in proc.stdout
