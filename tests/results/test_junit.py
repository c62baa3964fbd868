"""JUnit XML that CI systems read (checked against a JUnit schema) and GitHub Actions
annotations, from a real run and from crafted records."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema

from agentv.results.junit import github_annotations, junit_xml
from support.cli import agentv_cli
from support.files import write
from support.paths import DATA

SCHEMA = xmlschema.XMLSchema(DATA / "junit.xsd")

RECORDS = [
    {
        "eval_id": "ok-1",
        "dataset": "d",
        "target": "t",
        "status": "ok",
        "score": 1.0,
        "duration_ms": 1500,
        "eval_file": "/r/evals/a.yaml",
        "line": 3,
    },
    {
        "eval_id": "low",
        "dataset": "d",
        "target": "t",
        "status": "failed",
        "score": 0.25,
        "misses": ["no fix", "no test"],
        "duration_ms": 250,
        "eval_file": "/r/evals/a.yaml",
        "line": 9,
    },
    {
        "eval_id": "boom",
        "dataset": "e",
        "target": "t",
        "status": "error",
        "score": 0.0,
        "error": "HTTP 500: down\nsecond line",
        "repeat": 1,
        "eval_file": "/r/evals/b.yaml",
        "line": 4,
    },
    {
        "dataset": "e",
        "status": "invalid",
        "score": 0.0,
        "error": "unknown key 'outcom'\x1b",
        "eval_file": "/r/evals/b.yaml",
        "line": 12,
    },
]


def test_junit_xml_is_schema_valid_and_says_each_status() -> None:
    text = junit_xml(RECORDS)
    SCHEMA.validate(text)
    root = ET.fromstring(text)
    assert root.attrib == {
        "name": "agentv",
        "tests": "4",
        "failures": "1",
        "errors": "2",
        "time": "1.750",
    }
    d, e = root.findall("testsuite")
    assert (d.get("name"), d.get("tests"), d.get("failures"), d.get("errors")) == (
        "d",
        "2",
        "1",
        "0",
    )
    assert (e.get("name"), e.get("tests"), e.get("failures"), e.get("errors")) == (
        "e",
        "2",
        "0",
        "2",
    )
    cases = root.iter("testcase")
    ok, low, boom, invalid = cases
    assert ok.attrib == {
        "classname": "d",
        "name": "ok-1 [t]",
        "time": "1.500",
        "file": "/r/evals/a.yaml",
        "line": "3",
    }
    assert list(ok) == []
    failure = low.find("failure")
    assert failure is not None and failure.attrib == {"message": "score 0.250", "type": "failed"}
    assert failure.text == "no fix\nno test"
    error = boom.find("error")
    assert boom.get("name") == "boom [t] #2"
    assert error is not None and error.attrib == {"message": "HTTP 500: down", "type": "error"}
    assert error.text == "HTTP 500: down\nsecond line"
    bad = invalid.find("error")
    assert invalid.get("name") == "line 12"
    assert bad is not None and bad.get("type") == "invalid"
    assert bad.get("message") == "unknown key 'outcom'"  # no control character in XML


UNSURE = {
    "eval_id": "borderline",
    "dataset": "d",
    "target": "t",
    "status": "uncertain",
    "score": 0.8,
    "misses": ["judge 'judge' is uncertain: 1 of its 2 samples passed at 0.80"],
    "uncertain": ["judge"],
    "duration_ms": 250.0,
    "eval_file": "/r/evals/a.yaml",
    "line": 20,
}


def test_an_uncertain_run_is_a_failure_of_its_own_type_counted_apart() -> None:
    text = junit_xml([*RECORDS, UNSURE])
    SCHEMA.validate(text)
    root = ET.fromstring(text)
    # never a pass: among the failures, and said apart in its suite's properties
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("5", "2", "2")
    d, e = root.findall("testsuite")
    assert (d.get("tests"), d.get("failures")) == ("3", "2")
    (prop,) = d.iter("property")
    assert prop.attrib == {"name": "uncertain", "value": "1"}
    assert e.find("properties") is None  # nothing uncertain there
    (case,) = [c for c in d.iter("testcase") if c.get("name") == "borderline [t]"]
    failure = case.find("failure")
    assert failure is not None and failure.attrib == {
        "message": "uncertain: score 0.800, the samples of judge disagreed",
        "type": "uncertain",
    }
    assert failure.text == "judge 'judge' is uncertain: 1 of its 2 samples passed at 0.80"
    assert github_annotations([UNSURE], Path("/r")) == [
        "::warning file=evals/a.yaml,line=20,title=agentv%3A borderline [t] uncertain::"
        "score 0.800: judge 'judge' is uncertain: 1 of its 2 samples passed at 0.80"
    ]


def test_github_annotations_point_at_the_cases() -> None:
    lines = github_annotations(RECORDS, Path("/r"))
    assert (
        lines
        == [
            "::error file=evals/a.yaml,line=9,title=agentv%3A low [t] failed::score 0.250: no fix; no test",
            "::error file=evals/b.yaml,line=4,title=agentv%3A boom [t] #2 error::HTTP 500: down%0Asecond line",
            "::error file=evals/b.yaml,line=12,title=agentv%3A line 12 invalid::unknown key 'outcom'\\x1b",  # shown, not acted on
        ]
    )


@pytest.mark.slow
def test_eval_writes_junit_and_annotates_under_github_actions(repo: Path) -> None:
    write(
        repo,
        ".agentv/targets.yaml",
        "$schema: agentv-targets-v2.2\ntargets:\n"
        "  - {name: default, provider: mock, response: 'The answer is 42.'}\n",
    )
    write(
        repo,
        "evals/s.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n"
        "  - {id: good, outcome: '42', input_messages: [{role: user, content: q}],"
        " evaluators: [{type: contains, value: '42'}]}\n"
        "  - {id: bad, outcome: '7', input_messages: [{role: user, content: q}],"
        " evaluators: [{type: contains, value: '7'}]}\n",
    )
    summary = repo / "step-summary.md"
    github = {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)}
    proc = agentv_cli(
        repo, "eval", "evals/", "--out", "r.jsonl", "--junit", "reports/junit.xml", env=github
    )
    assert proc.returncode == 7, proc.stderr
    text = (repo / "reports/junit.xml").read_text(encoding="utf-8")
    SCHEMA.validate(text)
    names = [c.get("name") for c in ET.fromstring(text).iter("testcase")]
    assert sorted(names) == ["bad [default]", "good [default]"]
    assert (
        '::error file=evals/s.yaml,line=4,title=agentv%3A bad [default] failed::score 0.000: answer does not contain "7"'
        in proc.stdout
    )
    assert "::error" not in proc.stdout.replace(
        "::error file=evals/s.yaml,line=4,", "", 1
    )  # exactly one: the passing case has none
    assert "| 2 | 1 | 1 | 0 | 0 | 50.0% | 0.500 |" in summary.read_text(encoding="utf-8")


@pytest.mark.slow
def test_report_writes_junit_from_a_results_file(tmp_path: Path) -> None:
    results = tmp_path / "r.jsonl"
    results.write_text("".join(json.dumps(r) + "\n" for r in RECORDS), encoding="utf-8")
    junit = str(tmp_path / "junit.xml")
    proc = agentv_cli(
        tmp_path, "report", str(results), "-o", str(tmp_path / "r.html"), "--junit", junit
    )
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "junit.xml").read_text(encoding="utf-8")
    SCHEMA.validate(text)
    assert text == junit_xml(RECORDS)


def test_repeats_are_numbered_as_people_count_them() -> None:
    """A case run three times is ``#1``, ``#2``, ``#3`` (records count from 0); a case run
    once has no number."""
    records = [
        {"eval_id": "a", "target": "t", "status": "passed", "score": 1.0, "repeat": r}
        for r in range(3)
    ] + [{"eval_id": "b", "target": "t", "status": "passed", "score": 1.0, "repeat": 0}]
    root = ET.fromstring(junit_xml(records))
    names = [case.get("name") for case in root.iter("testcase")]
    assert names == ["a [t] #1", "a [t] #2", "a [t] #3", "b [t]"]
