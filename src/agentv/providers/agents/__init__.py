"""Agent targets: programs run as child processes (``cli``, ``codex``, ``vscode``).

``setup_warnings`` tells, without running anything, what would stop such a target on this
machine (a program that is not installed, a working directory that does not exist), for
``agentv validate``.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agentv.providers.base import ProviderSettings

#: The kinds ``setup_warnings`` knows how to check.
CHECKED_KINDS: frozenset[str] = frozenset({"cli", "codex", "vscode", "vscode-insiders"})


def _pending(raw: str | None) -> bool:
    """True for a value still holding a ``${{ VAR }}`` reference: it is only known when the
    target runs (``validate`` never reads the environment), so it cannot be checked here."""
    return raw is not None and "${{" in raw


def _missing_folder(raw: str | None, what: str) -> list[str]:
    if raw and not _pending(raw) and not Path(raw).expanduser().is_dir():
        return [f"{what} '{raw}' does not exist"]
    return []


def setup_warnings(kind: str, name: str, settings: ProviderSettings) -> list[str]:
    """What would stop target ``name`` of ``kind`` here, each said with how to fix it.

    Values that still hold ``${{ VAR }}`` references are skipped.
    """
    problems: list[str] = []
    if kind == "cli":
        from agentv.providers.agents.cli import CliSettings, CommandHealthcheck

        assert isinstance(settings, CliSettings)
        problems += _missing_folder(settings.cwd, "working directory (`cwd`)")
        if isinstance(settings.healthcheck, CommandHealthcheck):
            problems += _missing_folder(settings.healthcheck.cwd, "healthcheck `cwd`")
    elif kind == "codex":
        from agentv.providers.agents.codex import (
            CodexSettings,
            locate_executable,
            missing_executable_message,
        )

        assert isinstance(settings, CodexSettings)
        executable = settings.executable
        if not _pending(executable) and locate_executable(executable) is None:
            problems.append(missing_executable_message(executable, name))
        problems += _missing_folder(settings.cwd, "working directory (`cwd`)")
    elif kind in ("vscode", "vscode-insiders"):
        from agentv.providers.agents.vscode import VSCodeSettings

        assert isinstance(settings, VSCodeSettings)
        command = settings.vscode_cmd or ("code-insiders" if kind == "vscode-insiders" else "code")
        if not settings.dry_run and not _pending(command) and shutil.which(command) is None:
            problems.append(
                f"VS Code command '{command}' was not found on PATH; install VS Code's "
                f"command-line launcher or set `vscode_cmd` on target '{name}'"
            )
        template = settings.workspace_template
        if template and not _pending(template) and not Path(template).expanduser().is_file():
            problems.append(f"workspace template '{template}' does not exist")
    return problems
