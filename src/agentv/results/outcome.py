"""Step 8 of the data flow: one case's outcome becomes one result record (one line).

``raw_request`` (docs/prompt-rules.md, "What is logged") shows what was sent: the question
with its markers, the guidelines, the files and, for LM targets, the messages in agentv's
neutral shape (the very list the provider mapped to its wire shape, words unchanged) with
the request's settings as sent. Nothing here ever holds a secret: providers record what
they sent without credentials. Records are plain mappings in ``EvalResult``'s shape and key
order (``agentv.results.record``), written as they are.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentv.evaluators.base import required_miss_line
from agentv.evaluators.samples import stricter
from agentv.messages import FileSegment, chat_to_dicts
from agentv.prompts.builder import Prompt
from agentv.results.record import (
    DEFAULT_PASS_THRESHOLD,
    ERROR,
    FAILED,
    INVALID,
    LARGE_CONTENT,
    OK,
    SKIPPED,
    UNCERTAIN,
    large_content_ref,
    utc_timestamp,
)
from agentv.trajectory import Trajectory, steps_dicts

if TYPE_CHECKING:
    from agentv.cases import EvalCase, InvalidCase
    from agentv.evaluators.base import CaseGrade, EvaluatorScore
    from agentv.providers.base import Provider, ProviderResponse, Usage

#: the fields where a large text (an attachment, an answer) is stored once (``large_content``)
_STORED_ONCE = (
    "candidate_answer",
    "lm_provider_request",
    "agent_provider_request",
    "raw_request",
    "evaluator_results",
    "evaluator_raw_request",
    "turns",
)


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


def grading_fields(
    grade: CaseGrade, pass_threshold: float = DEFAULT_PASS_THRESHOLD
) -> dict[str, Any]:
    """What a record holds of its grading: every evaluator's entry (``evaluator_results``,
    a required or thresholded one with its threshold and whether it passed) or, for the
    default evaluator, its call's record (``evaluator_raw_request``, with that call's
    tokens, failure and reuse beside it). The summary reads its judge figures from these."""
    if grade.evaluator_results is not None:
        return {"evaluator_results": [r.to_dict(pass_threshold) for r in grade.evaluator_results]}
    if grade.evaluator_raw_request is not None:
        return {"evaluator_raw_request": grade.evaluator_raw_request}
    return {}


def grade_status(grade: CaseGrade, pass_threshold: float) -> str:
    """``error`` when an evaluator could not grade; else, when the verdict hangs on a
    judge whose samples disagreed, ``uncertain`` (or what its ``on_uncertain`` says); else
    ``failed`` when a required evaluator missed, else ``ok`` or ``failed`` by score."""
    return _status(grade, pass_threshold, grade.evaluator_errors())


#: what ``on_uncertain`` makes of a verdict that hangs on a judge's disagreeing samples
_RESOLVED = {"uncertain": UNCERTAIN, "fail": FAILED, "pass": OK}


def _status(grade: CaseGrade, pass_threshold: float, errors: list[tuple[str, str]]) -> str:
    if errors:
        return ERROR
    unsure = uncertain_evaluators(grade, pass_threshold)
    if unsure:
        choice = functools.reduce(stricter, (s.on_uncertain for s in unsure), None)
        return _RESOLVED[choice or "uncertain"]
    if grade.required_misses(pass_threshold):
        return FAILED
    return OK if grade.score >= pass_threshold else FAILED


def _verdict(
    grade: CaseGrade, pass_threshold: float, pick: Callable[[EvaluatorScore], float]
) -> str:
    """``ok`` or ``failed`` with each evaluator's score taken as ``pick`` says."""
    scores = grade.scores
    if grade.evaluator_results is not None:
        weights = sum(s.weight for s in scores)
        score = sum(s.weight * pick(s) for s in scores) / weights if weights > 0 else 0.0
    else:
        score = pick(scores[0]) if scores else grade.score
    if any(
        s.required and s.error is None and not s.passes(pass_threshold, pick(s)) for s in scores
    ):
        return FAILED
    return OK if score >= pass_threshold else FAILED


def uncertain_evaluators(grade: CaseGrade, pass_threshold: float) -> list[EvaluatorScore]:
    """The judges whose samples disagreed about pass or fail, when the case's verdict
    hangs on them: it is not the same with each of them at its lowest sample as at its
    highest (docs/trusting-verdicts.md). Empty when none disagreed, or when the verdict is
    the same either way (a required check failed it anyway, say)."""
    unsure = [s for s in grade.scores if s.uncertain]
    if not unsure:
        return []

    def low(s: EvaluatorScore) -> float:
        return s.spread.low if s.uncertain and s.spread is not None else s.score

    def high(s: EvaluatorScore) -> float:
        return s.spread.high if s.uncertain and s.spread is not None else s.score

    if _verdict(grade, pass_threshold, low) == _verdict(grade, pass_threshold, high):
        return []
    return unsure


