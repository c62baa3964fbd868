"""``provider: claude-code``: Anthropic's Claude Code CLI as a target (docs/targets.md,
"claude-code").

Each call runs ``claude -p --output-format stream-json --verbose`` with the target's
settings as flags (``--model``, ``--max-turns``, ``--permission-mode``, ``--allowedTools``,
``--disallowedTools``, ``--append-system-prompt``, then its own ``args``), in the case's
workspace (else the target's ``cwd``, else a scratch folder), the prompt document on stdin.
The stream is read into the answer (the ``result`` event's text), the trajectory (each
``tool_use`` of the session's own turns, with the ``tool_result`` that answered it),
the tokens and the cost Claude Code computed itself (``total_cost_usd``: it knows which
models it used). Its failures (not installed, not logged in, its turn limit, an option the
installed version does not know) become errors that say what to do.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

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
from agentv.system.env import child_environment
from agentv.system.masking import shorten
from agentv.system.process import run_process
from agentv.trajectory import ToolStep, Trajectory

INSTALL_HINT = "npm install -g @anthropic-ai/claude-code"
#: what every call passes: print mode, the event stream (which needs --verbose with -p)
FIXED_ARGS: tuple[str, ...] = ("-p", "--output-format", "stream-json", "--verbose")
#: the key variable Claude Code reads (without it, the login ``claude`` stored)
CLAUDE_KEYS = ("ANTHROPIC_API_KEY",)
#: the permission mode unless the target sets one: edits in the working folder are
#: accepted, any other tool needs ``allowed_tools`` (print mode has nobody to ask)
DEFAULT_PERMISSION_MODE = "acceptEdits"
#: characters of a tool's result a trajectory step keeps
RESULT_CHARS = 4000

_NOT_LOGGED_IN = re.compile(
    r"not logged in|please run /login|invalid api key|oauth token (?:has )?expired",
    re.IGNORECASE,
)
_UNKNOWN_OPTION = re.compile(r"unknown option '([^']+)'")
_ROOT_REFUSED = re.compile(r"cannot be used with root", re.IGNORECASE)


def _tools(value: Any) -> Any:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not all(
        isinstance(item, str) and item.strip() for item in value
    ):
        raise PydanticCustomError(
            "tools", 'must be a list of tool names or rules, such as [Read, Edit, "Bash(git *)"]'
        )
    return tuple(item.strip() for item in value)


class ClaudeCodeSettings(ProviderSettings):
    """``provider: claude-code`` fields."""

    path_fields: ClassVar[frozenset[str]] = frozenset({"cwd"})
    executable: str = Field(
        default="claude", validation_alias=AliasChoices("executable", "command", "binary")
    )
    model: OptionalText = None
    max_turns: int | None = Field(
        default=None, ge=1, validation_alias=AliasChoices("max_turns", "maxTurns")
    )
    permission_mode: str = Field(
        default=DEFAULT_PERMISSION_MODE,
        min_length=1,
        validation_alias=AliasChoices("permission_mode", "permissionMode"),
    )
    allowed_tools: tuple[str, ...] = Field(
        default=(), validation_alias=AliasChoices("allowed_tools", "allowedTools")
    )
    disallowed_tools: tuple[str, ...] = Field(
        default=(), validation_alias=AliasChoices("disallowed_tools", "disallowedTools")
    )
    append_system_prompt: OptionalText = Field(
        default=None, validation_alias=AliasChoices("append_system_prompt", "appendSystemPrompt")
    )
    args: tuple[str, ...] = Field(default=(), validation_alias=AliasChoices("args", "arguments"))
    cwd: OptionalText = None
    #: what Claude Code inherits of the run's environment (None: all but the vendors' keys
    #: other than ``ANTHROPIC_API_KEY``, which it uses)
    inherit_env: InheritEnv = Field(default=None, validation_alias=INHERIT_ENV_ALIASES)
    timeout_seconds: TimeoutSeconds = Field(
        default=None, validation_alias=AliasChoices("timeout_seconds", "timeoutSeconds")
    )

    @field_validator("executable", mode="before")
    @classmethod
    def _executable(cls, value: Any) -> Any:
        if value is None or (isinstance(value, str) and not value.strip()):
            return "claude"
        return value.strip() if isinstance(value, str) else value

    @field_validator("allowed_tools", "disallowed_tools", mode="before")
    @classmethod
    def _tool_list(cls, value: Any) -> Any:
        return _tools(value)

    @field_validator("args", mode="before")
    @classmethod
    def _args(cls, value: Any) -> Any:
        return argument_list(value)

    def setup_warnings(self, target: str, kind: str) -> list[str]:
        problems = []
        if not pending(self.executable) and locate_executable(self.executable) is None:
            problems.append(missing_executable_message(self.executable, target))
        return problems + missing_folder(self.cwd, "working directory (`cwd`)")


def locate_executable(executable: str) -> Path | None:
    """The ``claude`` program: a path when the value has a slash, else the first hit on
    ``PATH``; None when there is no such program."""
    if "/" in executable or "\\" in executable:
        path = Path(executable).expanduser().absolute()
        return path if path.is_file() and os.access(path, os.X_OK) else None
    found = shutil.which(executable)
    return Path(found) if found else None


def missing_executable_message(executable: str, target: str) -> str:
    """How to fix a Claude Code target whose program cannot be found."""
    where = "does not exist or is not executable" if "/" in executable else "was not found on PATH"
    return (
        f"Claude Code executable '{executable}' {where}. Install it with `{INSTALL_HINT}`, "
        f"or set `executable` on target '{target}' in targets.yaml to the program's path."
    )


# --- the stream-json events -----------------------------------------------------------------


def parse_stream(stdout: str) -> list[dict[str, Any]]:
    """The JSON events of a ``--output-format stream-json`` output, one a line (lines that
    are not a JSON object are skipped: a warning a program printed among them)."""
    events = []
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


def _result_event(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((e for e in reversed(events) if e.get("type") == "result"), None)


def _blocks(event: dict[str, Any]) -> list[dict[str, Any]]:
    message = event.get("message")
    content = message.get("content") if isinstance(message, dict) else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _own(event: dict[str, Any]) -> bool:
    """Whether ``event`` belongs to the session's own turns (not a subagent's)."""
    return event.get("parent_tool_use_id") is None


def _text_of(content: Any) -> str:
    """A tool result's or a message's text: a string, or its text blocks joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            b["text"]
            for b in content
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        ]
        return "\n".join(parts)
    return ""


