"""Loading `workspace:` blocks: the file's defaults, a case's own merged over them, and
their problems said at their keys (docs/eval-files.md, "Workspaces")."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentv.cases import Hook, Isolation, Repo, Workspace
from agentv.errors import InputError
from agentv.evalfile.loader import load_eval_file
from support.files import write
from support.gitrepo import commit, git

CASE = """  - id: {id}
    outcome: ok
    input_messages: [{{role: user, content: fix it}}]
"""


def _problems(path: Path) -> list[tuple[int | None, str, str, str | None]]:
    try:
        loaded = load_eval_file(path)
        found = loaded.diagnostics
    except InputError as exc:
        found = exc.diagnostics
    return [(d.line, d.severity, d.message, d.hint) for d in found]


@pytest.fixture
def app(repo: Path) -> tuple[Path, str]:
    """A git repository inside the project, with a tag ``v1``."""
    folder = repo / "fixtures" / "app"
    sha = commit(folder, {"calc.py": "def add(a, b):\n    return a - b\n"}, "one")
    git(folder, "tag", "v1")
    return folder, sha


@pytest.mark.slow  # git makes the repository and answers for its commits
def test_the_file_block_is_every_case_default_and_a_case_block_merges_over_it(
    repo: Path, app: tuple[Path, str]
) -> None:
    folder, sha = app
    write(repo, "evals/template/README.md", "task\n")
    path = write(
        repo,
        "evals/e.yaml",
        """$schema: agentv-eval-v2
workspace:
  template: template
  repos: [{path: app, repo: ../fixtures/app, commit: v1}]
  hooks:
    before_all: echo setup
    before_each: {command: make deps, timeout_seconds: 30}
  isolation: bwrap
evalcases:
"""
        + CASE.format(id="plain")
        + CASE.format(id="pinned")
        + f"""    workspace:
      repos: [{{path: app, repo: ../fixtures/app, base_commit: {sha}, sparse: [src]}}]
      hooks: {{after_each: echo done}}
      network: true
""",
    )
    loaded = load_eval_file(path)
    assert loaded.diagnostics == []
    plain, pinned = loaded.cases
    expected = Workspace(
        mode="temp",
        template=repo / "evals" / "template",
        repos=(Repo(path="app", repo=str(folder), commit="v1"),),
        hooks={"before_all": Hook("echo setup"), "before_each": Hook("make deps", 30.0)},
        isolation=Isolation(kind="bwrap"),
        eval_file=path,
    )
    assert plain.workspace == expected
    assert pinned.workspace == Workspace(
        mode="temp",
        template=repo / "evals" / "template",
        repos=(Repo(path="app", repo=str(folder), commit=sha, sparse=("src",)),),
        hooks={
            "before_all": Hook("echo setup"),
            "before_each": Hook("make deps", 30.0),
            "after_each": Hook("echo done"),
        },
        isolation=Isolation(kind="bwrap", network=True),
        eval_file=path,
    )
    assert plain.workspace.digest() != pinned.workspace.digest()
    # the digest is of what the agent starts from: after_each and the diff's limit aside
    assert (
        pinned.workspace.digest()
        == Workspace(
            template=repo / "evals" / "template",
            repos=(Repo(path="app", repo=str(folder), commit=sha, sparse=("src",)),),
            hooks={"before_all": Hook("echo setup"), "before_each": Hook("make deps", 30.0)},
            isolation=Isolation(kind="bwrap", network=True),
            max_diff_bytes=10,
        ).digest()
    )


def test_a_workspace_without_a_sandbox_is_warned_of_once(repo: Path) -> None:
    path = write(
        repo,
        "evals/e.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n"
        + CASE.format(id="a")
        + "    workspace: {mode: temp}\n"
        + CASE.format(id="b")
        + "    workspace: {mode: temp}\n"
        + CASE.format(id="c")
        + "    workspace: {isolation: none}\n",
    )
    assert _problems(path) == [
        (
            6,
            "warning",
            "case 'a': the agent works in this workspace without a sandbox: it can read and "
            "change "
            "anything you can on this machine",
            "set `isolation: bwrap` (Linux) or `isolation: docker` to confine it to its "
            "workspace, or `isolation: none` to say you mean it",
        )
    ]


@pytest.mark.slow  # git makes the repository and answers for its commits
def test_problems_are_said_at_their_keys(repo: Path, app: tuple[Path, str]) -> None:
    path = write(
        repo,
        "evals/e.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n"
        + CASE.format(id="static")  # line 3
        + "    workspace: {mode: static, isolation: none, template: t}\n"
        + CASE.format(id="repos")  # line 7
        + """    workspace:
      isolation: none
      repos:
        - {path: ../up, repo: ../fixtures/app}
        - {path: app, repo: ../fixtures/app, commit: nope}
        - {path: app/sub, repo: ../fixtures/app}
        - {path: lib, repo: ../fixtures/app, commit: v1, base_commit: v1}
        - {path: gone, repo: ../fixtures/missing}
