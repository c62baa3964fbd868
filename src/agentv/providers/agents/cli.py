"""``provider: cli``: any command line as a target.

The command is a template run by the system shell. Every value substituted into it is
shell-quoted, so a prompt or a file name can never run as shell code: templates must not
add quotes of their own around placeholders. The answer is what the command wrote to
``{OUTPUT_FILE}``, or its standard output when it wrote no such file.

A CLI target gets the LM-mode question in ``{PROMPT}`` (docs/prompt-rules.md section 6)
and, through ``{CHAT_PROMPT_FILE}``, the chat prompt as a JSON file so the roles of a
multi-turn conversation survive. A command that writes the tools it called as a JSON
transcript to ``{TRAJECTORY_FILE}`` gives its answers a trajectory (``agentv.trajectory``,
docs/targets.md "The trajectory file"); without that placeholder it has none.
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from agentv.errors import ProviderError
from agentv.messages import chat_to_dicts
from agentv.providers.agents.common import (
    INHERIT_ENV_ALIASES,
    InheritEnv,
    OptionalText,
    TimeoutSeconds,
    combined_timeout,
    describe_failure,
    missing_folder,
    normalise_newlines,
    process_failure,
    redact,
    safe_label,
    secret_values,
    unique_paths,
)
from agentv.providers.base import Provider, ProviderRequest, ProviderResponse, ProviderSettings
from agentv.system.env import child_environment
from agentv.system.masking import SECRET_ROOM
from agentv.system.process import cap_text, cut_marker, decode_head, read_head, run_process
from agentv.trajectory import Trajectory, parse_transcript

PLACEHOLDERS: tuple[str, ...] = (
    "PROMPT",
    "GUIDELINES",
    "EVAL_ID",
    "ATTEMPT",
    "FILES",
    "OUTPUT_FILE",
    "CHAT_PROMPT_FILE",
    "TRAJECTORY_FILE",
    "WORKSPACE",
)
# `${NAME}` is the shell's own expansion, left alone; `{NAME}` is a placeholder.
_TOKEN = re.compile(r"(?<!\$)\{([A-Z_]+)\}")
#: the most of an answer kept (``max_output_bytes``); more is cut, with a marker
DEFAULT_MAX_ANSWER_BYTES = 10 * 1024 * 1024
#: a healthcheck must not hang a run; used when neither it nor the target sets a timeout
DEFAULT_HEALTHCHECK_TIMEOUT_S = 30.0
#: the largest {TRAJECTORY_FILE} read; a larger one gives the answer no trajectory (said)
MAX_TRAJECTORY_BYTES = 64 * 1024 * 1024


def check_placeholders(template: str) -> str:
    """``template`` if every ``{UPPER_CASE}`` token in it is a supported placeholder."""
    for match in _TOKEN.finditer(template):
        if match.group(1) not in PLACEHOLDERS:
            raise PydanticCustomError(
                "placeholder",
                "includes unsupported placeholder '{token}'. Supported placeholders: {names}",
                {"token": match.group(0), "names": ", ".join(PLACEHOLDERS)},
            )
    return template


def _template(value: Any) -> Any:
    if isinstance(value, str):
        if not value.strip():
            raise PydanticCustomError("template", "must be a non-empty command line")
        check_placeholders(value)
    return value


def uses_placeholder(template: str, name: str) -> bool:
    """Whether ``{name}`` appears in ``template`` as a placeholder."""
    return any(m.group(1) == name for m in _TOKEN.finditer(template))


def render_template(template: str, values: dict[str, str]) -> str:
    """Replace each known ``{NAME}`` by its (already shell-quoted) value."""
    return _TOKEN.sub(lambda m: values.get(m.group(1), m.group(0)), template)


def _quote(value: str) -> str:
    return shlex.quote(value)


def render_files(paths: list[Path], files_format: str) -> str:
    """``{FILES}``: ``files_format`` per file with ``{path}``/``{basename}`` quoted, space-joined."""
    return " ".join(
        files_format.replace("{path}", _quote(str(p))).replace("{basename}", _quote(p.name))
        for p in paths
    )


# --- settings -------------------------------------------------------------------------------

_STRICT = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class HttpHealthcheck(BaseModel):
    """``healthcheck: {type: http, url: ...}``: a GET that must answer 2xx."""

    model_config = _STRICT

    type: Literal["http"]
    url: str = Field(min_length=1)
    timeout_seconds: TimeoutSeconds = Field(
        default=None, validation_alias=AliasChoices("timeout_seconds", "timeoutSeconds")
    )


class CommandHealthcheck(BaseModel):
    """``healthcheck: {type: command, command_template: ...}``: a command that must exit 0."""

    model_config = _STRICT

    type: Literal["command"]
    command_template: str = Field(
        validation_alias=AliasChoices("command_template", "commandTemplate")
    )
    cwd: OptionalText = None
    #: relative to the project folder, like the target's own `cwd`
    path_fields: ClassVar[frozenset[str]] = frozenset({"cwd"})
    timeout_seconds: TimeoutSeconds = Field(
        default=None, validation_alias=AliasChoices("timeout_seconds", "timeoutSeconds")
    )

    @field_validator("command_template", mode="before")
    @classmethod
    def _check_template(cls, value: Any) -> Any:
        return _template(value)


Healthcheck = Annotated[HttpHealthcheck | CommandHealthcheck, Field(discriminator="type")]


class CliSettings(ProviderSettings):
    """``provider: cli`` fields."""

    path_fields: ClassVar[frozenset[str]] = frozenset({"cwd"})
    #: without `cwd` the command runs where the run started, also from `run_eval(cwd=...)`
    #: and in a Ray worker
    run_folder_defaults: ClassVar[Mapping[str, str]] = MappingProxyType({"cwd": "."})
    command_template: str = Field(
        validation_alias=AliasChoices("command_template", "commandTemplate")
    )
    files_format: str = Field(
        default="{path}",
        validation_alias=AliasChoices(
            "files_format", "filesFormat", "attachments_format", "attachmentsFormat"
        ),
    )
    cwd: OptionalText = None
    env: dict[str, str] = Field(default_factory=dict)
    #: what the command inherits of the run's environment (None: all but the vendors' keys)
    inherit_env: InheritEnv = Field(default=None, validation_alias=INHERIT_ENV_ALIASES)
    timeout_seconds: TimeoutSeconds = Field(
        default=None, validation_alias=AliasChoices("timeout_seconds", "timeoutSeconds")
    )
    #: the most of an answer kept, from {OUTPUT_FILE} or stdout (the rest is cut, and said)
    max_output_bytes: int = Field(
        default=DEFAULT_MAX_ANSWER_BYTES,
        ge=1,
        validation_alias=AliasChoices("max_output_bytes", "maxOutputBytes"),
    )
    healthcheck: Healthcheck | None = None

    @field_validator("command_template", mode="before")
    @classmethod
    def _check_template(cls, value: Any) -> Any:
        return _template(value)

    def setup_warnings(self, target: str, kind: str) -> list[str]:
        problems = missing_folder(self.cwd, "working directory (`cwd`)")
        if isinstance(self.healthcheck, CommandHealthcheck):
            problems += missing_folder(self.healthcheck.cwd, "healthcheck `cwd`")
        return problems

    @field_validator("files_format", mode="before")
    @classmethod
    def _files_format(cls, value: Any) -> Any:
        if value is None or (isinstance(value, str) and not value.strip()):
            return "{path}"
        return value

    @field_validator("env", mode="before")
    @classmethod
    def _env(cls, value: Any) -> Any:
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise PydanticCustomError("env", "must be a mapping of variable names to values")
        out: dict[Any, Any] = {}
        for key, item in value.items():
            # YAML turns `PORT: 8080` into a number; the environment only holds strings.
            if isinstance(item, bool):
                item = "true" if item else "false"
            elif isinstance(item, int | float):
                item = str(item)
            out[key] = item
        return out

    @field_validator("healthcheck", mode="before")
    @classmethod
    def _healthcheck(cls, value: Any) -> Any:
        if value is None:
            return None
        if not isinstance(value, dict):
            raise PydanticCustomError(
                "healthcheck", "must be a mapping with 'type: http' or 'type: command'"
            )
        kind = value.get("type")
        kind = kind.strip().lower() if isinstance(kind, str) else kind
        if kind not in ("http", "command"):
            raise PydanticCustomError("healthcheck", "type must be 'http' or 'command'")
        return {**value, "type": kind}


# --- provider ---------------------------------------------------------------------------------


class CliProvider(Provider):
    """Runs ``command_template`` through the shell once per request."""

    kind = "cli"
    Settings = CliSettings
    settings: CliSettings
    is_agent = False
    works_in_workspace = True

    def __init__(self, name: str, settings: CliSettings) -> None:
        super().__init__(name, settings)
        self._health_lock = asyncio.Lock()
        self._health_checked = False
        self._health_error: ProviderError | None = None

    @property
    def reports_trajectory(self) -> bool:
        """A command given ``{TRAJECTORY_FILE}`` writes the tools it called there."""
        return uses_placeholder(self.settings.command_template, "TRAJECTORY_FILE")

    # --- helpers ---

    def _env(self) -> dict[str, str]:
        # the run's own variables (never another run's), vendor keys only when `env` or
        # `inherit_env` names them
        return child_environment(inherit=self.settings.inherit_env, extra=self.settings.env)

    def _secrets(self) -> list[str]:
        return secret_values(self.settings.env)

    def _cwd(self, override: str | None = None) -> Path | None:
        raw = override or self.settings.cwd
        if raw is None:
            return None
        path = Path(raw).expanduser()
        if not path.is_dir():
            raise ProviderError(
                self.name,
                f"CLI target '{self.name}': working directory '{path}' does not exist; "
                "fix `cwd` in targets.yaml (without `cwd` it is the folder the run started "
                "from: on a Ray cluster, the project must be at that path on every node)",
            )
        return path

    # --- healthcheck ---

    async def healthcheck(self) -> None:
        """Run the target's ``healthcheck`` once; the outcome (also a failure) is kept."""
        async with self._health_lock:
            if not self._health_checked:
                self._health_error = await self._run_healthcheck()
                self._health_checked = True
        if self._health_error is not None:
            raise self._health_error

    async def _run_healthcheck(self) -> ProviderError | None:
        check = self.settings.healthcheck
        if check is None:
            return None
        timeout = (
            check.timeout_seconds or self.settings.timeout_seconds or DEFAULT_HEALTHCHECK_TIMEOUT_S
        )
        try:
            if isinstance(check, HttpHealthcheck):
                reason = await asyncio.to_thread(_http_check, check.url, timeout)
            else:
                reason = await self._command_check(check, timeout)
        except ProviderError as exc:
            reason = str(exc)
        if reason is None:
            return None
        return ProviderError(
            self.name,
            redact(f"CLI healthcheck failed for '{self.name}': {reason}", self._secrets()),
        )

    async def _command_check(self, check: CommandHealthcheck, timeout: float) -> str | None:
        with tempfile.TemporaryDirectory(prefix="agentv-cli-", ignore_cleanup_errors=True) as tmp:
            chat_file = Path(tmp) / "agentv-healthcheck-chat.json"
            chat_file.write_text("[]", encoding="utf-8")
            values = {
                "PROMPT": _quote(""),
                "GUIDELINES": _quote(""),
                "EVAL_ID": _quote("healthcheck"),
                "ATTEMPT": _quote("0"),
                "FILES": "",
                "OUTPUT_FILE": _quote(str(Path(tmp) / "agentv-healthcheck-output.json")),
                "CHAT_PROMPT_FILE": _quote(str(chat_file)),
                "TRAJECTORY_FILE": _quote(str(Path(tmp) / "agentv-healthcheck-trajectory.json")),
                "WORKSPACE": _quote(str(self._cwd(check.cwd) or Path.cwd())),
            }
            command = render_template(check.command_template, values)
            try:
                result = await run_process(
                    command, cwd=self._cwd(check.cwd), env=self._env(), timeout=timeout
                )
            except OSError as exc:
                return f"could not run the healthcheck command: {exc}"
        if result.ok:
            return None
        return describe_failure("healthcheck command", result, timeout, self._secrets())

    # --- invoke ---

    def _files(self, request: ProviderRequest) -> list[Path]:
        # Every file the case refers to: guideline files first, then attachments.
        return unique_paths(request.guideline_paths, request.input_files)

    def preview(self, request: ProviderRequest) -> dict[str, Any]:
        """The command that would run, with placeholder paths for the per-call files."""
        scratch = Path(tempfile.gettempdir()) / "agentv-cli-XXXX"
        folder = request.workspace or Path(self.settings.cwd or ".")
        values = self._values(
            request,
            scratch / "output.json",
            scratch / "chat_prompt.json",
            scratch / "trajectory.json",
            folder,
        )
        sent: dict[str, Any] = {
            "command": render_template(self.settings.command_template, values),
            "cwd": str(request.workspace) if request.workspace else self.settings.cwd,
        }
        if uses_placeholder(self.settings.command_template, "CHAT_PROMPT_FILE"):
            sent["chat_prompt"] = chat_to_dicts(request.messages)
        return redact(sent, self._secrets())

    def _values(
        self, request: ProviderRequest, output: Path, chat: Path, trajectory: Path, folder: Path
    ) -> dict[str, str]:
        return {
            "WORKSPACE": _quote(str(folder.absolute())),
            "PROMPT": _quote(request.question),
            "GUIDELINES": _quote(request.guidelines),
            "EVAL_ID": _quote(request.eval_id),
            "ATTEMPT": _quote(str(request.attempt)),
            "FILES": render_files(self._files(request), self.settings.files_format),
            "OUTPUT_FILE": _quote(str(output)),
            "CHAT_PROMPT_FILE": _quote(str(chat)),
            "TRAJECTORY_FILE": _quote(str(trajectory)),
        }

    async def invoke(self, request: ProviderRequest) -> ProviderResponse:
        """Run the command for one request; the answer is ``{OUTPUT_FILE}`` or stdout."""
        await self.healthcheck()
        settings = self.settings
        cwd = request.workspace or self._cwd()  # a case's workspace, else the target's own
        timeout = combined_timeout(settings.timeout_seconds, request.timeout)
        secrets = self._secrets()
        uses_chat = uses_placeholder(settings.command_template, "CHAT_PROMPT_FILE")
        # A private folder per call: the output file cannot exist before the command runs,
        # and nothing is left behind afterwards.
        with tempfile.TemporaryDirectory(prefix="agentv-cli-", ignore_cleanup_errors=True) as tmp:
            label = safe_label(request.eval_id, "unknown")
            output_file = Path(tmp) / f"agentv-{label}-output.json"
            chat_file = Path(tmp) / f"agentv-{label}-chat.json"
            trajectory_file = Path(tmp) / f"agentv-{label}-trajectory.json"
            chat_prompt = chat_to_dicts(request.messages) if uses_chat else None
            if chat_prompt is not None:
                chat_file.write_text(
                    json.dumps(chat_prompt, ensure_ascii=False, indent=2), encoding="utf-8"
                )
            command = render_template(
                settings.command_template,
                self._values(request, output_file, chat_file, trajectory_file, cwd or Path.cwd()),
            )
            sent: dict[str, Any] = {
                "command": command,
                "cwd": str(cwd) if cwd else None,
                "env": sorted(settings.env),  # names only: values may be credentials
                "timeout_seconds": timeout,
                "output_file": str(output_file),
            }
            if chat_prompt is not None:
                sent["chat_prompt_file"] = str(chat_file)
                sent["chat_prompt"] = chat_prompt
            uses_trajectory = uses_placeholder(settings.command_template, "TRAJECTORY_FILE")
            if uses_trajectory:
                sent["trajectory_file"] = str(trajectory_file)
            sandbox = request.sandbox
            run: Any = command
            env = self._env()
            if sandbox is not None:  # confined to the workspace; the call's files writable
                wrapped, env = sandbox.wrap(command, cwd=cwd, env=env, writable=[Path(tmp)])
                run, cwd = wrapped.command, wrapped.cwd
                sent["sandbox"] = sandbox.kind
            try:
                result = await run_process(
                    run,
                    cwd=cwd,
                    env=env,
                    timeout=timeout,
                    stdout_head=settings.max_output_bytes,
                    secrets=secrets,
                )
            except OSError as exc:
                raise ProviderError(self.name, f"could not run the CLI command: {exc}") from None
            finally:
                if sandbox is not None:
                    await sandbox.finish(wrapped)
            if sandbox is not None:
                sandbox.observe(result.stdout, result.stderr)
            if not result.ok:
                raise process_failure(self.name, "CLI command", result, timeout, secrets)
            cap = settings.max_output_bytes
            if output_file.is_file():
                # never more than the cap and room for a secret crossing it, plus one byte
                data, more = read_head(output_file, cap + SECRET_ROOM)
                text = decode_head(data, more)
                cut = more or len(data) > cap
                source = "output_file"
                if cut:
                    # masked before the cut: a secret crossing it must not leave its start
                    text = cap_text(text, cap, secrets)
            else:
                text = result.stdout  # cut at the cap already, masked the same way
                source = "stdout"
                cut = result.stdout_truncated
            text = normalise_newlines(text)
            if source == "stdout":
                # A trailing newline from print/echo is not part of the answer.
                text = text.rstrip("\n")
            if cut:
                text += cut_marker(cap)
            trajectory: Trajectory | None = None
            trajectory_error = None
            if uses_trajectory:
                trajectory, trajectory_error = _read_trajectory(trajectory_file)
                if trajectory and secrets:
                    trajectory = tuple(
                        replace(
                            step,
                            arguments=redact(step.arguments, secrets),
                            result=redact(step.result, secrets),
                            error=redact(step.error, secrets),
                        )
                        for step in trajectory
                    )
        raw = {
            "exit_code": result.exit_code,
            "answer_source": source,
            "stderr": result.stderr_tail(4000, secrets),
            "stdout_truncated": result.stdout_truncated,
            "truncated": cut,  # the answer was cut at max_output_bytes (and says so)
            "duration_ms": round(result.duration_s * 1000, 1),
        }
        return ProviderResponse(
            text=text,
            latency_ms=result.duration_s * 1000,
            raw=redact(raw, secrets),
            sent=redact(sent, secrets),
            trajectory=trajectory,
            trajectory_error=redact(trajectory_error, secrets),
        )