def extract_answer(events: list[dict[str, Any]]) -> str | None:
    """The final answer: the ``result`` event's text, else the last assistant text."""
    result = _result_event(events)
    if result is not None and isinstance(result.get("result"), str) and result["result"]:
        return str(result["result"])
    for event in reversed(events):
        if event.get("type") == "assistant" and _own(event):
            text = "".join(
                b["text"]
                for b in _blocks(event)
                if b.get("type") == "text" and isinstance(b.get("text"), str)
            )
            if text.strip():
                return text
    return None


def extract_usage(events: list[dict[str, Any]]) -> Usage | None:
    """The session's tokens, from its ``result`` event: the input counting the prompt
    cache's reads and writes (the reads also as cached input), as agentv counts them."""
    result = _result_event(events)
    usage = result.get("usage") if result is not None else None
    if not isinstance(usage, dict):
        return None

    def count(key: str) -> int | None:
        value = usage.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    given, produced = count("input_tokens"), count("output_tokens")
    read = count("cache_read_input_tokens") or 0
    written = count("cache_creation_input_tokens") or 0
    if given is not None:
        given += read + written
    total = given + produced if given is not None and produced is not None else None
    return Usage(given, produced, total, read or None)


def extract_cost(events: list[dict[str, Any]]) -> float | None:
    """What Claude Code says the session cost (US dollars), None when it does not say."""
    result = _result_event(events)
    value = result.get("total_cost_usd") if result is not None else None
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    # never a price of infinity, or a negative one
    return float(value) if math.isfinite(value) and value >= 0 else None


class EventClock:
    """When each tool call's ``tool_use`` and its ``tool_result`` reached agentv (the stream
    carries no times of its own that every version writes)."""

    def __init__(self) -> None:
        self.started: dict[str, float] = {}
        self.ended: dict[str, float] = {}

    def line(self, stream: str, text: str) -> None:
        """Note the time of one output line's tool calls and results."""
        if stream != "stdout" or "tool_" not in text:
            return
        try:
            event = json.loads(text)
        except ValueError:
            return
        if not isinstance(event, dict):
            return
        now = time.monotonic()
        for block in _blocks(event):
            if block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                self.started.setdefault(block["id"], now)
            elif block.get("type") == "tool_result" and isinstance(block.get("tool_use_id"), str):
                self.ended.setdefault(block["tool_use_id"], now)

    def duration_ms(self, call: str) -> float | None:
        start, end = self.started.get(call), self.ended.get(call)
        if start is None or end is None or end < start:
            return None
        return (end - start) * 1000


