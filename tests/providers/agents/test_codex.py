"""``provider: codex`` against a fake ``codex`` executable on PATH."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from agentv.errors import AgentProcessError, ProviderError, ProviderTimeout
from agentv.providers.agents.codex import (
    FIXED_ARGS,
    CodexProvider,
    CodexSettings,
    extract_answer,
    parse_output,
    summarise_line,
)
from support.agents import FAKE_CODEX, install_script
from support.providers import ask

QUESTION = '@[User]:\nFix the bug in <file: path="src/app.py">\n\n@[Assistant]:\nOk\n\n@[User]:\nGo'


@pytest.fixture
def record(bin_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fake ``codex`` on PATH; returns the file where it records each call."""
    install_script(bin_dir, "codex", FAKE_CODEX)
    path = tmp_path / "codex-calls.jsonl"
    monkeypatch.setenv("FAKE_CODEX_RECORD", str(path))
    monkeypatch.delenv("AGENTV_CODEX_STREAM_LOGS", raising=False)
    monkeypatch.delenv("AGENTV_CODEX_LOG_FORMAT", raising=False)
    return path


def calls(record: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in record.read_text().splitlines()]


def codex(name: str = "codex-agent", **fields: Any) -> CodexProvider:
    return CodexProvider(name, CodexSettings.model_validate(fields))


@pytest.fixture
def files(repo: Path) -> tuple[Path, Path]:
    guideline = repo / "prompts" / "style.instructions.md"
    guideline.parent.mkdir()
    guideline.write_text("Be careful.")
    source = repo / "src" / "app.py"
    source.parent.mkdir()
    source.write_text("print('hi')\n")
    return guideline, source


@pytest.mark.slow
async def test_answer_prompt_arguments_logs_and_cleanup(
    repo: Path, record: Path, files: tuple[Path, Path]
) -> None:
    guideline, source = files
    provider = codex(args=["--model", "o4-mini"])
    await provider.healthcheck()
    response = await provider.invoke(
        ask(
            question=QUESTION,
            guideline_paths=[guideline],
            input_files=[source, guideline],
            eval_id="fix bug/1",
            attempt=1,
        )
    )
    # the last agent message of the stream, not an earlier one
    assert response.text == f"ANSWER: {QUESTION}"
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (120, 7)

    (call,) = calls(record)
    assert call["argv"] == [*FIXED_ARGS, "--model", "o4-mini", "-"]
    expected_prompt = (
        "Read all guideline files:\n"
        f"* [style.instructions.md]({guideline.as_uri()}).\n"
        "Read all input files:\n"
        f"* [app.py]({source.as_uri()}).\n"
        "If any file is missing, fail with ERROR: missing-file <filename> and stop.\n"
        "Then apply system_instructions on the user query below.\n"
        "\n"
        "[[ ## user_query ## ]]\n"
        "\n"
        f"{QUESTION}"
    )
    assert call["prompt"] == expected_prompt
    assert response.sent["prompt"] == expected_prompt
    assert response.sent["argv"][1:] == call["argv"]
    # ran in a scratch workspace holding the prompt and copies of the files...
    workspace = Path(call["cwd"])
    assert workspace.name.startswith("agentv-codex-")
    assert call["cwd_files"] == ["app.py", "prompt.md", "style.instructions.md"]
    assert response.sent["workspace"] == str(workspace)
    # ...which is gone afterwards
    assert not workspace.exists()

    log_file = Path(response.raw["log_file"])
    assert log_file.parent == repo / ".agentv" / "logs" / "codex"
    assert provider.artifacts == [log_file]
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d{3}Z_codex-agent_fix_bug_1_attempt-2_[0-9a-f]{8}\.log",
        log_file.name,
    )
    lines = log_file.read_text().splitlines()
    assert lines[:4] == [
        "# Codex CLI stream log",
        "# target: codex-agent",
        "# eval: fix bug/1",
        "# attempt: 2",
    ]
    assert lines[4].startswith("# started: ")
    body = "\n".join(lines[5:])
    assert "[+00:00] [stdout] thread.started" in body
    assert "[stdout] item.completed: draft answer" in body
    assert "[stdout] item.completed: ANSWER: @[User]:" in body
    assert "[stdout] turn.completed" in body
    assert "[stderr] stderr: fake codex: warming up" in body
    assert "[stderr] stderr: fake codex: done" in body  # a last line without newline