"""
        + CASE.format(id="docker")  # line 18
        + "    workspace: {isolation: docker, keep: always, mode: pooled}\n"
        + CASE.format(id="hooks")  # line 22
        + "    workspace: {isolation: none, hooks: {after_all: echo bye}}\n",
    )
    app = repo / "fixtures" / "app"
    evals = repo / "evals"
    assert _problems(path) == [
        (
            6,
            "error",
            "case 'static': a static workspace needs `path`: the folder the agent works in",
            "add `path:` with an existing folder, or use `mode: temp`",
        ),
        (
            6,
            "error",
            "case 'static': workspace template not found: t",
            f"`template` is relative to the eval file's folder ({evals})",
        ),
        (
            6,
            "error",
            "case 'static': a static workspace is used as it is: `template` has no effect",
            "leave it out, or use `mode: temp` or `mode: pooled` to make a workspace from it",
        ),
        (
            13,
            "error",
            "case 'repos': repository path '../up' is not a folder inside the workspace",
            "give a relative path without `..` (`.`: the workspace itself)",
        ),
        (
            14,
            "error",
            f"case 'repos': commit 'nope' is not in the repository {app}",
            "give a commit, tag or branch the repository has (`git -C REPO log` lists them)",
        ),
        (
            15,
            "error",
            "case 'repos': repository path 'app/sub' is used inside 'app', another one's",
            "give each repository a folder of its own, none inside another",
        ),
        (
            16,
            "error",
            "case 'repos': `commit` and `base_commit` both name the commit",
            "keep one of them (`base_commit` is accepted for SWE-bench-style data)",
        ),
        (
            17,
            "error",
            "case 'repos': repository not found: ../fixtures/missing",
            f"`repo` is relative to the eval file's folder ({evals})",
        ),
        (
            21,
            "error",
            "case 'docker': `isolation: docker` needs `image`: the container image the agent "
            "runs in",
            "add `image:` (one that has the agent's program installed)",
        ),
        (
            21,
            "error",
            "case 'docker': `keep` is for temp workspaces (this one is pooled)",
            "a pooled or static workspace stays where it is: leave `keep` out",
        ),
        (
            25,
            "error",
            "case 'hooks': `after_all` runs once for the whole file, not for one case",
            "write it in the file's `workspace:` block (at the top level)",
        ),
    ]


def test_workspace_graders_need_a_workspace(repo: Path) -> None:
    graders = "    evaluators: [{name: tests, type: command, command: pytest -q}]\n"
    path = write(
        repo,
        "evals/e.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n" + CASE.format(id="a") + graders,
    )
    loaded = load_eval_file(path)
    assert loaded.cases == []
    assert [(d.line, d.message, d.hint) for d in loaded.diagnostics] == [
        (
            3,
            "case 'a': evaluator 'tests' (command) grades the workspace the agent left, but "
            "this case has no `workspace:`",
            "give the case (or the file) a `workspace:` block",
        )
    ]
    # a file-level workspace written after the cases gives them one
    later = write(
        repo,
        "evals/later.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n"
        + CASE.format(id="a")
        + graders
        + "workspace: {isolation: none}\n",
    )
    (case,) = load_eval_file(later).cases
    assert case.workspace == Workspace(eval_file=later, isolation=Isolation("none"))


def test_a_file_workspace_after_cases_with_their_own_is_said(repo: Path) -> None:
    path = write(
        repo,
        "evals/e.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n"
        + CASE.format(id="a")
        + "    workspace: {network: true}\n"
        + "workspace: {isolation: bwrap}\n",
    )
    assert _problems(path)[0] == (
        7,
        "error",
        "the file's `workspace:` is written after cases that have a `workspace:` of their "
        "own, which are merged over it",
        "move the file's `workspace:` above `evalcases:`",
    )


def test_unknown_keys_are_schema_errors(repo: Path) -> None:
    path = write(
        repo,
        "evals/e.yaml",
        "$schema: agentv-eval-v2\nworkspace: {mod: temp}\nevalcases:\n" + CASE.format(id="a"),
    )
    ((line, severity, message, hint),) = _problems(path)
    assert (line, severity, message) == (2, "error", "unknown key 'mod'")
    assert hint is not None and hint.startswith("did you mean 'mode'?")


@pytest.mark.slow  # git makes the repository and answers for its commits
def test_cases_from_data_rows_pin_their_own_commits(repo: Path, app: tuple[Path, str]) -> None:
    folder, sha = app
    later = commit(folder, {"calc.py": "def add(a, b):\n    return a + b\n"}, "two")
    write(repo, "evals/tasks.csv", f"task,base_commit\nfirst,{sha}\nsecond,{later}\n")
    path = write(
        repo,
        "evals/e.yaml",
        """$schema: agentv-eval-v2
workspace:
  repos: [{path: ., repo: ../fixtures/app}]
  isolation: bwrap
rows: {path: tasks.csv, id: task}
template:
  outcome: fixed
  input_messages: [{role: user, content: Fix add()}]
  workspace:
    repos: [{path: ., repo: ../fixtures/app, base_commit: "{{ base_commit }}"}]
  evaluators: [{name: tests, type: command, command: pytest -q}]
""",
    )
    loaded = load_eval_file(path)
    assert loaded.diagnostics == []
    assert [(c.id, c.workspace) for c in loaded.cases] == [
        (
            name,
            Workspace(
                repos=(Repo(path=".", repo=str(folder), commit=pinned),),
                isolation=Isolation("bwrap"),
                eval_file=path,
            ),
        )
        for name, pinned in (("first", sha), ("second", later))
    ]
