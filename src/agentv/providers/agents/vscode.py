"""``provider: vscode`` / ``vscode-insiders``: GitHub Copilot chat in VS Code as a target.

VS Code has no API to call, so the dispatch goes through files (the "subagent" protocol):

- A *subagent root* (default ``~/.subagent/vscode-agents``, or ``vscode-insiders-agents``)
  holds folders ``subagent-1``, ``subagent-2``... Each is a workspace VS Code opens. A
  folder holding ``subagent.lock`` is busy; a dispatch claims the first free one by creating
  that file, and removes it when the answer has been read.
- The request goes to ``messages/<timestamp>_req.md`` in the claimed folder: the task (the
  pre-read document and the agent-mode question), then instructions to write the answer to
  ``<timestamp>_res.tmp.md`` and rename it to ``<timestamp>_res.md`` when complete.
- The ``code`` command focuses the workspace (``code --status`` tells whether it is already
  open; otherwise it is opened and woken with a ``wakeup`` chat mode that creates
  ``.alive``), then starts a chat: ``code -r chat -m <id> -a <file>... "Follow instructions
  in <timestamp>_req.md"``.
- agentv polls for the final response file, never longer than the request's timeout
  (``--agent-timeout``; 600 s when the request has none).

A batch puts one request file per case in the folder plus an orchestrator file asking the
agent to run one ``#runSubagent`` per request file, and waits for every response file.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import re
import secrets
import shlex
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

from pydantic import AliasChoices, Field

from agentv.errors import ProviderError, ProviderTimeout
from agentv.providers.agents.common import (
    INHERIT_ENV_ALIASES,
    InheritEnv,
    OptionalText,
    file_uri,
    normalise_newlines,
    pending,
    preread_document,
    secret_values,
    unique_paths,
)
from agentv.providers.base import Provider, ProviderRequest, ProviderResponse, ProviderSettings
from agentv.system.env import child_environment
from agentv.system.process import run_process
from agentv.system.readfile import read_input


def _answer(**fields: Any) -> ProviderResponse:
    """An answer of Copilot's: VS Code does not say which tools Copilot called, so it has
    no trajectory."""
    return ProviderResponse(**fields, trajectory=None)


log = logging.getLogger("agentv.vscode")

LOCK_FILE = "subagent.lock"
ALIVE_FILE = ".alive"
KEPT_AGENT_FILES = frozenset({"wakeup.md", "subagent.md"})
#: how long a response is awaited when the request carries no timeout
DEFAULT_RESPONSE_TIMEOUT_S = 600.0
_SUBAGENT_DIR = re.compile(r"^subagent-([1-9][0-9]*)$")
_MODE_FILES_SETTING = "chat.modeFilesLocations"
_LOCATION_SETTINGS = (
    "chat.promptFilesLocations",
    "chat.instructionsFilesLocations",
    "chat.modeFilesLocations",
)
_WAKEUP_AGENT = """---
description: 'Wake-up Signal'
model: GPT-4.1 (copilot)
---
Create a file named .alive in the root of this workspace, then stop.
"""


class VSCodeSettings(ProviderSettings):
    """``provider: vscode`` / ``vscode-insiders`` fields."""

    path_fields: ClassVar[frozenset[str]] = frozenset({"subagent_root", "workspace_template"})
    vscode_cmd: OptionalText = Field(
        default=None, validation_alias=AliasChoices("vscode_cmd", "command")
    )
    wait: bool = True
    dry_run: bool = Field(default=False, validation_alias=AliasChoices("dry_run", "dryRun"))
    subagent_root: OptionalText = Field(
        default=None, validation_alias=AliasChoices("subagent_root", "subagentRoot")
    )
    workspace_template: OptionalText = Field(
        default=None, validation_alias=AliasChoices("workspace_template", "workspaceTemplate")
    )
    #: what the launcher inherits of the run's environment (None: all but the vendors' keys)
    inherit_env: InheritEnv = Field(default=None, validation_alias=INHERIT_ENV_ALIASES)

    def setup_warnings(self, target: str, kind: str) -> list[str]:
        problems = []
        command = self.vscode_cmd or ("code-insiders" if kind == "vscode-insiders" else "code")
        if not self.dry_run and not pending(command) and shutil.which(command) is None:
            problems.append(
                f"VS Code command '{command}' was not found on PATH; install VS Code's "
                f"command-line launcher or set `vscode_cmd` on target '{target}'"
            )
        template = self.workspace_template
        if template and not pending(template) and not Path(template).expanduser().is_file():
            problems.append(f"workspace template '{template}' does not exist")
        return problems


# --- subagent folders ---------------------------------------------------------------------------


def default_subagent_root(insiders: bool = False) -> Path:
    """``~/.subagent/vscode-agents`` (or ``vscode-insiders-agents``)."""
    name = "vscode-insiders-agents" if insiders else "vscode-agents"
    return Path.home() / ".subagent" / name


def subagent_folders(root: Path) -> list[Path]:
    """The ``subagent-<n>`` folders directly under ``root``, in numeric order."""
    if not root.is_dir():
        return []
    found = []
    for entry in root.iterdir():
        match = _SUBAGENT_DIR.match(entry.name)
        if match and entry.is_dir():
            found.append((int(match.group(1)), entry))
    return [path for _, path in sorted(found)]


def workspace_file(folder: Path) -> Path:
    """``<folder>/<folder name>.code-workspace``."""
    return folder / f"{folder.name}.code-workspace"


def _absolute(base: Path, value: str) -> str:
    return value if Path(value).is_absolute() else (base / value).as_posix()


def build_workspace(folder: Path, template: Path | None = None) -> dict[str, Any]:
    """The workspace file for a subagent folder: the folder itself first, then the
    template's folders, with the template's relative paths made absolute against the
    template's own folder. Raises ``ValueError`` for a template that cannot be used."""
    settings: dict[str, Any] = {_MODE_FILES_SETTING: {".github/agents/**/*.md": True}}
    workspace: dict[str, Any] = {"folders": [{"path": "."}], "settings": settings}
    if template is None:
        return workspace
    try:
        data = json.loads(template.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"workspace template {template} is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("folders"), list):
        raise ValueError(f"workspace template {template} must have a 'folders' list")
    base = template.parent.absolute()
    for key, value in data.items():
        if key not in ("folders", "settings"):
            workspace[key] = value
    for entry in data["folders"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("path"), str):
            continue
        path = _absolute(base, entry["path"])
        if Path(path) == folder.absolute():
            continue  # already the first folder
        workspace["folders"].append({**entry, "path": path})
    template_settings = data.get("settings")
    if isinstance(template_settings, dict):
        for key, value in template_settings.items():
            if key in _LOCATION_SETTINGS and isinstance(value, dict):
                value = {_absolute(base, k): v for k, v in value.items()}
                if key == _MODE_FILES_SETTING:
                    value = {**settings[_MODE_FILES_SETTING], **value}
            settings[key] = value
    return workspace


def write_workspace(folder: Path, template: Path | None = None) -> Path:
    """Write the folder's ``.code-workspace`` file and its wake-up chat mode."""
    path = workspace_file(folder)
    path.write_text(json.dumps(build_workspace(folder, template), indent=2) + "\n", "utf-8")
    agents = folder / ".github" / "agents"
    agents.mkdir(parents=True, exist_ok=True)
    (agents / "wakeup.md").write_text(_WAKEUP_AGENT, encoding="utf-8")
    return path


@dataclass(slots=True)
class ProvisionResult:
    """What ``provision_subagents`` did."""

    created: list[Path] = field(default_factory=list)
    reused: list[Path] = field(default_factory=list)
    skipped_locked: list[Path] = field(default_factory=list)


def provision_subagents(root: Path, count: int, template: Path | None = None) -> ProvisionResult:
    """Make sure ``count`` unlocked subagent folders exist under ``root``.

    Existing unlocked folders are reused in numeric order (their workspace file written if
    missing), locked ones skipped, and new folders numbered after the highest existing one.
    """
    result = ProvisionResult()
    root.mkdir(parents=True, exist_ok=True)
    existing = subagent_folders(root)
    for folder in existing:
        if len(result.reused) >= count:
            break
        if (folder / LOCK_FILE).exists():
            result.skipped_locked.append(folder)
            continue
        if not workspace_file(folder).exists():
            write_workspace(folder, template)
        result.reused.append(folder)
    number = max((int(f.name.split("-")[1]) for f in existing), default=0)
    while len(result.reused) + len(result.created) < count:
        number += 1
        folder = root / f"subagent-{number}"
        folder.mkdir()
        write_workspace(folder, template)
        result.created.append(folder)
    return result


def _prepare(folder: Path, template: Path | None) -> None:
    write_workspace(folder, template)
    messages = folder / "messages"
    messages.mkdir(exist_ok=True)
    for entry in messages.iterdir():
        if entry.is_file() or entry.is_symlink():
            entry.unlink()
    agents = folder / ".github" / "agents"
    for entry in agents.glob("*.md"):
        if entry.name not in KEPT_AGENT_FILES:
            entry.unlink()


def claim_subagent(root: Path, template: Path | None = None) -> Path:
    """Lock the first free subagent folder and prepare it for a request.

    The lock file is created exclusively, so two dispatches never share a folder.
    Raises ``RuntimeError`` when every folder is busy.
    """
    for folder in subagent_folders(root):
        lock = folder / LOCK_FILE
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            continue
        os.close(fd)
        try:
            _prepare(folder, template)
        except BaseException:
            lock.unlink(missing_ok=True)
            raise
        return folder
    raise RuntimeError(
        f"No unlocked subagents available under {root}. Provision more (each eval run "
        "provisions one), or, if no agent is still working, delete the stale "
        f"'{LOCK_FILE}' files in its subagent-<n> folders."
    )


def release_subagent(folder: Path) -> None:
    """Remove the folder's lock."""
    (folder / LOCK_FILE).unlink(missing_ok=True)


# --- request documents --------------------------------------------------------------------------


def _ps(value: Path) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def _rename_command(tmp: Path, final: Path) -> str:
    if os.name == "nt":  # pragma: no cover - the agent's terminal is PowerShell there
        return f"Move-Item -LiteralPath {_ps(tmp)} -Destination {_ps(final)}"
    return f"mv -- {shlex.quote(str(tmp))} {shlex.quote(str(final))}"


def _unlock_command(lock: Path, required: Sequence[Path] = ()) -> str:
    if os.name == "nt":  # pragma: no cover
        remove = f"Remove-Item -LiteralPath {_ps(lock)} -ErrorAction SilentlyContinue"
        if not required:
            return remove
        tests = " -and ".join(f"(Test-Path -LiteralPath {_ps(p)})" for p in required)
        return f"if ({tests}) {{ {remove} }}"
    remove = f"rm -f -- {shlex.quote(str(lock))}"
    if not required:
        return remove
    tests = " && ".join(f"[ -f {shlex.quote(str(p))} ]" for p in required)
    return f"if {tests}; then {remove}; fi"


def request_document(task: str, tmp: Path, final: Path, lock: Path | None) -> str:
    """A request file: the task, then how to hand the answer back (and unlock, if single)."""
    steps = [
        "**IMPORTANT**: Follow these exact steps:",
        f"1. Create and write your complete response to: {tmp}",
        "2. When completely finished, run these commands to signal completion:",
        _rename_command(tmp, final),
    ]
    if lock is not None:
        steps.append(_unlock_command(lock))
    steps.append("")
    steps.append(
        "Do not proceed to step 2 until your response is completely written to the temporary file."
    )
    if lock is None:
        steps.append("Do not unlock the workspace: the orchestrator does that.")
    return "\n".join(
        ["[[ ## task ## ]]", "", task, "", "[[ ## system_instructions ## ]]", "", *steps]
    )


def orchestrator_document(requests: Sequence[Path], responses: Sequence[Path], lock: Path) -> str:
    """The batch orchestrator file: one ``#runSubagent`` per request file, then unlock."""
    lines = [
        "[[ ## task ## ]]",
        "",
        "Use the #runSubagent tool once for each request file below. Give each subagent only",
        "the instruction `Follow instructions in <request file>`; do not read the request",
        "files yourself.",
        "",
        *(f"* messages/{p.name}" for p in requests),
        "",
        "[[ ## system_instructions ## ]]",
        "",
        "After every subagent has completed, unlock the workspace only if every response",
        "file exists:",
        "",
        _unlock_command(lock, responses),
    ]
    return "\n".join(lines)


def _timestamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%d%H%M%S")


def _names_folder(status: str, name: str) -> bool:
    # subagent-1 must not match subagent-12
    return re.search(re.escape(name) + r"(?![0-9])", status) is not None


# --- provider -----------------------------------------------------------------------------------


class VSCodeProvider(Provider):
    """Dispatches each request to GitHub Copilot chat in a VS Code subagent workspace."""

    kind = "vscode"
    Settings = VSCodeSettings
    settings: VSCodeSettings
    is_agent = True
    supports_batch = True

    def concurrency_limit(self, batching: bool) -> int | None:
        """One case at a time (Copilot needs the window's focus), unless batched."""
        return None if batching else 1

    default_command = "code"
    insiders = False
    #: seconds between checks for the response file
    poll_interval = 1.0
    #: limit for ``code --status``, and for each other ``code`` launch
    status_timeout = 10.0
    launch_timeout = 30.0
    #: how long a woken workspace gets to create ``.alive`` (not fatal when it does not)
    ready_timeout = 60.0
    #: pause before starting the chat, so the workspace window has focus
    settle_delay = 0.5

    def __init__(self, name: str, settings: VSCodeSettings) -> None:
        super().__init__(name, settings)
        self._ready_lock = asyncio.Lock()
        self._ready = False

    # --- configuration ---

    @property
    def command(self) -> str:
        """The VS Code command as configured (``code`` / ``code-insiders`` by default)."""
        return self.settings.vscode_cmd or self.default_command

    @property
    def root(self) -> Path:
        """The subagent root folder."""
        if self.settings.subagent_root:
            return Path(self.settings.subagent_root).expanduser().absolute()
        return default_subagent_root(self.insiders)

    def _template(self) -> Path | None:
        raw = self.settings.workspace_template
        if raw is None:
            return None
        path = Path(raw).expanduser().absolute()
        if not path.exists():
            raise ProviderError(self.name, f"workspace template not found: {path}")
        if not path.is_file():
            raise ProviderError(
                self.name, f"workspace template must be a file, not a directory: {path}"
            )
        return path

    def _executable(self) -> str:
        found = shutil.which(self.command)
        if found is None:
            raise ProviderError(
                self.name,
                f"VS Code command '{self.command}' was not found on PATH. Install VS Code and "
                "its command-line launcher (Command Palette: \"Shell Command: Install 'code' "
                f"command in PATH\"), or set `vscode_cmd` on target '{self.name}' in "
                "targets.yaml to the launcher's path.",
            )
        return found

    async def healthcheck(self) -> None:
        """Check the ``code`` command and the template; provision one subagent folder."""
        if self.settings.dry_run:
            return
        async with self._ready_lock:
            if self._ready:
                return
            self._executable()
            template = self._template()
            try:
                provision_subagents(self.root, 1, template)
            except (OSError, ValueError) as exc:
                raise ProviderError(
                    self.name, f"could not prepare subagent folders under {self.root}: {exc}"
                ) from None
            self._ready = True

    # --- pieces of a dispatch ---

    def _files(self, request: ProviderRequest) -> tuple[list[Path], list[Path]]:
        guidelines = unique_paths(request.guideline_paths)
        attachments = [p for p in unique_paths(request.input_files) if p not in set(guidelines)]
        return guidelines, attachments

    def _prompt(self, request: ProviderRequest) -> str:
        guidelines, attachments = self._files(request)
        return preread_document(request.question, guidelines, attachments, files_label="attachment")

    def preview(self, request: ProviderRequest) -> dict[str, Any]:
        """The prompt document and the files a dispatch would attach."""
        guidelines, attachments = self._files(request)
        return {
            "prompt": self._prompt(request),
            "attachments": [str(p) for p in [*guidelines, *attachments]],
            "vscode_cmd": self.command,
            "subagent_root": str(self.root),
        }

    def _check_attachments(self, files: Sequence[Path]) -> None:
        for path in files:
            if not path.exists():
                raise ProviderError(self.name, f"Attachment not found: {path}")

    def _child_env(self) -> dict[str, str]:
        return child_environment(inherit=self.settings.inherit_env)

    def _claim(self) -> Path:
        try:
            return claim_subagent(self.root, self._template())
        except (RuntimeError, ValueError, OSError) as exc:
            raise ProviderError(self.name, str(exc)) from None

    async def _code(
        self, args: list[str], folder: Path, commands: list[list[str]], timeout: float
    ) -> None:
        argv = [self._executable(), *args]
        commands.append([self.command, *args])
        try:
            result = await run_process(
                argv, cwd=folder, env=self._child_env(), timeout=timeout, keep_children=True
            )
        except OSError as exc:
            raise ProviderError(
                self.name, f"Failed to launch VS Code for subagent session: {exc}"
            ) from None
        if not result.ok:
            known = secret_values()
            detail = result.stderr_tail(800, known) or result.stdout_tail(800, known)
            what = "timed out" if result.timed_out else result.describe_exit()
            raise ProviderError(
                self.name,
                f"Failed to launch VS Code for subagent session: `{self.command}` {what}"
                + (f": {detail}" if detail else ""),
            )

    async def _focus(self, folder: Path, commands: list[list[str]]) -> None:
        """Bring the subagent's workspace to the front, waking it if it is not open."""
        workspace = str(workspace_file(folder))
        commands.append([self.command, "--status"])
        try:
            status = await run_process(
                [self._executable(), "--status"],
                cwd=folder,
                env=self._child_env(),
                timeout=self.status_timeout,
                keep_children=True,
            )
            open_already = _names_folder(status.stdout, folder.name)
        except OSError:
            open_already = False
        if open_already:
            await self._code([workspace], folder, commands, self.launch_timeout)
            return
        alive = folder / ALIVE_FILE
        alive.unlink(missing_ok=True)
        agents = folder / ".github" / "agents"
        agents.mkdir(parents=True, exist_ok=True)
        (agents / "wakeup.md").write_text(_WAKEUP_AGENT, encoding="utf-8")
        await self._code([workspace], folder, commands, self.launch_timeout)
        await asyncio.sleep(0.1)
        wake = ["-r", "chat", "-m", "wakeup", "create a file named .alive"]
        await self._code(wake, folder, commands, self.launch_timeout)
        if not await _wait_exists([alive], self.ready_timeout, self.poll_interval):
            log.warning(
                "Workspace readiness timeout after %ss; VS Code may not be fully ready (%s)",
                f"{self.ready_timeout:g}",
                folder,
            )

    async def _read_responses(
        self, files: Sequence[Path], timeout: float, folder: Path, started: float
    ) -> list[str]:
        remaining = timeout - (time.monotonic() - started)
        if not await _wait_exists(files, remaining, self.poll_interval):
            missing = [p.name for p in files if not p.exists()]
            raise ProviderTimeout(
                self.name,
                f"VS Code subagent did not write its response within {math.ceil(timeout)}s "
                f"(still missing in {folder / 'messages'}: {', '.join(missing)}). Check that "
                f"VS Code has the workspace {workspace_file(folder).name} open with Copilot "
                "chat available; raise --agent-timeout for longer tasks.",
            )
        texts = []
        for path in files:
            try:
                texts.append(normalise_newlines(await _read_text(path)))
            except OSError as exc:
                raise ProviderError(
                    self.name, f"could not read the agent's response file {path}: {exc}"
                ) from None
        return texts

    # --- dispatch ---

    async def invoke(self, request: ProviderRequest) -> ProviderResponse:
        """Dispatch one request and wait for its response file."""
        guidelines, attachments = self._files(request)
        files = [*guidelines, *attachments]
        prompt = self._prompt(request)
        sent: dict[str, Any] = {
            "prompt": prompt,
            "attachments": [str(p) for p in files],
            "vscode_cmd": self.command,
            "subagent_root": str(self.root),
        }
        if self.settings.dry_run:
            return _answer(text="", sent={**sent, "dry_run": True}, raw={"dry_run": True})
        await self.healthcheck()
        self._check_attachments(files)
        # The limit covers the whole dispatch, focusing and launching included.
        timeout = request.timeout or DEFAULT_RESPONSE_TIMEOUT_S
        started = time.monotonic()
        folder = self._claim()
        keep_lock = False
        try:
            stamp = _timestamp()
            messages = folder / "messages"
            request_file = messages / f"{stamp}_req.md"
            tmp = messages / f"{stamp}_res.tmp.md"
            final = messages / f"{stamp}_res.md"
            document = request_document(prompt, tmp, final, folder / LOCK_FILE)
            request_file.write_text(document, encoding="utf-8")
            commands: list[list[str]] = []
            sent.update(
                workspace=str(workspace_file(folder)),
                request_file=str(request_file),
                request_document=document,
                commands=commands,
            )
            await self._focus(folder, commands)
            await asyncio.sleep(self.settle_delay)
            chat = ["-r", "chat", "-m", secrets.token_hex(4)]
            for path in [*files, request_file]:
                chat += ["-a", str(path)]
            chat.append(f"Follow instructions in {request_file.name}")
            await self._code(chat, folder, commands, self.launch_timeout)
            raw = {
                "subagent": folder.name,
                "request_file": str(request_file),
                "response_file": str(final),
            }
            if not self.settings.wait:
                keep_lock = True  # the agent unlocks the folder when it is done
                return _answer(text="", sent=sent, raw={**raw, "waited": False})
            (text,) = await self._read_responses([final], timeout, folder, started)
            elapsed_ms = (time.monotonic() - started) * 1000
            return _answer(text=text, sent=sent, raw=raw, latency_ms=elapsed_ms)
        finally:
            if not keep_lock:
                release_subagent(folder)

    async def invoke_batch(self, requests: list[ProviderRequest]) -> list[ProviderResponse]:
        """Dispatch every request in one chat session and wait for all response files."""
        if not requests:
            raise ProviderError(self.name, "At least one query is required for batch dispatch")
        prompts = [self._prompt(r) for r in requests]
        files = unique_paths(*(g + a for g, a in (self._files(r) for r in requests)))
        base_sent: dict[str, Any] = {
            "attachments": [str(p) for p in files],
            "vscode_cmd": self.command,
            "subagent_root": str(self.root),
            "batch_size": len(requests),
        }
        if self.settings.dry_run:
            return [
                _answer(text="", sent={**base_sent, "prompt": p, "dry_run": True}) for p in prompts
            ]
        await self.healthcheck()
        self._check_attachments(files)
        # Each case gets its own time budget: the agent works through them in turn.
        timeout = sum(r.timeout or DEFAULT_RESPONSE_TIMEOUT_S for r in requests)
        started = time.monotonic()
        folder = self._claim()
        keep_lock = False
        try:
            stamp = _timestamp()
            messages = folder / "messages"
            request_files, finals, documents = [], [], []
            for i, prompt in enumerate(prompts):
                request_file = messages / f"{stamp}_{i}_req.md"
                final = messages / f"{stamp}_{i}_res.md"
                tmp = messages / f"{stamp}_{i}_res.tmp.md"
                document = request_document(prompt, tmp, final, None)
                request_file.write_text(document, encoding="utf-8")
                request_files.append(request_file)
                finals.append(final)
                documents.append(document)
            orchestrator = messages / f"{stamp}_orchestrator.md"
            orchestrator.write_text(
                orchestrator_document(request_files, finals, folder / LOCK_FILE), "utf-8"
            )
            commands: list[list[str]] = []
            base_sent.update(
                workspace=str(workspace_file(folder)),
                orchestrator_file=str(orchestrator),
                commands=commands,
            )
            await self._focus(folder, commands)
            await asyncio.sleep(self.settle_delay)
            chat = ["-r", "chat", "-m", secrets.token_hex(4), "-a", str(orchestrator)]
            for path in files:
                chat += ["-a", str(path)]
            chat.append(
                f"Follow instructions in [{orchestrator.name}]({file_uri(orchestrator)}). "
                "Use #runSubagent tool."
            )
            await self._code(chat, folder, commands, self.launch_timeout)

            def response(i: int, text: str) -> ProviderResponse:
                sent = {
                    **base_sent,
                    "prompt": prompts[i],
                    "request_file": str(request_files[i]),
                    "request_document": documents[i],
                }
                raw = {"subagent": folder.name, "response_file": str(finals[i]), "batch_index": i}
                return _answer(text=text, sent=sent, raw=raw)

            if not self.settings.wait:
                keep_lock = True
                return [response(i, "") for i in range(len(requests))]
            texts = await self._read_responses(finals, timeout, folder, started)
            return [response(i, text) for i, text in enumerate(texts)]
        finally:
            if not keep_lock:
                release_subagent(folder)


class VSCodeInsidersProvider(VSCodeProvider):
    """The same protocol with ``code-insiders`` and its own subagent root."""

    kind = "vscode-insiders"
    default_command = "code-insiders"
    insiders = True


async def _wait_exists(files: Sequence[Path], timeout: float, interval: float) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        if all(p.exists() for p in files):
            return True
        remaining = deadline - loop.time()
        if remaining <= 0:
            return False
        await asyncio.sleep(min(interval, remaining))


async def _read_text(path: Path, attempts: int = 10) -> str:
    # A file the editor still holds open can refuse reads briefly (EBUSY on Windows).
    for attempt in range(attempts):
        try:
            return read_input(path).decode("utf-8", errors="replace")  # a regular file
        except PermissionError:
            if attempt == attempts - 1:
                raise
            await asyncio.sleep(1.0)
    raise AssertionError("unreachable")  # pragma: no cover