def uncertain_line(score: EvaluatorScore) -> str:
    """The miss that says a judge's samples disagreed."""
    spread = score.spread
    assert spread is not None
    return (
        f"judge {score.name!r} is uncertain: {spread.passed} of its {spread.n} samples passed "
        f"at {spread.threshold:.2f} (scores {spread.low:.2f} to {spread.high:.2f})"
    )


def required_fields(grade: CaseGrade, pass_threshold: float) -> tuple[list[str], list[str]]:
    """The required evaluators that missed (their names, for ``failed_required``) and the
    lines that say so among the case's misses; a judge the verdict hangs on whose samples
    disagreed is not among them (the record's ``uncertain`` names it)."""
    unsure = {id(s) for s in uncertain_evaluators(grade, pass_threshold)}
    missed = [s for s in grade.required_misses(pass_threshold) if id(s) not in unsure]
    return [s.name for s in missed], [required_miss_line(s, pass_threshold) for s in missed]


def uncertain_fields(grade: CaseGrade, pass_threshold: float) -> tuple[list[str], list[str]]:
    """The judges the verdict hangs on whose samples disagreed (their names, for the
    record's ``uncertain``) and the lines that say so among the case's misses."""
    unsure = uncertain_evaluators(grade, pass_threshold)
    return [s.name for s in unsure], [uncertain_line(s) for s in unsure]


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


def _store_large_once(rec: dict[str, Any], case: EvalCase) -> None:
    """Keep each large text once (``large_content``): an attachment's, which the question,
    the messages and the judge prompt repeat, and an answer's, which the answer, its turn,
    the messages carried forward and the judges' prompts repeat; they refer to it instead."""
    texts: set[str] = set()
    for msg in case.input_messages:  # a plain loop: this runs for every record
        for seg in msg.segments:
            if isinstance(seg, FileSegment) and len(seg.text) > LARGE_CONTENT:
                texts.add(seg.text.rstrip())
    store_large_once(rec, texts)


def _large_answers(rec: dict[str, Any]) -> set[str]:
    """The answers of a record larger than ``LARGE_CONTENT``, and each one trimmed (as a
    judge's prompt shows it)."""
    answers = [rec.get("candidate_answer")]
    answers += [t.get("answer") for t in rec.get("turns") or () if isinstance(t, dict)]
    found: set[str] = set()
    for text in answers:
        if isinstance(text, str) and len(text) > LARGE_CONTENT:
            found.add(text)
            trimmed = text.strip()
            if len(trimmed) > LARGE_CONTENT:
                found.add(trimmed)
    return found


def store_large_once(rec: dict[str, Any], texts: Iterable[str] = ()) -> None:
    """Keep ``texts`` and the record's large answers once each in ``large_content`` (by
    SHA-256), every place that holds one referring to it; the texts it already stores
    stay (a record read back and written again)."""
    texts = set(texts) | _large_answers(rec)
    if not texts:
        return
    refs: dict[str, tuple[str, str]] = {}  # text -> (digest, reference)
    for text in sorted(texts, key=len, reverse=True):  # a text inside another goes after it
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        refs[text] = (digest, large_content_ref(digest))
    store: dict[str, str] = dict(rec.get("large_content") or {})

    def swap(value: Any) -> Any:
        if isinstance(value, str):
            if len(value) <= LARGE_CONTENT:
                return value  # holds no large text
            for text, (digest, ref) in refs.items():
                if text in value:
                    value = value.replace(text, ref)
                    store[digest] = text
            return value
        if isinstance(value, dict):
            return {k: swap(v) for k, v in value.items()}
        if isinstance(value, list):
            return [swap(v) for v in value]
        return value

    for key in _STORED_ONCE:
        if key in rec:
            rec[key] = swap(rec[key])
    if store:
        rec["large_content"] = store


def _origin(rec: dict[str, Any], case: EvalCase | InvalidCase) -> None:
    """Which data row (``row``) and which combination of variables (``vars``) a case was
    made from, when it was."""
    if case.row is not None:
        rec["row"] = case.row.as_dict()
    if case.vars:
        rec["vars"] = dict(case.vars)


