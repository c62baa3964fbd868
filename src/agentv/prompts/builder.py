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
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from agentv.messages import (
    ChatMessage,
    FileSegment,
    GuidelineFile,
    GuidelineRef,
    Message,
    Mode,
    Segment,
    TextSegment,
    ToolCall,
)

if TYPE_CHECKING:
    from agentv.cases import EvalCase

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
            return seg.value if seg.verbatim else seg.value.rstrip()
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
    """What prompt building made of a live conversation, kept while it lasts: each request
    repeats every earlier message, so each message is rendered once, and what was made of
    the messages before (the question, the message list) is grown by the new ones only,
    not made again per request (docs/architecture.md, "Running"). Keyed by the message
    objects' identity: it must not outlive the messages (a conversation's history holds
    them). A history that does not start with the messages seen last is built whole."""

    __slots__ = ("_listing", "_questions", "chat", "turn")

    def __init__(self) -> None:
        self.chat: dict[int, tuple[bool, str, ChatMessage | None]] = {}
        self.turn: dict[tuple[int, str], str] = {}
        self._questions: dict[str, _Question] = {}  # by mode
        self._listing: _Listing | None = None

    def question(self, messages: Sequence[Message], mode: Mode) -> str:
        """``build_question(messages, mode)``, grown from the last one of ``mode``."""
        known = self._questions.get(mode)
        # with markers once, always: new turns only add to the text
        new = _after(known.seen, messages) if known is not None and known.markers else None
        if known is None or new is None:
            markers = uses_role_markers(messages)
            text = _question(messages, mode, markers, self)
            self._questions[mode] = _Question(list(messages), markers, text)
            return text
        for msg in new:
            if turn := _marked_turn(msg, mode, self):
                known.text = f"{known.text}\n\n{turn}" if known.text else turn
        known.seen.extend(new)
        return known.text

    def listing(self, messages: Sequence[Message]) -> _Listing:
        """``_listing(messages)``, grown from the last one."""
        known = self._listing
        # once a turn is visible, a new one changes nothing of the earlier ones
        new = _after(known.seen, messages) if known is not None and known.any_visible else None
        if known is None or new is None:
            self._listing = _listing(messages, self)
            return self._listing
        for msg in new:
            _place(msg, _chat_message(msg, self), known)
        if any(msg.role == "system" for msg in new):
            known.system = system_turns(messages)
        known.seen.extend(new)
        return known


def _after(seen: list[Message], messages: Sequence[Message]) -> Sequence[Message] | None:
    """The messages after ``seen`` when ``messages`` starts with those very messages."""
    count = len(seen)
    if count > len(messages) or not all(map(operator.is_, seen, messages[:count])):
        return None
    return messages[count:]


@dataclass(slots=True)
class _Question:
    seen: list[Message]
    markers: bool
    text: str


def build_question(messages: Sequence[Message], mode: Mode = "lm", memo: Memo | None = None) -> str:
    """The readable question: ``@[Role]:`` turns when markers are used, flat text otherwise."""
    if memo is not None:
        return memo.question(messages, mode)
    return _question(messages, mode, uses_role_markers(messages), None)


def _question(messages: Sequence[Message], mode: Mode, markers: bool, memo: Memo | None) -> str:
    if markers:
        return "\n\n".join([turn for msg in messages if (turn := _marked_turn(msg, mode, memo))])
    return "\n".join([p for msg in messages for p in _question_parts(msg, mode)])


def _marked_turn(msg: Message, mode: Mode, memo: Memo | None) -> str:
    """One message as an ``@[Role]:`` turn ("" when it has nothing to show)."""
    key = (id(msg), mode)
    turn = memo.turn.get(key) if memo is not None else None
    if turn is None:
        parts = _question_parts(msg, mode)
        turn = f"@[{msg.role.capitalize()}]:\n" + "\n".join(parts) if parts else ""
        if memo is not None:
            memo.turn[key] = turn
    return turn


# --- the messages --------------------------------------------------------------------------------


