"""The graders of what an agent left in its workspace (``file_exists``, ``file_contains``,
``command``, ``diff``), on a real workspace: made from a template, changed as an agent
would, measured, then graded (docs/eval-files.md, "Workspace graders")."""

from __future__ import annotations

import shlex
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from agentv.cases import EvaluatorConfig, Isolation, Workspace
from agentv.evaluators.base import EvaluatorScore
from agentv.evaluators.grading import run_evaluator
from agentv.evaluators.registry import AnyEvaluatorSpec
from agentv.evaluators.workspace import matches
from agentv.run.workspaces import Lease, WorkspaceManager
from support.evaluator_kit import make_case, make_ctx
from support.files import write

SPEC: TypeAdapter[Any] = TypeAdapter(AnyEvaluatorSpec)
PY = shlex.quote(sys.executable)


def config(**fields: Any) -> EvaluatorConfig:
    spec = SPEC.validate_python(fields)
    return EvaluatorConfig(fields.get("name") or spec.type, spec)


@pytest.fixture
async def lease(tmp_path: Path) -> AsyncIterator[Lease]:
    """A workspace from a template, as an agent left it: ``src/app.py`` fixed,
    ``notes.md`` added, ``old.txt`` deleted, ``tests/test_app.py`` untouched."""
    template = tmp_path / "template"
    write(template, "src/app.py", "def add(a, b):\n    return a - b\n")
    write(template, "tests/test_app.py", "from app import add\n")
    write(template, "old.txt", "bye\n")
    spec = Workspace(template=template, isolation=Isolation("none"))
    manager = WorkspaceManager(tmp_path / "root")
    async with manager.lease(spec, eval_id="fix", target="agent", repeat=0) as found:
        write(found.path, "src/app.py", "def add(a, b):\n    return a + b\n")
        write(found.path, "notes.md", "# Fixed\nadd() now adds.\n")
        (found.path / "old.txt").unlink()
        await found.settle()
        yield found


async def grade(tmp_path: Path, lease: Lease | None, **fields: Any) -> EvaluatorScore:
    cfg = config(**fields)
    ctx = make_ctx(make_case(tmp_path, evaluators=[cfg]), "done", timeout=60)
    ctx.workspace = lease
    return await run_evaluator(ctx, cfg)


def verdict(score: EvaluatorScore) -> tuple[float, list[str], list[str], str | None]:
    return score.score, score.hits, score.misses, score.error


@pytest.mark.slow  # git takes the workspace's snapshots; commands run
async def test_file_exists_by_path_and_pattern(tmp_path: Path, lease: Lease) -> None:
    score = await grade(
        tmp_path, lease, type="file_exists", path=["notes.md", "src/*.py", "old.txt", "**/*.rs"]
    )
    assert verdict(score) == (
        0.5,
        ["notes.md exists in the workspace", "src/*.py exists in the workspace"],
        ["old.txt does not exist in the workspace", "**/*.rs does not exist in the workspace"],
        None,
    )


@pytest.mark.slow  # git takes the workspace's snapshots; commands run
async def test_file_contains_text_and_pattern(tmp_path: Path, lease: Lease) -> None:
    assert verdict(
        await grade(tmp_path, lease, type="file_contains", path="src/app.py", value="a + b")
    ) == (1.0, ["src/app.py contains 'a + b'"], [], None)
    assert verdict(
        await grade(
            tmp_path, lease, type="file_contains", path="notes.md", pattern="^ADD", flags="im"
        )
    ) == (1.0, ["notes.md contains a match of /^ADD/im"], [], None)
    assert verdict(
        await grade(tmp_path, lease, type="file_contains", path="old.txt", value="bye")
    ) == (0.0, [], ["old.txt does not exist in the workspace"], None)


@pytest.mark.slow  # git takes the workspace's snapshots; commands run
async def test_command_grades_by_exit_code(tmp_path: Path, lease: Lease) -> None:
    check = f"cd src && {PY} -c 'from app import add; assert add(2, 3) == 5' && echo ok"
    score = await grade(tmp_path, lease, type="command", command=check)
    assert verdict(score) == (1.0, [f"`{check}` exited with code 0"], [], None)
    assert score.raw_request is not None
    assert (score.raw_request["cwd"], score.raw_request["exit_code"]) == (str(lease.path), 0)
    assert score.raw_request["output"] == "ok"

    failing = await grade(tmp_path, lease, type="command", command="echo boom >&2; exit 3")
    assert verdict(failing) == (0.0, [], ["`echo boom >&2; exit 3` exited with code 3"], None)
    assert failing.raw_request is not None and failing.raw_request["output"] == "boom"


