"""Files agentv writes for CI and people (JUnit XML, the summary's JSON, the HTML report):
well-formed whatever the records hold, whole or not at all, and a command that could not
write one says so with a non-zero exit. Reproduced first: a lone surrogate in an id left a
0-byte JUnit file, U+FFFE in an agent's stderr a file that is not XML ("JUnit XML written"
all the same), `--junit DIR` exited 0, and SIGTERM while the report was written left its
temporary file behind."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import xmlschema

from support.cli import agentv_cli, start_agentv
from support.files import write
from support.paths import DATA
from support.targets import mock_target, write_targets

#: every test here runs agentv (or a writer) as a process: left out of `make test-fast`
pytestmark = pytest.mark.slow

SCHEMA = xmlschema.XMLSchema(DATA / "junit.xsd")


def _records(path: Path, *records: dict[str, object]) -> Path:
    # json.dumps writes "\ud800" as its escape: what a results file holding one looks like
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_junit_holds_only_xml_characters(tmp_path: Path) -> None:
    _records(
        tmp_path / "r.jsonl",
        {"eval_id": "x\ud800y", "dataset": "d", "status": "failed", "score": 0.1},
        {
            "eval_id": "agent",
            "dataset": "d",
            "status": "error",
            "error": "stderr: a\ufffeb\uffffc\x07d",
        },
    )
    proc = agentv_cli(tmp_path, "report", "r.jsonl", "--junit", "j.xml")
    assert proc.returncode == 0, proc.stderr
    assert "JUnit XML written to: j.xml" in proc.stdout
    root = ET.parse(tmp_path / "j.xml").getroot()  # well-formed: expat refuses the rest
    SCHEMA.validate(str(tmp_path / "j.xml"))
    names = [case.get("name") for case in root.iter("testcase")]
    assert names == ["x\ufffdy", "agent"]
    (error,) = root.iter("error")
    assert error.text == "stderr: a\ufffdb\ufffdcd"


def test_junit_replaces_its_file_whole_or_not_at_all(tmp_path: Path) -> None:
    _records(
        tmp_path / "r.jsonl",
        *({"eval_id": f"c{i}", "status": "failed", "misses": ["m" * 200]} for i in range(200)),
    )
    old = tmp_path / "j.xml"
    old.write_text("<testsuites/>\n")

    def small_files() -> None:  # a file size limit, as a full disk would stop the write
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    code = "import agentv; agentv.write_junit('r.jsonl', 'j.xml')"
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        preexec_fn=small_files,
        timeout=120,
    )
    assert proc.returncode == 1
    assert "SetupError: cannot write JUnit XML to j.xml: File too large" in proc.stderr
    assert old.read_text() == "<testsuites/>\n"  # the file before, untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["j.xml", "r.jsonl"]  # no temp


def test_an_output_that_cannot_be_written_fails_the_command(repo: Path) -> None:
    write_targets(repo, mock_target(response="The answer is 42."))
    write(
        repo,
        "evals/e.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n  - id: a\n    outcome: x\n"
        "    input_messages: [{role: user, content: hi}]\n"
        "    evaluators: [{type: contains, value: '42'}]\n",
    )
    (repo / "folder").mkdir()
    ok = agentv_cli(repo, "eval", "evals", "--out", "r.jsonl")
    assert ok.returncode == 0, ok.stderr
    for flag in ("--junit", "--summary-json"):
        proc = agentv_cli(repo, "eval", "evals", "--out", "r.jsonl", flag, "folder")
        assert proc.returncode == 1, flag
        assert "folder: Is a directory" in proc.stderr, proc.stderr
        assert "a requested output could not be written: exit code 1" in proc.stderr
    proc = agentv_cli(repo, "report", "r.jsonl", "--junit", "folder")
    assert proc.returncode == 1 and "Is a directory" in proc.stderr
    assert sorted(p.name for p in (repo / "folder").iterdir()) == []


def test_sigterm_while_the_report_is_written_leaves_no_temporary_file(tmp_path: Path) -> None:
    # Records enough for the report to take a moment; the command is stopped (SIGSTOP) the
    # moment its temporary file appears, sent SIGTERM, then let go on.
    record = {"dataset": "d", "status": "ok", "score": 1.0, "candidate_answer": "y" * 20_000}
    _records(tmp_path / "r.jsonl", *({"eval_id": f"c{i}", **record} for i in range(4000)))
    proc = start_agentv(tmp_path, "report", "r.jsonl")
    caught = False
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if any(p.name.endswith(".tmp") for p in tmp_path.iterdir()):
            os.kill(proc.pid, signal.SIGSTOP)
            caught = any(p.name.endswith(".tmp") for p in tmp_path.iterdir())
            os.kill(proc.pid, signal.SIGTERM)
            os.kill(proc.pid, signal.SIGCONT)
            break
    proc.communicate(timeout=120)
    assert caught, "the report was written before it could be stopped"
    assert proc.returncode == 143
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.jsonl"]  # no temp, no report