def _tail(
    rec: dict[str, Any],
    case: EvalCase,
    attempts: int,
    error: str | None,
    *,
    queued_ms: float | None = None,
    cached: bool = False,
) -> None:
    if queued_ms is not None:
        rec["queued_ms"] = queued_ms
    rec["attempts"] = attempts
    if cached:
        rec["cached"] = True
    rec["eval_file"] = str(case.eval_file)
    if case.line is not None:
        rec["line"] = case.line
    _origin(rec, case)
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
    queued_ms: float | None = None,
    pass_threshold: float = DEFAULT_PASS_THRESHOLD,
    attempts: int = 1,
    repeat: int = 0,
    cost: dict[str, Any] | None = None,
    own_tools: bool = False,
    workspace: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The record of a case that got an answer and was graded. ``own_tools``: the target
    reports the tools it calls (its ``trajectory`` is written even without a step);
    ``workspace``: what the record keeps of the case's workspace."""
    errors = grade.evaluator_errors()
    rec = _head(case, _status(grade, pass_threshold, errors))
    gates, gate_misses = required_fields(grade, pass_threshold)
    unsure, unsure_misses = uncertain_fields(grade, pass_threshold) if not errors else ([], [])
    rec["score"] = grade.score
    rec["hits"] = grade.hits
    added = [*gate_misses, *unsure_misses]
    rec["misses"] = [*grade.misses, *added] if added else grade.misses
    rec["candidate_answer"] = response.text
    rec["expected_aspect_count"] = grade.expected_aspect_count
    rec["target"] = target
    rec["timestamp"] = utc_timestamp()
    rec["repeat"] = repeat
    if grade.reasoning:
        rec["reasoning"] = grade.reasoning
    rec.update(_requests(prompt, provider, response, None))
    rec.update(grading_fields(grade, pass_threshold))
    if gates:
        rec["failed_required"] = gates
    if unsure:
        rec["uncertain"] = unsure
    _answer_fields(rec, response, cost, own_tools)
    if workspace is not None:
        rec["workspace"] = workspace
    rec["duration_ms"] = round(duration_ms, 3)
    _tail(rec, case, attempts, _error_text(errors), queued_ms=queued_ms, cached=response.cached)
    return rec


def _answer_fields(
    rec: dict[str, Any],
    response: ProviderResponse,
    cost: dict[str, Any] | None,
    own_tools: bool = False,
) -> None:
    """What a record says of the target's answer besides its text: tokens, cost, ending,
    the tools it called, time."""
    if response.usage is not None:
        rec["usage"] = response.usage.to_dict()
    if cost:
        rec["cost"] = cost
    if response.finish_reason is not None:
        rec["finish_reason"] = response.finish_reason
        if response.finish_reason_raw is not None:
            rec["finish_reason_raw"] = response.finish_reason_raw
    if response.token_limit_ignored:
        rec["token_limit_ignored"] = True
    _trajectory(rec, response.trajectory, response.trajectory_error, own_tools)
    if response.latency_ms is not None:
        rec["latency_ms"] = round(response.latency_ms, 3)


def _trajectory(
    rec: dict[str, Any], steps: Trajectory | None, error: str | None, shown_empty: bool
) -> None:
    """``trajectory``: the tools the candidate called, in order; written without a step
    only where a step could have been (a target that reports its tools, a case with
    tools). ``trajectory_error``: why a target that should have said it did not."""
    if steps is not None and (steps or shown_empty):
        rec["trajectory"] = steps_dicts(steps)
    elif steps is None and error is not None:
        rec["trajectory_error"] = error


@dataclass(slots=True)
class LiveFacts:
    """What a live conversation's record says beyond one request's answer."""

    score: float
    status: str
    hits: list[str]
    misses: list[str]
    answer: str  # the last answer
    turns: list[dict[str, Any]]
    aggregation: str
    grading: dict[str, Any]  # the conversation-level grade's entries (``grading_fields``)
    failed_required: list[str] | None = None  # required evaluators that missed
    uncertain: list[str] | None = None  # judges whose disagreeing samples it hangs on
    reasoning: str | None = None
    expected_aspect_count: int = 0
    usage: Usage | None = None
    latency_ms: float | None = None
    stopped: dict[str, Any] | None = None
    error: str | None = None
    plan_digest: str | None = None
    cached: bool = False  # every answer came from --cache
    user: dict[str, Any] | None = None  # the simulated user's part (``user`` in the record)
    cost: dict[str, Any] | None = None  # the record's ``cost``
    trajectory: Trajectory | None = None  # every turn's tool calls, in order
    trajectory_error: str | None = None
    own_tools: bool = False  # the trajectory is written even without a step
    skip_reason: str | None = None  # why the run's budget stopped it (it is ``skipped``)
    resumed: dict[str, Any] | None = None  # what was taken up from an earlier record


