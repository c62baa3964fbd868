"""The ``code`` evaluator: the user's script grades the answer (reference 9.3).

``script`` is run as a shell command (eval authors write things like ``uv run check.py``)
in the evaluator's ``cwd`` (the loader resolved it; else the eval file's folder), with the
run's environment but the vendors' key variables (``inherit_env`` narrows it to a list:
``agentv.system.env.child_environment``). It gets one JSON document on stdin and prints a JSON object on
stdout: ``{"score": 0..1, "hits": [...], "misses": [...], "reasoning": "..."}``.

A non-zero exit, output without a numeric ``score``, a score outside [0, 1] (or not a finite
number), a start failure or a timeout is a failure of the evaluator (score 0, ``error`` set,
the reason and stderr's tail in ``misses``), so a broken script is never mistaken for a bad
answer. On timeout or cancellation the script's whole process group is killed,
grandchildren included. Before a run, the loader resolves ``cwd`` and checks that the script
file the command names is there (``agentv.system.scripts``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from agentv.cases import EvaluatorConfig
from agentv.errors import Problem
from agentv.evaluators.base import (
    EvaluationContext,
    EvaluatorScore,
    EvaluatorSpec,
    Loading,
    excerpt,
    failed,
    number_text,
    text_list,
)
from agentv.messages import FileSegment, GuidelineRef, Message, TextSegment
from agentv.prompts.builder import system_turns
from agentv.system.env import child_environment
from agentv.system.process import ProcessResult, run_process
from agentv.system.scripts import script_problem
from agentv.trajectory import steps_dicts

STDERR_TAIL = 500  # characters of stderr kept in a failure's reason


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


def build_payload(ctx: EvaluationContext) -> dict[str, Any]:
    """The JSON document a script reads on stdin.

    The original's fields, then the documented names as aliases of the same values
    (``system_message`` has no original counterpart: the conversation's system turns),
    then the tools the candidate called (``trajectory``: null when its target cannot say).
    """
    case, prompt = ctx.case, ctx.prompt
    guideline_paths = [str(p) for p in prompt.guideline_paths]
    attachments = [str(p) for p in prompt.input_files]
    input_files = list(dict.fromkeys(guideline_paths + attachments))
    segments = _segments(case.input_messages)
    return {
        "question": prompt.question,
        "expected_outcome": case.outcome,
        "reference_answer": case.reference_answer,
        "candidate_answer": ctx.candidate,
        "guideline_paths": guideline_paths,
        "input_files": input_files,
        "input_segments": segments,
        "task": prompt.question,
        "outcome": case.outcome,
        "expected": case.reference_answer,
        "output": ctx.candidate,
        "system_message": system_turns(case.input_messages),
        "attachments": input_files,
        "user_segments": segments,
        "trajectory": steps_dicts(ctx.trajectory) if ctx.trajectory is not None else None,
    }


def _with_stderr(reason: str, result: ProcessResult) -> str:
    # masked before it is cut (the tail of stderr is where a key a script printed may sit)
    tail = result.stderr_tail(STDERR_TAIL)
    return f"{reason}; stderr: {tail}" if tail else reason


def _number(value: object) -> float | None:
    """A JSON number (or numeric string) as a float, whatever its range; None otherwise."""
    if isinstance(value, bool):  # JSON true/false is not a score
        return None
    if isinstance(value, int | float):
        try:
            return float(value)
        except OverflowError:  # an integer beyond any float
            return math.inf if value > 0 else -math.inf
    if isinstance(value, str):  # strictly as JSON writes numbers: never "0_1" or "nan"
        return number_text(value)
    return None


def _score_problem(value: object) -> str | None:
    """Why a numeric ``score`` is not a score (outside [0, 1], or not finite), or None."""
    number = _number(value)
    if number is not None and math.isfinite(number) and 0 <= number <= 1:
        return None
    shown = json.dumps(value) if isinstance(value, int | float) else repr(value)
    if len(shown) > 40:
        shown = shown[:37] + "..."
    return f"printed the score {shown}, but a score must be a number from 0 to 1"


def parse_output(stdout: str) -> dict[str, Any] | None:
    """The script's verdict: a JSON object with a numeric ``score``, or None (the score's
    range is checked by the caller).

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
        if isinstance(data, dict) and _number(data.get("score")) is not None:
            return data
    return None


