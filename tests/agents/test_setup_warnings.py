"""``setup_warnings``: what `agentv validate` can say about agent targets on this machine."""

from __future__ import annotations

from pathlib import Path

from agent_helpers import HERE, install_script

from agentv.providers.agents import setup_warnings
from agentv.providers.agents.cli import CliSettings
from agentv.providers.agents.codex import CodexSettings
from agentv.providers.agents.vscode import VSCodeSettings


def test_missing_codex_executable_says_how_to_install(bin_dir: Path, tmp_path: Path) -> None:
    settings = CodexSettings(executable="codex-missing-here", cwd=str(tmp_path / "nowhere"))
    problems = setup_warnings("codex", "cx", settings)
    assert len(problems) == 2
    assert "npm install -g @openai/codex" in problems[0]
    assert "set `executable` on target 'cx'" in problems[0]
    assert "does not exist" in problems[1]
    install_script(bin_dir, "codex", HERE / "fake_codex.py")
    assert setup_warnings("codex", "cx", CodexSettings()) == []


def test_vscode_and_cli_checks(bin_dir: Path, tmp_path: Path) -> None:
    missing = setup_warnings("vscode-insiders", "ins", VSCodeSettings())
    assert missing and "'code-insiders' was not found on PATH" in missing[0]
    assert setup_warnings("vscode", "vs", VSCodeSettings(dry_run=True)) == []
    install_script(bin_dir, "code", HERE / "fake_code.py")
    assert setup_warnings("vscode", "vs", VSCodeSettings()) == []
    cli = CliSettings.model_validate({"command_template": "x", "cwd": str(tmp_path / "gone")})
    assert setup_warnings("cli", "c", cli) == [
        f"working directory (`cwd`) '{tmp_path / 'gone'}' does not exist"
    ]
