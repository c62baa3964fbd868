"""A run's trajectory: the tools the candidate called, in order, in one shape whatever
called them (docs/eval-files.md, "Trajectories").

Three sources make the steps: the tool loop of a model target (the calls agentv answered
with the case's ``tools``: ``agentv.run.tools``), Codex's ``--json`` event stream
(``agentv.providers.agents.codex``), and the JSON transcript a command-line target writes
to ``{TRAJECTORY_FILE}`` (``agentv.providers.agents.cli``). Tool calls written in the eval
file's messages are the scripted context the candidate was given, never its trajectory.

A target that cannot say which tools it called has no trajectory (``None``), which is not
the same as a trajectory without a step (``()``): the trajectory evaluators refuse to grade
the first and grade the second.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from typing import Any

#: what the trajectory evaluators say when a target reports no trajectory at all
NOT_REPORTED = (
    "the target does not report the tools it called: trajectories come from a model "
    "target's tool loop (the case's `tools`), from Codex, and from a cli target whose "
    "command writes {TRAJECTORY_FILE}"
)


@dataclass(frozen=True, slots=True)
class ToolStep:
    """One tool call of a trajectory: what was called with what, what came back (or why
    nothing did) and how long it took; ``turn`` is the live conversation's turn (1-based)
    it was made in, ``server`` the MCP server of a Codex MCP tool."""

    name: str
    arguments: Any = field(default_factory=dict)  # a JSON object, as a rule
    result: Any = None
    error: str | None = None
    duration_ms: float | None = None
    id: str | None = None
    turn: int | None = None
    server: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The record's form (``trajectory`` entries); absent values are left out."""
        out: dict[str, Any] = {}
        if self.turn is not None:
            out["turn"] = self.turn
        if self.id is not None:
            out["id"] = self.id
        out["name"] = self.name
        if self.server is not None:
            out["server"] = self.server
        out["arguments"] = self.arguments
        if self.result is not None:
            out["result"] = self.result
        if self.error is not None:
            out["error"] = self.error
        if self.duration_ms is not None:
            out["duration_ms"] = round(self.duration_ms, 3)
        return out

    def in_turn(self, turn: int) -> ToolStep:
        """This step, made in ``turn`` of a live conversation."""
        return replace(self, turn=turn)


Trajectory = tuple[ToolStep, ...]


def steps_dicts(steps: Trajectory) -> list[dict[str, Any]]:
    """The record's ``trajectory``."""
    return [s.to_dict() for s in steps]


# --- reading a transcript ---------------------------------------------------------------------
#
# The documented format (docs/targets.md, "The trajectory file"): a JSON list of calls, or an
# object whose `tool_calls` is that list. Each call has `name` and may have `arguments`,
# `result`, `error`, `duration_ms`, `id` and `server`; AgentV's trace names (`tool`, `input`, `output`)
# are read too, so that an agent written for it needs no change.

_NAME_KEYS = ("name", "tool")
_ARGUMENT_KEYS = ("arguments", "args", "input")
_RESULT_KEYS = ("result", "output")


def read_transcript(data: Any) -> Trajectory:
    """The steps of a transcript already read as JSON. Raises ``ValueError`` saying which
    entry is wrong and how, in the user's terms."""
    if isinstance(data, dict):
        if "tool_calls" not in data:
            raise ValueError(
                "expected a JSON list of tool calls, or an object with `tool_calls`; "
                f"the object has {_keys(data)}"
            )
        data = data["tool_calls"]
    if not isinstance(data, list):
        raise ValueError(f"expected a JSON list of tool calls, not {_kind(data)}")
    return tuple(_step(i, entry) for i, entry in enumerate(data, 1))


def parse_transcript(text: str) -> Trajectory:
    """The steps of a transcript's JSON text (``ValueError`` when it is not one)."""
    if not text.strip():
        raise ValueError("the file is empty (write `[]` when no tool was called)")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        ) from None
    except RecursionError:
        raise ValueError("not valid JSON: nested too deeply") from None
    return read_transcript(data)


def _first(entry: dict[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        if key in entry:
            return entry[key]
    return None


def _step(index: int, entry: Any) -> ToolStep:
    where = f"tool call {index}"
    if not isinstance(entry, dict):
        raise ValueError(f"{where} is {_kind(entry)}, not an object with a `name`")
    name = _first(entry, _NAME_KEYS)
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"{where} has no `name` (the tool's name, as text); it has {_keys(entry)}")
    arguments = _first(entry, _ARGUMENT_KEYS)
    if arguments is None:
        arguments = {}
    elif isinstance(arguments, str):  # a JSON object as text, as OpenAI writes them
        try:
            parsed = json.loads(arguments)
        except (ValueError, RecursionError):
            parsed = None
        if isinstance(parsed, dict):
            arguments = parsed
    error = entry.get("error")
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        error = error["message"]
    if error is not None and not isinstance(error, str):
        error = json.dumps(error, ensure_ascii=False)
    duration = entry.get("duration_ms")
    if duration is not None and (
        isinstance(duration, bool)
        or not isinstance(duration, int | float)
        or not math.isfinite(duration)
        or duration < 0
    ):
        raise ValueError(f"{where} ({name!r}): `duration_ms` must be a number of milliseconds")
    call_id, server = entry.get("id"), entry.get("server")
    return ToolStep(
        name=name.strip(),
        arguments=arguments,
        result=_first(entry, _RESULT_KEYS),
        error=error or None,
        duration_ms=float(duration) if duration is not None else None,
        id=str(call_id) if call_id is not None else None,
        server=server if isinstance(server, str) and server else None,
    )


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "true/false",
        int: "a number",
        float: "a number",
        str: "text",
        list: "a list",
        dict: "an object",
    }.get(type(value), type(value).__name__)


def _keys(entry: dict[str, Any]) -> str:
    keys = [str(k) for k in entry][:8]
    return "the keys " + ", ".join(f"`{k}`" for k in keys) if keys else "no keys"
