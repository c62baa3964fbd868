"""A record as its page shows it: the conversation as sent (large attachments put back),
the turns of a live conversation, tool calls, the trajectory, each evaluator's grade, the
cost. Only plain values come out of here; the template renders every one as text.
"""

from __future__ import annotations

import json
from typing import Any

from agentv.results.record import EvalResult, put_back_large_content

#: the most characters of one text a page shows (the results file keeps every one)
DISPLAY_CHARS = 100_000


def text(value: Any, where: str = "") -> str:
    """A value as text to show: a string as it is, anything else as indented JSON; cut
    at ``DISPLAY_CHARS``, saying how much was left out and where the whole is."""
    if value is None:
        return ""
    shown = (
        value
        if isinstance(value, str)
        else json.dumps(value, indent=2, ensure_ascii=False, default=str)
    )
    if len(shown) <= DISPLAY_CHARS:
        return shown
    left = len(shown) - DISPLAY_CHARS
    return f"{shown[:DISPLAY_CHARS]}\n[{left:,} more characters not shown; the whole text is in {where}]"


def _calls(calls: Any, where: str) -> list[dict[str, str]]:
    out = []
    for call in calls if isinstance(calls, list) else []:
        if not isinstance(call, dict):
            continue
        out.append(
            {
                "id": str(call.get("id") or ""),
                "name": str(call.get("name") or "?"),
                "arguments": text(call.get("arguments"), where),
                "result": text(call.get("result"), where),
                "error": text(call.get("error"), where),
            }
        )
    return out


def _messages(messages: Any, where: str) -> list[dict[str, Any]]:
    out = []
    for message in messages if isinstance(messages, list) else []:
        if not isinstance(message, dict):
            continue
        out.append(
            {
                "role": str(message.get("role") or "?"),
                "name": str(message.get("name") or ""),
                "content": text(message.get("content"), where),
                "tool_calls": _calls(message.get("tool_calls"), where),
                "tool_call_id": str(message.get("tool_call_id") or ""),
            }
        )
    return out


def _evaluators(entries: Any, where: str) -> list[dict[str, Any]]:
    out = []
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict):
            continue
        raw = entry.get("evaluator_raw_request")
        out.append(
            {
                "name": str(entry.get("name") or entry.get("type") or "?"),
                "type": str(entry.get("type") or "?"),
                "score": entry.get("score"),
                "weight": entry.get("weight"),
                "required": entry.get("required") is True,
                "threshold": entry.get("threshold"),
                "passed": entry.get("passed"),
                "hits": [text(h, where) for h in entry.get("hits") or []],
                "misses": [text(m, where) for m in entry.get("misses") or []],
                "reasoning": text(entry.get("reasoning"), where),
                "error": text(entry.get("error"), where),
                "request": text(raw, where) if raw else "",
                "cost_usd": entry.get("cost_usd"),
            }
        )
    return out


def record_view(result: EvalResult, where: str) -> dict[str, Any]:
    """What the record's page shows; ``where`` names the results file and line (for texts
    cut short)."""
    large = result.large_content or {}
    raw = put_back_large_content(result.raw_request or {}, large)
    turns = []
    for turn in result.turns or []:
        if not isinstance(turn, dict):
            continue
        user = turn.get("user") if isinstance(turn.get("user"), dict) else {}
        turns.append(
            {
                "turn": turn.get("turn"),
                "content": text(put_back_large_content(turn.get("content"), large), where),
                "user_source": str(user.get("source") or ""),
                "answer": text(turn.get("answer"), where),
                "tool_calls": _calls(turn.get("tool_calls"), where),
                "status": str(turn.get("status") or ""),
                "score": turn.get("score"),
                "hits": [text(h, where) for h in turn.get("hits") or []],
                "misses": [text(m, where) for m in turn.get("misses") or []],
                "evaluators": _evaluators(turn.get("evaluator_results"), where),
            }
        )
    evaluators = _evaluators(result.evaluator_results, where)
    if result.evaluator_results is None and result.evaluator_raw_request:
        default = dict(result.evaluator_raw_request)
        evaluators = [
            {
                "name": "llm_judge",
                "type": "llm_judge",
                "score": result.score,
                "weight": None,
                "required": False,
                "threshold": None,
                "passed": None,
                "hits": [text(h, where) for h in result.hits],
                "misses": [text(m, where) for m in result.misses],
                "reasoning": text(result.reasoning, where),
                "error": text(default.get("error"), where),
                "request": text(put_back_large_content(default, large), where),
                "cost_usd": None,
            }
        ]
    user = result.user or {}
    return {
        "question": text(raw.get("question"), where),
        "guidelines": text(raw.get("guidelines"), where),
        "messages": _messages(raw.get("chat_prompt"), where),
        "settings": raw.get("settings") if isinstance(raw.get("settings"), dict) else {},
        "agent": {
            k: text(v, where)
            for k, v in raw.items()
            if k
            not in (
                "question",
                "guidelines",
                "chat_prompt",
                "settings",
                "guideline_paths",
                "input_files",
                "token_limit",
                "plan_digest",
            )
            and v not in (None, "", [], {})
        },
        "answer": text(result.candidate_answer, where),
        "turns": turns,
        "simulated_user": {
            k: text(v, where) for k, v in user.items() if k in ("target", "ended", "seed")
        },
        "trajectory": [
            {
                "turn": step.get("turn"),
                "name": str(step.get("name") or "?"),
                "server": str(step.get("server") or ""),
                "arguments": text(step.get("arguments"), where),
                "result": text(step.get("result"), where),
                "error": text(step.get("error"), where),
                "duration_ms": step.get("duration_ms"),
            }
            for step in result.trajectory or []
            if isinstance(step, dict)
        ],
        "trajectory_known": result.trajectory is not None,
        "evaluators": evaluators,
        "hits": [text(h, where) for h in result.hits],
        "misses": [text(m, where) for m in result.misses],
        "failed_required": list(result.failed_required or []),
        "cost": result.cost or {},
        "usage": result.usage or {},
        "error": text(result.error, where),
        "skip_reason": text(result.skip_reason, where),
        "trajectory_error": text(result.trajectory_error, where),
        "facts": [
            (name, value)
            for name, value in (
                ("timestamp", result.timestamp),
                ("finish reason", result.finish_reason),
                ("finish reason (API)", result.finish_reason_raw),
                ("output limit ignored by the server", result.token_limit_ignored),
                ("answer reused from --cache", result.cached),
                ("latency (ms)", result.latency_ms),
                ("queued (ms)", result.queued_ms),
                ("aggregation", result.aggregation),
                ("stopped", text(result.stopped, where) if result.stopped else None),
                ("secrets masked", result.masked_secrets),
            )
            if value not in (None, "")
        ],
    }
