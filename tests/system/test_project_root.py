"""A project outside any git repository is the folder holding ``.agentv/``: its ``.env`` is
found from a subfolder, as a repository root's is."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentv.evalfile.files import find_repo_root
from agentv.system.env import read_environment
from support.cli import agentv_cli
from support.files import write


def test_the_folder_holding_agentv_is_the_root_outside_a_repository(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / ".agentv").mkdir(parents=True)
    (project / "evals" / "deep").mkdir(parents=True)
    assert find_repo_root(project / "evals" / "deep", project / "evals") == project
    (project / ".git").mkdir()  # a repository's root wins
    (project / "evals" / ".git").write_text("gitdir: elsewhere\n")
    assert find_repo_root(project / "evals" / "deep", project) == project / "evals"
    # neither: the working directory when the folder is inside it, else the folder
    bare = tmp_path / "bare" / "evals"
    bare.mkdir(parents=True)
    assert find_repo_root(bare, tmp_path) == tmp_path
    assert find_repo_root(bare, project) == bare


@pytest.mark.slow
def test_dot_env_beside_agentv_is_read_from_a_subfolder(tmp_path: Path) -> None:
    project = tmp_path / "project"
    write(project, ".env", "AGENTV_TEST_ANSWER=from the project\n")
    write(
        project,
        ".agentv/targets.yaml",
        "$schema: agentv-targets-v2.2\ntargets:\n"
        "  - {name: default, provider: mock, response: hello,"
        " system_prompt: '${{ AGENTV_TEST_ANSWER }}'}\n",
    )
    write(
        project,
        "evals/one.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n  - id: a\n    outcome: x\n"
        "    input_messages: [{role: user, content: hi}]\n"
        "    evaluators: [{type: contains, value: hello}]\n",
    )
    env, found = read_environment(find_repo_root(project / "evals", project / "evals"))
    assert (env["AGENTV_TEST_ANSWER"], found) == ("from the project", project / ".env")
    (project / "sub").mkdir()
    # the target's variable is set from the project's .env: the run starts, and passes
    done = agentv_cli(project / "sub", "eval", "../evals/one.yaml", "--out", "r.jsonl")
    assert (done.returncode, done.stderr) == (0, "")
    (project / ".env").unlink()
    missing = agentv_cli(project / "sub", "eval", "../evals/one.yaml", "--out", "r2.jsonl")
    assert missing.returncode == 1
    assert "or in a .env file at the project's root (the repository's, else the folder " in (
        missing.stderr
    )
