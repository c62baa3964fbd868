"""Tools that answer: when a model calls one of a case's tools during a turn, its mock
gives the result that goes back to the model (docs/eval-files.md, "Tools that answer").

A mock is a fixed ``result``, canned ``results`` by arguments, or a ``script`` run as a
shell command in its folder with the call's arguments as JSON on stdin (its stdout is the
result; the same process and environment rules as a code evaluator: its own process group,
killed on timeout, no vendor key variable unless its ``inherit_env`` names it). A call that cannot be answered — an unknown tool, arguments that are not a JSON
object or do not fit the tool's parameters, no canned answer for them, a script that fails
— is answered to the model as an error (``Error: ...``) and recorded; it never fails the
case. Each call is recorded with its arguments, its result, its error and its time.

Bounds: a script's output keeps its first ``MAX_RESULT_CHARS`` characters (at most
``MAX_RESULT_BYTES`` are read) and says how much there was; the scripts a turn runs share
the run's time limit (``ToolTime``): once it is spent, the calls left are answered an
error without running.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from agentv.cases import Tool
from agentv.messages import ToolCall
from agentv.providers.llm import json_text
from agentv.system.env import child_environment
from agentv.system.process import run_process
from agentv.trajectory import ToolStep

#: characters of a failing script's stderr said to the model and recorded
STDERR_SHOWN = 500
#: the longest result sent back to a model from a script (the rest is cut, and said)
MAX_RESULT_CHARS = 100_000
#: what is read of a script's output: room for ``MAX_RESULT_CHARS`` characters of any
#: UTF-8 text (the rest is read and dropped as it comes)
MAX_RESULT_BYTES = 4 * MAX_RESULT_CHARS


@dataclass(slots=True)
class ToolTime:
    """The time a turn's tool scripts may take together: ``limit`` seconds (the run's
    ``--agent-timeout``; None: no limit), of which ``spent`` are gone."""

    limit: float | None
    spent: float = 0.0

    def left(self) -> float | None:
        """Seconds left (None: no limit)."""
        return None if self.limit is None else max(0.0, self.limit - self.spent)

    def out_of_time(self) -> str:
        """Why a call was not run, once the time is spent."""
        return (
            f"the time for this turn's tool calls ran out ({self.limit:g} s, the run's "
            "--agent-timeout): the call was not run"
        )


@dataclass(frozen=True, slots=True)
class ToolRun:
    """One tool call and how it was answered."""

    call: ToolCall
    result: str  # what goes back to the model
    error: str | None = None  # why the call could not be answered (``result`` says it too)
    duration_ms: float = 0.0
    round: int = 0  # which round of the turn's tool loop (0: the first)

    def to_dict(self) -> dict[str, Any]:
        """The record of the call: ``id``, ``name``, ``arguments`` (and ``arguments_text``,
        what the model wrote, when it is not what the arguments write as: not JSON, or
        spaced its own way), ``result``, ``error`` when there is one, ``duration_ms`` and
        ``round``."""
        out: dict[str, Any] = self.call.to_dict()
        text = self.call.text
        if text is not None and text != json_text(self.call.arguments):
            out["arguments_text"] = text
        out["result"] = self.result
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
    tool_time: ToolTime | None = None,
) -> ToolRun:
    """Answer one call with its tool's mock (never raises for a call that cannot be
    answered: the model is told why).

    Args:
        call: The model's call.
        tools: The case's tools, by name.
        timeout: Seconds a script may take, unless its tool says (None: no limit).
        round_: Which round of the turn's tool loop the call was made in.
        tool_time: The time the turn's scripts share (the call's time is added to it).
    """
    started = time.perf_counter()
    result, error = await _answer(call, tools, timeout, tool_time or ToolTime(None))
    if error is not None:
        result = f"Error: {error}"
    elapsed = time.perf_counter() - started
    if tool_time is not None:
        tool_time.spent += elapsed
    return ToolRun(call, result, error, elapsed * 1000, round_)


async def _answer(
    call: ToolCall, tools: Mapping[str, Tool], timeout: float | None, tool_time: ToolTime
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
        return await _run_script(tool, call.arguments, timeout, tool_time)
    shown = json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)
    return "", f"{tool.name!r} has no answer for the arguments {shown}"


def _arguments_problem(arguments: dict[str, Any], parameters: dict[str, Any]) -> str | None:
    """Why ``arguments`` do not fit the JSON Schema ``parameters`` (None: they do)."""
    from jsonschema import exceptions, validators

    try:
        validators.validator_for(parameters)(parameters).validate(arguments)
    except RecursionError:  # a recursive schema followed as deep as the arguments nest
        return "they nest too deep to be checked against its schema"
    except exceptions.ValidationError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)
        return f"{exc.message}" + (f" (at `{where}`)" if where else "")
    except exceptions.SchemaError as exc:  # checked when the eval file was loaded
        return f"the tool's parameters are not a valid schema: {exc.message}"
    return None


async def _run_script(
    tool: Tool, arguments: dict[str, Any], timeout: float | None, tool_time: ToolTime
) -> tuple[str, str | None]:
    assert tool.script is not None
    own = tool.timeout_seconds if tool.timeout_seconds is not None else timeout
    left = tool_time.left()
    if left is not None and left <= 0:
        return "", tool_time.out_of_time()
    # the turn's time left bounds the call when it is shorter than the call's own limit
    bounded = left is not None and (own is None or left < own)
    limit = left if bounded else own
    stdin = json.dumps(arguments, ensure_ascii=False).encode("utf-8")
    try:
        done = await run_process(
            tool.script,
            cwd=tool.cwd,
            stdin=stdin,
            timeout=limit,
            stdout_head=MAX_RESULT_BYTES,
            # as a code evaluator's: what it prints goes to the model, so no vendor key
            # reaches it unless the tool names it
            env=child_environment(inherit=tool.inherit_env),
        )
    except OSError as exc:
        return "", f"the tool's script `{tool.script}` could not start: {exc.strerror or exc}"
    if done.timed_out:
        if bounded:
            return "", (
                f"the tool's script `{tool.script}` was stopped: the time for this turn's "
                f"tool calls ran out ({tool_time.limit:g} s, the run's --agent-timeout)"
            )
        assert limit is not None
        return "", f"the tool's script `{tool.script}` took more than {limit:g} s and was stopped"
    if done.exit_code != 0:
        tail = done.stderr_tail(STDERR_SHOWN)
        said = f": {tail}" if tail else ""
        return "", f"the tool's script `{tool.script}` {done.describe_exit()}{said}"
    return _result_of(done.stdout, done.stdout_bytes), None


def _result_of(stdout: str, size: int) -> str:
    """What a script printed (``stdout``, the start of ``size`` bytes) as the result the
    model gets: stripped, or, when longer than ``MAX_RESULT_CHARS`` characters, its start
    and a line saying how much there was."""
    text = stdout.strip()
    if len(text) <= MAX_RESULT_CHARS and size <= MAX_RESULT_BYTES:
        return text
    kept = stdout.lstrip()[:MAX_RESULT_CHARS]
    return (
        f"{kept}\n[agentv: the tool's output was {size:,} bytes: only its first "
        f"{len(kept):,} characters are kept, the rest was left out]"
    )
