"""The ``code`` evaluator: the user's script grades the answer (reference 9.3).

``script`` is run as a shell command (eval authors write things like ``uv run check.py``)
in the evaluator's ``cwd`` (the loader resolved it; else the eval file's folder), with the
environment inherited. It gets one JSON document on stdin and prints a JSON object on
stdout: ``{"score": 0..1, "hits": [...], "misses": [...], "reasoning": "..."}``.

A non-zero exit, output without a numeric ``score``, a start failure or a timeout is a
failure of the evaluator (score 0, ``error`` set, the reason and stderr's tail in
``misses``), so a broken script is never mistaken for a bad answer. On timeout or
cancellation the script's whole process group is killed, grandchildren included.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from agentv.evalfile.schema import CodeSpec
from agentv.evaluators.base import (
    EvaluationContext,
    EvaluatorScore,
    as_score,
    excerpt,
    failed,
    text_list,
)
from agentv.messages import FileSegment, GuidelineRef, Message, TextSegment

if TYPE_CHECKING:
    from agentv.cases import EvaluatorConfig

STDERR_TAIL = 500  # characters of stderr kept in a failure's reason
DRAIN_SECONDS = 1.0  # how long output may stay open after the script exited or was killed
EXIT_POLL_SECONDS = 0.05


def _segments(messages: tuple[Message, ...]) -> list[dict[str, str]]:
    """Every input segment, flattened across messages; guideline references are left out
    (their paths are in ``guideline_paths``)."""
    out: list[dict[str, str]] = []
    for msg in messages:
        for seg in msg.segments:
            match seg:
                case TextSegment():
                    out.append({"type": "text", "value": seg.value})
                case FileSegment():
                    out.append(
                        {
                            "type": "file",
                            "path": seg.path,
                            "text": seg.text,
                            "resolved_path": str(seg.resolved),
                        }
                    )
                case GuidelineRef():
                    pass
    return out


def _system_text(messages: tuple[Message, ...]) -> str:
    """The text of the conversation's own system turns, joined by a blank line."""
    turns = []
    for msg in messages:
        if msg.role != "system":
            continue
        parts = [
            s.value if isinstance(s, TextSegment) else f"=== {s.path} ===\n{s.text.rstrip()}"
            for s in msg.segments
            if isinstance(s, TextSegment | FileSegment)
        ]
        text = "\n".join(parts)
        if text.strip():
            turns.append(text)
    return "\n\n".join(turns)


def build_payload(ctx: EvaluationContext) -> dict[str, Any]:
    """The JSON document a script reads on stdin.

    The original's fields, then the documented names as aliases of the same values
    (``system_message`` has no original counterpart: the conversation's system turns).
    """
    case, inputs = ctx.case, ctx.inputs
    guideline_paths = [str(p) for p in inputs.guideline_paths]
    attachments = [str(p) for p in inputs.input_files]
    input_files = list(dict.fromkeys(guideline_paths + attachments))
    segments = _segments(case.input_messages)
    return {
        "question": inputs.question,
        "expected_outcome": case.outcome,
        "reference_answer": case.reference_answer,
        "candidate_answer": ctx.candidate,
        "guideline_paths": guideline_paths,
        "input_files": input_files,
        "input_segments": segments,
        "task": inputs.question,
        "outcome": case.outcome,
        "expected": case.reference_answer,
        "output": ctx.candidate,
        "system_message": _system_text(case.input_messages),
        "attachments": input_files,
        "user_segments": segments,
    }


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """Kill the script and everything it started (it leads its own process group)."""
    try:
        if hasattr(os, "killpg"):
            os.killpg(proc.pid, signal.SIGKILL)
        else:  # pragma: no cover - not POSIX
            proc.kill()
    except (ProcessLookupError, PermissionError):
        pass  # already gone


class _TimedOut(Exception):
    pass


async def _exit(proc: asyncio.subprocess.Process) -> int:
    """The script's exit code, as soon as it has exited.

    ``Process.wait()`` is not enough: on Python 3.11 it does not return while a leftover
    background process still holds the pipes, so the exit is polled.
    """
    while proc.returncode is None:
        await asyncio.sleep(EXIT_POLL_SECONDS)
    return proc.returncode


async def _settle(proc: asyncio.subprocess.Process, io: asyncio.Future[Any]) -> None:
    """After a kill: reap the process and stop reading (bounded, whatever escaped)."""
    if not io.done():
        await asyncio.wait({io}, timeout=DRAIN_SECONDS)
    io.cancel()
    with contextlib.suppress(BaseException):
        await io
    with contextlib.suppress(BaseException):
        await asyncio.wait_for(_exit(proc), DRAIN_SECONDS)