def extract_trajectory(events: list[dict[str, Any]], clock: EventClock | None = None) -> Trajectory:
    """The tools the session called, in order: each ``tool_use`` of its own turns, with the
    ``tool_result`` that answered it (``error`` when it says ``is_error``; a call never
    answered says so)."""
    calls: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    results: dict[str, dict[str, Any]] = {}
    for event in events:
        if not _own(event):
            continue
        for block in _blocks(event):
            kind = block.get("type")
            if kind == "tool_use" and event.get("type") == "assistant":
                call = block.get("id") if isinstance(block.get("id"), str) else f"#{len(order)}"
                if call not in calls:
                    order.append(call)
                calls[call] = block
            elif kind == "tool_result" and isinstance(block.get("tool_use_id"), str):
                results[block["tool_use_id"]] = block
    steps = []
    for call in order:
        block = calls[call]
        answer = results.get(call)
        result: Any = None
        error: str | None = None
        if answer is None:
            error = "the call had no result when Claude Code ended"
        else:
            text = shorten(_text_of(answer.get("content")), RESULT_CHARS, keep="head")
            if answer.get("is_error"):
                error = text or "the call failed"
            else:
                result = text
        arguments = block.get("input")
        steps.append(
            ToolStep(
                name=str(block.get("name") or "tool"),
                arguments=arguments if arguments is not None else {},
                result=result,
                error=error,
                duration_ms=clock.duration_ms(call) if clock is not None else None,
                id=None if call.startswith("#") else call,
            )
        )
    return tuple(steps)


# --- provider ---------------------------------------------------------------------------------


