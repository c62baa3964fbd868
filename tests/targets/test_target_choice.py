"""Which target a case runs on: `agentv render` and `agentv eval` decide it the same way."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentv.targets import choose_target
from support.cli import invoke_cli
from support.files import write

TARGETS = """$schema: agentv-targets-v2.2
targets:
  - {name: default, provider: mock, response: from default, judge_target: j}
  - {name: a, provider: mock, response: from a, judge_target: j}
  - {name: b, provider: mock, response: from b, judge_target: j}
  - {name: c, provider: mock, response: from c, judge_target: j}
  - {name: j, provider: mock, response: '{"score": 1.0, "reasoning": "fine"}'}
"""
EVAL = """$schema: agentv-eval-v2
target: b
evalcases:
  - id: on-c
    outcome: ok
    execution: {target: c}
    input_messages: [{role: user, content: Hi}]
  - id: plain
    outcome: ok
    input_messages: [{role: user, content: Hi}]
"""


def _rendered(*args: str) -> dict[str, str | None]:
    """Each case's target as ``agentv render ARGS`` says it."""
    result = invoke_cli("render", *args, "--format", "json")
    assert result.exit_code == 0, result.output
    return {case["eval_id"]: case.get("target") for case in json.loads(result.stdout)}


def _evaluated(tmp: Path, *args: str) -> dict[str, tuple[str, str]]:
    """Each case's target and answer as ``agentv eval ARGS`` ran it."""
    out = tmp / "R.jsonl"
    out.unlink(missing_ok=True)
    result = invoke_cli("eval", *args, "--out", str(out))
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in out.read_text("utf-8").splitlines() if line]
    return {r["eval_id"]: (r["target"], r["candidate_answer"]) for r in records}


@pytest.mark.slow  # its run asks git for the commit it is on
def test_render_and_eval_pick_the_same_target_for_each_case(repo: Path) -> None:
    write(repo, ".agentv/targets.yaml", TARGETS)
    path = str(write(repo, "evals/suite.yaml", EVAL))

    # execution.target beats the file's `target`, which beats `default`
    assert _rendered(path) == {"on-c": "c", "plain": "b"}
    assert _evaluated(repo, path) == {"on-c": ("c", "from c"), "plain": ("b", "from b")}
    # `--target default` overrides like any other name, in both commands
    assert _rendered(path, "--target", "default") == {"on-c": "default", "plain": "default"}
    assert _evaluated(repo, path, "--target", "default") == {
        "on-c": ("default", "from default"),
        "plain": ("default", "from default"),
    }
    # `--target a` overrides both
    assert _rendered(path, "--target", "a") == {"on-c": "a", "plain": "a"}
    assert _evaluated(repo, path, "--target", "a") == {
        "on-c": ("a", "from a"),
        "plain": ("a", "from a"),
    }


def test_render_without_a_targets_file_shows_no_target(repo: Path) -> None:
    path = str(write(repo, "evals/suite.yaml", EVAL))
    assert _rendered(path) == {"on-c": None, "plain": None}
    # asked for a target, render needs the file as eval does
    result = invoke_cli("render", path, "--target", "a", "--format", "json")
    assert result.exit_code == 1
    assert "no targets file found" in result.stderr


def test_render_without_any_named_target_shows_none(repo: Path) -> None:
    write(repo, ".agentv/targets.yaml", TARGETS)
    plain = EVAL.replace("target: b\n", "").replace("    execution: {target: c}\n", "")
    assert _rendered(str(write(repo, "evals/plain.yaml", plain))) == {
        "on-c": None,
        "plain": None,
    }


@pytest.mark.parametrize(
    ("cli", "case", "file", "expected"),
    [
        (None, None, None, "default"),
        ("default", "c", "b", "default"),
        ("a", "c", "b", "a"),
        (None, None, "b", "b"),
        ("", "c", None, "c"),
    ],
)
def test_precedence(cli: str | None, case: str | None, file: str | None, expected: str) -> None:
    assert choose_target(cli, case, file) == expected


def test_no_default_when_nothing_names_a_target() -> None:
    # what `render` asks when --target is not given
    assert choose_target(None, None, None, default=None) is None
    assert choose_target(None, None, "b", default=None) == "b"