async def run_script(
    command: str, cwd: Path, stdin: bytes, timeout: float | None
) -> tuple[int, str, str]:
    """Run ``command`` through the shell; (exit code, stdout, stderr).

    Raises ``OSError`` when it cannot start and ``_TimedOut`` after killing it on timeout.
    A background process the script leaves behind holding its output open is killed once
    the script has exited, so that it cannot hold the evaluation up.
    """
    proc = await asyncio.create_subprocess_shell(
        command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=cwd,
        start_new_session=True,  # own process group: a timeout kills grandchildren too
    )
    io = asyncio.ensure_future(proc.communicate(stdin))
    exited = asyncio.ensure_future(_exit(proc))
    try:
        # Usually the output closes when the script exits; either way, stop on the first.
        done, _ = await asyncio.wait({io, exited}, timeout=timeout, return_when="FIRST_COMPLETED")
        if not done:
            _kill_group(proc)
            await _settle(proc, io)
            raise _TimedOut
        if not io.done():
            done, _ = await asyncio.wait({io}, timeout=DRAIN_SECONDS)
            if not done:
                _kill_group(proc)  # leftovers of the script still hold the pipes
                done, _ = await asyncio.wait({io}, timeout=DRAIN_SECONDS)
            if not done:  # pragma: no cover - a descendant that left the process group
                io.cancel()
                escaped = "its output was held open by a process that left its process group"
                return await _exit(proc), "", escaped
        out, err = io.result()
    except _TimedOut:
        raise
    except BaseException:  # cancelled (Ctrl-C, shutdown): leave nothing running
        _kill_group(proc)
        await _settle(proc, io)
        raise
    finally:
        exited.cancel()
    return await _exit(proc), out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def _tail(stderr: str) -> str:
    text = stderr.strip()
    return text if len(text) <= STDERR_TAIL else "…" + text[-STDERR_TAIL:]


def _with_stderr(reason: str, stderr: str) -> str:
    tail = _tail(stderr)
    return f"{reason}; stderr: {tail}" if tail else reason


def parse_output(stdout: str) -> dict[str, Any] | None:
    """The script's verdict: a JSON object with a numeric ``score``, or None.

    Tried: the whole output, its last non-blank line (scripts that log first), and the
    text from the first ``{`` to the last ``}``.
    """
    text = stdout.strip()
    if not text:
        return None
    candidates = [text]
    lines = text.splitlines()
    if len(lines) > 1:
        candidates.append(lines[-1])
    first, last = text.find("{"), text.rfind("}")
    if 0 <= first < last and (first > 0 or last < len(text) - 1):
        candidates.append(text[first : last + 1])
    for candidate in candidates:
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(data, dict) and as_score(data.get("score")) is not None:
            return data
    return None


class CodeEvaluator:
    """Runs the evaluator's script with the case as JSON on stdin."""

    type: ClassVar[str] = "code"

    async def evaluate(self, ctx: EvaluationContext, config: EvaluatorConfig) -> EvaluatorScore:
        spec = config.spec
        assert isinstance(spec, CodeSpec)
        cwd = config.cwd or ctx.case.eval_file.parent
        raw = {"script": spec.script, "cwd": str(cwd)}
        timeout = spec.timeout_seconds if spec.timeout_seconds is not None else ctx.timeout
        if timeout is not None and timeout <= 0:
            timeout = None  # 0 means no limit, as for --agent-timeout
        stdin = json.dumps(build_payload(ctx), indent=2, ensure_ascii=False).encode("utf-8")
        try:
            code, stdout, stderr = await run_script(spec.script, cwd, stdin, timeout)
        except _TimedOut:
            return failed(
                config,
                f"code evaluator timed out after {timeout:g} s and was stopped; "
                "raise `timeout_seconds` on the evaluator or --agent-timeout",
                raw_request=raw,
            )
        except OSError as exc:
            return failed(
                config,
                f"cannot run `{spec.script}` in {cwd}: {exc.strerror or exc}",
                raw_request=raw,
            )
        if code != 0:
            if code < 0:
                try:
                    how = f"was killed by {signal.Signals(-code).name}"
                except ValueError:
                    how = f"was killed by signal {-code}"
            else:
                how = f"exited with code {code}"
            return failed(config, _with_stderr(f"`{spec.script}` {how}", stderr), raw_request=raw)
        data = parse_output(stdout)
        if data is None:
            shown = excerpt(stdout)
            reason = (
                f"`{spec.script}` did not print a JSON object with a numeric `score` on stdout"
                f" (it printed {shown!r})"
                if shown
                else f"`{spec.script}` printed nothing on stdout"
                " (expected a JSON object with a numeric `score`)"
            )
            return failed(config, _with_stderr(reason, stderr), raw_request=raw)
        hits = text_list(data.get("hits"))
        misses = text_list(data.get("misses"))
        reasoning = data.get("reasoning")
        return EvaluatorScore(
            name=config.name,
            type=config.type,
            score=as_score(data.get("score")) or 0.0,
            hits=hits,
            misses=misses,
            reasoning=reasoning.strip()
            if isinstance(reasoning, str) and reasoning.strip()
            else None,
            raw_request=raw,
            expected_aspect_count=len(hits) + len(misses) or 1,
        )