class ClaudeCodeProvider(Provider):
    """Runs ``claude -p`` once per request, the prompt document on stdin."""

    kind = "claude-code"
    Settings = ClaudeCodeSettings
    settings: ClaudeCodeSettings
    is_agent = True
    works_in_workspace = True
    reports_trajectory = True  # its event stream says what it ran

    def __init__(self, name: str, settings: ClaudeCodeSettings) -> None:
        super().__init__(name, settings)
        self._executable: Path | None = None

    def executable(self) -> Path:
        """The ``claude`` program (looked up once); ``ProviderError`` saying how to install
        it."""
        if self._executable is None:
            found = locate_executable(self.settings.executable)
            if found is None:
                raise ProviderError(
                    self.name, missing_executable_message(self.settings.executable, self.name)
                )
            self._executable = found
        return self._executable

    async def healthcheck(self) -> None:
        """Fail before the first case when the program cannot be found."""
        self.executable()

    def argv(self, executable: Path | str) -> list[str]:
        """The command line of a call (the prompt goes to stdin)."""
        s = self.settings
        argv = [str(executable), *FIXED_ARGS]
        if s.model:
            argv += ["--model", s.model]
        if s.max_turns is not None:
            argv += ["--max-turns", str(s.max_turns)]
        argv += ["--permission-mode", s.permission_mode]
        if s.append_system_prompt:
            argv += ["--append-system-prompt", s.append_system_prompt]
        argv += list(s.args)
        # the tool lists take every argument up to the next option: they come last
        if s.allowed_tools:
            argv += ["--allowedTools", *s.allowed_tools]
        if s.disallowed_tools:
            argv += ["--disallowedTools", *s.disallowed_tools]
        return argv

    def _prompt(self, request: ProviderRequest) -> str:
        guidelines = unique_paths(request.guideline_paths)
        inputs = [p for p in unique_paths(request.input_files) if p not in set(guidelines)]
        return preread_document(request.question, guidelines, inputs, files_label="input")

    def preview(self, request: ProviderRequest) -> dict[str, Any]:
        """The prompt document and the command line a call would use."""
        exe = locate_executable(self.settings.executable) or Path(self.settings.executable)
        cwd = str(request.workspace) if request.workspace else self.settings.cwd
        return redact(
            {"prompt": self._prompt(request), "argv": self.argv(exe), "cwd": cwd},
            secret_values(),
        )

    async def invoke(self, request: ProviderRequest) -> ProviderResponse:
        """Run Claude Code on one request and read its stream."""
        executable = self.executable()
        prompt = self._prompt(request)
        argv = self.argv(executable)
        timeout = combined_timeout(self.settings.timeout_seconds, request.timeout)
        cwd = Path(self.settings.cwd).expanduser().absolute() if self.settings.cwd else None
        if request.workspace is not None:
            cwd = request.workspace
        if cwd is not None and not cwd.is_dir():
            raise ProviderError(
                self.name,
                f"Claude Code target '{self.name}': working directory '{cwd}' does not exist; "
                "fix `cwd` in targets.yaml",
            )
        scratch = None if cwd is not None else Path(tempfile.mkdtemp(prefix="agentv-claude-"))
        where = cwd or scratch
        env = child_environment(inherit=self.settings.inherit_env, keys=CLAUDE_KEYS)
        clock = EventClock()
        run: Any = argv
        sandbox = request.sandbox
        wrapped = None
        try:
            if sandbox is not None:  # confined to the case's workspace
                wrapped, env = sandbox.wrap(argv, cwd=where, env=env)
                run, where = wrapped.command, wrapped.cwd
            try:
                result = await run_process(
                    run, cwd=where, env=env, stdin=prompt, timeout=timeout, on_line=clock.line
                )
            except OSError as exc:
                raise ProviderError(
                    self.name,
                    f"{missing_executable_message(str(executable), self.name)} ({exc})",
                ) from None
            finally:
                if sandbox is not None and wrapped is not None:
                    await sandbox.finish(wrapped)
        finally:
            if scratch is not None:
                shutil.rmtree(scratch, ignore_errors=True)
        if sandbox is not None:
            sandbox.observe(result.stdout, result.stderr)

        secrets = secret_values()
        events = parse_stream(result.stdout)
        final = _result_event(events)
        if final is None or final.get("is_error"):
            raise self._failure(result, final, timeout, secrets)
        answer = extract_answer(events)
        if answer is None:
            raise ProviderError(self.name, "Claude Code's stream holds no answer")
        init = next((e for e in events if e.get("subtype") == "init"), {})
        raw: dict[str, Any] = {
            "exit_code": result.exit_code,
            "stderr": result.stderr_tail(4000, secrets),
            "duration_ms": round(result.duration_s * 1000, 1),
            "events": len(events),
            "session_id": final.get("session_id"),
            "model": init.get("model"),
            "num_turns": final.get("num_turns"),
        }
        if final.get("permission_denials"):
            raw["permission_denials"] = final["permission_denials"]
        sent = {"prompt": prompt, "argv": argv, "cwd": str(cwd or scratch)}
        return ProviderResponse(
            text=answer,
            usage=extract_usage(events),
            latency_ms=result.duration_s * 1000,
            raw=redact(raw, secrets),
            sent=redact(sent, secrets),
            trajectory=extract_trajectory(events, clock),
            reported_cost_usd=extract_cost(events),
        )

    def _failure(
        self,
        result: Any,
        final: Mapping[str, Any] | None,
        timeout: float | None,
        secrets: list[str],
    ) -> ProviderError:
        """The error of a call that did not end in a successful ``result`` event."""
        if result.timed_out or final is None:
            stderr = result.stderr
            unknown = _UNKNOWN_OPTION.search(stderr)
            if unknown is not None and not result.timed_out:
                return ProviderError(
                    self.name,
                    f"the installed Claude Code does not know the option {unknown.group(1)}: "
                    f"update it (`{INSTALL_HINT}`), or remove it from target '{self.name}' "
                    "in targets.yaml",
                )
            if _ROOT_REFUSED.search(stderr) and not result.timed_out:
                return ProviderError(
                    self.name,
                    "Claude Code refuses `bypassPermissions` when run as root: run agentv as "
                    "another user, or use `permission_mode: acceptEdits` with `allowed_tools`",
                )
            if _NOT_LOGGED_IN.search(stderr):
                return self._not_logged_in(stderr)
            if result.ok:
                return ProviderError(
                    self.name, "Claude Code ended without a result event in its stream"
                )
            return process_failure(self.name, "Claude Code", result, timeout, secrets)
        text = final.get("result") if isinstance(final.get("result"), str) else ""
        errors = [e for e in final.get("errors") or () if isinstance(e, str)]
        said = redact("; ".join([t for t in (text, *errors) if t]), secrets)
        if final.get("subtype") == "error_max_turns":
            limit = self.settings.max_turns
            return ProviderError(
                self.name,
                f"Claude Code reached its turn limit ({said or 'max_turns'}) before it "
                f"finished, after {final.get('num_turns')} turns"
                + (f"; raise `max_turns` (now {limit}) on target '{self.name}'" if limit else ""),
            )
        if _NOT_LOGGED_IN.search(said):
            return self._not_logged_in(said)
        status = final.get("api_error_status")
        kind = str(final.get("subtype") or "error")
        return ProviderError(
            self.name,
            f"Claude Code failed ({kind}"
            + (f", API status {status}" if status else "")
            + f"): {said or 'no reason given'}",
        )

    def _not_logged_in(self, said: str) -> ProviderError:
        return ProviderError(
            self.name,
            f"Claude Code is not logged in ({shorten(said.strip(), 200, keep='head')}): run "
            "`claude` once and log in with /login, or give it ANTHROPIC_API_KEY (the run's "
            "environment or .env; with `inherit_env`, name it there)",
        )


__all__ = [
    "ClaudeCodeProvider",
    "ClaudeCodeSettings",
    "extract_answer",
    "extract_cost",
    "extract_trajectory",
    "extract_usage",
    "parse_stream",
]
