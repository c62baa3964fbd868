"""JSON Schema files follow the repository root rule of every other file an eval file
refers to (docs/reliability.md, "Untrusted eval files stay inside the repository"): an
``is_json`` schema or a trajectory evaluator's ``args_schema`` outside the root is refused
unless ``--allow-outside-root``, and nothing of it shows anywhere. Through the real command
line on real files."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.cli_run import agentv_cli, rows
from support.helpers import write

TARGETS = """\
$schema: agentv-targets-v2.2
targets:
  - name: default
    provider: mock
    response: '{"answer": 1}'
"""
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
    write(repo, ".agentv/targets.yaml", TARGETS)
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
    write(repo, ".agentv/targets.yaml", TARGETS)
    write(repo, "evals/e.yaml", IS_JSON.format(ref="../schemas/answer.json"))
    ran = agentv_cli(repo, "eval", "evals/e.yaml", "--out", "out.jsonl")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    (record,) = rows(repo / "out.jsonl")
    assert (record["status"], record["score"]) == ("ok", 1.0)