class CodeSpec(EvaluatorSpec):
    """Runs ``script`` as a shell command, with the case as JSON on stdin, in ``cwd``."""

    type: Literal["code"]
    script: Annotated[str, Field(min_length=1)]
    cwd: str | None = None
    timeout_seconds: Annotated[float, Field(allow_inf_nan=False)] | None = None
    #: what the script inherits of the run's environment: variable names or ``*`` patterns
    #: (None: everything but the vendors' key variables; ``agentv.system.env.child_environment``)
    inherit_env: list[Annotated[str, Field(min_length=1)]] | None = None

    key_hints: ClassVar[Mapping[str, str]] = {
        **EvaluatorSpec.key_hints,
        "script": "add `script:` with the command to run",
    }

    def resolve(self, name: str, at: Loading) -> EvaluatorConfig:
        # None (said by the loader) when `cwd` cannot be used
        return EvaluatorConfig(name, self, cwd=at.folder(self.cwd, "cwd", "code evaluator folder"))

    def check(self, config: EvaluatorConfig, at: Loading) -> list[Problem]:
        cwd = config.cwd
        if cwd is None:
            return []  # a `cwd` that cannot be used is reported already
        # one look at the disk per script and folder in a file
        problem = at.memo(("script", self.script, cwd), lambda: script_problem(self.script, cwd))
        return [problem] if problem is not None else []

    async def evaluate(self, ctx: EvaluationContext, config: EvaluatorConfig) -> EvaluatorScore:
        cwd = config.cwd or ctx.case.eval_file.parent
        raw = {"script": self.script, "cwd": str(cwd)}
        timeout = self.timeout_seconds if self.timeout_seconds is not None else ctx.timeout
        if timeout is not None and timeout <= 0:
            timeout = None  # 0 means no limit, as for --agent-timeout
        stdin = json.dumps(build_payload(ctx), indent=2, ensure_ascii=False).encode("utf-8")
        try:
            # Through the shell, in its own process group: a timeout or a cancellation kills
            # the script's children too, and leftovers holding its output do not hold it up.
            result = await run_process(
                self.script,
                cwd=cwd,
                # the run's own variables, the vendors' keys only when named
                env=child_environment(inherit=self.inherit_env),
                stdin=stdin,
                timeout=timeout,
            )
        except NotADirectoryError:
            return failed(
                config,
                f"cannot run `{self.script}` in {cwd}: the folder does not exist",
                raw_request=raw,
            )
        except OSError as exc:
            return failed(
                config,
                f"cannot run `{self.script}` in {cwd}: {exc.strerror or exc}",
                raw_request=raw,
            )
        if result.timed_out:
            return failed(
                config,
                f"code evaluator timed out after {timeout:g} s and was stopped; "
                "raise `timeout_seconds` on the evaluator or --agent-timeout",
                raw_request=raw,
            )
        if result.exit_code != 0:
            reason = f"`{self.script}` {result.describe_exit()}"
            return failed(config, _with_stderr(reason, result), raw_request=raw)
        data = parse_output(result.stdout)
        if data is None:
            shown = excerpt(result.stdout)
            reason = (
                f"`{self.script}` did not print a JSON object with a numeric `score` on stdout"
                f" (it printed {shown!r})"
                if shown
                else f"`{self.script}` printed nothing on stdout"
                " (expected a JSON object with a numeric `score`)"
            )
            return failed(config, _with_stderr(reason, result), raw_request=raw)
        problem = _score_problem(data.get("score"))
        if problem is not None:  # never clamped: 7 on a 0-10 scale is not a full mark
            return failed(config, f"`{self.script}` {problem}", raw_request=raw)
        hits = text_list(data.get("hits"))
        misses = text_list(data.get("misses"))
        reasoning = data.get("reasoning")
        return EvaluatorScore(
            name=config.name,
            type=config.type,
            score=_number(data.get("score")) or 0.0,
            hits=hits,
            misses=misses,
            reasoning=reasoning.strip()
            if isinstance(reasoning, str) and reasoning.strip()
            else None,
            raw_request=raw,
            expected_aspect_count=len(hits) + len(misses) or 1,
        )
