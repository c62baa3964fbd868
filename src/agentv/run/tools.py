"""Tools that answer: when a model calls one of a case's tools during a turn, its mock
gives the result that goes back to the model (docs/eval-files.md, "Tools that answer").

A mock is a fixed ``result``, canned ``results`` by arguments, or a ``script`` run as a
shell command in its folder with the call's arguments as JSON on stdin (its stdout is the
result; the same process and environment rules as a code evaluator: its own process group,
killed on timeout, no vendor key variable unless its ``inherit_env`` names it). A call that cannot be answered — an unknown tool, arguments that are not a JSON
object or do not fit the tool's parameters, no canned answer for them, a script that fails
— is answered to the model as an error (``Error: ...``) and recorded; it never fails the
case. Each call is recorded with its arguments, its result, its error and its time.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentv.cases import Tool
from agentv.messages import ToolCall
from agentv.system.env import child_environment
from agentv.system.process import run_process
from agentv.trajectory import ToolStep

#: characters of a failing script's stderr said to the model and recorded
STDERR_SHOWN = 500
#: the longest result sent back to a model from a script (the rest is cut, and said)
MAX_RESULT_CHARS = 100_000


@dataclass(frozen=True, slots=True)
class ToolRun:
    """One tool call and how it was answered."""

    call: ToolCall
    result: str  # what goes back to the model
    error: str | None = None  # why the call could not be answered (``result`` says it too)
    duration_ms: float = 0.0
    round: int = 0  # which round of the turn's tool loop (0: the first)

    def to_dict(self) -> dict[str, Any]:
        """The record of the call: ``id``, ``name``, ``arguments``, ``result``, ``error``
        when there is one, ``duration_ms`` and ``round``."""
        out: dict[str, Any] = {**self.call.to_dict(), "result": self.result}
        if self.error is not None:
            out["error"] = self.error
        out["duration_ms"] = round(self.duration_ms, 3)
        out["round"] = self.round
        return out

    def step(self, turn: int) -> ToolStep:
        """The call as a step of the run's trajectory (made in ``turn``): its result when
        it was answered, else the reason it was not."""
        return ToolStep(
            name=self.call.name,
            arguments=self.call.arguments,
            result=self.result if self.error is None else None,
            error=self.error,
            duration_ms=self.duration_ms,
            id=self.call.id,
            turn=turn,
        )


def result_text(value: Any) -> str:
    """A mock's result as the text a tool message carries: text as it is, anything else as
    JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


async def answer_call(
    call: ToolCall,
    tools: Mapping[str, Tool],
    *,
    timeout: float | None = None,
    round_: int = 0,
) -> ToolRun:
    """Answer one call with its tool's mock (never raises for a call that cannot be
    answered: the model is told why)."""
    started = time.perf_counter()
    result, error = await _answer(call, tools, timeout)
    if error is not None:
        result = f"Error: {error}"
    elapsed = (time.perf_counter() - started) * 1000
    return ToolRun(call, result, error, elapsed, round_)


async def _answer(
    call: ToolCall, tools: Mapping[str, Tool], timeout: float | None
) -> tuple[str, str | None]:
    tool = tools.get(call.name)
    if tool is None:
        known = ", ".join(sorted(tools)) or "none"
        return "", f"there is no tool called {call.name!r} (the tools are: {known})"
    if call.invalid is not None:
        return "", call.invalid
    problem = _arguments_problem(call.arguments, tool.parameters)
    if problem is not None:
        return "", f"the arguments do not fit the parameters of {tool.name!r}: {problem}"
    for arguments, canned in tool.results:
        if arguments == call.arguments:
            return result_text(canned), None
    if tool.has_result:
        return result_text(tool.result), None
    if tool.script is not None:
        return await _run_script(tool, call.arguments, timeout)
    shown = json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)
    return "", f"{tool.name!r} has no answer for the arguments {shown}"


def _arguments_problem(arguments: dict[str, Any], parameters: dict[str, Any]) -> str | None:
    """Why ``arguments`` do not fit the JSON Schema ``parameters`` (None: they do)."""
    from jsonschema import exceptions, validators

    try:
        validators.validator_for(parameters)(parameters).validate(arguments)
    except exceptions.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)
        return f"{exc.message}" + (f" (at `{where}`)" if where else "")
    except exceptions.SchemaError as exc:  # checked when the eval file was loaded
        return f"the tool's parameters are not a valid schema: {exc.message}"
    return None


async def _run_script(
    tool: Tool, arguments: dict[str, Any], timeout: float | None
) -> tuple[str, str | None]:
    assert tool.script is not None
    limit = tool.timeout_seconds if tool.timeout_seconds is not None else timeout
    stdin = json.dumps(arguments, ensure_ascii=False).encode("utf-8")
    try:
        done = await run_process(
            tool.script,
            cwd=tool.cwd,
            stdin=stdin,
            timeout=limit,
            # as a code evaluator's: what it prints goes to the model, so no vendor key
            # reaches it unless the tool names it
            env=child_environment(inherit=tool.inherit_env),
        )
    except OSError as exc:
        return "", f"the tool's script `{tool.script}` could not start: {exc.strerror or exc}"
    if done.timed_out:
        return "", f"the tool's script `{tool.script}` took more than {limit:g} s and was stopped"
    if done.exit_code != 0:
        tail = done.stderr_tail(STDERR_SHOWN)
        said = f": {tail}" if tail else ""
        return "", f"the tool's script `{tool.script}` {done.describe_exit()}{said}"
    text = done.stdout.strip()
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + f"\n[cut at {MAX_RESULT_CHARS:,} characters]"
    return text, None
