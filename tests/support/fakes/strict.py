"""Request validation the way strict servers do it, for the fake LM server's ``strict`` mode.

Servers built on typed request models (llama.cpp's Python server, FastAPI gateways, many
OpenAI-compatible proxies) check every field's JSON type and refuse fields they do not know,
where OpenAI's own API is lenient: an assistant turn's ``"content": null`` next to tool calls,
say, or a ``max_completion_tokens`` a server predating it does not know. Each check returns
the problems found, in the shape FastAPI answers with (HTTP 422)::

    {"detail": [{"type": "string_type", "loc": ["body", "messages", 1, "content"],
                 "msg": "Input should be a valid string", "input": null}]}
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

Problem = dict[str, Any]
Loc = tuple[str | int, ...]


def _problem(loc: Loc, kind: str, msg: str, value: Any) -> Problem:
    return {"type": kind, "loc": ["body", *loc], "msg": msg, "input": value}


def _string(value: Any, loc: Loc, out: list[Problem]) -> None:
    if not isinstance(value, str):
        out.append(_problem(loc, "string_type", "Input should be a valid string", value))


def _number(value: Any, loc: Loc, out: list[Problem]) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        out.append(_problem(loc, "float_type", "Input should be a valid number", value))


def _positive_int(value: Any, loc: Loc, out: list[Problem]) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        out.append(_problem(loc, "int_type", "Input should be a valid integer", value))
    elif value < 1:
        out.append(_problem(loc, "greater_than_equal", "Input should be >= 1", value))


def _object(value: Any, loc: Loc, out: list[Problem]) -> bool:
    if isinstance(value, dict):
        return True
    out.append(_problem(loc, "dict_type", "Input should be a valid dictionary", value))
    return False


def _list(value: Any, loc: Loc, out: list[Problem], *, empty: bool = False) -> bool:
    if not isinstance(value, list):
        out.append(_problem(loc, "list_type", "Input should be a valid list", value))
        return False
    if not value and not empty:
        out.append(_problem(loc, "too_short", "List should have at least 1 item", value))
        return False
    return True


def _known(body: dict[str, Any], allowed: Collection[str], loc: Loc, out: list[Problem]) -> None:
    for key in body:
        if key not in allowed:
            out.append(
                _problem(
                    (*loc, key), "extra_forbidden", "Extra inputs are not permitted", body[key]
                )
            )


def _required(body: dict[str, Any], names: Collection[str], loc: Loc, out: list[Problem]) -> bool:
    missing = [n for n in names if n not in body]
    for name in missing:
        out.append(_problem((*loc, name), "missing", "Field required", None))
    return not missing


# --- OpenAI chat completions --------------------------------------------------------------

_OPENAI_FIELDS = {
    "model",
    "messages",
    "temperature",
    "top_p",
    "n",
    "stream",
    "stop",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "user",
    "tools",
    "tool_choice",
    "response_format",
}
_MESSAGE_FIELDS = {
    "system": {"role", "content", "name"},
    "user": {"role", "content", "name"},
    "assistant": {"role", "content", "name", "tool_calls"},
    "tool": {"role", "content", "tool_call_id"},
}


def openai_problems(body: Any, limit_params: Collection[str]) -> list[Problem]:
    """What a strict chat-completions server refuses in ``body``; ``limit_params`` are the
    names of the output limit it knows (an older server: only ``max_tokens``)."""
    out: list[Problem] = []
    if not _object(body, (), out):
        return out
    _known(body, _OPENAI_FIELDS | set(limit_params), (), out)
    if not _required(body, ("model", "messages"), (), out):
        return out
    _string(body["model"], ("model",), out)
    if "temperature" in body:
        _number(body["temperature"], ("temperature",), out)
    for name in limit_params:
        if name in body:
            _positive_int(body[name], (name,), out)
    if _list(body["messages"], ("messages",), out):
        for i, message in enumerate(body["messages"]):
            _openai_message(message, ("messages", i), out)
    return out


def _openai_message(message: Any, loc: Loc, out: list[Problem]) -> None:
    if not _object(message, loc, out) or not _required(message, ("role",), loc, out):
        return
    role = message["role"]
    if role not in _MESSAGE_FIELDS:
        out.append(
            _problem(
                (*loc, "role"),
                "literal_error",
                "Input should be 'system', 'user', 'assistant' or 'tool'",
                role,
            )
        )
        return
    _known(message, _MESSAGE_FIELDS[role], loc, out)
    if "name" in message:
        _string(message["name"], (*loc, "name"), out)
    if role == "assistant" and "tool_calls" in message:
        # text is optional next to tool calls, but when present it is text
        if "content" in message:
            _string(message["content"], (*loc, "content"), out)
        if _list(message["tool_calls"], (*loc, "tool_calls"), out):
            for j, call in enumerate(message["tool_calls"]):
                _tool_call(call, (*loc, "tool_calls", j), out)
        return
    if _required(message, ("content",), loc, out):
        _string(message["content"], (*loc, "content"), out)
    if role == "tool" and _required(message, ("tool_call_id",), loc, out):
        _string(message["tool_call_id"], (*loc, "tool_call_id"), out)


def _tool_call(call: Any, loc: Loc, out: list[Problem]) -> None:
    if not _object(call, loc, out):
        return
    _known(call, {"id", "type", "function"}, loc, out)
    if not _required(call, ("id", "type", "function"), loc, out):
        return
    _string(call["id"], (*loc, "id"), out)
    if call["type"] != "function":
        out.append(
            _problem((*loc, "type"), "literal_error", "Input should be 'function'", call["type"])
        )
    function = call["function"]
    if _object(function, (*loc, "function"), out):
        _known(function, {"name", "arguments"}, (*loc, "function"), out)
        if _required(function, ("name", "arguments"), (*loc, "function"), out):
            _string(function["name"], (*loc, "function", "name"), out)
            # arguments travel as JSON text, not as an object
            _string(function["arguments"], (*loc, "function", "arguments"), out)


# --- Anthropic messages -------------------------------------------------------------------

_ANTHROPIC_FIELDS = {
    "model",
    "messages",
    "max_tokens",
    "system",
    "temperature",
    "thinking",
    "stop_sequences",
    "metadata",
    "top_p",
    "top_k",
    "tools",
    "tool_choice",
    "stream",
}


def anthropic_problems(body: Any, limit_params: Collection[str] = ()) -> list[Problem]:
    """What a strict messages-API server refuses in ``body``."""
    out: list[Problem] = []
    if not _object(body, (), out):
        return out
    _known(body, _ANTHROPIC_FIELDS, (), out)
    if not _required(body, ("model", "messages", "max_tokens"), (), out):
        return out
    _string(body["model"], ("model",), out)
    _positive_int(body["max_tokens"], ("max_tokens",), out)
    if "system" in body:
        _string(body["system"], ("system",), out)
    if "temperature" in body:
        _number(body["temperature"], ("temperature",), out)
    if _list(body["messages"], ("messages",), out):
        for i, message in enumerate(body["messages"]):
            loc: Loc = ("messages", i)
            if not _object(message, loc, out):
                continue
            _known(message, {"role", "content"}, loc, out)
            if not _required(message, ("role", "content"), loc, out):
                continue
            content = message["content"]
            if isinstance(content, list):
                for j, block in enumerate(content):
                    if _object(block, (*loc, "content", j), out):
                        _required(block, ("type",), (*loc, "content", j), out)
            else:
                _string(content, (*loc, "content"), out)
    return out


# --- Gemini generateContent ---------------------------------------------------------------

_GEMINI_FIELDS = {"contents", "systemInstruction", "generationConfig", "tools", "safetySettings"}
_GENERATION_FIELDS = {
    "temperature",
    "maxOutputTokens",
    "topP",
    "topK",
    "stopSequences",
    "candidateCount",
    "thinkingConfig",
    "responseMimeType",
}


def gemini_problems(body: Any, limit_params: Collection[str] = ()) -> list[Problem]:
    """What a strict generateContent server refuses in ``body``."""
    out: list[Problem] = []
    if not _object(body, (), out):
        return out
    _known(body, _GEMINI_FIELDS, (), out)
    if not _required(body, ("contents",), (), out):
        return out
    config = body.get("generationConfig")
    if config is not None and _object(config, ("generationConfig",), out):
        _known(config, _GENERATION_FIELDS, ("generationConfig",), out)
        if "maxOutputTokens" in config:
            _positive_int(config["maxOutputTokens"], ("generationConfig", "maxOutputTokens"), out)
        if "temperature" in config:
            _number(config["temperature"], ("generationConfig", "temperature"), out)
    if _list(body["contents"], ("contents",), out):
        for i, content in enumerate(body["contents"]):
            loc: Loc = ("contents", i)
            if not _object(content, loc, out):
                continue
            _known(content, {"role", "parts"}, loc, out)
            if _required(content, ("role", "parts"), loc, out):
                _list(content["parts"], (*loc, "parts"), out)
    return out


CHECKS: dict[str, Callable[[Any, Collection[str]], list[Problem]]] = {
    "openai": openai_problems,
    "azure": openai_problems,
    "anthropic": anthropic_problems,
    "gemini": gemini_problems,
}