def _message_part(seg: Segment) -> str:
    # Every part written in a file is right-stripped, as in the question: a `content: |`
    # block's final newline is not content (docs/prompt-rules.md section 5). A model's own
    # answer goes back to it as it was said.
    match seg:
        case TextSegment():
            return seg.value if seg.verbatim else seg.value.rstrip()
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


def _system_content(turns: str, guidelines: str, configured: str | None) -> str:
    """The system turns (``turns``), else the configured prompt, else the default; then the
    guidelines."""
    base = turns
    if not base:
        configured = (configured or "").rstrip()
        base = configured if configured.strip() else DEFAULT_SYSTEM_PROMPT
    if guidelines:
        return f"{base}\n\n{GUIDELINES_HEADER}\n\n{guidelines}"
    return base


@dataclass(slots=True)
class _Listing:
    """What of a conversation's message list does not depend on the target: its system
    turns, and the messages after the system message."""

    seen: list[Message]
    system: str  # the system turns (``system_turns``)
    any_visible: bool  # a turn has visible content: those with none are left out
    tail: list[ChatMessage] = field(default_factory=list)
    called: set[str] = field(default_factory=set)  # the ids of the tool calls so far
    has_user: bool = False  # a user turn (or a tool result, in one) is in ``tail``
    chars: int = 0  # the characters of ``tail``'s contents, kept as it grows


def _listing(messages: Sequence[Message], memo: Memo | None) -> _Listing:
    made = [_chat_message(m, memo) for m in messages]
    listing = _Listing(list(messages), system_turns(messages), any(m[0] for m in made))
    for msg, chat in zip(messages, made, strict=True):
        _place(msg, chat, listing)
    return listing


def _place(msg: Message, made: tuple[bool, str, ChatMessage | None], listing: _Listing) -> None:
    """Add ``msg`` (``made`` of it: ``_chat_message``) to the messages after the system
    message, as the rules say (docs/prompt-rules.md sections 5 and 6)."""
    shown, content, chat = made
    if chat is None:  # a system turn, or nothing to send
        return
    structural = bool(msg.tool_calls) or msg.tool_call_id is not None
    if listing.any_visible and not shown and not structural:
        return  # only <Attached: ...> markers or nothing
    if msg.role == "tool" and (msg.tool_call_id is None or msg.tool_call_id not in listing.called):
        listing.tail.append(ChatMessage("user", f"{TOOL_MARKER}\n{content}"))
        listing.chars += len(listing.tail[-1].content)
        listing.has_user = True
        return
    if msg.tool_calls:
        listing.called.update(c.id for c in msg.tool_calls)
    listing.tail.append(chat)
    listing.chars += len(chat.content)
    listing.has_user = listing.has_user or msg.role in ("user", "tool")


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
    listing = memo.listing(messages) if memo is not None else _listing(messages, None)
    out = [
        ChatMessage("system", _system_content(listing.system, guidelines, system_prompt)),
        *listing.tail,
    ]
    added = needs_user_turn and not listing.has_user
    if added:
        # Anthropic and Gemini need a user turn (a tool result travels in one there).
        out.insert(1, ChatMessage("user", question))
    return out, added


def request_chars(
    history: Sequence[Message],
    guidelines: str,
    settings: PromptSettings,
    memo: Memo,
) -> int | None:
    """The characters of the messages' contents that ``build_prompt`` would send for a
    conversation's request (``history``, with ``guidelines``' text), counted without
    building them: a conversation's next request grows the ``memo``'s count by its new
    messages only, so counting every turn of a long conversation is linear in its length
    (``agentv estimate``). None when the request would need the question as an added user
    turn: build the prompt then."""
    listing = memo.listing(history)
    if settings.needs_user_turn and not listing.has_user:
        return None
    system = _system_content(listing.system, guidelines, settings.system_prompt)
    return len(system) + listing.chars


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
        ChatMessage("system", _system_content("", guidelines, system_prompt)),
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
