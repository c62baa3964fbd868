""".env reading: the repository root's file first, else the working directory's; the real
environment always wins; targets.yaml substitution sees what was read; and each run has
its own environment, never another's (os.environ is not a channel between runs)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentv.system.env import environment_scope, find_env_file, read_environment, run_environment
from agentv.targets import create_provider, load_targets_file
from support.files import write
from support.suites import env_project


@pytest.fixture(autouse=True)
def _restore_environ() -> Iterator[None]:
    saved = dict(os.environ)
    yield
    os.environ.clear()
    os.environ.update(saved)


def test_repository_root_env_file_is_read(repo: Path) -> None:
    env_file = write(repo, ".env", "AGENTV_T_ONE=from-root\n# a comment\nAGENTV_T_TWO='quoted'\n")
    env, found = read_environment(repo, repo / "sub")
    assert found == env_file
    assert env["AGENTV_T_ONE"] == "from-root"
    assert env["AGENTV_T_TWO"] == "quoted"
    assert env["PATH"] == os.environ["PATH"]  # the process's variables too
    assert "AGENTV_T_ONE" not in os.environ  # read, never loaded into the process


def test_the_environment_wins_over_the_file(repo: Path) -> None:
    write(repo, ".env", "AGENTV_T_ONE=from-file\nAGENTV_T_TWO=from-file\n")
    os.environ["AGENTV_T_ONE"] = "from-shell"
    env, _ = read_environment(repo)
    assert env["AGENTV_T_ONE"] == "from-shell"
    assert env["AGENTV_T_TWO"] == "from-file"


def test_only_the_first_file_is_read(repo: Path, tmp_path: Path) -> None:
    cwd = tmp_path / "work"
    write(cwd, ".env", "AGENTV_T_ONE=from-cwd\nAGENTV_T_CWD_ONLY=yes\n")
    assert find_env_file(repo, cwd) == cwd / ".env"  # no root file yet: the cwd's
    write(repo, ".env", "AGENTV_T_ONE=from-root\n")
    env, found = read_environment(repo, cwd)
    assert found == repo / ".env"
    assert env["AGENTV_T_ONE"] == "from-root"
    assert "AGENTV_T_CWD_ONLY" not in env


def test_a_scope_makes_a_runs_environment_the_current_one(repo: Path) -> None:
    assert run_environment() is os.environ  # outside any run
    with environment_scope({"ONLY": "this"}):
        assert dict(run_environment()) == {"ONLY": "this"}
        with environment_scope({"INNER": "x"}):
            assert dict(run_environment()) == {"INNER": "x"}
        assert dict(run_environment()) == {"ONLY": "this"}
    assert run_environment() is os.environ


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


@pytest.mark.slow
def test_two_projects_run_from_one_process_each_see_their_own_env_file(tmp_path: Path) -> None:
    import agentv

    answers = []
    for name in ("alpha", "beta"):
        root = _project(tmp_path, name)
        (result,) = agentv.run_eval("evals/e.yaml", cwd=root).results
        answers.append(result.candidate_answer.strip())
    assert answers == ["answer from alpha", "answer from beta"]


@pytest.mark.slow
async def test_a_run_prepared_before_another_one_runs_with_its_own_env_file(
    tmp_path: Path,
) -> None:
    import agentv

    alpha = agentv.prepare_run("evals/e.yaml", cwd=_project(tmp_path, "alpha"))
    beta = agentv.prepare_run("evals/e.yaml", cwd=_project(tmp_path, "beta"))
    answers = [(await run.run()).results[0].candidate_answer.strip() for run in (alpha, beta)]
    assert answers == ["answer from alpha", "answer from beta"]


def test_no_env_file(repo: Path) -> None:
    assert read_environment(repo, repo)[1] is None


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
    with environment_scope(read_environment(repo)[0]):
        provider = create_provider(target)  # reads the run's environment
    assert provider.settings.api_key == "sk-from-dotenv"  # type: ignore[attr-defined]


# --- runs at the same time, and what agents and code evaluators inherit ---------------------


@pytest.mark.slow
async def test_concurrent_runs_each_see_their_own_env_file(tmp_path: Path) -> None:
    import asyncio

    import agentv

    before = dict(os.environ)
    alpha, beta = (env_project(tmp_path, name) for name in ("alpha", "beta"))
    runs = await asyncio.gather(
        agentv.arun_eval("evals", cwd=alpha), agentv.arun_eval("evals", cwd=beta)
    )
    for run, name in zip(runs, ("alpha", "beta"), strict=True):
        assert sorted(r.candidate_answer for r in run.results) == [f"value-of-{name}"] * 6
    assert dict(os.environ) == before  # nothing was put into the process environment


KEYS_TARGETS = """\
$schema: agentv-targets-v2.2
targets:
  - name: default
    provider: cli
    command_template: sh -c 'printf "%s|%s|%s" "${OPENAI_API_KEY:+openai}" "${ANTHROPIC_API_KEY:+anthropic}" "$PROJ_SETTING"'
  - name: given
    provider: cli
    command_template: sh -c 'printf "%s|%s" "${OPENAI_API_KEY:+openai}" "$PROJ_SETTING"'
    env: {OPENAI_API_KEY: "${{ OPENAI_API_KEY }}"}
  - name: listed
    provider: cli
    command_template: sh -c 'env | cut -d= -f1 | sort | tr "\\n" " "'
    inherit_env: [PROJ_*, ANTHROPIC_API_KEY]
