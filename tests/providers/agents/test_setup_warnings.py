"""``ProviderSettings.setup_warnings``: what `agentv validate` can say about agent targets on this machine."""

from __future__ import annotations

from pathlib import Path

from agentv.providers.agents.cli import CliSettings
from agentv.providers.agents.codex import CodexSettings
from agentv.providers.agents.vscode import VSCodeSettings
from agentv.providers.base import ProviderSettings
from support.agents import FAKE_CODE, FAKE_CODEX, install_script


def test_missing_codex_executable_says_how_to_install(bin_dir: Path, tmp_path: Path) -> None:
    settings = CodexSettings(executable="codex-missing-here", cwd=str(tmp_path / "nowhere"))
    problems = settings.setup_warnings("cx", "codex")
    assert len(problems) == 2
    assert "npm install -g @openai/codex" in problems[0]
    assert "set `executable` on target 'cx'" in problems[0]
    assert "does not exist" in problems[1]
    install_script(bin_dir, "codex", FAKE_CODEX)
    assert CodexSettings().setup_warnings("cx", "codex") == []


def test_vscode_and_cli_checks(bin_dir: Path, tmp_path: Path) -> None:
    missing = VSCodeSettings().setup_warnings("ins", "vscode-insiders")
    assert missing and "'code-insiders' was not found on PATH" in missing[0]
    assert VSCodeSettings(dry_run=True).setup_warnings("vs", "vscode") == []
    install_script(bin_dir, "code", FAKE_CODE)
    assert VSCodeSettings().setup_warnings("vs", "vscode") == []
    cli = CliSettings.model_validate({"command_template": "x", "cwd": str(tmp_path / "gone")})
    assert cli.setup_warnings("c", "cli") == [
        f"working directory (`cwd`) '{tmp_path / 'gone'}' does not exist"
    ]


def test_settings_without_setup_checks_say_nothing() -> None:
    assert ProviderSettings().setup_warnings("t", "openai") == []
