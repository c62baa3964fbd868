"""Building blocks for the evaluator tests: cases, contexts and a recording judge."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from agentv.cases import EvalCase, EvaluatorConfig
from agentv.evaluators.base import EvaluationContext
from agentv.evaluators.code import CodeSpec
from agentv.evaluators.deterministic import ContainsSpec, EqualsSpec, IsJsonSpec, RegexSpec
from agentv.evaluators.llm_judge import LlmJudgeSpec
from agentv.messages import GuidelineFile, Message, Segment, TextSegment
from agentv.prompts.builder import Mode, PromptSettings, build_prompt
from agentv.providers.base import (
    Provider,
    ProviderRequest,
    ProviderResponse,
    ProviderSettings,
    Usage,
)
from agentv.trajectory import Trajectory


def user(text: str) -> Message:
    return Message("user", (TextSegment(text),))


def msg(role: str, *segments: Segment) -> Message:
    return Message(role, tuple(segments))  # type: ignore[arg-type]


def make_case(
    folder: Path,
    *,
    messages: Sequence[Message] = (),
    outcome: str = "Names the capital of France.",
    reference: str = "",
    expected: Sequence[Message] = (),
    evaluators: Sequence[EvaluatorConfig] = (),
    guideline_files: Sequence[GuidelineFile] = (),
    input_files: Sequence[Path] = (),
    default_evaluator: str = "llm_judge",
    case_id: str = "capital",
) -> EvalCase:
    return EvalCase(
        id=case_id,
        dataset="geo",
        eval_file=folder / "geo.yaml",
        outcome=outcome,
        input_messages=tuple(messages) or (user("What is the capital of France?"),),
        expected_messages=tuple(expected),
        reference_answer=reference,
        guideline_files=tuple(guideline_files),
        input_files=tuple(input_files),
        evaluators=tuple(evaluators),
        default_evaluator=default_evaluator,
    )


def make_ctx(
    case: EvalCase,
    candidate: str,
    *,
    judge: Provider | None = None,
    mode: Mode = "lm",
    timeout: float | None = None,
    attempt: int = 0,
    trajectory: Trajectory | None = None,
    trajectory_error: str | None = None,
) -> EvaluationContext:
    return EvaluationContext(
        case=case,
        prompt=build_prompt(case, PromptSettings(mode)),
        candidate=candidate,
        target_name="candidate-target",
        judge=judge,
        timeout=timeout,
        attempt=attempt,
        trajectory=trajectory,
        trajectory_error=trajectory_error,
    )


def contains(value: str, name: str = "contains", *, ignore_case: bool = False) -> EvaluatorConfig:
    kind = "icontains" if ignore_case else "contains"
    return EvaluatorConfig(name, ContainsSpec(type=kind, value=value))


def equals(value: str, name: str = "equals") -> EvaluatorConfig:
    return EvaluatorConfig(name, EqualsSpec(type="equals", value=value))


def regex(value: str, flags: str | None = None, name: str = "regex") -> EvaluatorConfig:
    return EvaluatorConfig(name, RegexSpec(type="regex", value=value, flags=flags))


def is_json(schema: object = None, name: str = "is_json") -> EvaluatorConfig:
    return EvaluatorConfig(name, IsJsonSpec.model_validate({"type": "is_json", "schema": schema}))


def judge(
    name: str = "judge", *, prompt: str | None = None, model: str | None = None
) -> EvaluatorConfig:
    return EvaluatorConfig(name, LlmJudgeSpec(type="llm_judge", model=model), prompt_text=prompt)


def code(
    script: str,
    cwd: Path | None = None,
    *,
    name: str = "check",
    timeout_seconds: float | None = None,
) -> EvaluatorConfig:
    spec = CodeSpec(type="code", script=script, timeout_seconds=timeout_seconds)
    return EvaluatorConfig(name, spec, cwd=cwd)


class JudgeSettings(ProviderSettings):
    api_key: str = ""


class FakeJudge(Provider):
    """A judge that records every request and answers from a script of replies.

    A reply is a string (the judge's text), a ``ProviderResponse``, or an exception to raise.
    """

    kind = "fake"
    Settings = JudgeSettings

    def __init__(self, *replies: str | ProviderResponse | BaseException, api_key: str = "") -> None:
        super().__init__("judge-target", JudgeSettings(api_key=api_key))
        self.replies = list(replies)
        self.requests: list[ProviderRequest] = []

    async def invoke(self, request: ProviderRequest) -> ProviderResponse:
        self.requests.append(request)
        reply = self.replies.pop(0)
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, ProviderResponse):
            return reply
        return ProviderResponse(text=reply, usage=Usage(10, 5, 15), latency_ms=12.0)
