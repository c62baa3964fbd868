"""``provider: codex``: the OpenAI Codex CLI as a target.

Each call runs ``codex --ask-for-approval never exec --json --color never
--skip-git-repo-check <args...> -`` in a scratch folder (or the target's ``cwd``), with the
prompt document on stdin: a pre-read block of ``file://`` links to the guideline and input
files, then the agent-mode question. The answer is the last agent message of the ``--json``
event stream; the commands, file changes, MCP tool calls and web searches in it are the
call's trajectory (``extract_trajectory``). Each call's stream is logged under ``.agentv/logs/codex`` unless
``AGENTV_CODEX_STREAM_LOGS`` is ``false``, ``0`` or ``off``.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Literal, TextIO

from pydantic import AliasChoices, Field, field_validator
from pydantic_core import PydanticCustomError

from agentv.errors import ProviderError
from agentv.providers.agents.common import (
    INHERIT_ENV_ALIASES,
    InheritEnv,
    OptionalText,
    TimeoutSeconds,
    argument_list,
    combined_timeout,
    missing_folder,
    pending,
    preread_document,
    process_failure,
    redact,
    safe_label,
    secret_values,
    unique_paths,
)
from agentv.providers.base import (
    Provider,
    ProviderRequest,
    ProviderResponse,
    ProviderSettings,
    Usage,
)
from agentv.system.env import child_environment, run_environment
from agentv.system.masking import shorten
from agentv.system.process import run_process
from agentv.trajectory import ToolStep, Trajectory

log = logging.getLogger("agentv.codex")

LOGS_ENV = "AGENTV_CODEX_STREAM_LOGS"
LOG_FORMAT_ENV = "AGENTV_CODEX_LOG_FORMAT"
#: where stream logs go without ``log_dir``, under the run's folder
LOG_DIR = ".agentv/logs/codex"
INSTALL_HINT = "npm install -g @openai/codex"
FIXED_ARGS: tuple[str, ...] = (
    "--ask-for-approval",
    "never",
    "exec",
    "--json",
    "--color",
    "never",
    "--skip-git-repo-check",
)
_ANSWER_ITEMS = ("agent_message", "response", "output")

LogFormat = Literal["summary", "json"]


def _log_format(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, str):
        value = value.strip().lower()
        if not value:
            return None
        if value in ("summary", "json"):
            return value
    raise PydanticCustomError("log_format", "codex log format must be 'summary' or 'json'")


#: the vendors' key variables Codex reads (its built-in OpenAI and Azure providers)
CODEX_KEYS = ("OPENAI_API_KEY", "AZURE_OPENAI_API_KEY")


class CodexSettings(ProviderSettings):
    """``provider: codex`` fields."""

    path_fields: ClassVar[frozenset[str]] = frozenset({"cwd", "log_dir"})
    run_folder_defaults: ClassVar[Mapping[str, str]] = MappingProxyType({"log_dir": LOG_DIR})
    not_in_cache_key: ClassVar[frozenset[str]] = frozenset({"log_dir", "log_format"})
    executable: str = Field(
        default="codex", validation_alias=AliasChoices("executable", "command", "binary")
    )
    args: tuple[str, ...] = Field(default=(), validation_alias=AliasChoices("args", "arguments"))
    cwd: OptionalText = None
    #: what Codex inherits of the run's environment (None: all but the vendors' keys other
    #: than OpenAI's, which Codex uses)
    inherit_env: InheritEnv = Field(default=None, validation_alias=INHERIT_ENV_ALIASES)
    timeout_seconds: TimeoutSeconds = Field(
        default=None, validation_alias=AliasChoices("timeout_seconds", "timeoutSeconds")
    )
    log_dir: OptionalText = Field(
        default=None,
        validation_alias=AliasChoices("log_dir", "logDir", "log_directory", "logDirectory"),
    )
    log_format: LogFormat | None = Field(
        default=None,
        validation_alias=AliasChoices(
            "log_format", "logFormat", "log_output_format", "logOutputFormat"
        ),
    )

    @field_validator("executable", mode="before")
    @classmethod
    def _executable(cls, value: Any) -> Any:
        if value is None or (isinstance(value, str) and not value.strip()):
            return "codex"
        return value.strip() if isinstance(value, str) else value

    @field_validator("args", mode="before")
    @classmethod
    def _args(cls, value: Any) -> Any:
        return argument_list(value)

    @field_validator("log_format", mode="before")
    @classmethod
    def _format(cls, value: Any) -> Any:
        return _log_format(value)

    def setup_warnings(self, target: str, kind: str) -> list[str]:
        problems = []
        if not pending(self.executable) and locate_executable(self.executable) is None:
            problems.append(missing_executable_message(self.executable, target))
        return problems + missing_folder(self.cwd, "working directory (`cwd`)")


# --- the executable -------------------------------------------------------------------------


def locate_executable(executable: str) -> Path | None:
    """The Codex executable: a path (relative to the working directory) when the value has a
    slash, else the first hit on ``PATH``. None when there is no such program."""
    if "/" in executable or "\\" in executable:
        path = Path(executable).expanduser().absolute()
        return path if path.is_file() and os.access(path, os.X_OK) else None
    found = shutil.which(executable)
    return Path(found) if found else None


def missing_executable_message(executable: str, target: str) -> str:
    """How to fix a Codex target whose executable cannot be found."""
    where = "does not exist or is not executable" if "/" in executable else "was not found on PATH"
    return (
        f"Codex executable '{executable}' {where}. Install the Codex CLI with "
        f"`{INSTALL_HINT}`, or set `executable` on target '{target}' in targets.yaml "
        "to the program's path."
    )


# --- the --json event stream ------------------------------------------------------------------


def flatten(value: Any) -> str:
    """Text of a string, of a list of strings / ``{text}`` parts, or of a ``{text}`` object."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = []
        for part in value:
            if isinstance(part, str):
                text = part
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                text = part["text"]
            else:
                continue
            if text:
                parts.append(text)
        return " \n".join(parts)
    if isinstance(value, dict) and isinstance(value.get("text"), str):
        return value["text"]
    return ""


