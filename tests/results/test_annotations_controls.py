"""GitHub Actions annotations carry no control character (docs/reliability.md, "Console and
CI logs"): GitHub's workflow-command encoding escapes only ``%``, CR and LF (and ``:``,
``,`` in properties), so an ESC or a BEL from a case id or an evaluator's stderr would
reach the log's terminal as it is. Through the real command line under
``GITHUB_ACTIONS=true``, with a real code evaluator."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from support.cli import agentv_cli
from support.files import write
from support.results import rows
from support.targets import mock_target, write_targets

#: every test here starts agentv (or a script) as a process: left out of `make test-fast`
pytestmark = pytest.mark.slow

#: a case id holding ESC, BEL, a C1 control and DEL, as YAML writes them
ID = "bad\\e[31mred\\a\\x9b\\x7fid"
CRASH = "import sys; sys.stderr.write('boom \\x1b]0;title\\x07 done'); sys.exit(2)"


def test_annotations_hold_no_control_character(repo: Path) -> None:
    write_targets(repo, mock_target(response="an answer"))
    write(repo, "crash.py", CRASH)
    write(
        repo,
        "evals/e.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n"
        f'  - id: "{ID}"\n    outcome: x\n    input_messages: [{{role: user, content: hi}}]\n'
        "    evaluators: [{type: contains, value: zzz}]\n"
        "  - id: crash\n    outcome: x\n    input_messages: [{role: user, content: hi}]\n"
        f"    evaluators: [{{type: code, script: {json.dumps(sys.executable + ' ../crash.py')}}}]\n",
    )
    proc = agentv_cli(repo, "eval", "evals", "--out", "r.jsonl", env={"GITHUB_ACTIONS": "true"})
    assert proc.returncode == 3, proc.stderr
    failed, crashed = rows(repo / "r.jsonl")
    assert failed["eval_id"] == "bad\x1b[31mred\x07\x9b\x7fid"  # the record keeps it exactly
    assert "\x1b]0;title\x07" in crashed["evaluator_results"][0]["error"]
    ours = [line for line in proc.stdout.splitlines() if line.startswith("::error ")]
    assert len(ours) == 2
    for line in ours:
        assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in line), repr(line)
    first, second = ours
    assert "title=agentv%3A bad\\x1b[31mred\\x07\\x9b\\x7fid [default] failed::" in first
    assert "boom \\x1b]0;title\\x07 done" in second
