"""``provider: vscode``: the subagent protocol against a fake ``code`` launcher on PATH."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from agentv.errors import ProviderError, ProviderTimeout
from agentv.providers.agents.vscode import (
    LOCK_FILE,
    VSCodeInsidersProvider,
    VSCodeProvider,
    VSCodeSettings,
    build_workspace,
    provision_subagents,
    workspace_file,
)
from support.agents import FAKE_CODE, install_script
from support.providers import ask


@pytest.fixture
def state(bin_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fake ``code`` on PATH; returns its state folder (``calls.jsonl`` logs each call)."""
    install_script(bin_dir, "code", FAKE_CODE)
    folder = tmp_path / "code-state"
    folder.mkdir()
    monkeypatch.setenv("FAKE_CODE_STATE", str(folder))
    monkeypatch.setenv("FAKE_CODE_DELAY", "0.2")
    return folder


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "subagents"


def vscode(root: Path, cls: type[VSCodeProvider] = VSCodeProvider, **fields: Any) -> VSCodeProvider:
    provider = cls("copilot", VSCodeSettings.model_validate({"subagent_root": str(root), **fields}))
    # fast polling for tests; the protocol is the same
    provider.poll_interval = 0.05
    provider.settle_delay = 0.0
    provider.ready_timeout = 5.0
    return provider


def code_calls(state: Path) -> list[list[str]]:
    path = state / "calls.jsonl"
    return [json.loads(line)["argv"] for line in path.read_text().splitlines()]


@pytest.fixture
def case_files(tmp_path: Path) -> tuple[Path, Path]:
    guideline = tmp_path / "repo" / "style.instructions.md"
    guideline.parent.mkdir(parents=True, exist_ok=True)
    guideline.write_text("Be brief.")
    attachment = tmp_path / "repo" / "data.csv"
    attachment.write_text("a,b\n")
    return guideline, attachment


