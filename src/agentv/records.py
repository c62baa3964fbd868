"""Step 8 of the data flow: one case's outcome becomes one result record (one JSONL line).

Key order follows the original AgentV's result record; absent values are left out rather
than written as null. ``raw_request`` (docs/prompt-rules.md, "What is logged") shows what
was sent: the question with its markers, the guidelines, the files and, for LM targets,
the messages in agentv's neutral shape (the very list the provider mapped to its wire
shape, words unchanged) with the request's settings as sent. Nothing here ever holds a
secret: providers record what they sent without credentials.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, model_serializer

from agentv.errors import InputError
from agentv.messages import FileSegment, chat_to_dicts
from agentv.prompts import Prompt

if TYPE_CHECKING:
    from agentv.cases import EvalCase, InvalidCase
    from agentv.evaluators.base import CaseGrade
    from agentv.providers.base import Provider, ProviderResponse


#: how a case ended (``status`` in every record)
OK = "ok"  # graded, score at or above the pass threshold
FAILED = "failed"  # graded, below the pass threshold
ERROR = "error"  # the target or an evaluator could not do its job
INVALID = "invalid"  # the case could not be loaded, or its target or judge cannot be used
STATUSES = (OK, FAILED, ERROR, INVALID)
#: the default lowest score that passes (``--pass-threshold``, ``pass_threshold`` in config)
DEFAULT_PASS_THRESHOLD = 0.8


class EvalResult(BaseModel):
    """One case's result: exactly one line of the results file.

    ``model_dump(mode="json")`` is that line (absent values are left out, as in the file);
    ``EvalResult.model_validate(json.loads(line))`` reads one back. Fields are in the file's
    key order.
    """

    # built on first use (the Python API, ``compare``, ``report``), not by every import:
    # the command line writes records as dicts and never needs it
    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)

    eval_id: str | None = None
    """The case's id (absent only for an invalid case without a usable id)."""
    dataset: str
    conversation_id: str | None = None
    status: str
    """``ok``, ``failed`` (graded below the pass threshold), ``error`` or ``invalid``."""
    passed: bool
    score: float
    hits: list[str]
    misses: list[str]
    candidate_answer: str
    expected_aspect_count: int
    target: str | None = None
    timestamp: str
    repeat: int | None = None
    """Which run of the case on its target (0 .. N-1 with ``--repeat N``)."""
    raw_aspects: list[Any] | None = None
    reasoning: str | None = None
    lm_provider_request: dict[str, Any] | None = None
    agent_provider_request: dict[str, Any] | None = None
    raw_request: dict[str, Any] | None = None
    evaluator_results: list[dict[str, Any]] | None = None
    evaluator_raw_request: dict[str, Any] | None = None
    usage: dict[str, Any] | None = None
    finish_reason: str | None = None
    """How the target's answer ended: ``stop``, ``length`` (cut at the output token limit),
    ``tool_calls``, ``content_filter`` or ``other`` (LM API targets)."""
    finish_reason_raw: str | None = None
    """The API's own word for how the answer ended (``end_turn``, ``MAX_TOKENS``...)."""
    token_limit_ignored: bool | None = None
    """True when the answer has more output tokens than the limit sent: the server did not
    honour it (``max_tokens_param`` names the limit as the server knows it)."""
    latency_ms: float | None = None
    duration_ms: float | None = None
    attempts: int | None = None
    """Requests sent to the target for this case (retries included; 0: none was sent)."""
    eval_file: str | None = None
    line: int | None = None
    """Where the case is written (1-based)."""
    large_content: dict[str, str] | None = None
    """Attachments larger than 64 KiB, once each, by SHA-256: the request fields hold
    ``<<agentv:large_content SHA256>>`` in their place (so a record stays near the size of
    what was sent; put each text back to get the request exactly as sent)."""
    masked_secrets: bool | None = None
    """True when a known secret value was masked (``***``) in this record or in the answer
    its evaluators saw (``agentv.masking``); absent otherwise."""
    error: str | None = None
    """Why the case's status is ``error`` or ``invalid``."""

    @model_serializer(mode="wrap")
    def _without_absent(self, handler: Any) -> dict[str, Any]:
        return {k: v for k, v in handler(self).items() if v is not None}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> EvalResult:
        """The model of a record built by this module (already valid: not checked again)."""
        return cls.model_construct(**record)


def utc_timestamp() -> str:
    """ISO-8601 UTC with milliseconds, e.g. ``2025-11-30T01:02:03.456Z``."""
    global _last_second
    seconds, millis = divmod(time.time_ns() // 1_000_000, 1000)
    last = _last_second
    if last[0] != seconds:  # records come many a second: each second is formatted once
        last = _last_second = (seconds, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)))
    return f"{last[1]}.{millis:03d}Z"


_last_second: tuple[int, str] = (-1, "")  # a second since the epoch, and its text