@pytest.mark.slow  # git takes the workspace's snapshots; commands run
async def test_command_reads_a_score_from_its_output(tmp_path: Path, lease: Lease) -> None:
    report = "echo '=== 3 passed, 1 failed in 0.1s ==='; exit 1"
    score = await grade(
        tmp_path,
        lease,
        type="command",
        command=report,
        score_pattern=r"(?P<passed>\d+) passed(?:, (?P<failed>\d+) failed)?",
    )
    assert verdict(score) == (0.75, [], [f"`{report}` scored 0.75 (exited with code 1)"], None)
    direct = await grade(
        tmp_path,
        lease,
        type="command",
        command="echo score=0.9",
        score_pattern=r"score=(?P<score>[\d.]+)",
    )
    assert direct.score == 0.9
    none = await grade(
        tmp_path, lease, type="command", command="echo nothing", score_pattern=r"(?P<score>\d) ok"
    )
    assert verdict(none) == (
        0.0,
        [],
        ["`echo nothing`: its output has no match of `score_pattern`"],
        None,
    )


@pytest.mark.slow  # git takes the workspace's snapshots; commands run
async def test_a_command_that_cannot_run_or_takes_too_long(tmp_path: Path, lease: Lease) -> None:
    missing = await grade(tmp_path, lease, type="command", command="no-such-program-xyz")
    assert missing.error is not None
    assert missing.error.startswith("`no-such-program-xyz` could not run (exit code 127): ")
    slow = await grade(tmp_path, lease, type="command", command="sleep 30", timeout_seconds=0.5)
    assert verdict(slow) == (
        0.0,
        [],
        ["`sleep 30` did not finish within 0.5 s and was stopped"],
        None,
    )


@pytest.mark.slow  # git takes the workspace's snapshots; commands run
async def test_diff_rules_on_what_changed(tmp_path: Path, lease: Lease) -> None:
    assert lease.changes is not None
    assert lease.changes.paths == ["notes.md", "old.txt", "src/app.py"]
    score = await grade(
        tmp_path,
        lease,
        type="diff",
        must_change=["src/", "*.md", "docs/**"],
        must_not_change=["tests/**", "old.txt"],
    )
    assert verdict(score) == (
        0.6,
        ["src/ changed (src/app.py)", "*.md changed (notes.md)", "tests/** did not change"],
        ["docs/** did not change", "old.txt must not change, but old.txt did"],
        None,
    )


async def test_without_a_workspace_a_grader_cannot_grade(tmp_path: Path) -> None:
    score = await grade(tmp_path, None, type="file_exists", path="a.txt")
    assert score.error == (
        "there is no workspace to grade (a regraded answer: its workspace is gone); run the "
        "case again to grade what its agent leaves"
    )


@pytest.mark.parametrize(
    ("pattern", "path", "hit"),
    [
        ("src", "src/app.py", True),
        ("src", "srcs/app.py", False),
        ("*.py", "app.py", True),
        ("*.py", "src/app.py", False),
        ("**/*.py", "src/deep/app.py", True),
        ("**/*.py", "app.py", True),
        ("src/?.py", "src/a.py", True),
        ("src/[!a].py", "src/a.py", False),
    ],
)
def test_path_patterns(pattern: str, path: str, hit: bool) -> None:
    assert matches(pattern, path) is hit


def test_settings_are_checked_when_loaded(repo: Path) -> None:
    from agentv.evalfile.loader import load_eval_file

    path = write(
        repo,
        "e.yaml",
        """$schema: agentv-eval-v2
workspace: {isolation: none}
evalcases:
  - id: a
    outcome: ok
    input_messages: [{role: user, content: hi}]
    evaluators:
      - {name: a, type: file_exists, path: ../etc/passwd}
      - {name: b, type: file_contains, path: x.txt}
      - {name: c, type: command, command: pytest, score_pattern: "(\\\\d+) passed"}
      - {name: d, type: diff}
""",
    )
    loaded = load_eval_file(path)
    assert [(d.line, d.message, d.hint) for d in loaded.errors] == [
        (
            8,
            "case 'a': '../etc/passwd' is not a path inside the workspace",
            "give a path relative to the workspace's top, without `..`",
        ),
        (
            9,
            "case 'a': `file_contains` needs either `value` (text) or `pattern` (a regex)",
            "give one of them",
        ),
        (
            10,
            "case 'a': `score_pattern` has no group to read a score from",
            "name a group `score` (a number from 0 to 1), or `passed` with `failed` or "
            r"`total`: (?P<passed>\d+) passed",
        ),
        (
            11,
            "case 'a': `diff` needs `must_change` or `must_not_change`: with "
            "neither, every workspace would pass",
            "list the paths (or patterns: src/**/*.py) that must or must not change",
        ),
    ]
