"""JSON Schema files follow the repository root rule of every other file an eval file
refers to (docs/reliability.md, "Untrusted eval files stay inside the repository"): an
``is_json`` schema or a trajectory evaluator's ``args_schema`` outside the root is refused
unless ``--allow-outside-root``, and nothing of it shows anywhere. Through the real command
line on real files."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.cli import agentv_cli
from support.files import write
from support.results import rows
from support.targets import mock_target, write_targets

#: every test here starts agentv (or a script) as a process: left out of `make test-fast`
pytestmark = pytest.mark.slow

#: what the outside file holds: no valid schema, so a reader that reads it quotes it
PRIVATE = '{"type": "PRIVATE-MARKER-41c7"}'

IS_JSON = """\
$schema: agentv-eval-v2
evalcases:
  - id: schema-out
    outcome: Answers JSON.
    input_messages: [{{role: user, content: Answer.}}]
    evaluators:
      - type: is_json
        schema: {ref}
"""
ARGS_SCHEMA = """\
$schema: agentv-eval-v2
evalcases:
  - id: args-out
    outcome: Calls the tool.
    input_messages: [{{role: user, content: Answer.}}]
    evaluators:
      - type: tool_used
        tool: search
        args_schema: {ref}
"""


@pytest.mark.parametrize(
    ("text", "key", "line"), [(IS_JSON, "schema", 8), (ARGS_SCHEMA, "args_schema", 9)]
)
@pytest.mark.parametrize("how", ["relative", "absolute"])
def test_a_schema_file_outside_the_root_is_refused(
    repo: Path, tmp_path: Path, text: str, key: str, line: int, how: str
) -> None:
    outside = write(tmp_path, "outside/schema.json", PRIVATE)
    ref = "../../outside/schema.json" if how == "relative" else str(outside)
    write_targets(repo, mock_target(response='{"answer": 1}'))
    write(repo, "evals/e.yaml", text.format(ref=ref))

    checked = agentv_cli(repo, "validate", "evals/e.yaml")
    assert checked.returncode == 1, checked.stdout + checked.stderr
    said = checked.stdout + checked.stderr
    assert "PRIVATE-MARKER" not in said
    assert f"evals/e.yaml:{line}" in said
    assert f"JSON Schema file {ref} resolves outside the repository root" in said
    assert "--allow-outside-root" in said

    ran = agentv_cli(repo, "eval", "evals/e.yaml", "--out", "out.jsonl")
    assert ran.returncode != 0
    (record,) = rows(repo / "out.jsonl")
    assert record["status"] == "invalid"
    assert "PRIVATE-MARKER" not in ran.stdout + ran.stderr + str(record)

    # trusted: read, and its problem said (it is not a valid schema)
    allowed = agentv_cli(repo, "validate", "evals/e.yaml", "--allow-outside-root")
    assert allowed.returncode == 1
    assert "'PRIVATE-MARKER-41c7' is not valid under any of the given schemas" in (
        allowed.stdout + allowed.stderr
    )


def test_a_schema_file_inside_the_root_is_read(repo: Path) -> None:
    write(repo, "schemas/answer.json", '{"type": "object", "required": ["answer"]}')
    write_targets(repo, mock_target(response='{"answer": 1}'))
    write(repo, "evals/e.yaml", IS_JSON.format(ref="../schemas/answer.json"))
    ran = agentv_cli(repo, "eval", "evals/e.yaml", "--out", "out.jsonl")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    (record,) = rows(repo / "out.jsonl")
    assert (record["status"], record["score"]) == ("ok", 1.0)