@pytest.mark.slow
async def test_target_cwd_is_used_and_nothing_is_copied(
    repo: Path, record: Path, files: tuple[Path, Path], tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "existing.txt").write_text("x")
    provider = codex(cwd=str(work))
    await provider.invoke(ask(question="Q", input_files=[files[1]]))
    (call,) = calls(record)
    assert Path(call["cwd"]) == work
    assert call["cwd_files"] == ["existing.txt"]
    assert call["prompt"].startswith("Read all input files:\n* [app.py](file://")


@pytest.mark.slow
async def test_prompt_without_files_is_just_the_query(repo: Path, record: Path) -> None:
    await codex().invoke(ask(question="  What is 2+2?\n"))
    assert calls(record)[0]["prompt"] == "[[ ## user_query ## ]]\n\nWhat is 2+2?"


@pytest.mark.slow
async def test_json_log_format_and_log_dir(
    repo: Path, record: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTV_CODEX_LOG_FORMAT", "json")
    provider = codex(logDir=str(tmp_path / "logs"))
    response = await provider.invoke(ask(question="Q", eval_id="c"))
    log_file = Path(response.raw["log_file"])
    assert log_file.parent == tmp_path / "logs"
    text = log_file.read_text()
    assert '] [stdout] {\n  "type": "turn.completed",\n  "usage": {' in text
    assert "[stderr] fake codex: warming up" in text  # not JSON: written as it is


@pytest.mark.slow
@pytest.mark.parametrize("value", ["false", "0", "OFF "])
async def test_stream_logs_can_be_disabled(
    repo: Path, record: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("AGENTV_CODEX_STREAM_LOGS", value)
    provider = codex()
    response = await provider.invoke(ask(question="Q"))
    assert response.raw["log_file"] is None
    assert not (repo / ".agentv" / "logs").exists()
    assert provider.artifacts == []


async def test_missing_executable_says_how_to_install(repo: Path, bin_dir: Path) -> None:
    provider = codex("cx", executable="codex-not-installed-anywhere")
    with pytest.raises(ProviderError) as info:
        await provider.healthcheck()
    message = str(info.value)
    assert "Codex executable 'codex-not-installed-anywhere' was not found on PATH" in message
    assert "npm install -g @openai/codex" in message
    assert "set `executable` on target 'cx'" in message
    with pytest.raises(ProviderError, match="does not exist or is not executable"):
        await codex(executable="./tools/codex").invoke(ask(question="Q"))


@pytest.mark.slow
async def test_executable_given_as_a_path(repo: Path, record: Path, bin_dir: Path) -> None:
    provider = codex(executable=str(bin_dir / "codex"))
    assert provider.executable() == bin_dir / "codex"
    assert (await provider.invoke(ask(question="Q"))).text == "ANSWER: Q"


@pytest.mark.slow
async def test_non_zero_exit(repo: Path, record: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_CODEX_MODE", "fail")
    with pytest.raises(AgentProcessError) as info:
        await codex().invoke(ask(question="Q"))
    assert str(info.value) == "Codex CLI exited with code 3: fake codex: model refused the request"
    assert info.value.exit_code == 3


@pytest.mark.slow
async def test_no_output(repo: Path, record: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_CODEX_MODE", "silent")
    with pytest.raises(ProviderError, match=r"^Codex CLI produced no output in --json mode$"):
        await codex().invoke(ask(question="Q"))


@pytest.mark.slow
async def test_stream_without_an_answer(
    repo: Path, record: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_CODEX_MODE", "no_answer")
    with pytest.raises(ProviderError) as info:
        await codex().invoke(ask(question="Q"))
    assert str(info.value) == (
        "Codex CLI JSON response did not include an assistant message "
        "(last error: stream disconnected)"
    )


@pytest.mark.slow
async def test_timeout_kills_codex_and_cleans_up(
    repo: Path, record: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_CODEX_MODE", "sleep")
    with pytest.raises(ProviderTimeout, match=r"^Codex CLI timed out after 1s$"):
        await codex(timeout_seconds=0.5).invoke(ask(question="Q"))
    (call,) = calls(record)
    assert not Path(call["cwd"]).exists()


# --- parsing ------------------------------------------------------------------------------------


def test_parse_output_forms() -> None:
    single = {"messages": [{"role": "assistant", "content": [{"text": "a"}, {"text": "b"}]}]}
    assert extract_answer(parse_output(json.dumps(single))) == "a \nb"
    mixed = (
        'warning: not json\n{"type":"item.completed","item":{"type":"agent_message","text":"x"}}'
    )
    assert extract_answer(parse_output(mixed)) == "x"
    assert extract_answer(parse_output('{"output": ["one", {"text": "two"}, 3]}')) == "one \ntwo"
    assert extract_answer(parse_output('{"response": {"content": "r"}}')) == "r"
    assert extract_answer(parse_output('{"type": "turn.completed"}')) is None
    with pytest.raises(ValueError, match="emitted invalid JSON: not json at all"):
        parse_output("not json at all")


def test_summary_lines() -> None:
    assert summarise_line("stdout", '{"type":"turn.started"}') == "turn.started"
    started = '{"type":"item.started","item":{"type":"command_execution","command":"ls"}}'
    assert summarise_line("stdout", started) == "item.started: ls"
    assert summarise_line("stdout", '{"type":"item.started","item":{"type":"x"}}') == (
        "item.started:x"
    )
    assert summarise_line("stdout", "plain") == "plain"
    assert summarise_line("stderr", "plain") == "stderr: plain"


# --- settings -----------------------------------------------------------------------------------


def test_settings_aliases_and_defaults() -> None:
    settings = CodexSettings.model_validate(
        {
            "command": "  ",
            "arguments": ["-c", 'model="o3"', 5],
            "timeoutSeconds": 30,
            "logDirectory": "logs",
            "logOutputFormat": " JSON ",
        }
    )
    assert settings.executable == "codex"
    assert settings.args == ("-c", 'model="o3"', "5")
    assert settings.log_format == "json"
    assert settings.log_dir == "logs"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"log_format": "yaml"}, "codex log format must be 'summary' or 'json'"),
        ({"args": "--model o3"}, "must be a list of strings"),
        ({"args": ["ok", ""]}, "every argument must be a non-empty string"),
        ({"timeout_seconds": -1}, "greater than zero seconds"),
        ({"sandbox": "none"}, "sandbox"),
    ],
)
def test_settings_errors(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as info:
        CodexSettings.model_validate(fields)
    assert message in str(info.value)


async def test_bad_log_format_from_environment(
    repo: Path, record: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTV_CODEX_LOG_FORMAT", "xml")
    with pytest.raises(ProviderError, match="codex log format must be 'summary' or 'json'"):
        await codex().invoke(ask(question="Q"))


@pytest.mark.slow
async def test_hostile_text_and_file_names_reach_codex_verbatim(
    repo: Path, record: Path, tmp_path: Path
) -> None:
    odd = tmp_path / "a]b\n$(touch PWNED) [x].md"
    odd.write_text("x")
    question = "'; touch PWNED; '\n`touch PWNED` $(touch PWNED) \x01\x7f\u202e"
    await codex().invoke(ask(question=question, input_files=[odd]))
    (call,) = calls(record)
    assert call["prompt"].endswith(f"[[ ## user_query ## ]]\n\n{question.strip()}")
    # the link stays on one line, its text escaped, its target percent-encoded
    link = call["prompt"].splitlines()[1]
    assert link == f"* [a\\]b $(touch PWNED) \\[x\\].md]({odd.as_uri()})."
    assert not (repo / "PWNED").exists() and not (tmp_path / "PWNED").exists()


def test_the_run_folder_sets_the_default_log_folder_but_not_the_cache_key(tmp_path: Path) -> None:
    from agentv.run.cache import cache_key
    from agentv.targets import TargetDefinition, create_provider

    def built(folder: str, **fields: Any) -> Any:
        definition = TargetDefinition(name="cx", kind="codex", provider="codex", fields=fields)
        return create_provider(definition, env={}, cwd=tmp_path / folder)

    a, b = built("a"), built("b")
    assert a.settings.log_dir == str(tmp_path / "a" / ".agentv" / "logs" / "codex")
    assert b.settings.log_dir == str(tmp_path / "b" / ".agentv" / "logs" / "codex")
    request = ask(question="Q", eval_id="e")
    # where logs go cannot change an answer: one cache entry wherever the run starts
    assert cache_key(a, request) == cache_key(b, request)
    assert cache_key(a, request) == cache_key(built("a", log_format="json"), request)
    assert cache_key(a, request) != cache_key(built("a", args=["--model", "o3"]), request)
    assert built("a", log_dir="/elsewhere").settings.log_dir == "/elsewhere"  # given: kept