"""


def _keys_project(repo: Path) -> None:
    write(
        repo,
        ".env",
        "OPENAI_API_KEY=sk-openai-0123456789\nANTHROPIC_API_KEY=sk-ant-0123456789\n"
        "PROJ_SETTING=plain\nPROJ_OTHER=x\nUNLISTED=y\n",
    )
    write(repo, ".agentv/targets.yaml", KEYS_TARGETS)
    write(
        repo,
        "check.sh",
        'printf \'{"score": 1, "reasoning": "%s|%s"}\' "${OPENAI_API_KEY:+openai}" "$PROJ_SETTING"\n',
    )
    write(
        repo,
        "evals/e.yaml",
        "$schema: agentv-eval-v2\nevalcases:\n"
        "  - id: c\n    outcome: x\n    input_messages: [{role: user, content: hi}]\n"
        "    evaluators:\n"
        "      - {name: plain, type: code, script: sh ../check.sh}\n"
        "      - {name: keyed, type: code, script: sh ../check.sh,"
        " inherit_env: [OPENAI_API_KEY, PROJ_SETTING]}\n",
    )


@pytest.mark.slow
def test_agents_and_code_evaluators_get_no_vendor_key_unless_it_is_named(repo: Path) -> None:
    import agentv

    _keys_project(repo)
    answers = {}
    for target in ("default", "given", "listed"):
        (result,) = agentv.run_eval("evals", target=target, cwd=repo).results
        answers[target] = result.candidate_answer
        if target == "default":
            reasons = {e["name"]: e.get("reasoning") for e in result.evaluator_results or []}
    assert answers["default"] == "||plain"  # the .env value, but no vendor key
    assert answers["given"] == "openai|plain"  # named in its `env`: given
    names = set(answers["listed"].split())
    assert {"PATH", "PROJ_SETTING", "PROJ_OTHER", "ANTHROPIC_API_KEY"} <= names
    assert not names & {"UNLISTED", "OPENAI_API_KEY"}  # the allow-list: nothing else
    ours = {"AGENTV_PROCESS_TAG"}  # how agentv finds what the program leaves running
    shell = {"PWD", "SHLVL", "_"}
    assert names <= {"PROJ_SETTING", "PROJ_OTHER", "ANTHROPIC_API_KEY"} | ours | shell | {
        n for n in names if n in os.environ and _basic(n)
    }
    assert reasons == {"plain": "|plain", "keyed": "openai|plain"}


def _basic(name: str) -> bool:
    from agentv.system.env import BASE_VARIABLES

    return any(name == b or (b.endswith("*") and name.startswith(b[:-1])) for b in BASE_VARIABLES)


def test_codex_keeps_the_openai_key_it_needs(repo: Path) -> None:
    from agentv.providers.agents.codex import CODEX_KEYS
    from agentv.system.env import child_environment

    env = {"OPENAI_API_KEY": "a" * 20, "GEMINI_API_KEY": "b" * 20, "PATH": "/bin", "X": "y"}
    with environment_scope(env):
        assert child_environment(keys=CODEX_KEYS) == {
            "OPENAI_API_KEY": "a" * 20,
            "PATH": "/bin",
            "X": "y",
        }
        assert child_environment(inherit=["X"], keys=CODEX_KEYS) == {
            "OPENAI_API_KEY": "a" * 20,
            "PATH": "/bin",
            "X": "y",
        }
        assert child_environment(inherit=[]) == {"PATH": "/bin"}
        assert child_environment(inherit=["*"]) == {"PATH": "/bin", "X": "y"}  # keys by name