def _paths(paths: list[Any]) -> list[str]:
    return [str(p) for p in paths]


def raw_request(
    prompt: Prompt,
    provider: Provider,
    response: ProviderResponse | None,
    chat_prompt: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """What was sent to the target for this case (or would have been, when it failed first)."""
    record: dict[str, Any] = {
        "question": prompt.question,
        "guidelines": prompt.guidelines,
        "guideline_paths": _paths(prompt.guideline_paths),
        "input_files": _paths(prompt.input_files),
    }
    if not provider.is_agent:
        record["chat_prompt"] = (
            chat_prompt if chat_prompt is not None else chat_to_dicts(prompt.messages)
        )
        if prompt.added_user_turn:
            record["added_user_turn"] = True
    sent = response.sent if response is not None else {}
    for key, value in sent.items():
        # `messages` is chat_prompt above; `request` (the vendor payload) repeats it at length.
        if key not in ("messages", "request") and key not in record:
            record[key] = value
    return record


def _requests(
    prompt: Prompt, provider: Provider, response: ProviderResponse | None, error: str | None
) -> dict[str, Any]:
    """The original's ``agent_provider_request`` / ``lm_provider_request`` record, then
    ``raw_request``; for LM targets both show the one message list that was sent."""
    chat = None
    if provider.is_agent:
        name, rec = "agent_provider_request", {"question": prompt.question}
    else:
        chat = chat_to_dicts(prompt.messages)
        name, rec = "lm_provider_request", {"chat_prompt": chat}
    rec["guideline_paths"] = _paths(prompt.guideline_paths)
    if error is not None:
        rec["error"] = error
    return {name: rec, "raw_request": raw_request(prompt, provider, response, chat)}


def grade_status(grade: CaseGrade, pass_threshold: float) -> str:
    """``error`` when an evaluator could not grade, else ``ok`` or ``failed`` by score."""
    return _status(grade, pass_threshold, grade.evaluator_errors())


def _status(grade: CaseGrade, pass_threshold: float, errors: list[tuple[str, str]]) -> str:
    if errors:
        return ERROR
    return OK if grade.score >= pass_threshold else FAILED


def evaluator_error_text(grade: CaseGrade) -> str | None:
    """The ``error`` of a case whose evaluators could not all grade (None when they did)."""
    return _error_text(grade.evaluator_errors())


def _error_text(errors: list[tuple[str, str]]) -> str | None:
    if not errors:
        return None
    return "; ".join(f"evaluator {name!r} could not grade: {reason}" for name, reason in errors)


def _head(case: EvalCase, status: str) -> dict[str, Any]:
    rec: dict[str, Any] = {"eval_id": case.id, "dataset": case.dataset}
    if case.conversation_id:
        rec["conversation_id"] = case.conversation_id
    rec["status"] = status
    rec["passed"] = status == OK
    return rec


#: an attachment larger than this is stored once per record (``large_content``)
LARGE_CONTENT = 64 * 1024
_REQUEST_FIELDS = (
    "lm_provider_request",
    "agent_provider_request",
    "raw_request",
    "evaluator_results",
    "evaluator_raw_request",
)


def large_content_ref(digest: str) -> str:
    """What stands for a large attachment's text in a record's request fields."""
    return f"<<agentv:large_content {digest}>>"


def put_back_large_content(value: Any, store: dict[str, str]) -> Any:
    """``value`` (a record's field) with its large attachments put back in their place."""
    if not store:
        return value
    if isinstance(value, str):
        for digest, text in store.items():
            value = value.replace(large_content_ref(digest), text)
        return value
    if isinstance(value, dict):
        return {k: put_back_large_content(v, store) for k, v in value.items()}
    if isinstance(value, list):
        return [put_back_large_content(v, store) for v in value]
    return value


def read_results(path: Path, *, strict: bool = True) -> Iterator[tuple[int, dict[str, Any]]]:
    """The records of a JSON Lines results file with their line numbers, one at a time.

    ``strict``: a line that is not a record is an ``InputError`` naming the file and line;
    otherwise it is passed over (a partial last line left by a killed run, say)."""
    try:
        handle = path.open(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputError(f"cannot read results file {path}: {exc.strerror or exc}") from None
    with handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                record = None
            if not isinstance(record, dict) or not (strict or line.endswith("\n")):
                if strict:
                    raise InputError(
                        f"{path}:{number}: not a result line (a JSON record); give a results "
                        "file written by agentv eval"
                    )
                continue
            yield number, record


def _store_large_once(rec: dict[str, Any], case: EvalCase) -> None:
    """Keep each large attachment's text once (``large_content``); the question, the
    messages and the judge prompt refer to it instead of repeating it."""
    texts: set[str] = set()
    for msg in case.input_messages:  # a plain loop: this runs for every record
        for seg in msg.segments:
            if isinstance(seg, FileSegment) and len(seg.text) > LARGE_CONTENT:
                texts.add(seg.text.rstrip())
    if not texts:
        return
    refs: dict[str, str] = {}
    store: dict[str, str] = {}
    for text in sorted(texts, key=len, reverse=True):  # a text inside another goes after it
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        refs[text] = large_content_ref(digest)
        store[digest] = text

    def swap(value: Any) -> Any:
        if isinstance(value, str):
            for text, ref in refs.items():
                if text in value:
                    value = value.replace(text, ref)
            return value
        if isinstance(value, dict):
            return {k: swap(v) for k, v in value.items()}
        if isinstance(value, list):
            return [swap(v) for v in value]
        return value

    for key in _REQUEST_FIELDS:
        if key in rec:
            rec[key] = swap(rec[key])
    rec["large_content"] = store


def _tail(rec: dict[str, Any], case: EvalCase, attempts: int, error: str | None) -> None:
    rec["attempts"] = attempts
    rec["eval_file"] = str(case.eval_file)
    if case.line is not None:
        rec["line"] = case.line
    _store_large_once(rec, case)
    if error is not None:
        rec["error"] = error


def result_record(
    case: EvalCase,
    *,
    target: str,
    provider: Provider,
    prompt: Prompt,
    response: ProviderResponse,
    grade: CaseGrade,
    duration_ms: float,
    pass_threshold: float = DEFAULT_PASS_THRESHOLD,
    attempts: int = 1,
    repeat: int = 0,
) -> dict[str, Any]:
    """The record of a case that got an answer and was graded."""
    errors = grade.evaluator_errors()
    rec = _head(case, _status(grade, pass_threshold, errors))
    rec["score"] = grade.score
    rec["hits"] = grade.hits
    rec["misses"] = grade.misses
    rec["candidate_answer"] = response.text
    rec["expected_aspect_count"] = grade.expected_aspect_count
    rec["target"] = target
    rec["timestamp"] = utc_timestamp()
    rec["repeat"] = repeat
    if grade.reasoning:
        rec["reasoning"] = grade.reasoning
    rec.update(_requests(prompt, provider, response, None))
    if grade.evaluator_results is not None:
        rec["evaluator_results"] = [r.to_dict() for r in grade.evaluator_results]
    elif grade.evaluator_raw_request is not None:
        rec["evaluator_raw_request"] = grade.evaluator_raw_request
    if response.usage is not None:
        rec["usage"] = response.usage.to_dict()
    if response.finish_reason is not None:
        rec["finish_reason"] = response.finish_reason
        if response.finish_reason_raw is not None:
            rec["finish_reason_raw"] = response.finish_reason_raw
    if response.token_limit_ignored:
        rec["token_limit_ignored"] = True
    if response.latency_ms is not None:
        rec["latency_ms"] = round(response.latency_ms, 3)
    rec["duration_ms"] = round(duration_ms, 3)
    _tail(rec, case, attempts, _error_text(errors))
    return rec


def error_record(
    case: EvalCase,
    *,
    target: str,
    provider: Provider | None,
    prompt: Prompt | None,
    error: str,
    duration_ms: float,
    attempts: int = 0,
    repeat: int = 0,
) -> dict[str, Any]:
    """The record of a case that failed before it could be graded (score 0, ``error`` set)."""
    rec = _head(case, ERROR)
    rec.update(
        score=0.0,
        hits=[],
        misses=[f"Error: {error}"],
        candidate_answer=f"Error occurred: {error}",
        expected_aspect_count=0,
        target=target,
        timestamp=utc_timestamp(),
        repeat=repeat,
        raw_aspects=[],
    )
    if provider is not None and prompt is not None:
        rec.update(_requests(prompt, provider, None, error))
    rec["duration_ms"] = round(duration_ms, 3)
    _tail(rec, case, attempts, error)
    return rec


def invalid_record(
    invalid: InvalidCase, target: str | None = None, repeat: int | None = None
) -> dict[str, Any]:
    """The record of a case that could not run: where it is written and why."""
    rec: dict[str, Any] = {}
    if invalid.id is not None:
        rec["eval_id"] = invalid.id
    rec.update(
        dataset=invalid.dataset,
        status=INVALID,
        passed=False,
        score=0.0,
        hits=[],
        misses=[f"Invalid: {invalid.reason}"],
        candidate_answer="",
        expected_aspect_count=0,
    )
    if target is not None:
        rec["target"] = target
    rec["timestamp"] = utc_timestamp()
    if repeat is not None:
        rec["repeat"] = repeat
    rec["attempts"] = 0
    rec["eval_file"] = str(invalid.eval_file)
    if invalid.line is not None:
        rec["line"] = invalid.line
    rec["error"] = invalid.reason
    return rec
