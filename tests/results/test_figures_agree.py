"""Every view of one results file shows the same figures: ``--summary-json``, the HTML
report, JUnit and the Python API of a mixed run (every status, three targets, repeats, live
turns, simulated users, trajectories, costs spent and reused) agree on every number they
both show, compared whole. The figures are the summary's (``agentv.results.summary``); the
report's page shows them (tests/results/test_report_browser.py reads them off the page).
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import agentv
from support.mixed_run import MixedRun, mixed_run
from support.results import rows

#: every test here reads a results file made by running agentv as a process: left out of
#: `make test-fast`
pytestmark = pytest.mark.slow

INDEX = re.compile(r'<script type="application/json" id="agentv-index-0">(.*?)</script>', re.S)


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> MixedRun:
    return mixed_run(tmp_path_factory.mktemp("mixed"))


def _summary(mixed: MixedRun) -> dict[str, Any]:
    return json.loads(mixed.summary_json.read_text(encoding="utf-8"))


def _index(report: Path) -> dict[str, Any]:
    found = INDEX.search(report.read_text(encoding="utf-8"))
    assert found is not None
    return json.loads(found.group(1))


def _figures(summary: dict[str, Any]) -> dict[str, Any]:
    """--summary-json without its lists of cases (the errored runs, each case's repeats,
    each target's flaky cases), which the report's table shows instead of its head."""
    assert summary["errors_by_case"] and summary["cases"]  # left out, not missing
    kept = {k: v for k, v in summary.items() if k not in ("errors_by_case", "cases")}
    kept["targets"] = [{k: v for k, v in t.items() if k != "flaky"} for t in summary["targets"]]
    return kept


def test_the_run_holds_every_kind_of_result(mixed: MixedRun) -> None:
    records = rows(mixed.results)
    assert mixed.exit_code == 4  # the budget left runs unsent
    assert {r["status"] for r in records} == {
        "ok",
        "failed",
        "error",
        "invalid",
        "user_error",
        "skipped",
    }
    assert {r["target"] for r in records} == {"alpha", "beta", "gamma"}
    assert {r["repeat"] for r in records} == {0, 1}
    assert any(r.get("turns") for r in records) and any(r.get("user") for r in records)
    assert any(r.get("trajectory") for r in records)
    assert any(r.get("cached") for r in records)
    assert any(r.get("failed_required") and r["status"] == "failed" for r in records)
    costs = [r["cost"] for r in records if r.get("cost")]
    assert {party for cost in costs for party in cost} == {"target", "judge", "user"}
    assert any("reused_usd" in entry for cost in costs for entry in cost.values())
    assert any(entry.get("unpriced") for cost in costs for entry in cost.values())
    # the summary counts what the file holds (every run once here: no record superseded)
    summary = _summary(mixed)
    assert summary["statuses"] == dict(Counter(r["status"] for r in records))
    assert summary["total"] == len(records) == 54


def test_the_report_shows_the_summary_json_whole(mixed: MixedRun) -> None:
    summary = _summary(mixed)
    index = _index(mixed.report)
    assert index["summary"] == _figures(summary)
    # the table's rows are the runs the summary counts, by status and by target
    statuses = index["statuses"]
    targets = index["targets"]
    table = index["rows"]
    assert len(table) == summary["total"]
    assert dict(Counter(statuses[row[5]] for row in table)) == summary["statuses"]
    by_target = Counter(targets[row[2]] for row in table)
    assert {t["target"]: t["runs"] for t in summary["targets"]} == dict(by_target)
    # a score shown for every graded run, none for the others (errors are not scores)
    assert sum(1 for row in table if row[4] is not None) == summary["graded"]


def test_the_python_api_and_a_report_built_again_say_the_same(
    mixed: MixedRun, tmp_path: Path
) -> None:
    summary = _summary(mixed)
    assert agentv.read_results(mixed.results).summary.to_dict() == summary
    again = agentv.report(mixed.results, out=tmp_path / "again.html")
    assert _index(again.path)["summary"] == _figures(summary)


def test_junit_counts_are_the_summarys(mixed: MixedRun) -> None:
    summary = _summary(mixed)
    root = ET.parse(mixed.junit).getroot()
    assert {k: root.get(k) for k in ("tests", "failures", "errors", "time")} == {
        "tests": str(summary["total"]),
        "failures": str(summary["failed"]),
        "errors": str(summary["errors"] + summary["invalid"]),
        "time": f"{summary['time']['case_seconds']:.3f}",
    }
    suites = {
        s.get("name"): {k: s.get(k) for k in ("tests", "failures", "errors", "skipped")}
        for s in root.iter("testsuite")
    }
    assert suites == {
        d["dataset"]: {
            "tests": str(d["runs"]),
            "failures": str(d["failed"]),
            "errors": str(d["errors"] + d["invalid"]),
            "skipped": str(d["skipped"] + d["user_errors"]),
        }
        for d in summary["datasets"]
    }
    assert [len(s.findall("testcase")) for s in root.iter("testsuite")] == [
        d["runs"] for d in summary["datasets"]
    ]
