""".env loading: the repository root's file first, else the working directory's; the real
environment always wins; and targets.yaml substitution sees what was loaded."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentv.env import find_env_file, load_env_file
from agentv.targets import create_provider, load_targets_file
from helpers import write


@pytest.fixture(autouse=True)
def _restore_environ() -> Iterator[None]:
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


def test_repository_root_env_file_is_loaded(repo: Path) -> None:
    env_file = write(repo, ".env", "AGENTV_T_ONE=from-root\n# a comment\nAGENTV_T_TWO='quoted'\n")
    assert load_env_file(repo, repo / "sub") == env_file
    assert os.environ["AGENTV_T_ONE"] == "from-root"
    assert os.environ["AGENTV_T_TWO"] == "quoted"


def test_the_environment_wins_over_the_file(repo: Path) -> None:
    write(repo, ".env", "AGENTV_T_ONE=from-file\nAGENTV_T_TWO=from-file\n")
    os.environ["AGENTV_T_ONE"] = "from-shell"
    load_env_file(repo)
    assert os.environ["AGENTV_T_ONE"] == "from-shell"
    assert os.environ["AGENTV_T_TWO"] == "from-file"


def test_only_the_first_file_is_loaded(repo: Path, tmp_path: Path) -> None:
    cwd = tmp_path / "work"
    write(cwd, ".env", "AGENTV_T_ONE=from-cwd\nAGENTV_T_CWD_ONLY=yes\n")
    assert find_env_file(repo, cwd) == cwd / ".env"  # no root file yet: the cwd's
    write(repo, ".env", "AGENTV_T_ONE=from-root\n")
    assert load_env_file(repo, cwd) == repo / ".env"
    assert os.environ["AGENTV_T_ONE"] == "from-root"
    assert "AGENTV_T_CWD_ONLY" not in os.environ


def test_a_later_load_takes_back_what_an_earlier_one_set(repo: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    write(repo, ".env", "AGENTV_T_ONE=from-a\nAGENTV_T_A_ONLY=a\n")
    write(other, ".env", "AGENTV_T_ONE=from-b\n")
    load_env_file(repo)
    os.environ["AGENTV_T_A_ONLY"] = "set-by-the-user-meanwhile"
    load_env_file(other)
    assert os.environ["AGENTV_T_ONE"] == "from-b"  # not the first project's value
    assert os.environ["AGENTV_T_A_ONLY"] == "set-by-the-user-meanwhile"  # theirs: kept
    write(other, ".env", "AGENTV_T_TWO=edited\n")  # the file edited between two runs
    load_env_file(other)
    assert "AGENTV_T_ONE" not in os.environ and os.environ["AGENTV_T_TWO"] == "edited"
    assert load_env_file(tmp_path / "none", tmp_path / "none") is None
    assert "AGENTV_T_TWO" not in os.environ


def _project(tmp_path: Path, name: str) -> Path:
    """A project whose agent answers with ``AGENTV_T_ANSWER``, set by its own ``.env``."""
    root = tmp_path / name
    (root / ".git").mkdir(parents=True)
    write(root, ".env", f"AGENTV_T_ANSWER=answer from {name}\n")
    write(
        root,
        ".agentv/targets.yaml",
        # the agent inherits the run's environment (a `${{ VAR }}` value would be masked
        # in the results as a secret)
        "$schema: agentv-targets-v2.2\ntargets:\n  - name: default\n    provider: cli\n"
        "    command_template: printenv AGENTV_T_ANSWER\n",
    )
    write(
        root,
        "evals/e.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n  - id: c\n    outcome: Answers.\n"
        "    input_messages: [{role: user, content: hi}]\n"
        "    execution: {evaluators: [{type: contains, value: answer}]}\n",
    )
    return root


def test_two_projects_run_from_one_process_each_see_their_own_env_file(tmp_path: Path) -> None:
    import agentv

    answers = []
    for name in ("alpha", "beta"):
        root = _project(tmp_path, name)
        (result,) = agentv.run_eval("evals/e.yaml", cwd=root).results
        answers.append(result.candidate_answer.strip())
    assert answers == ["answer from alpha", "answer from beta"]


async def test_a_run_prepared_before_another_one_runs_with_its_own_env_file(
    tmp_path: Path,
) -> None:
    import agentv

    alpha = agentv.prepare_run("evals/e.yaml", cwd=_project(tmp_path, "alpha"))
    beta = agentv.prepare_run("evals/e.yaml", cwd=_project(tmp_path, "beta"))
    answers = [(await run.run()).results[0].candidate_answer.strip() for run in (alpha, beta)]
    assert answers == ["answer from alpha", "answer from beta"]


def test_no_env_file(repo: Path) -> None:
    assert load_env_file(repo, repo) is None


def test_a_key_from_env_file_reaches_the_provider(repo: Path) -> None:
    write(repo, ".env", "AGENTV_T_KEY=sk-from-dotenv\n")
    path = write(
        repo,
        ".agentv/targets.yaml",
        "$schema: agentv-targets-v2.2\ntargets:\n"
        "  - name: gpt\n    provider: openai\n    model: m\n"
        "    base_url: http://127.0.0.1:9/v1\n    api_key: ${{ AGENTV_T_KEY }}\n",
    )
    target = load_targets_file(path).get("gpt")
    load_env_file(repo)
    provider = create_provider(target)  # reads os.environ
    assert provider.settings.api_key == "sk-from-dotenv"  # type: ignore[attr-defined]