def _first(mapping: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if mapping.get(key) is not None:
            return mapping[key]
    return None


def parse_output(stdout: str) -> Any:
    """The ``--json`` output: one JSON document, or the list of its JSON Lines events.

    Lines that are not JSON (a stray warning) are skipped rather than failing the call.
    Raises ``ValueError`` with the reason when nothing usable was printed.
    """
    text = stdout.strip()
    if not text:
        raise ValueError("Codex CLI produced no output in --json mode")
    try:
        return json.loads(text)
    except ValueError:
        pass
    events = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    if events:
        return events
    shown = shorten(text, 200, keep="head", secrets=secret_values())
    raise ValueError(f"Codex CLI emitted invalid JSON: {shown}")


def _event_text(event: Any) -> str:
    if not isinstance(event, dict):
        return ""
    item = event.get("item")
    if (
        event.get("type") == "item.completed"
        and isinstance(item, dict)
        and item.get("type") in _ANSWER_ITEMS
    ):
        return flatten(_first(item, "text", "content", "output"))
    return flatten(_first(event, "output", "content"))


def extract_answer(parsed: Any) -> str | None:
    """The final assistant text: the last event that carries one, scanning backwards."""
    if isinstance(parsed, list):
        for event in reversed(parsed):
            text = _event_text(event)
            if text.strip():
                return text
        return None
    if not isinstance(parsed, dict):
        return None
    text = _event_text(parsed)
    if text.strip():
        return text
    messages = parsed.get("messages")
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") == "assistant":
                text = flatten(message.get("content"))
                if text.strip():
                    return text
    response = parsed.get("response")
    if isinstance(response, dict):
        text = flatten(response.get("content"))
        if text.strip():
            return text
    text = flatten(parsed.get("output"))
    return text if text.strip() else None


def extract_usage(parsed: Any) -> Usage | None:
    """Token counts of the last ``turn.completed`` event, when it has any."""
    events = parsed if isinstance(parsed, list) else [parsed]
    for event in reversed(events):
        if not isinstance(event, dict) or not isinstance(event.get("usage"), dict):
            continue
        usage = event["usage"]
        given = usage.get("input_tokens")
        produced = usage.get("output_tokens")
        given = given if isinstance(given, int) else None
        produced = produced if isinstance(produced, int) else None
        total = given + produced if given is not None and produced is not None else None
        return Usage(input_tokens=given, output_tokens=produced, total_tokens=total)
    return None


def last_error(parsed: Any) -> str | None:
    """The message of the last error event (``error``, ``turn.failed``, error items)."""
    events = parsed if isinstance(parsed, list) else [parsed]
    for event in reversed(events):
        if not isinstance(event, dict):
            continue
        kind = event.get("type")
        if kind == "error" and isinstance(event.get("message"), str):
            return event["message"]
        if kind == "turn.failed" and isinstance(event.get("error"), dict):
            message = event["error"].get("message")
            if isinstance(message, str):
                return message
    return None


# --- the trajectory ---------------------------------------------------------------------------
#
# Codex reports what it did as items (docs/targets.md, "Codex"): each tool call is one item,
# announced by `item.started` and ended by `item.completed` (some only by the latter). Every
# tool item becomes one step, in the order the items first appeared, with the name a user
# would look for: `shell` (a command), `apply_patch` (file changes), the MCP tool's own name
# (its server beside it) and `web_search`. The stream carries no times: a step's
# `duration_ms` is measured from when its first and its last event reached agentv.

_ITEM_EVENTS = ("item.started", "item.updated", "item.completed")
_TOOL_ITEMS = ("command_execution", "file_change", "mcp_tool_call", "web_search")


class EventClock:
    """When each item's first and last events arrived (fed each output line as it comes)."""

    def __init__(self) -> None:
        self.first: dict[str, float] = {}
        self.last: dict[str, float] = {}

    def line(self, stream: str, text: str) -> None:
        """Note the time of one output line's item event."""
        if stream != "stdout" or '"item.' not in text:
            return
        try:
            event = json.loads(text)
        except ValueError:
            return
        item = event.get("item") if isinstance(event, dict) else None
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            return
        now = time.monotonic()
        self.first.setdefault(item["id"], now)
        if event.get("type") == "item.completed":
            self.last[item["id"]] = now

    def duration_ms(self, item_id: str) -> float | None:
        """From the item's first event to its completion; None when it had one event only."""
        start, end = self.first.get(item_id), self.last.get(item_id)
        if start is None or end is None or end <= start:
            return None
        return (end - start) * 1000


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _tool_step(item: dict[str, Any], completed: bool) -> ToolStep:
    kind = item["type"]
    status = _text(item.get("status"))
    error: str | None = None
    if not completed:
        error = "the call had not finished when Codex ended"
    elif status in ("failed", "declined"):
        error = f"the call {status}"
    result: Any = None
    server: str | None = None
    if kind == "command_execution":
        name, arguments = "shell", {"command": item.get("command")}
        result = _text(item.get("aggregated_output"))
        code = item.get("exit_code")
        if isinstance(code, int) and not isinstance(code, bool) and code != 0:
            error = f"exited with code {code}"
        elif status == "declined":
            error = "the command was declined"
    elif kind == "file_change":
        name, arguments = "apply_patch", {"changes": item.get("changes") or []}
    elif kind == "web_search":
        name, arguments = "web_search", {"query": item.get("query")}
    else:  # mcp_tool_call
        name = _text(item.get("tool")) or "mcp_tool"
        server = _text(item.get("server"))
        arguments = item.get("arguments")
        arguments = {} if arguments is None else arguments
        result = item.get("result")
        failure = item.get("error")
        if isinstance(failure, dict) and isinstance(failure.get("message"), str):
            error = failure["message"]
    return ToolStep(name=name, arguments=arguments, result=result, error=error, server=server)


def extract_trajectory(parsed: Any, clock: EventClock | None = None) -> Trajectory:
    """The tool calls of a ``--json`` event stream, in the order they started, each as it
    last stood (an item still running when the stream ended says so)."""
    events = parsed if isinstance(parsed, list) else [parsed]
    items: dict[str, tuple[dict[str, Any], bool]] = {}  # id -> (latest item, completed)
    for n, event in enumerate(events):
        if not isinstance(event, dict) or event.get("type") not in _ITEM_EVENTS:
            continue
        item = event.get("item")
        if not isinstance(item, dict) or item.get("type") not in _TOOL_ITEMS:
            continue
        key = item["id"] if isinstance(item.get("id"), str) else f"#{n}"
        done = event["type"] == "item.completed" or items.get(key, (item, False))[1]
        items[key] = (item, done)
    steps = []
    for key, (item, done) in items.items():
        step = _tool_step(item, done)
        duration = clock.duration_ms(key) if clock is not None else None
        steps.append(
            replace(step, id=key if not key.startswith("#") else None, duration_ms=duration)
        )
    return tuple(steps)


# --- stream logs ------------------------------------------------------------------------------


def stream_logs_enabled() -> bool:
    """False when ``AGENTV_CODEX_STREAM_LOGS`` is ``false``, ``0`` or ``off``."""
    return run_environment().get(LOGS_ENV, "").strip().lower() not in ("false", "0", "off")


def summarise_line(stream: str, line: str) -> str:
    """One stream line in the ``summary`` log format."""
    try:
        event = json.loads(line)
    except ValueError:
        return line if stream == "stdout" else f"stderr: {line}"
    if not isinstance(event, dict):
        return line
    kind = str(event.get("type") or "event")
    item = event.get("item") if isinstance(event.get("item"), dict) else None
    message = _event_text(event)
    if not message and item is not None:
        message = flatten(_first(item, "text", "content", "output", "message", "command"))
    if not message:
        message = flatten(event.get("message"))
    if message:
        return f"{kind}: {message}"
    if item is not None and item.get("type"):
        return f"{kind}:{item['type']}"
    return kind


class StreamLog:
    """Writes one Codex call's stdout/stderr lines to a log file as they arrive."""

    def __init__(self, path: Path, fmt: LogFormat, header: list[str]) -> None:
        self.path = path
        self.format = fmt
        self._started = time.monotonic()
        self._file: TextIO | None = path.open("a", encoding="utf-8")
        self._file.write("\n".join(header) + "\n")
        self._file.flush()

    def _elapsed(self) -> str:
        seconds = int(time.monotonic() - self._started)
        hours, rest = divmod(seconds, 3600)
        minutes, secs = divmod(rest, 60)
        return f"{hours:02d}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"

    def line(self, stream: str, text: str) -> None:
        """Record one line (blank lines are skipped)."""
        if self._file is None or not text.strip():
            return
        if self.format == "json":
            try:
                message = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
            except ValueError:
                message = text
        else:
            message = summarise_line(stream, text)
        self._file.write(f"[+{self._elapsed()}] [{stream}] {message}\n")
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _iso_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


# --- provider ---------------------------------------------------------------------------------


class CodexProvider(Provider):
    """Runs ``codex exec`` once per request with the prompt document on stdin."""

    kind = "codex"
    Settings = CodexSettings
    settings: CodexSettings
    is_agent = True
    works_in_workspace = True
    artifacts_label = "Codex CLI logs"
    reports_trajectory = True  # its event stream says what it ran

    def __init__(self, name: str, settings: CodexSettings) -> None:
        super().__init__(name, settings)
        self._executable: Path | None = None

    def executable(self) -> Path:
        """The Codex program (looked up once); ``ProviderError`` saying how to install it."""
        if self._executable is None:
            found = locate_executable(self.settings.executable)
            if found is None:
                raise ProviderError(
                    self.name, missing_executable_message(self.settings.executable, self.name)
                )
            self._executable = found
        return self._executable

    async def healthcheck(self) -> None:
        """Fail before the first case when the Codex executable cannot be found."""
        self.executable()

    def _log_format(self) -> LogFormat:
        if self.settings.log_format is not None:
            return self.settings.log_format
        try:
            return _log_format(run_environment().get(LOG_FORMAT_ENV)) or "summary"
        except PydanticCustomError:
            raise ProviderError(
                self.name,
                f"codex log format must be 'summary' or 'json' ({LOG_FORMAT_ENV}="
                f"{run_environment().get(LOG_FORMAT_ENV)!r})",
            ) from None

    def _open_log(self, request: ProviderRequest) -> StreamLog | None:
        if not stream_logs_enabled():
            return None
        fmt = self._log_format()
        folder = (
            Path(self.settings.log_dir).expanduser().absolute()
            if self.settings.log_dir
            else Path.cwd() / LOG_DIR
        )
        stamp = _iso_now()
        name = (
            f"{stamp.replace(':', '-').replace('.', '-')}_{safe_label(self.name, 'target')}_"
            f"{safe_label(request.eval_id, 'codex')}_attempt-{request.attempt + 1}_"
            f"{uuid.uuid4().hex[:8]}.log"
        )
        header = ["# Codex CLI stream log", f"# target: {self.name}"]
        if request.eval_id:
            header.append(f"# eval: {request.eval_id}")
        header += [f"# attempt: {request.attempt + 1}", f"# started: {stamp}"]
        try:
            folder.mkdir(parents=True, exist_ok=True)
            stream_log = StreamLog(folder / name, fmt, header)
        except OSError as exc:
            log.warning("Skipping Codex stream logging (could not create %s): %s", folder, exc)
            return None
        self.keep_artifact(stream_log.path)  # where to look when an answer puzzles you
        return stream_log

    def _argv(self, executable: Path) -> list[str]:
        return [str(executable), *FIXED_ARGS, *self.settings.args, "-"]

    def _prompt(self, request: ProviderRequest) -> tuple[str, list[Path], list[Path]]:
        guidelines = unique_paths(request.guideline_paths)
        inputs = [p for p in unique_paths(request.input_files) if p not in set(guidelines)]
        prompt = preread_document(request.question, guidelines, inputs, files_label="input")
        return prompt, guidelines, inputs

    def preview(self, request: ProviderRequest) -> dict[str, Any]:
        """The prompt document and arguments a call would use."""
        prompt, _, _ = self._prompt(request)
        exe = locate_executable(self.settings.executable) or Path(self.settings.executable)
        return redact(
            {"prompt": prompt, "argv": self._argv(exe), "cwd": self.settings.cwd},
            secret_values(),
        )

    async def invoke(self, request: ProviderRequest) -> ProviderResponse:
        """Run Codex on one request and return its final agent message."""
        executable = self.executable()
        prompt, guidelines, inputs = self._prompt(request)
        argv = self._argv(executable)
        timeout = combined_timeout(self.settings.timeout_seconds, request.timeout)
        cwd = Path(self.settings.cwd).expanduser().absolute() if self.settings.cwd else None
        if request.workspace is not None:  # the case's workspace, as the agent left it
            cwd = request.workspace
        if cwd is not None and not cwd.is_dir():
            raise ProviderError(
                self.name,
                f"Codex target '{self.name}': working directory '{cwd}' does not exist; "
                "fix `cwd` in targets.yaml",
            )
        workspace = Path(tempfile.mkdtemp(prefix="agentv-codex-"))
        stream_log: StreamLog | None = None
        copied: list[Path] = []
        prompt_file = workspace / "prompt.md"  # for inspection; the prompt goes on stdin
        try:
            prompt_file.write_text(prompt, encoding="utf-8")
            if cwd is None:  # so that the files are also inside the agent's workspace
                copied = _copy_files(workspace, [*guidelines, *inputs])
            stream_log = self._open_log(request)
            clock = EventClock()

            def on_line(stream: str, text: str) -> None:
                clock.line(stream, text)
                if stream_log is not None:
                    stream_log.line(stream, text)

            run: Any = argv
            where: Path | None = cwd or workspace
            env = child_environment(inherit=self.settings.inherit_env, keys=CODEX_KEYS)
            sandbox = request.sandbox
            if sandbox is not None:  # confined to the case's workspace
                wrapped, env = sandbox.wrap(argv, cwd=where, env=env)
                run, where = wrapped.command, wrapped.cwd
            try:
                result = await run_process(
                    run, cwd=where, env=env, stdin=prompt, timeout=timeout, on_line=on_line
                )
            except OSError as exc:
                raise ProviderError(
                    self.name,
                    f"{missing_executable_message(str(executable), self.name)} ({exc})",
                ) from None
            finally:
                if sandbox is not None:
                    await sandbox.finish(wrapped)
            if sandbox is not None:
                sandbox.observe(result.stdout, result.stderr)
        finally:
            if stream_log is not None:
                stream_log.close()
            shutil.rmtree(workspace, ignore_errors=True)

        secrets = secret_values()
        sent = {
            "prompt": prompt,
            "argv": argv,
            "cwd": str(cwd or workspace),
            "workspace": str(workspace),
            "prompt_file": str(prompt_file),
            "workspace_files": [str(p) for p in copied],
        }
        raw: dict[str, Any] = {
            "exit_code": result.exit_code,
            "stderr": result.stderr_tail(4000, secrets),
            "log_file": str(stream_log.path) if stream_log else None,
            "duration_ms": round(result.duration_s * 1000, 1),
        }
        if not result.ok:
            raise process_failure(self.name, "Codex CLI", result, timeout, secrets)
        try:
            parsed = parse_output(result.stdout)
        except ValueError as exc:
            raise ProviderError(self.name, redact(str(exc), secrets)) from None
        answer = extract_answer(parsed)
        if answer is None:
            message = "Codex CLI JSON response did not include an assistant message"
            error = last_error(parsed)
            if error:
                message += f" (last error: {error})"
            raise ProviderError(self.name, redact(message, secrets))
        raw["events"] = len(parsed) if isinstance(parsed, list) else 1
        return ProviderResponse(
            text=answer,
            usage=extract_usage(parsed),
            latency_ms=result.duration_s * 1000,
            raw=redact(raw, secrets),
            sent=redact(sent, secrets),
            trajectory=extract_trajectory(parsed, clock),
        )


def _copy_files(workspace: Path, files: list[Path]) -> list[Path]:
    """Copy the case's files into the scratch workspace (by base name, clashes numbered)."""
    taken = {"prompt.md"}
    copied = []
    for source in files:
        if not source.is_file():
            continue  # the prompt tells the agent to report a missing file itself
        stem, suffix = source.stem, source.suffix
        name, n = source.name, 1
        while name in taken:
            n += 1
            name = f"{stem}-{n}{suffix}"
        taken.add(name)
        target = workspace / name
        try:
            shutil.copyfile(source, target)
        except OSError as exc:
            log.warning("could not copy %s into the Codex workspace: %s", source, exc)
            continue
        copied.append(target)
    return copied


__all__ = [
    "CodexProvider",
    "CodexSettings",
    "StreamLog",
    "extract_answer",
    "extract_trajectory",
    "extract_usage",
    "flatten",
    "locate_executable",
    "parse_output",
]