@pytest.mark.slow
async def test_single_dispatch_wakes_the_workspace_and_reads_the_response(
    state: Path, root: Path, case_files: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_CODE_OPEN", "0")  # --status never lists it: wake-up path
    guideline, attachment = case_files
    provider = vscode(root)
    await provider.healthcheck()
    folder = root / "subagent-1"
    assert workspace_file(folder).is_file()
    assert (folder / ".github" / "agents" / "wakeup.md").is_file()

    question = '@[User]:\nSummarise <file: path="data.csv">\n\n@[User]:\nThanks'
    response = await provider.invoke(
        ask(
            question=question,
            guideline_paths=[guideline],
            input_files=[attachment],
            eval_id="c1",
            timeout=30,
        )
    )
    assert response.text == f"vscode says: {question}"

    workspace = str(workspace_file(folder))
    calls = code_calls(state)
    assert calls[0] == ["--status"]
    assert calls[1] == [workspace]
    assert calls[2] == ["-r", "chat", "-m", "wakeup", "create a file named .alive"]
    chat = calls[3]
    assert chat[:3] == ["-r", "chat", "-m"] and re.fullmatch(r"[0-9a-f]{8}", chat[3])
    request_file = Path(response.sent["request_file"])
    assert re.fullmatch(r"\d{14}_req\.md", request_file.name)
    assert chat[4:] == [
        "-a",
        str(guideline),
        "-a",
        str(attachment),
        "-a",
        str(request_file),
        f"Follow instructions in {request_file.name}",
    ]
    assert response.sent["commands"] == [["code", *c] for c in calls]

    document = request_file.read_text()
    assert document == response.sent["request_document"]
    assert document.startswith("[[ ## task ## ]]\n\nRead all guideline files:\n")
    assert "Read all attachment files:\n" in document
    assert "[[ ## system_instructions ## ]]" in document
    assert (folder / ".alive").exists()
    assert not (folder / LOCK_FILE).exists()  # released after reading
    assert Path(response.raw["response_file"]).read_text() == response.text


@pytest.mark.slow
async def test_an_open_workspace_is_focused_without_waking_it(state: Path, root: Path) -> None:
    provider = vscode(root)
    await provider.invoke(ask(question="first"))
    before = len(code_calls(state))
    response = await provider.invoke(ask(question="second"))
    assert response.text == "vscode says: second"
    calls = code_calls(state)[before:]
    workspace = str(workspace_file(root / "subagent-1"))
    assert calls[:2] == [["--status"], [workspace]]
    assert len(calls) == 3 and calls[2][:2] == ["-r", "chat"]  # no wake-up chat


@pytest.mark.slow
async def test_batch_dispatch_answers_every_request_in_order(
    state: Path, root: Path, case_files: tuple[Path, Path]
) -> None:
    guideline, attachment = case_files
    provider = vscode(root)
    requests = [
        ask(question="one", guideline_paths=[guideline], timeout=10),
        ask(question="two", input_files=[attachment], timeout=10),
        ask(question="three", timeout=10),
    ]
    responses = await provider.invoke_batch(requests)
    assert [r.text for r in responses] == [
        "vscode says: one",
        "vscode says: two",
        "vscode says: three",
    ]

    chat = code_calls(state)[-1]
    orchestrator = Path(responses[0].sent["orchestrator_file"])
    assert re.fullmatch(r"\d{14}_orchestrator\.md", orchestrator.name)
    assert chat[4:6] == ["-a", str(orchestrator)]
    assert chat[6:10] == ["-a", str(guideline), "-a", str(attachment)]
    assert chat[-1] == (
        f"Follow instructions in [{orchestrator.name}]({orchestrator.as_uri()}). "
        "Use #runSubagent tool."
    )
    listed = re.findall(r"^\* messages/(\S+)$", orchestrator.read_text(), re.M)
    assert listed == [Path(r.sent["request_file"]).name for r in responses]
    assert [r.raw["batch_index"] for r in responses] == [0, 1, 2]
    # batch requests leave unlocking to the orchestrator (and to agentv)
    assert "rm -f" not in responses[0].sent["request_document"]
    assert not (root / "subagent-1" / LOCK_FILE).exists()


@pytest.mark.slow
async def test_missing_response_times_out_and_releases_the_subagent(
    state: Path, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_CODE_RESPOND", "0")
    provider = vscode(root)
    with pytest.raises(ProviderTimeout) as info:
        await provider.invoke(ask(question="anyone?", timeout=0.5))
    message = str(info.value)
    assert message.startswith("VS Code subagent did not write its response within 1s")
    assert "_res.md" in message and "--agent-timeout" in message
    assert not (root / "subagent-1" / LOCK_FILE).exists()
    with pytest.raises(ProviderTimeout):
        await provider.invoke_batch([ask(question="a", timeout=0.2)] * 2)


async def test_dry_run_sends_nothing(state: Path, root: Path) -> None:
    provider = vscode(root, dryRun=True)
    await provider.healthcheck()
    response = await provider.invoke(ask(question="Q"))
    assert response.text == ""
    assert response.sent["prompt"] == "[[ ## user_query ## ]]\n\nQ"
    batch = await provider.invoke_batch([ask(question="a"), ask(question="b")])
    assert [r.text for r in batch] == ["", ""]
    assert not root.exists()
    assert not (state / "calls.jsonl").exists()


@pytest.mark.slow
async def test_wait_false_returns_at_once_and_leaves_the_lock_to_the_agent(
    state: Path, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_CODE_RESPOND", "0")
    provider = vscode(root, wait=False)
    response = await provider.invoke(ask(question="Q"))
    assert response.text == ""
    assert response.raw["waited"] is False
    assert (root / "subagent-1" / LOCK_FILE).exists()


async def test_busy_subagents_give_a_clear_error(state: Path, root: Path) -> None:
    provider = vscode(root)
    await provider.healthcheck()
    (root / "subagent-1" / LOCK_FILE).write_text("")
    with pytest.raises(ProviderError, match="No unlocked subagents available under"):
        await provider.invoke(ask(question="Q"))


@pytest.mark.slow
async def test_launch_failure_and_missing_attachment(
    state: Path, root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    provider = vscode(root)
    with pytest.raises(ProviderError, match=r"Attachment not found: .*missing\.txt"):
        await provider.invoke(ask(question="Q", input_files=[tmp_path / "missing.txt"]))
    monkeypatch.setenv("FAKE_CODE_BROKEN", "1")
    with pytest.raises(ProviderError) as info:
        await provider.invoke(ask(question="Q"))
    assert str(info.value).startswith(
        "Failed to launch VS Code for subagent session: `code` exited with code 1: "
    )
    assert not (root / "subagent-1" / LOCK_FILE).exists()


async def test_missing_code_command_says_how_to_fix_it(bin_dir: Path, root: Path) -> None:
    provider = vscode(root, vscode_cmd="code-not-installed")
    with pytest.raises(ProviderError) as info:
        await provider.healthcheck()
    assert "VS Code command 'code-not-installed' was not found on PATH" in str(info.value)
    assert "set `vscode_cmd` on target 'copilot'" in str(info.value)


def test_insiders_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    provider = VSCodeInsidersProvider("ins", VSCodeSettings())
    assert provider.command == "code-insiders"
    assert provider.root == tmp_path / ".subagent" / "vscode-insiders-agents"
    assert VSCodeProvider("vs", VSCodeSettings()).root == tmp_path / ".subagent" / "vscode-agents"
    assert VSCodeProvider.is_agent and VSCodeProvider.supports_batch


def test_provisioning_reuses_free_folders_and_skips_locked_ones(root: Path) -> None:
    first = provision_subagents(root, 2)
    assert [p.name for p in first.created] == ["subagent-1", "subagent-2"]
    (root / "subagent-1" / LOCK_FILE).write_text("")
    second = provision_subagents(root, 2)
    assert [p.name for p in second.skipped_locked] == ["subagent-1"]
    assert [p.name for p in second.reused] == ["subagent-2"]
    assert [p.name for p in second.created] == ["subagent-3"]
    settings = json.loads(workspace_file(root / "subagent-3").read_text())["settings"]
    assert settings["chat.modeFilesLocations"] == {".github/agents/**/*.md": True}


def test_workspace_template_paths_are_made_absolute(tmp_path: Path) -> None:
    template = tmp_path / "templates" / "eval.code-workspace"
    template.parent.mkdir()
    template.write_text(
        json.dumps(
            {
                "folders": [{"path": "../project", "name": "project"}],
                "settings": {
                    "chat.promptFilesLocations": {"prompts/**": True},
                    "editor.tabSize": 2,
                },
                "extensions": {"recommendations": ["x"]},
            }
        )
    )
    folder = tmp_path / "subagent-1"
    workspace = build_workspace(folder, template)
    assert workspace["folders"] == [
        {"path": "."},
        {"path": (template.parent / "../project").as_posix(), "name": "project"},
    ]
    prompt_locations = workspace["settings"]["chat.promptFilesLocations"]
    assert prompt_locations == {(template.parent / "prompts/**").as_posix(): True}
    assert workspace["settings"]["editor.tabSize"] == 2
    assert workspace["extensions"] == {"recommendations": ["x"]}
    bad = tmp_path / "bad.code-workspace"
    bad.write_text('{"settings": {}}')
    with pytest.raises(ValueError, match="must have a 'folders' list"):
        build_workspace(folder, bad)


async def test_template_errors_are_reported(state: Path, root: Path, tmp_path: Path) -> None:
    with pytest.raises(ProviderError, match="workspace template not found"):
        await vscode(root, workspaceTemplate=str(tmp_path / "nope.json")).healthcheck()
    with pytest.raises(ProviderError, match="must be a file, not a directory"):
        await vscode(root, workspace_template=str(tmp_path)).healthcheck()


def test_settings_aliases() -> None:
    settings = VSCodeSettings.model_validate(
        {"command": "code", "dryRun": "true", "wait": "false", "subagentRoot": " ~/agents "}
    )
    assert (settings.vscode_cmd, settings.dry_run, settings.wait) == ("code", True, False)
    assert settings.subagent_root == "~/agents"
