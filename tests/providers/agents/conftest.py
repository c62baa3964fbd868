"""Fixtures for agent target tests: a private ``bin`` folder on PATH for fake programs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty folder put first on PATH."""
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
    return folder
