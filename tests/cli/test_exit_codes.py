"""``agentv eval``'s exit code, rule by rule in the documented order (docs/results.md): a
failed case fails the command (7) unless ``--threshold`` gates on the mean instead or a
dry run's mock answered; errors keep their code, ``--allow-errors`` accepts them."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.cli import agentv_cli
from support.files import write

#: every test here runs agentv as a process: left out of `make test-fast`
pytestmark = pytest.mark.slow

TARGETS = """$schema: agentv-targets-v2.2
targets:
  - {name: default, provider: mock, response: Paris is the capital of France.}
  - {name: broken, provider: cli, command_template: "python3 -c 'raise SystemExit(1)'"}
"""


def _case(case_id: str, value: str, target: str | None = None) -> str:
    on = f"\n    execution: {{target: {target}}}" if target else ""
    return (
        f"  - id: {case_id}\n    outcome: names the capital\n"
        "    input_messages: [{role: user, content: What is the capital of France?}]\n"
        f"    evaluators: [{{type: contains, value: {value}}}]{on}\n"
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / ".git").mkdir()
    write(tmp_path, ".agentv/targets.yaml", TARGETS)
    head = "$schema: agentv-eval-v2\nevalcases:\n"
    write(tmp_path, "evals/mixed.yaml", head + _case("right", "Paris") + _case("wrong", "Rome"))
    write(tmp_path, "evals/passing.yaml", head + _case("right", "Paris"))
    write(
        tmp_path,
        "errors/errored.yaml",
        head + _case("wrong", "Rome") + _case("down", "Paris", target="broken"),
    )
    return tmp_path


FAILED_7 = (
    "1 of the 2 graded run(s) failed: exit code 7 (--threshold SCORE gates on the mean "
    "score instead)\n"
)


@pytest.mark.parametrize(
    ("args", "code", "last_line"),
    [
        (["evals/passing.yaml"], 0, ""),
        (["evals/passing.yaml", "--output-format", "jsonl"], 0, ""),  # the old spelling
        (["evals/mixed.yaml"], 7, FAILED_7),
        (
            ["evals/mixed.yaml", "--threshold", "0.5"],
            0,
            "Mean score 0.500 of the 2 graded run(s) meets the threshold 0.500\n",
        ),
        (
            ["evals/mixed.yaml", "--threshold", "0.6"],
            1,
            "Mean score 0.500 of the 2 graded run(s) is below the threshold 0.600\n",
        ),
        (
            ["evals/mixed.yaml", "--dry-run"],
            0,
            "2 of the 2 graded run(s) failed on the dry run's mock\n",
        ),
        (
            ["errors/errored.yaml"],
            3,
            "1 run(s) errored, 0 invalid: exit code 3 (see the summary; --allow-errors to "
            "accept)\n",
        ),
        (
            ["errors/errored.yaml", "--allow-errors"],
            7,
            "1 run(s) errored, 0 invalid (--allow-errors: accepted)\n"
            "1 of the 1 graded run(s) failed: exit code 7 (--threshold SCORE gates on the mean "
            "score instead)\n",
        ),
        (
            ["errors/errored.yaml", "--threshold", "0.1"],
            1,
            "Mean score 0.000 of the 1 graded run(s) is below the threshold 0.100\n",
        ),
    ],
    ids=[
        "all-passed",
        "old-format-spelling",
        "one-failed",
        "threshold-met",
        "threshold-missed",
        "dry-run",
        "errors",
        "errors-accepted-then-failed",
        "threshold-before-errors",
    ],
)
def test_exit_code_rules_in_order(
    project: Path, args: list[str], code: int, last_line: str
) -> None:
    done = agentv_cli(project, "eval", *args, "--out", "r.jsonl")
    assert done.returncode == code, done.stdout + done.stderr
    assert done.stderr.endswith(last_line), done.stderr
    if not last_line:
        assert done.stderr == ""