def _read_trajectory(path: Path) -> tuple[Trajectory | None, str | None]:
    """The steps the command wrote to ``{TRAJECTORY_FILE}``, or why there are none."""
    if not path.is_file():
        return None, (
            "the command wrote no {TRAJECTORY_FILE}; write `[]` to it when no tool was called"
        )
    data, more = read_head(path, MAX_TRAJECTORY_BYTES)
    if more:
        return None, f"the {{TRAJECTORY_FILE}} is larger than {MAX_TRAJECTORY_BYTES:,} bytes"
    try:
        return parse_transcript(data.decode("utf-8")), None
    except UnicodeDecodeError:
        return None, "the {TRAJECTORY_FILE} is not UTF-8 text"
    except ValueError as exc:
        return None, f"the {{TRAJECTORY_FILE}} is not a transcript: {exc}"


def _http_check(url: str, timeout: float) -> str | None:
    """GET ``url``; None when it answers 2xx, else the reason."""
    parts = urllib.parse.urlsplit(url)
    shown = urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, "", ""))
    if parts.scheme not in ("http", "https"):
        return f"healthcheck URL must start with http:// or https:// (got {shown!r})"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            status = response.status
            if 200 <= status < 300:
                return None
            return f"GET {shown} answered HTTP {status} {response.reason}"
    except urllib.error.HTTPError as exc:
        return f"GET {shown} answered HTTP {exc.code} {exc.reason}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return f"GET {shown} failed: {reason}"