def live_record(
    case: EvalCase,
    *,
    target: str,
    provider: Provider,
    prompt: Prompt,
    response: ProviderResponse | None,
    facts: LiveFacts,
    duration_ms: float,
    queued_ms: float | None = None,
    attempts: int = 0,
    repeat: int = 0,
    workspace: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The record of a live conversation: one run, holding every turn (``turns``), its
    last request as ``raw_request`` (each turn's request is a prefix of its messages), the
    conversation-level grade and the score its ``aggregation`` made of them all."""
    rec = _head(case, facts.status)
    rec["score"] = facts.score
    rec["hits"] = facts.hits
    rec["misses"] = facts.misses
    rec["candidate_answer"] = facts.answer
    rec["expected_aspect_count"] = facts.expected_aspect_count
    rec["target"] = target
    rec["timestamp"] = utc_timestamp()
    rec["repeat"] = repeat
    if facts.reasoning:
        rec["reasoning"] = facts.reasoning
    rec.update(_requests(prompt, provider, response, None))
    if facts.plan_digest is not None:
        rec["raw_request"]["plan_digest"] = facts.plan_digest
    rec.update(facts.grading)
    if facts.failed_required:
        rec["failed_required"] = facts.failed_required
    if facts.uncertain:
        rec["uncertain"] = facts.uncertain
    if facts.usage is not None:
        rec["usage"] = facts.usage.to_dict()
    if facts.cost:
        rec["cost"] = facts.cost
    if response is not None and response.finish_reason is not None:
        rec["finish_reason"] = response.finish_reason
    rec["turns"] = facts.turns
    rec["aggregation"] = facts.aggregation
    if facts.stopped is not None:
        rec["stopped"] = facts.stopped
    if facts.resumed is not None:
        rec["resumed"] = facts.resumed
    if facts.user is not None:
        rec["user"] = facts.user
    _trajectory(rec, facts.trajectory, facts.trajectory_error, facts.own_tools)
    if facts.latency_ms is not None:
        rec["latency_ms"] = round(facts.latency_ms, 3)
    if workspace is not None:
        rec["workspace"] = workspace
    rec["duration_ms"] = round(duration_ms, 3)
    _tail(rec, case, attempts, facts.error, queued_ms=queued_ms, cached=facts.cached)
    if facts.skip_reason is not None:
        rec["skip_reason"] = facts.skip_reason
    return rec


def error_record(
    case: EvalCase,
    *,
    target: str,
    provider: Provider | None,
    prompt: Prompt | None,
    error: str,
    duration_ms: float,
    queued_ms: float | None = None,
    attempts: int = 0,
    repeat: int = 0,
    cost: dict[str, Any] | None = None,
    workspace: dict[str, Any] | None = None,
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
    if cost:
        rec["cost"] = cost
    if workspace is not None:
        rec["workspace"] = workspace
    rec["duration_ms"] = round(duration_ms, 3)
    _tail(rec, case, attempts, error, queued_ms=queued_ms)
    return rec


def skipped_record(
    case: EvalCase,
    *,
    target: str,
    provider: Provider | None,
    prompt: Prompt | None,
    reason: str,
    response: ProviderResponse | None = None,
    duration_ms: float = 0.0,
    attempts: int = 0,
    repeat: int = 0,
    cost: dict[str, Any] | None = None,
    workspace: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The record of a run that was not run (``skipped``, never a score): the run's budget
    was reached before its request was sent or, when ``response`` is given, before its
    judge was asked (its answer is kept: ``agentv regrade`` can grade it)."""
    rec = _head(case, SKIPPED)
    rec.update(
        score=0.0,
        hits=[],
        misses=[f"Skipped: {reason}"],
        candidate_answer=response.text if response is not None else "",
        expected_aspect_count=0,
        target=target,
        timestamp=utc_timestamp(),
        repeat=repeat,
    )
    if provider is not None and prompt is not None:
        rec.update(_requests(prompt, provider, response, None))
    if response is not None:
        _answer_fields(rec, response, cost)
    elif cost:
        rec["cost"] = cost
    if workspace is not None:
        rec["workspace"] = workspace
    rec["duration_ms"] = round(duration_ms, 3)
    cached = response is not None and response.cached
    _tail(rec, case, attempts, None, cached=cached)
    rec["skip_reason"] = reason
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
    _origin(rec, invalid)
    rec["error"] = invalid.reason
    return rec
