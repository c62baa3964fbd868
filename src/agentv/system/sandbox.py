"""Where an agent and a workspace's graders run: on the machine, under bubblewrap, or in a
Docker container (docs/targets.md, "Sandboxes").

A ``Sandbox`` turns a command into the command that runs it confined (``wrap``): only the
workspace (and the call's own scratch folders) writable, the rest of the file system
read-only, the network off unless allowed, the environment the caller chose passed on
unchanged (the rule of what agents inherit: ``agentv.system.env``).

- ``bwrap`` (bubblewrap, the sandbox Flatpak and Claude Code use on Linux): the whole file
  system bound read-only at its own paths, so paths in prompts and commands mean the same
  inside; ``/dev``, ``/proc`` and a private ``TMPDIR`` of the sandbox's own; new PID, IPC
  and (without network) network namespaces; the sandbox dies with agentv.
- ``docker``: a container of the given image with the workspace mounted at its own path,
  a read-only root, ``/tmp`` in memory, no network unless allowed, the caller's user and
  group (files it writes are the user's); ended (``docker rm -f``) when the call ends,
  whatever ended it.

What a sandboxed program tried and was refused is known from what it printed: the kernel's
refusals (``Read-only file system``, ``Network is unreachable``, a failed name lookup, a
refused connection when the network is off) in its output are noted (``observe``), and the
record says so. A program that hides its errors hides its attempts too.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agentv.errors import WorkspaceError
from agentv.system.env import run_environment

#: the most refusals of each kind a record quotes
MAX_EVIDENCE = 5
#: characters of each quoted line
EVIDENCE_CHARS = 240

_WRITE_REFUSED = re.compile(r"read-only file system|\bEROFS\b", re.IGNORECASE)
_NETWORK_REFUSED = re.compile(
    r"network is unreachable|\bENETUNREACH\b|temporary failure in name resolution|"
    r"\bEAI_AGAIN\b|could not resolve host|name or service not known|"
    r"getaddrinfo (?:ENOTFOUND|EAI_AGAIN)|failed to resolve|"
    # without a network, the sandbox's own loopback has nothing listening on it
    r"connection refused|\bECONNREFUSED\b",
    re.IGNORECASE,
)
#: variables that describe the machine outside, not the container
_HOST_ONLY = frozenset(
    {"PATH", "HOME", "SHELL", "TMPDIR", "TMP", "TEMP", "PWD", "OLDPWD", "HOSTNAME", "USER"}
)
INSTALL_BWRAP = (
    "bubblewrap (bwrap) is not installed; install it (apt-get install bubblewrap, "
    "dnf install bubblewrap), or set `isolation: none` to run the agent unsandboxed"
)


@dataclass
class Refusals:
    """What sandboxed programs tried and were refused, as their output says."""

    writes: list[str] = field(default_factory=list)
    network: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        if self.writes:
            out["writes_refused"] = self.writes
        if self.network:
            out["network_refused"] = self.network
        return out


@dataclass(frozen=True, slots=True)
class Wrapped:
    """A command as the sandbox runs it: ``command`` (an argument list, or a shell line
    when it was one and no sandbox applies), in ``cwd``; ``name``: the container to end
    afterwards (docker)."""

    command: list[str] | str
    cwd: Path | None
    name: str | None = None


class Sandbox:
    """Runs commands confined to a workspace.

    Args:
        kind: ``none``, ``bwrap`` or ``docker``.
        workspace: The folder the programs may write.
        network: Whether they may connect out.
        image: The container image (docker).
        writable: More folders they may write (made when missing).
    """

    def __init__(
        self,
        kind: str,
        workspace: Path,
        *,
        network: bool = False,
        image: str | None = None,
        writable: Sequence[Path] = (),
    ) -> None:
        self.kind = kind
        self.workspace = workspace
        self.network = network
        self.image = image
        self.writable = tuple(writable)
        self.refused = Refusals()
        self._scratch: list[Path] = []

    @property
    def active(self) -> bool:
        """Whether commands are confined (``kind`` is not ``none``)."""
        return self.kind != "none"

    def check(self) -> None:
        """``WorkspaceError`` when the sandbox cannot run on this machine (its program is
        missing), said before anything runs."""
        if self.kind == "bwrap" and _which("bwrap") is None:
            raise WorkspaceError(INSTALL_BWRAP)
        if self.kind == "docker" and _which("docker") is None:
            raise WorkspaceError(
                "docker is not installed: `isolation: docker` needs the docker command and a "
                "Docker daemon it can reach (https://docs.docker.com/engine/install/)"
            )

    def wrap(
        self,
        command: Sequence[str] | str,
        *,
        cwd: Path | None,
        env: Mapping[str, str],
        writable: Sequence[Path] = (),
    ) -> tuple[Wrapped, dict[str, str]]:
        """``command`` as it runs in the sandbox, and the environment to start it with.

        Args:
            command: An argument list, or a shell line.
            cwd: Where it runs (default: the workspace).
            env: What the program inherits.
            writable: The call's own folders it must write (an output file's folder).
        """
        cwd = cwd or self.workspace
        if self.kind == "none":
            return Wrapped(command if isinstance(command, str) else list(command), cwd), dict(env)
        argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
        if self.kind == "bwrap":
            return self._bwrap(argv, cwd, env, writable)
        return self._docker(argv, cwd, env, writable)

    def _scratch_dir(self) -> Path:
        """A private ``TMPDIR`` for the sandboxed program, removed by ``close``."""
        folder = Path(tempfile.mkdtemp(prefix="agentv-sandbox-tmp-"))
        self._scratch.append(folder)
        return folder

    def _bwrap(
        self, argv: list[str], cwd: Path, env: Mapping[str, str], writable: Sequence[Path]
    ) -> tuple[Wrapped, dict[str, str]]:
        executable = _which("bwrap")
        if executable is None:
            raise WorkspaceError(INSTALL_BWRAP)
        scratch = self._scratch_dir()
        command = [
            executable,
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
        ]
        for folder in (self.workspace, scratch, *self.writable, *writable):
            folder.mkdir(parents=True, exist_ok=True)
            command += ["--bind", str(folder), str(folder)]
        command += ["--unshare-pid", "--unshare-ipc", "--unshare-uts"]
        if not self.network:
            command.append("--unshare-net")
        command += ["--die-with-parent", "--new-session", "--chdir", str(cwd), "--", *argv]
        inner = {**env, "TMPDIR": str(scratch), "TMP": str(scratch), "TEMP": str(scratch)}
        return Wrapped(command, cwd), inner

    def _docker(
        self, argv: list[str], cwd: Path, env: Mapping[str, str], writable: Sequence[Path]
    ) -> tuple[Wrapped, dict[str, str]]:
        assert self.image is not None
        command, name = docker_command(
            self.image,
            argv,
            workspace=self.workspace,
            cwd=cwd,
            env=env,
            network=self.network,
            writable=(*self.writable, *writable),
        )
        return Wrapped(command, None, name), {**env}

    def observe(self, *texts: str) -> None:
        """Note what a sandboxed program's output says it was refused."""
        if not self.active:
            return
        for text in texts:
            if not text:
                continue
            for line in text.splitlines():
                if _WRITE_REFUSED.search(line):
                    _note(self.refused.writes, line)
                elif not self.network and _NETWORK_REFUSED.search(line):
                    _note(self.refused.network, line)

    async def finish(self, wrapped: Wrapped) -> None:
        """End what outlives the call (a container left running by a timeout)."""
        if wrapped.name is None:
            return
        from agentv.system.process import run_process

        docker = _which("docker")
        if docker is None:
            return
        with contextlib.suppress(OSError):
            await run_process([docker, "rm", "-f", wrapped.name], timeout=60)

    def close(self) -> None:
        """Remove the sandbox's scratch folders."""
        for folder in self._scratch:
            shutil.rmtree(folder, ignore_errors=True)
        self._scratch.clear()

    def describe(self) -> dict[str, object]:
        """What a record says of the sandbox."""
        out: dict[str, object] = {"isolation": self.kind}
        if self.active:
            out["network"] = self.network
            if self.image:
                out["image"] = self.image
            out.update(self.refused.to_dict())
        return out


