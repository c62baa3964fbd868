"""Shared test fixtures.

No test may reach beyond 127.0.0.1, and no test may see a real API key: the autouse
fixture below removes every credential-looking variable from the environment.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

_SECRET_MARKERS = ("API_KEY", "APIKEY", "TOKEN", "SECRET")
_SECRET_PREFIXES = ("OPENAI_", "AZURE_OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_", "CODEX_")


@pytest.fixture(autouse=True)
def _no_real_credentials(
    monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory
) -> None:
    for name in list(os.environ):
        upper = name.upper()
        if any(m in upper for m in _SECRET_MARKERS) or upper.startswith(_SECRET_PREFIXES):
            monkeypatch.delenv(name, raising=False)
    # Plain output from rich in CLI tests, whatever terminal runs them.
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    # Workspaces and their repository cache under the tests' own temp folder, never in
    # the user's ~/.cache/agentv (docs/eval-files.md, "Workspaces").
    root = tmp_path_factory.getbasetemp() / "agentv-workspaces"
    monkeypatch.setenv("AGENTV_WORKSPACE_ROOT", str(root))


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty repository root (holds `.git`), also the working directory."""
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    monkeypatch.chdir(root)
    return root
