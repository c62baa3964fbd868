"""Sandboxes: bubblewrap for real (installed by ``make test``), docker's command line."""

from __future__ import annotations

import os
import shlex
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentv.errors import WorkspaceError
from agentv.system.process import run_process
from agentv.system.sandbox import Sandbox, docker_command

PY = shlex.quote(sys.executable)


@pytest.fixture
def listener() -> Iterator[tuple[int, list[str]]]:
    """A TCP server on 127.0.0.1 that notes each connection it accepts."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    accepted: list[str] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            accepted.append("connected")
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    server.close()


def _connect(port: int) -> str:
    return f"{PY} -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=10)\""


async def _run(sandbox: Sandbox, command: str) -> tuple[int | None, str]:
    wrapped, env = sandbox.wrap(command, cwd=None, env=dict(os.environ))
    try:
        result = await run_process(wrapped.command, cwd=wrapped.cwd, env=env, timeout=120)
    finally:
        await sandbox.finish(wrapped)
    sandbox.observe(result.stdout, result.stderr)
    return result.exit_code, result.stdout + result.stderr


@pytest.mark.slow  # bubblewrap runs
async def test_bwrap_lets_the_workspace_be_written_and_nothing_else(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    extra = tmp_path / "cache"
    sandbox = Sandbox("bwrap", ws, writable=[extra])
    sandbox.check()
    outside = tmp_path / "outside.txt"
    code, output = await _run(
        sandbox,
        f"echo in > inside.txt && echo c > {extra}/c.txt && echo $TMPDIR > tmpdir.txt && "
        f"echo t > $TMPDIR/t.txt && echo out > {outside}",
    )
    assert code != 0
    assert (ws / "inside.txt").read_text() == "in\n"
    assert (extra / "c.txt").read_text() == "c\n"
    assert not outside.exists()
    # its TMPDIR is its own, writable, and gone once the sandbox closes
    scratch = Path((ws / "tmpdir.txt").read_text().strip())
    assert (scratch / "t.txt").read_text() == "t\n"
    sandbox.close()
    assert not scratch.exists()
    assert sandbox.describe() == {
        "isolation": "bwrap",
        "network": False,
        "writes_refused": [f"/bin/sh: 1: cannot create {outside}: Read-only file system"],
    }
    assert "Read-only file system" in output


@pytest.mark.slow  # bubblewrap runs
async def test_bwrap_without_network_refuses_connections(
    tmp_path: Path, listener: tuple[int, list[str]]
) -> None:
    port, accepted = listener
    sandbox = Sandbox("bwrap", tmp_path)
    code, _ = await _run(sandbox, _connect(port))
    assert code != 0 and accepted == []
    assert sandbox.describe() == {
        "isolation": "bwrap",
        "network": False,
        "network_refused": ["ConnectionRefusedError: [Errno 111] Connection refused"],
    }
    sandbox.close()

    allowed = Sandbox("bwrap", tmp_path, network=True)
    code, output = await _run(allowed, _connect(port))
    assert (code, accepted) == (0, ["connected"]), output
    assert allowed.describe() == {"isolation": "bwrap", "network": True}
    allowed.close()


async def test_no_sandbox_runs_the_command_as_it_is(tmp_path: Path) -> None:
    sandbox = Sandbox("none", tmp_path)
    wrapped, env = sandbox.wrap("echo hi", cwd=None, env={"A": "1"})
    assert (wrapped.command, wrapped.cwd, env) == ("echo hi", tmp_path, {"A": "1"})
    sandbox.observe("Read-only file system")  # not a sandbox's refusal
    assert sandbox.describe() == {"isolation": "none"}


def test_a_missing_sandbox_program_is_said_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(WorkspaceError) as caught:
        Sandbox("bwrap", tmp_path).check()
    assert str(caught.value) == (
        "bubblewrap (bwrap) is not installed; install it (apt-get install bubblewrap, "
        "dnf install bubblewrap), or set `isolation: none` to run the agent unsandboxed"
    )
    with pytest.raises(WorkspaceError) as caught:
        Sandbox("docker", tmp_path, image="python:3.12").check()
    assert str(caught.value).startswith("docker is not installed: `isolation: docker` needs")


def test_the_docker_command_line(tmp_path: Path) -> None:
    ws, cache = tmp_path / "ws", tmp_path / "cache"
    command, name = docker_command(
        "python:3.12-slim",
        ["/bin/sh", "-c", "pytest -q"],
        workspace=ws,
        cwd=ws / "app",
        env={"PATH": "/usr/bin", "HOME": "/root", "ANTHROPIC_API_KEY": "sk-x", "LANG": "C"},
        network=False,
        writable=[cache],
        name="agentv-test",
        uid=1000,
        gid=1000,
    )
    assert name == "agentv-test"
    assert command[1:] == [
        "run",
        "--rm",
        "-i",
        "--init",
        "--name",
        "agentv-test",
        "--read-only",
        "--tmpfs",
        "/tmp:exec",
        "--network",
        "none",
        "--user",
        "1000:1000",
        "--volume",
        f"{ws}:{ws}:rw",
        "--volume",
        f"{cache}:{cache}:rw",
        "--workdir",
        str(ws / "app"),
        "--env",
        "HOME=/tmp",
        "--env",
        "TMPDIR=/tmp",
        # by name only: docker reads the values from its own environment, never argv
        "--env",
        "ANTHROPIC_API_KEY",
        "--env",
        "LANG",
        "--",
        "python:3.12-slim",
        "/bin/sh",
        "-c",
        "pytest -q",
    ]
    assert "sk-x" not in " ".join(command)
    online, _ = docker_command(
        "img", ["true"], workspace=ws, cwd=ws, env={}, network=True, uid=0, gid=0
    )
    assert online[online.index("--network") + 1] == "bridge"


def test_a_docker_sandbox_wraps_a_shell_line_in_its_container(tmp_path: Path) -> None:
    sandbox = Sandbox("docker", tmp_path, image="node:22")
    wrapped, env = sandbox.wrap("npm test", cwd=None, env={"CI": "1"})
    assert isinstance(wrapped.command, list) and wrapped.cwd is None
    assert wrapped.command[-5:] == ["--", "node:22", "/bin/sh", "-c", "npm test"]
    assert wrapped.name is not None and wrapped.name in wrapped.command
    assert env == {"CI": "1"}
    assert sandbox.describe() == {"isolation": "docker", "network": False, "image": "node:22"}
