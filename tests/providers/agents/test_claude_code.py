"""``provider: claude-code`` against a fake ``claude`` that replays stream-json recorded
from the real CLI (tests/data/claude_code: Claude Code 2.1.332 against a loopback model)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from agentv.errors import ProviderError
from agentv.providers.agents.claude_code import (
    FIXED_ARGS,
    ClaudeCodeProvider,
    ClaudeCodeSettings,
    parse_stream,
)
from agentv.providers.base import Usage
from agentv.providers.registry import canonical_kind, provider_class
from agentv.trajectory import ToolStep
from support.agents import FAKE_CLAUDE, install_script
from support.paths import ROOT
from support.providers import ask

RECORDED = ROOT / "tests" / "data" / "claude_code"


@pytest.fixture
def record(bin_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fake ``claude`` on PATH, replaying the recorded fix of calc.py; returns the file
    where it records each call."""
    install_script(bin_dir, "claude", FAKE_CLAUDE)
    path = tmp_path / "claude-calls.jsonl"
    monkeypatch.setenv("FAKE_CLAUDE_RECORD", str(path))
    monkeypatch.setenv("FAKE_CLAUDE_EVENTS", str(RECORDED / "fix_calc.jsonl"))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key-123456")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-not-for-claude")
    return path


def calls(record: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in record.read_text().splitlines()]


def claude(**fields: Any) -> ClaudeCodeProvider:
    return ClaudeCodeProvider("claude-agent", ClaudeCodeSettings.model_validate(fields))


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    return folder


def test_the_kind_and_its_alias_name_the_provider() -> None:
    assert canonical_kind("claude-code") == "claude-code"
    assert canonical_kind("Claude-CLI") == "claude-code"
    assert provider_class("claude-code") is ClaudeCodeProvider


