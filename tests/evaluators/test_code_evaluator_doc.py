"""The manual's "Code evaluators" (docs/eval-files.md) is checked against a real run: its example
eval and script run through `agentv eval` on a mock target, the script gets exactly the
documented input, prints the documented output, and the field table lists every field."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from support.cli import agentv_cli
from support.files import write
from support.paths import DOCS

#: every test here runs agentv as a process: left out of `make test-fast`
pytestmark = pytest.mark.slow

PAGE = DOCS / "eval-files.md"
TITLE = "## Code evaluators"
DOC_ROOT = "/home/me/project"  # where the page's example runs


def _section() -> str:
    text = PAGE.read_text(encoding="utf-8")
    assert f"\n{TITLE}\n" in text, f"{PAGE.name} lost its section {TITLE!r}"
    body = text.split(f"\n{TITLE}\n", 1)[1]
    return re.split(r"\n#{2,3} ", body, maxsplit=1)[0]


def _blocks(section: str) -> dict[str, list[str]]:
    blocks: dict[str, list[str]] = {}
    for lang, code in re.findall(r"```(\w+)\n(.*?)\n```", section, flags=re.S):
        blocks.setdefault(lang, []).append(code)
    return blocks


def _field_table(section: str) -> dict[str, str | None]:
    """field -> the field it is an alias of (None: an original name)."""
    fields: dict[str, str | None] = {}
    for row in re.findall(r"^\| `(\w+)` \|([^|]*)\|", section, flags=re.M):
        name, alias_of = row
        match = re.search(r"`(\w+)`", alias_of)
        fields[name] = match.group(1) if match else None
    return fields


def test_the_documented_example_is_what_the_script_gets_and_prints(tmp_path: Path) -> None:
    section = _section()
    blocks = _blocks(section)
    (eval_yaml,) = blocks["yaml"]
    (script,) = blocks["python"]
    documented_input, documented_output = blocks["json"]
    example = json.loads(documented_input)

    root = (tmp_path / "project").resolve()
    (root / ".git").mkdir(parents=True)
    assert "script: python3 checks/check_add.py" in eval_yaml
    # the same command, keeping a copy of its stdin
    write(
        root,
        "evals/fix.yaml",
        eval_yaml.replace("script: python3 ", f"script: tee payload.json | {sys.executable} "),
    )
    write(root, "evals/checks/check_add.py", script + "\n")
    (calc,) = [s for s in example["input_segments"] if s["type"] == "file"]
    write(root, "evals/calc.py", calc["text"])
    write(root, "evals/style.instructions.md", "Use type hints.\n")
    write(
        root,
        ".agentv/targets.yaml",
        "$schema: agentv-targets-v2.2\ntargets:\n  - name: mock\n    provider: mock\n"
        f"    response: {json.dumps(example['candidate_answer'])}\n",
    )
    proc = agentv_cli(root, "eval", "evals/", "--target", "mock", "--out", "r.jsonl")
    assert proc.returncode == 0, proc.stdout + proc.stderr

    sent = json.loads((root / "evals/payload.json").read_text(encoding="utf-8"))
    assert sent == json.loads(documented_input.replace(DOC_ROOT, str(root)))

    (record,) = [json.loads(line) for line in (root / "r.jsonl").read_text().splitlines()]
    (entry,) = record["evaluator_results"]
    verdict = json.loads(documented_output)
    assert entry.get("error") is None
    assert entry["name"] == "adds" and entry["type"] == "code"
    for key in ("score", "hits", "misses", "reasoning"):
        assert entry[key] == verdict[key], key
    assert entry["evaluator_raw_request"]["cwd"] == str(root / "evals")

    # the table documents every field sent, and nothing else; aliases hold their field's value
    fields = _field_table(section)
    assert set(fields) == set(sent)
    for name, original in fields.items():
        if original is not None:
            assert original in sent and fields[original] is None, name
            assert sent[name] == sent[original], name
    assert [name for name, original in fields.items() if original is None] == [
        "question",
        "expected_outcome",
        "reference_answer",
        "candidate_answer",
        "guideline_paths",
        "input_files",
        "input_segments",
        "system_message",
        "trajectory",
    ]
