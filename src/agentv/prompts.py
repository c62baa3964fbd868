"""Step 3 of the data flow: from a loaded case to the texts and messages that are sent.

Pure functions, no I/O; they implement ``prompt-rules.md`` sections 3 to 6:

- ``build_guidelines``: the guideline files' text (goes to the system prompt);
- ``build_question``: the readable ``question`` with ``@[Role]:`` markers, for logs, agent
  targets and judges (LM mode embeds files, agent mode points at them);
- ``build_chat_prompt``: the structured messages for LM APIs;
- ``sent_messages``: what an LM API target actually receives.

The question is only ever sent *out*; nothing parses it back into messages.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from agentv.cases import EvalCase
from agentv.messages import (
    ChatMessage,
    FileSegment,
    GuidelineFile,
    GuidelineRef,
    Message,
    Segment,
    TextSegment,
    ToolCall,
)

Mode = Literal["lm", "agent"]

DEFAULT_SYSTEM_PROMPT = "You are a careful assistant."
GUIDELINES_HEADER = "[[ ## Guidelines ## ]]"


@dataclass(slots=True)
class PromptInputs:
    """Everything prompt building produces for one case."""

    question: str
    guidelines: str
    chat_prompt: list[ChatMessage]
    guideline_paths: list[Path] = field(default_factory=list)
    input_files: list[Path] = field(default_factory=list)


# --- section 3: guidelines -------------------------------------------------------------


def build_guidelines(files: Sequence[GuidelineFile]) -> str:
    """One file: its text. Several: ``=== PATH ===`` blocks joined by a blank line."""
    if not files:
        return ""
    if len(files) == 1:
        return files[0].text.rstrip()
    return "\n\n".join(f"=== {g.path} ===\n{g.text.rstrip()}" for g in files)


# --- section 4: the question ------------------------------------------------------------


def uses_role_markers(messages: Sequence[Message]) -> bool:
    """Markers iff an assistant/tool turn exists or more than one turn has visible content."""
    visible = 0
    for msg in messages:
        if msg.role in ("assistant", "tool"):
            return True
        if msg.visible:
            visible += 1
            if visible > 1:
                return True
    return False


def _question_part(seg: Segment, mode: Mode) -> str:
    match seg:
        case TextSegment():
            return seg.value.rstrip()
        case GuidelineRef():
            return f"<Attached: {seg.path}>"
        case FileSegment():
            if mode == "agent":
                return f'<file: path="{seg.path}">'
            return f'<file path="{seg.path}">\n{seg.text.rstrip()}\n</file>'
    raise TypeError(f"unknown segment {seg!r}")  # pragma: no cover


def _tool_call_part(call: ToolCall) -> str:
    args = json.dumps(call.arguments, ensure_ascii=False, separators=(",", ":"))
    return f'<tool_call id="{call.id}" name="{call.name}">{args}</tool_call>'


def _question_parts(msg: Message, mode: Mode) -> list[str]:
    parts = [p for p in (_question_part(s, mode) for s in msg.segments) if p]
    parts.extend(_tool_call_part(c) for c in msg.tool_calls)
    return parts


def build_question(messages: Sequence[Message], mode: Mode = "lm") -> str:
    """The readable question: ``@[Role]:`` turns when markers are used, flat text otherwise."""
    if uses_role_markers(messages):
        turns = []
        for msg in messages:
            parts = _question_parts(msg, mode)
            if parts:
                turns.append(f"@[{msg.role.capitalize()}]:\n" + "\n".join(parts))
        return "\n\n".join(turns)
    return "\n".join(p for msg in messages for p in _question_parts(msg, mode))


# --- section 5: the chat prompt -----------------------------------------------------------


def _chat_part(seg: Segment) -> str:
    match seg:
        case TextSegment():
            return seg.value
        case FileSegment():
            return f"=== {seg.path} ===\n{seg.text.rstrip()}"
        case GuidelineRef():
            return f"<Attached: {seg.path}>"
    raise TypeError(f"unknown segment {seg!r}")  # pragma: no cover


def _system_base(messages: Sequence[Message]) -> str:
    rendered = []
    for msg in messages:
        if msg.role != "system":
            continue
        text = "\n".join(_chat_part(s) for s in msg.segments if not isinstance(s, GuidelineRef))
        if text.strip():
            rendered.append(text)
    return "\n\n".join(rendered)


def build_chat_prompt(
    messages: Sequence[Message],
    guidelines: str,
    system_prompt: str | None = None,
) -> list[ChatMessage]:
    """Structured messages for LM APIs (prompt-rules section 5).

    All system turns merge into one leading system message; the configured
    ``system_prompt`` is used only when the conversation has no system turn, and the default
    prompt only when guidelines need a system message to live in.
    """
    base = _system_base(messages)
    if not base and system_prompt and system_prompt.strip():
        base = system_prompt
    if not base and guidelines:
        base = DEFAULT_SYSTEM_PROMPT
    system_items = [base] if base else []
    if guidelines:
        system_items.append(f"{GUIDELINES_HEADER}\n\n{guidelines}")
    out: list[ChatMessage] = []
    if system_items:
        out.append(ChatMessage("system", "\n\n".join(system_items)))
    any_visible = any(m.visible for m in messages)
    for msg in messages:
        if msg.role == "system":
            continue
        structural = bool(msg.tool_calls) or msg.tool_call_id is not None
        if any_visible and not msg.visible and not structural:
            continue  # only <Attached: ...> markers or nothing: dropped (5.3)
        content = "\n".join(_chat_part(s) for s in msg.segments)
        if not content.strip() and not structural:
            continue
        out.append(
            ChatMessage(
                msg.role,
                content,
                tool_calls=msg.tool_calls,
                tool_call_id=msg.tool_call_id,
                name=msg.name,
            )
        )
    return out


# --- section 6: what an LM API receives ---------------------------------------------------


def sent_messages(
    chat_prompt: list[ChatMessage] | None,
    *,
    question: str = "",
    guidelines: str = "",
    system_prompt: str | None = None,
) -> list[ChatMessage]:
    """The messages an LM API target sends for a request (prompt-rules section 6).

    With a chat prompt: sent as it is when it has a system message (guidelines ignored),
    else preceded by the configured system prompt or the default. Without one (a judge's
    request, say): the legacy two messages, system (+ guidelines) and user = question.
    """
    system = system_prompt if system_prompt and system_prompt.strip() else DEFAULT_SYSTEM_PROMPT
    if chat_prompt is not None:
        if chat_prompt and chat_prompt[0].role == "system":
            return list(chat_prompt)
        return [ChatMessage("system", system), *chat_prompt]
    if guidelines:
        system = f"{system}\n\n{GUIDELINES_HEADER}\n\n{guidelines}"
    return [ChatMessage("system", system), ChatMessage("user", question)]


def build_prompt_inputs(
    case: EvalCase, mode: Mode = "lm", system_prompt: str | None = None
) -> PromptInputs:
    """Question (in ``mode``), guidelines and chat prompt for one case."""
    guidelines = build_guidelines(case.guideline_files)
    return PromptInputs(
        question=build_question(case.input_messages, mode),
        guidelines=guidelines,
        chat_prompt=build_chat_prompt(case.input_messages, guidelines, system_prompt),
        guideline_paths=case.guideline_paths,
        input_files=list(case.input_files),
    )