@pytest.mark.slow  # the fake claude runs
async def test_the_replayed_stream_is_the_answer_trajectory_tokens_and_cost(
    record: Path, project: Path
) -> None:
    provider = claude(
        model="claude-sonnet-4-5",
        max_turns=8,
        allowed_tools=["Bash", "Edit", "Bash(git *)"],
        disallowed_tools="WebFetch",
        append_system_prompt="Be brief.",
        cwd=str(project),
    )
    await provider.healthcheck()
    response = await provider.invoke(ask(question="Fix add() in calc.py", eval_id="fix"))

    assert response.text == "Fixed add() in calc.py: it now returns a + b."
    # the result event's session totals: input counts the cache reads (also as cached)
    assert response.usage == Usage(
        input_tokens=1160, output_tokens=80, total_tokens=1240, cached_input_tokens=160
    )
    assert response.reported_cost_usd == 0.005632
    steps = [replace_duration(s) for s in response.trajectory or ()]
    assert steps == [
        ToolStep(
            name="Bash",
            arguments={"command": "cat calc.py", "description": "Show calc.py"},
            result="def add(a, b):\n    return a - b",
            id="toolu_01",
        ),
        ToolStep(
            name="Edit",
            arguments={
                "replace_all": False,
                "file_path": f"{project}/calc.py",
                "old_string": "a - b",
                "new_string": "a + b",
            },
            result=(
                f"The file {project}/calc.py has been updated successfully. (file state is "
                "current in your context — no need to Read it back)"
            ),
            id="toolu_02",
        ),
        ToolStep(
            name="Bash",
            arguments={"command": "exit 3", "description": "Fails"},
            error="Exit code 3",
            id="toolu_03",
        ),
    ]
    assert all(s.duration_ms is not None and s.duration_ms >= 0 for s in response.trajectory)
    assert (project / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"

    (call,) = calls(record)
    assert call["argv"] == [
        *FIXED_ARGS,
        "--model",
        "claude-sonnet-4-5",
        "--max-turns",
        "8",
        "--permission-mode",
        "acceptEdits",
        "--append-system-prompt",
        "Be brief.",
        "--allowedTools",
        "Bash",
        "Edit",
        "Bash(git *)",
        "--disallowedTools",
        "WebFetch",
    ]
    assert call["cwd"] == str(project)
    assert call["prompt"] == "[[ ## user_query ## ]]\n\nFix add() in calc.py"
    # the key Claude Code uses is passed on, no other vendor's
    assert (call["api_key"], call["openai_key"]) == ("sk-ant-test-key-123456", None)
    assert response.raw["session_id"] == "f9115189-803a-4e70-9c3f-0bed94485380"
    assert (response.raw["model"], response.raw["num_turns"]) == ("claude-test", 4)
    assert "sk-ant-test-key-123456" not in json.dumps([response.raw, response.sent])


def replace_duration(step: ToolStep) -> ToolStep:
    from dataclasses import replace

    return replace(step, duration_ms=None)


@pytest.mark.slow  # the fake claude runs
async def test_a_request_in_a_workspace_runs_there_and_files_are_linked(
    record: Path, project: Path, tmp_path: Path
) -> None:
    guide = tmp_path / "style.instructions.md"
    guide.write_text("Be careful.")
    provider = claude(cwd=str(tmp_path))  # the workspace wins over the target's folder
    await provider.invoke(
        ask(question="Fix it", workspace=project, guideline_paths=[guide], input_files=[guide])
    )
    (call,) = calls(record)
    assert call["cwd"] == str(project)
    assert call["argv"] == [*FIXED_ARGS, "--permission-mode", "acceptEdits"]
    assert call["prompt"].startswith(
        f"Read all guideline files:\n* [style.instructions.md]({guide.as_uri()})."
    )


@pytest.mark.slow  # the fake claude runs
async def test_without_a_folder_each_call_gets_a_scratch_one_removed_after(record: Path) -> None:
    provider = claude()
    with pytest.raises(ProviderError):  # the recording edits calc.py, which is not there
        await provider.invoke(ask(question="Fix it"))
    (call,) = calls(record)
    assert Path(call["cwd"]).name.startswith("agentv-claude-")
    assert not Path(call["cwd"]).exists()


@pytest.mark.slow  # the fake claude runs
async def test_inherit_env_keeps_the_key_claude_needs(
    record: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LANG", "C.UTF-8")
    await claude(cwd=str(project), inherit_env=["FAKE_CLAUDE_*"]).invoke(ask(question="x"))
    (call,) = calls(record)
    assert (call["api_key"], call["openai_key"], call["lang"]) == (
        "sk-ant-test-key-123456",
        None,
        "C.UTF-8",
    )


@pytest.mark.slow  # the fake claude runs
async def test_the_turn_limit_is_an_error_that_says_how_to_raise_it(
    record: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_CLAUDE_EVENTS", str(RECORDED / "max_turns.jsonl"))
    with pytest.raises(ProviderError) as caught:
        await claude(cwd=str(project), max_turns=1).invoke(ask(question="write hello.txt"))
    assert str(caught.value) == (
        "Claude Code reached its turn limit (Reached maximum number of turns "
        "(1)) before it finished, after 2 turns; raise `max_turns` (now 1) on target "
        "'claude-agent'"
    )


@pytest.mark.slow  # the fake claude runs
async def test_not_logged_in_says_how_to_log_in(
    record: Path, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_CLAUDE_EVENTS", str(RECORDED / "not_logged_in.jsonl"))
    with pytest.raises(ProviderError) as caught:
        await claude(cwd=str(project)).invoke(ask(question="hi"))
    assert str(caught.value) == (
        "Claude Code is not logged in (Not logged in · Please run /login): run "
        "`claude` once and log in with /login, or give it ANTHROPIC_API_KEY (the run's "
        "environment or .env; with `inherit_env`, name it there)"
    )


@pytest.mark.slow  # the fake claude runs
async def test_an_option_the_installed_cli_does_not_know_is_named(
    record: Path, project: Path
) -> None:
    with pytest.raises(ProviderError) as caught:
        await claude(cwd=str(project), args=["--frobnicate"]).invoke(ask(question="hi"))
    assert str(caught.value) == (
        "the installed Claude Code does not know the option --frobnicate: "
        "update it (`npm install -g @anthropic-ai/claude-code`), or remove it from target "
        "'claude-agent' in targets.yaml"
    )


@pytest.mark.slow  # the fake claude runs
async def test_a_stream_without_a_result_event_is_an_error(
    record: Path, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cut = tmp_path / "cut.jsonl"
    lines = (RECORDED / "fix_calc.jsonl").read_text().splitlines()
    kept = [line for line in lines if json.loads(line).get("type") != "result"]
    assert len(kept) == len(lines) - 1
    cut.write_text("\n".join(kept) + "\n")
    monkeypatch.setenv("FAKE_CLAUDE_EVENTS", str(cut))
    with pytest.raises(ProviderError) as caught:
        await claude(cwd=str(project)).invoke(ask(question="hi"))
    assert str(caught.value) == "Claude Code ended without a result event in its stream"


async def test_a_missing_program_says_how_to_install_it(
    bin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(bin_dir))
    with pytest.raises(ProviderError) as caught:
        await claude().healthcheck()
    assert str(caught.value) == (
        "Claude Code executable 'claude' was not found on PATH. Install it with "
        "`npm install -g @anthropic-ai/claude-code`, or set `executable` on target "
        "'claude-agent' in targets.yaml to the program's path."
    )
    assert ClaudeCodeSettings().setup_warnings("claude-agent", "claude-code") == [
        str(caught.value).removeprefix("")
    ]


def test_settings_are_checked() -> None:
    with pytest.raises(ValidationError) as caught:
        ClaudeCodeSettings.model_validate({"max_turns": 0, "allowed_tools": [""], "modle": "x"})
    problems = {(e["loc"][0], e["type"]) for e in caught.value.errors()}
    assert problems == {
        ("max_turns", "greater_than_equal"),
        ("allowed_tools", "tools"),
        ("modle", "extra_forbidden"),
    }
    assert ClaudeCodeSettings.model_validate({"maxTurns": 3, "allowedTools": "Read"}) == (
        ClaudeCodeSettings(max_turns=3, allowed_tools=("Read",))
    )


def test_lines_that_are_not_events_are_skipped() -> None:
    assert parse_stream('warning: slow disk\n{"type": "a"}\n[1]\n{broken\n{"type": "b"}') == [
        {"type": "a"},
        {"type": "b"},
    ]
