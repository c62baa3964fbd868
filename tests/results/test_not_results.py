"""``agentv report`` and ``agentv compare`` refuse what is not a results file, as
``--resume`` does (docs/reliability.md, "Hostile files are refused in words"): an eval
file, a targets or config file (they say what they are in ``$schema``), or mappings that
name no case. Through the real command line on real files."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.cli import agentv_cli
from support.files import write

#: every test here starts agentv (or a script) as a process: left out of `make test-fast`
pytestmark = pytest.mark.slow

EVAL = """\
$schema: agentv-eval-v2
evalcases:
  - id: a
    outcome: x
    input_messages: [{role: user, content: hi}]
"""
CONFIG = "$schema: agentv-config-v2\nguideline_patterns: ['**/*.md']\n"
OLD_CONFIG = "guideline_patterns: ['**/*.md']\n"
RESULT = '{"eval_id": "a", "dataset": "d", "status": "ok", "score": 1.0}\n'


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [
        (
            "e.yaml",
            EVAL,
            "e.yaml:1: warning: not a result: an agentv input file "
            "($schema: agentv-eval-v2), not results",
        ),
        (
            "config.yaml",
            CONFIG,
            "config.yaml:1: warning: not a result: an agentv input file "
            "($schema: agentv-config-v2), not results",
        ),
        (
            "old.yaml",
            OLD_CONFIG,
            "error: old.yaml is not a results file (no record names an eval case)",
        ),
    ],
)
def test_report_refuses_a_file_that_is_not_results(
    repo: Path, name: str, text: str, said: str
) -> None:
    write(repo, name, text)
    proc = agentv_cli(repo, "report", name, "-o", "r.html")
    assert proc.returncode == 1, proc.stdout
    assert said in proc.stderr
    assert not (repo / "r.html").exists()


@pytest.mark.parametrize(
    ("name", "text", "said"),
    [
        (
            "e.yaml",
            EVAL,
            "e.yaml:1: not a result (an agentv input file ($schema: agentv-eval-v2), not results)",
        ),
        ("old.yaml", OLD_CONFIG, "old.yaml is not a results file (no record names an eval case)"),
    ],
)
@pytest.mark.parametrize("side", ["base", "new"])
def test_compare_refuses_a_file_that_is_not_results(
    repo: Path, name: str, text: str, said: str, side: str
) -> None:
    write(repo, name, text)
    write(repo, "r.jsonl", RESULT)
    files = (name, "r.jsonl") if side == "base" else ("r.jsonl", name)
    proc = agentv_cli(repo, "compare", *files)
    assert proc.returncode == 1, proc.stdout
    assert said in proc.stderr
