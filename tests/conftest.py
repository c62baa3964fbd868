"""Shared test fixtures.

No test may reach beyond 127.0.0.1, and no test may see a real API key: the autouse
fixture below removes every credential-looking variable from the environment.

A test that starts a process (agentv, an agent, a script, Ray, a browser, npm) is marked
``slow`` (docs/testing.md): ``make test-fast`` leaves those out. The second autouse fixture
keeps the marker honest: a test without it that starts a process fails, naming the process.
"""

from __future__ import annotations

import os
import platform
import sys
from pathlib import Path
from typing import Any

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


#: the audit events (PEP 578) of a process being started, and what each names first
_STARTS = {"subprocess.Popen": 1, "os.posix_spawn": 1, "os.fork": None, "os.exec": 1}
#: processes started by the running test while it is watched (it is not marked slow)
_started: list[str] = []
_watching = False


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _watching and event in _STARTS:
        where = _STARTS[event]
        named = args[where] if where is not None and len(args) > where else ()
        words = [os.fsdecode(a) for a in named] if isinstance(named, list | tuple) else [named]
        _started.append(" ".join(str(w) for w in words[:3])[:120] or event)


sys.addaudithook(_audit)
# The standard library asks `uname -p` once per process, when something first wants the
# machine's processor (the SDKs' platform headers): asked here, before any test, it is no
# test's process.
platform.processor()


@pytest.fixture(autouse=True)
def _slow_if_it_starts_processes(request: pytest.FixtureRequest) -> Any:
    global _watching
    _started.clear()
    _watching = request.node.get_closest_marker("slow") is None
    yield
    _watching = False
    if _started:
        pytest.fail(
            f"{request.node.nodeid} started a process ({_started[0]}) but is not marked slow: "
            "add @pytest.mark.slow (docs/testing.md)",
            pytrace=False,
        )
