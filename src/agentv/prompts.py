"""Step 3 of the data flow: from a loaded case to exactly what a target is sent.

``build_prompt`` is the one place a prompt is finished (docs/prompt-rules.md): it turns a
case, and what of the target shapes a prompt (``PromptSettings``: the question's mode, the
configured system prompt, whether the API needs a user turn), into

- the ``question``: readable text with ``@[Role]:`` markers, for logs, agents and judges
  (LM mode embeds files, agent mode points at them);
- the ``guidelines``: the guideline files' text;
- the ``messages``: the neutral message list exactly as an LM API receives it. The system
  message (system turns, else the configured prompt, else the default) is applied, tool
  results that answer no earlier call are already ``@[Tool]:`` user turns, and a user
  turn holding the question is added when the API needs one and there is none.

Vendor converters only map that list to their wire shape; ``render``, the logged
``raw_request.chat_prompt`` and the wire therefore show one list. Pure functions, no I/O;
the question is only ever sent *out*, nothing parses it back into messages.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

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

if TYPE_CHECKING:
    from agentv.cases import EvalCase

Mode = Literal["lm", "agent"]

DEFAULT_SYSTEM_PROMPT = "You are a careful assistant."
GUIDELINES_HEADER = "[[ ## Guidelines ## ]]"
TOOL_MARKER = "@[Tool]:"


class _Target(Protocol):
    """What prompt building reads from a target (``agentv.providers.base.Provider``)."""

    @property
    def mode(self) -> Mode: ...

    @property
    def system_prompt(self) -> str | None: ...

    @property
    def needs_user_turn(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class PromptSettings:
    """What of a target shapes the prompt it gets (docs/prompt-rules.md sections 5 and 6)."""

    mode: Mode = "lm"
    #: the target's configured ``system_prompt``; used when the case has no system turn
    system_prompt: str | None = None
    #: the API rejects a conversation without a user turn (Anthropic, Gemini)
    needs_user_turn: bool = False

    @classmethod
    def of(cls, target: _Target) -> PromptSettings:
        """The settings of a provider (its mode, system prompt and API's needs)."""
        return cls(target.mode, target.system_prompt, target.needs_user_turn)


LM = PromptSettings()


@dataclass(slots=True)
class Prompt:
    """Everything prompt building produces for one case on one target."""

    question: str
    guidelines: str
    #: the messages exactly as an LM API receives them (vendor mapping aside)
    messages: list[ChatMessage]
    guideline_paths: list[Path] = field(default_factory=list)
    input_files: list[Path] = field(default_factory=list)
    #: a user turn holding the question was added because the API needs one
    added_user_turn: bool = False


# --- guidelines ----------------------------------------------------------------------------


def build_guidelines(files: Sequence[GuidelineFile]) -> str:
    """One file: its text. Several: ``=== PATH ===`` blocks joined by a blank line."""
    if not files:
        return ""
    if len(files) == 1:
        return files[0].text.rstrip()
    return "\n\n".join(f"=== {g.path} ===\n{g.text}".rstrip() for g in files)


# --- the question ------------------------------------------------------------------------------


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
    parts = [p for s in msg.segments if (p := _question_part(s, mode))]
    if msg.tool_calls:
        parts.extend(_tool_call_part(c) for c in msg.tool_calls)
    return parts


class Memo:
    """What prompt building made of each message, kept while a conversation lasts: each
    request of a live conversation repeats every earlier message, which is then rendered
    once, not once per request (docs/architecture.md, "Running"). Keyed by the message
    objects' identity: it must not outlive the messages (a conversation's history holds
    them)."""

    __slots__ = ("chat", "parts", "turn")

    def __init__(self) -> None:
        self.chat: dict[int, tuple[bool, str, ChatMessage | None]] = {}
        self.parts: dict[tuple[int, str], list[str]] = {}
        self.turn: dict[tuple[int, str], str] = {}


def build_question(messages: Sequence[Message], mode: Mode = "lm", memo: Memo | None = None) -> str:
    """The readable question: ``@[Role]:`` turns when markers are used, flat text otherwise."""
    if uses_role_markers(messages):
        turns = []
        for msg in messages:
            key = (id(msg), mode)
            turn = memo.turn.get(key) if memo is not None else None
            if turn is None:
                parts = _question_parts(msg, mode)
                turn = f"@[{msg.role.capitalize()}]:\n" + "\n".join(parts) if parts else ""
                if memo is not None:
                    memo.turn[key] = turn
            if turn:
                turns.append(turn)
        return "\n\n".join(turns)
    return "\n".join([p for msg in messages for p in _question_parts(msg, mode)])


# --- the messages --------------------------------------------------------------------------------


def _message_part(seg: Segment) -> str:
    # Every part is right-stripped, as in the question: a `content: |` block's final
    # newline is not content (docs/prompt-rules.md section 5).
    match seg:
        case TextSegment():
            return seg.value.rstrip()
        case FileSegment():
            return f"=== {seg.path} ===\n{seg.text}".rstrip()
        case GuidelineRef():
            return f"<Attached: {seg.path}>"
    raise TypeError(f"unknown segment {seg!r}")  # pragma: no cover


def _content(segments: Sequence[Segment]) -> str:
    return "\n".join([p for p in map(_message_part, segments) if p])


def system_turns(messages: Sequence[Message]) -> str:
    """The conversation's own system turns, wherever they stand, joined by a blank line
    (guideline markers left out: the guidelines' text follows them in the system message)."""
    turns = [
        text
        for msg in messages
        if msg.role == "system"
        and (
            text := "\n".join(
                [
                    p
                    for s in msg.segments
                    if not isinstance(s, GuidelineRef) and (p := _message_part(s))
                ]
            )
        )
    ]
    return "\n\n".join(turns)


def _system_content(messages: Sequence[Message], guidelines: str, configured: str | None) -> str:
    """System turns, else the configured prompt, else the default; then the guidelines."""
    base = system_turns(messages)
    if not base:
        configured = (configured or "").rstrip()
        base = configured if configured.strip() else DEFAULT_SYSTEM_PROMPT
    if guidelines:
        return f"{base}\n\n{GUIDELINES_HEADER}\n\n{guidelines}"
    return base


def build_messages(
    messages: Sequence[Message],
    guidelines: str,
    *,
    system_prompt: str | None = None,
    question: str = "",
    needs_user_turn: bool = False,
    memo: Memo | None = None,
) -> tuple[list[ChatMessage], bool]:
    """The messages an LM API receives for a conversation, and whether a user turn holding
    ``question`` was added (docs/prompt-rules.md sections 5 and 6).

    The one system message comes first. Other turns keep their order and role; a turn with
    no visible content is dropped when another turn has some; a tool result whose
    ``tool_call_id`` answers no earlier call becomes an ``@[Tool]:`` user turn, since no
    API can take it natively.
    """
    out = [ChatMessage("system", _system_content(messages, guidelines, system_prompt))]
    made = [_chat_message(m, memo) for m in messages]
    any_visible = any(shown for shown, _, _ in made)
    called: set[str] = set()
    for msg, (shown, content, chat) in zip(messages, made, strict=True):
        if chat is None:  # a system turn, or nothing to send
            continue
        structural = bool(msg.tool_calls) or msg.tool_call_id is not None
        if any_visible and not shown and not structural:
            continue  # only <Attached: ...> markers or nothing
        if msg.role == "tool" and (msg.tool_call_id is None or msg.tool_call_id not in called):
            out.append(ChatMessage("user", f"{TOOL_MARKER}\n{content}"))
            continue
        if msg.tool_calls:
            called.update(c.id for c in msg.tool_calls)
        out.append(chat)
    added = needs_user_turn and not any(m.role in ("user", "tool") for m in out)
    if added:
        # Anthropic and Gemini need a user turn (a tool result travels in one there).
        out.insert(1, ChatMessage("user", question))
    return out, added


def _chat_message(msg: Message, memo: Memo | None) -> tuple[bool, str, ChatMessage | None]:
    """``(visible, content, the message as sent)`` of one turn (None: a system turn, or one
    with nothing to send); made once per message with a ``memo``."""
    found = memo.chat.get(id(msg)) if memo is not None else None
    if found is None:
        content = _content(msg.segments) if msg.role != "system" else ""
        structural = bool(msg.tool_calls) or msg.tool_call_id is not None
        chat = None
        if msg.role != "system" and (content or structural):
            chat = ChatMessage(
                msg.role,
                content,
                tool_calls=msg.tool_calls,
                tool_call_id=msg.tool_call_id,
                name=msg.name,
            )
        found = (msg.visible, content, chat)
        if memo is not None:
            memo.chat[id(msg)] = found
    return found


def request_messages(
    question: str, *, system_prompt: str | None = None, guidelines: str = ""
) -> list[ChatMessage]:
    """The two messages of a request that is not a conversation (a judge's, an API
    caller's): the system prompt (else the default) with any guidelines, then the question
    as the user turn."""
    return [
        ChatMessage("system", _system_content((), guidelines, system_prompt)),
        ChatMessage("user", question),
    ]


def build_prompt(
    case: EvalCase,
    settings: PromptSettings = LM,
    memo: Memo | None = None,
    *,
    so_far: tuple[Sequence[Message], Sequence[GuidelineFile], Sequence[Path]] | None = None,
) -> Prompt:
    """Question, guidelines and the messages as sent, for one case on a target. ``memo``:
    a live conversation's, so that its earlier messages are not rendered again; ``so_far``:
    its messages, guideline files and attached files up to now, in place of the case's
    (each turn's request, without a copy of the case per turn)."""
    history, guideline_files, input_files = so_far or (
        case.input_messages,
        case.guideline_files,
        case.input_files,
    )
    guidelines = build_guidelines(guideline_files)
    question = build_question(history, settings.mode, memo)
    # An added user turn holds the LM question: it is an LM API's turn, whatever the mode.
    lm_question = question
    if settings.needs_user_turn and settings.mode != "lm":
        lm_question = build_question(history, memo=memo)
    messages, added = build_messages(
        history,
        guidelines,
        system_prompt=settings.system_prompt,
        question=lm_question,
        needs_user_turn=settings.needs_user_turn,
        memo=memo,
    )
    return Prompt(
        question=question,
        guidelines=guidelines,
        messages=messages,
        guideline_paths=[g.resolved for g in guideline_files],
        input_files=list(input_files),
        added_user_turn=added,
    )
