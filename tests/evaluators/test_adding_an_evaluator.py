"""Adding an evaluator is one module and its line in the registry
(docs/maintainers/evaluators.md): on a copy of the package with the page's two blocks added
and nothing else changed, an eval file using the new evaluator is validated (its unknown
keys, its own check) and run (its grading, in the results)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from support.cli import agentv_cli
from support.files import write
from support.results import rows
from support.targets import mock_target, write_targets

#: every test here runs agentv as a process: left out of `make test-fast`
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "maintainers" / "evaluators.md"
_BLOCK = re.compile(r"^```python\n# (?P<path>\S+)\n(?P<body>.*?)^```$", re.M | re.S)


def page_blocks() -> dict[str, str]:
    """The page's Python blocks, by the file each names on its first line."""
    return {m["path"]: m["body"] for m in _BLOCK.finditer(PAGE.read_text(encoding="utf-8"))}


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of ``src/`` with the page's evaluator module and registry line added."""
    src = tmp_path_factory.mktemp("src")
    shutil.copytree(
        ROOT / "src" / "agentv", src / "agentv", ignore=shutil.ignore_patterns("__pycache__")
    )
    blocks = page_blocks()
    module = blocks["src/agentv/evaluators/starts_with.py"]
    (src / "agentv" / "evaluators" / "starts_with.py").write_text(module, encoding="utf-8")
    line = blocks["src/agentv/evaluators/registry.py"]
    (import_line,) = [x for x in line.splitlines() if x.startswith("from ")]
    (listed,) = [x for x in line.splitlines() if x.strip() == "StartsWithSpec,"]
    registry = src / "agentv" / "evaluators" / "registry.py"
    text = registry.read_text(encoding="utf-8")
    assert "KINDS: tuple" in text and "    DiffSpec,\n)" in text
    text = text.replace("KINDS: tuple", f"{import_line}\n\nKINDS: tuple", 1)
    text = text.replace("    DiffSpec,\n)", f"    DiffSpec,\n{listed}\n)", 1)
    registry.write_text(text, encoding="utf-8")
    return src


def run(package: Path, project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``agentv ARGS`` in ``project``, with the copy of the package first on the path."""
    path = os.pathsep.join(filter(None, [str(package), os.environ.get("PYTHONPATH")]))
    return agentv_cli(project, *args, timeout=120, env={"PYTHONPATH": path})


CASE = (
    "$schema: agentv-eval-v2\nevalcases:\n"
    "  - id: capital\n    outcome: Names Paris.\n"
    "    input_messages: [{role: user, content: What is the capital of France?}]\n"
    "    evaluators:\n"
)


def test_a_new_evaluator_is_checked_like_every_other(package: Path, repo: Path) -> None:
    write(
        repo,
        "evals/bad.yaml",
        CASE
        + "      - {type: starts_with, prefx: Paris}\n"
        + "      - {type: starts_with, prefix: ' '}\n"
        + "      - {type: start_with, prefix: Paris}\n",
    )
    done = run(package, repo, "validate", "evals/bad.yaml")
    assert done.returncode == 1, done.stderr
    lines = [line.strip() for line in done.stdout.splitlines()]
    assert "✗ evals/bad.yaml:7:29: case 'capital': unknown key 'prefx'" in lines
    keys = "name, weight, required, threshold, type, prefix, ignore_case"
    assert f"hint: did you mean 'prefix'? valid keys here: {keys}" in lines
    assert "✗ evals/bad.yaml:9:16: case 'capital': unknown evaluator type 'start_with'" in lines
    assert any(
        line.startswith("hint: did you mean 'starts_with'? valid choices: llm_judge, code,")
        and line.endswith(", command, diff, starts_with")
        for line in lines
    )
    # the schema errors come first; once they are fixed, the evaluator's own check speaks
    write(repo, "evals/blank.yaml", CASE + "      - {type: starts_with, prefix: ' '}\n")
    done = run(package, repo, "validate", "evals/blank.yaml")
    assert done.returncode == 1, done.stderr
    lines = [line.strip() for line in done.stdout.splitlines()]
    assert (
        "✗ evals/blank.yaml:7:37: case 'capital': `prefix` is blank: every answer would pass"
        in lines
    )
    assert "hint: give the text the answer must start with" in lines


def test_a_new_evaluator_grades_a_run(package: Path, repo: Path) -> None:
    write_targets(repo, mock_target(response="  Paris is the capital."))
    write(
        repo,
        "evals/good.yaml",
        CASE
        + "      - {type: starts_with, prefix: paris, ignore_case: true}\n"
        + "      - {name: strict, type: starts_with, prefix: paris}\n",
    )
    done = run(package, repo, "eval", "evals/good.yaml", "--out", "out.jsonl")
    assert done.returncode == 7, done.stdout + done.stderr  # 0.5: below the pass threshold
    (record,) = rows(repo / "out.jsonl")
    assert record["score"] == 0.5
    assert [
        (e["name"], e["type"], e["score"], e["hits"], e["misses"])
        for e in record["evaluator_results"]
    ] == [
        ("starts_with", "starts_with", 1.0, ["answer starts with 'paris'"], []),
        ("strict", "starts_with", 0.0, [], ["answer does not start with 'paris'"]),
    ]
