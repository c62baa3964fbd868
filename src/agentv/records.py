"""Step 8 of the data flow: one case's outcome becomes one result record (one JSONL line).

Key order follows the original AgentV's result record; absent values are left out rather
than written as null. ``raw_request`` (prompt-rules section 8) shows what was sent: the
question with its markers, the guidelines, the files and, for LM targets, the chat prompt
exactly as sent. Nothing here ever holds a secret: providers record what they sent without
credentials.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from agentv.messages import chat_to_dicts
from agentv.prompts import PromptInputs, sent_messages

if TYPE_CHECKING:
    from agentv.cases import EvalCase
    from agentv.evaluators.base import CaseGrade
    from agentv.providers.base import Provider, ProviderResponse


def utc_timestamp() -> str:
    """ISO-8601 UTC with milliseconds, e.g. ``2025-11-30T01:02:03.456Z``."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _paths(paths: list[Any]) -> list[str]:
    return [str(p) for p in paths]


def raw_request(
    inputs: PromptInputs,
    provider: Provider,
    response: ProviderResponse | None,
) -> dict[str, Any]:
    """What was sent to the target for this case (or would have been, when it failed first)."""
    record: dict[str, Any] = {
        "question": inputs.question,
        "guidelines": inputs.guidelines,
        "guideline_paths": _paths(inputs.guideline_paths),
        "input_files": _paths(inputs.input_files),
    }
    sent = response.sent if response is not None else {}
    if not provider.is_agent:
        messages = sent.get("messages")
        if messages is None:
            messages = chat_to_dicts(
                sent_messages(inputs.chat_prompt, system_prompt=provider.system_prompt)
            )
        record["chat_prompt"] = messages
    for key, value in sent.items():
        # `messages` is chat_prompt above; `request` (the vendor payload) repeats it at length.
        if key not in ("messages", "request") and key not in record:
            record[key] = value
    return record


def _provider_request(
    inputs: PromptInputs, provider: Provider, error: str | None
) -> tuple[str, dict[str, Any]]:
    """The original's ``agent_provider_request`` / ``lm_provider_request`` record."""
    if provider.is_agent:
        name, rec = "agent_provider_request", {"question": inputs.question}
    else:
        name, rec = "lm_provider_request", {"chat_prompt": chat_to_dicts(inputs.chat_prompt)}
    rec["guideline_paths"] = _paths(inputs.guideline_paths)
    if error is not None:
        rec["error"] = error
    return name, rec


def result_record(
    case: EvalCase,
    *,
    target: str,
    provider: Provider,
    inputs: PromptInputs,
    response: ProviderResponse,
    grade: CaseGrade,
    duration_ms: float,
) -> dict[str, Any]:
    """The record of a case that got an answer and was graded."""
    rec: dict[str, Any] = {"eval_id": case.id, "dataset": case.dataset}
    if case.conversation_id:
        rec["conversation_id"] = case.conversation_id
    rec["score"] = grade.score
    rec["hits"] = grade.hits
    rec["misses"] = grade.misses
    rec["candidate_answer"] = response.text
    rec["expected_aspect_count"] = grade.expected_aspect_count
    rec["target"] = target
    rec["timestamp"] = utc_timestamp()
    if grade.reasoning:
        rec["reasoning"] = grade.reasoning
    name, req = _provider_request(inputs, provider, None)
    rec[name] = req
    rec["raw_request"] = raw_request(inputs, provider, response)
    if grade.evaluator_results is not None:
        rec["evaluator_results"] = [r.to_dict() for r in grade.evaluator_results]
    elif grade.evaluator_raw_request is not None:
        rec["evaluator_raw_request"] = grade.evaluator_raw_request
    if response.usage is not None:
        rec["usage"] = response.usage.to_dict()
    if response.latency_ms is not None:
        rec["latency_ms"] = round(response.latency_ms, 3)
    rec["duration_ms"] = round(duration_ms, 3)
    return rec


def error_record(
    case: EvalCase,
    *,
    target: str,
    provider: Provider | None,
    inputs: PromptInputs | None,
    error: str,
    duration_ms: float,
) -> dict[str, Any]:
    """The record of a case that failed before it could be graded (score 0, ``error`` set)."""
    rec: dict[str, Any] = {"eval_id": case.id, "dataset": case.dataset}
    if case.conversation_id:
        rec["conversation_id"] = case.conversation_id
    rec.update(
        score=0.0,
        hits=[],
        misses=[f"Error: {error}"],
        candidate_answer=f"Error occurred: {error}",
        expected_aspect_count=0,
        target=target,
        timestamp=utc_timestamp(),
        raw_aspects=[],
    )
    if provider is not None and inputs is not None:
        name, req = _provider_request(inputs, provider, error)
        rec[name] = req
        rec["raw_request"] = raw_request(inputs, provider, None)
    rec["duration_ms"] = round(duration_ms, 3)
    rec["error"] = error
    return rec