def docker_command(
    image: str,
    argv: Sequence[str],
    *,
    workspace: Path,
    cwd: Path,
    env: Mapping[str, str],
    network: bool,
    writable: Sequence[Path] = (),
    name: str | None = None,
    uid: int | None = None,
    gid: int | None = None,
) -> tuple[list[str], str]:
    """The ``docker run`` line that runs ``argv`` in ``image`` with the workspace mounted at
    its own path, and the container's name.

    Variables are passed by name only (``-e NAME``): docker takes their values from its own
    environment, so no value (a key) is ever on a command line for ``ps`` to show. Those
    that describe the machine outside (``PATH``, ``HOME``...) are left to the image.
    """
    name = name or f"agentv-{uuid.uuid4().hex[:16]}"
    uid = os.getuid() if uid is None and hasattr(os, "getuid") else uid
    gid = os.getgid() if gid is None and hasattr(os, "getgid") else gid
    command = [
        _which("docker") or "docker",
        "run",
        "--rm",
        "-i",
        "--init",
        "--name",
        name,
        "--read-only",
        "--tmpfs",
        "/tmp:exec",
        "--network",
        "bridge" if network else "none",
    ]
    if uid is not None:
        command += ["--user", f"{uid}:{gid}"]
    for folder in (workspace, *writable):
        command += ["--volume", f"{folder}:{folder}:rw"]
    command += ["--workdir", str(cwd), "--env", "HOME=/tmp", "--env", "TMPDIR=/tmp"]
    for variable in sorted(env):
        if variable not in _HOST_ONLY:
            command += ["--env", variable]
    command += ["--", image, *argv]
    return command, name


def _note(found: list[str], line: str) -> None:
    line = " ".join(line.split())
    if len(line) > EVIDENCE_CHARS:
        line = line[: EVIDENCE_CHARS - 3] + "..."
    if line not in found and len(found) < MAX_EVIDENCE:
        found.append(line)


def _which(program: str) -> str | None:
    return shutil.which(program, path=run_environment().get("PATH"))


def shell_line(argv: Sequence[str]) -> str:
    """An argument list as one shell line (for messages and previews)."""
    return shlex.join(argv)
