"""Keys of live conversations on cases that cannot use them (docs/eval-files.md, "Case
keys"): `turn_evaluators` where no turn would run them is an error (the case would be
graded by something else than what it says), `aggregation`, `on_turn_failure` and
`max_tool_rounds` where they change nothing are warnings. Through the real CLI
(`validate`, `eval`) on real files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.cli import agentv_cli
from support.files import write
from support.results import rows

#: every test here starts agentv (or a script) as a process: left out of `make test-fast`
pytestmark = pytest.mark.slow

HEAD = "$schema: agentv-eval-v2\n{extra}evalcases:\n  - id: c\n    outcome: Says hi.\n"
INPUT = "    input_messages: [{role: user, content: Hi}]\n"
CHECK = "    evaluators: [{type: contains, value: hi}]\n"
TURNS = "    turns:\n      - content: Hi\n      - content: Again\n"


def _mock(repo: Path, answer: str = "hi there") -> None:
    write(
        repo,
        ".agentv/targets.yaml",
        "$schema: agentv-targets-v2.2\ntargets:\n  - name: default\n    provider: mock\n"
        f"    response: {json.dumps(answer)}\n",
    )


def _validate(repo: Path, body: str, extra: str = "") -> tuple[int, str]:
    _mock(repo)
    write(repo, "evals/c.yaml", HEAD.format(extra=extra) + body)
    proc = agentv_cli(repo, "validate", "evals/c.yaml")
    return proc.returncode, proc.stdout


def test_turn_evaluators_without_turns_or_a_user_are_an_error(repo: Path) -> None:
    body = INPUT + "    turn_evaluators: [{type: contains, value: hi}]\n"
    code, out = _validate(repo, body)
    assert code == 1, out
    assert (
        "evals/c.yaml:6:5: case 'c': `turn_evaluators` grade the answers of a live "
        "conversation, and this case has no `turns` and no simulated `user`: they would "
        "never run (a judge of the outcome would grade the case instead)"
    ) in out
    assert "hint: move them to the case's `evaluators`, or give the case `turns`" in out
    # and eval does not grade it with something else: the case is invalid
    proc = agentv_cli(repo, "eval", "evals/c.yaml", "--out", "r.jsonl")
    (record,) = rows(repo / "r.jsonl")
    assert record["status"] == "invalid" and "turn_evaluators" in record["error"]
    assert proc.returncode == 3


def test_turn_evaluators_with_tools_only_are_an_error_too(repo: Path) -> None:
    body = (
        INPUT
        + CHECK
        + "    turn_evaluators: [{type: contains, value: hi}]\n"
        + "    tools: [{name: t, description: A tool., result: ok}]\n"
    )
    code, out = _validate(repo, body)
    assert code == 1 and "`turn_evaluators` grade the answers of a live conversation" in out


def test_turn_evaluators_that_no_turn_uses_are_a_warning(repo: Path) -> None:
    body = (
        INPUT
        + "    turn_evaluators: [{type: contains, value: hi}]\n"
        + "    turns:\n"
        + "      - content: Hi\n        evaluators: [{type: contains, value: hi}]\n"
        + "      - content: Again\n        outcome: Says hi again.\n"
    )
    code, out = _validate(repo, body)
    assert code == 0, out
    assert (
        "⚠ evals/c.yaml:6:5: case 'c': `turn_evaluators` are never used: every turn has "
        "evaluators (or an outcome) of its own"
    ) in out


@pytest.mark.parametrize(
    ("key", "line", "effect"),
    [
        ("aggregation: min", "aggregation", "there is one score"),
        ("on_turn_failure: stop", "on_turn_failure", "there is no later turn to stop"),
    ],
)
def test_conversation_keys_on_a_single_answer_are_warnings(
    repo: Path, key: str, line: str, effect: str
) -> None:
    for body in (
        INPUT + CHECK,
        INPUT + CHECK + "    tools: [{name: t, description: T., result: ok}]\n",
    ):
        code, out = _validate(repo, body + f"    {key}\n")
        assert code == 0, out
        where = len((HEAD + body).splitlines()) + 1  # the line after the body
        assert (
            f"⚠ evals/c.yaml:{where}:5: case 'c': `{line}` has no effect here: the case "
            f"has no `turns` and no simulated `user`, so {effect}"
        ) in out


def test_max_tool_rounds_without_tools_is_a_warning(repo: Path) -> None:
    code, out = _validate(repo, INPUT + CHECK + "    max_tool_rounds: 3\n")
    assert code == 0, out
    assert (
        "⚠ evals/c.yaml:7:5: case 'c': `max_tool_rounds` has no effect here: the case has "
        "no `tools` (and its file none)"
    ) in out
    # the file's tools count
    code, out = _validate(
        repo,
        INPUT + CHECK + "    max_tool_rounds: 3\n",
        extra="tools: [{name: t, description: T., result: ok}]\n",
    )
    assert code == 0 and "max_tool_rounds" not in out, out


def test_the_keys_where_they_apply_say_nothing(repo: Path) -> None:
    body = (
        INPUT
        + CHECK
        + TURNS
        + "    aggregation: min\n    on_turn_failure: stop\n    max_tool_rounds: 2\n"
        + "    turn_evaluators: [{type: contains, value: hi}]\n"
        + "    tools: [{name: t, description: T., result: ok}]\n"
    )
    code, out = _validate(repo, body)
    assert code == 0 and "⚠ evals/c.yaml:" not in out, out


def test_eval_shows_the_warning_and_runs(repo: Path) -> None:
    _mock(repo)
    write(repo, "evals/c.yaml", HEAD.format(extra="") + INPUT + CHECK + "    aggregation: max\n")
    proc = agentv_cli(repo, "eval", "evals/c.yaml", "--out", "r.jsonl")
    assert proc.returncode == 0, proc.stderr
    assert "`aggregation` has no effect here" in proc.stdout + proc.stderr
    (record,) = rows(repo / "r.jsonl")
    assert record["status"] == "ok"
