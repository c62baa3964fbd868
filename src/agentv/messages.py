"""Provider-neutral conversation types. No SDK is imported here.

A loaded message keeps its own list of segments (docs/prompt-rules.md section 1), so building a
prompt never searches other messages for a file. Chat messages are what LM APIs receive,
before any vendor mapping.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")
#: how a target gets the question: LM mode (files inlined) or agent mode (files pointed at),
#: docs/prompt-rules.md
Mode = Literal["lm", "agent"]


@dataclass(frozen=True, slots=True)
class TextSegment:
    """A piece of text: written in the eval file, or (``verbatim``) said by a model during
    a live conversation, which goes back to it exactly as it was said: the trimming rule
    of prompt building is for text written in files (docs/prompt-rules.md, section 5)."""

    value: str
    type: Literal["text"] = "text"
    verbatim: bool = False

    @property
    def visible(self) -> bool:
        """Not blank."""
        return bool(self.value.strip())


@dataclass(frozen=True, slots=True)
class FileSegment:
    """An attached file that is not a guideline: its text goes into the turn."""

    path: str  # exactly as written in the eval file
    resolved: Path
    text: str
    type: Literal["file"] = "file"

    @property
    def visible(self) -> bool:
        """The file's text is not blank."""
        return bool(self.text.strip())


@dataclass(frozen=True, slots=True)
class GuidelineRef:
    """A reference to a guideline file: its text goes to the guidelines, a marker stays."""

    path: str  # exactly as written in the eval file
    resolved: Path
    type: Literal["guideline"] = "guideline"

    @property
    def visible(self) -> bool:
        """Never: a guideline's text goes to the system prompt, not into the turn."""
        return False


Segment = TextSegment | FileSegment | GuidelineRef


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call made by an assistant turn. ``arguments`` is a JSON object (``{}`` when
    the model's could not be read as one: ``invalid`` then says why). ``text``: the
    arguments exactly as the model wrote them, when it wrote them as text (OpenAI's form);
    they go back to it as written (None: written as an object, or in an eval file)."""

    id: str
    name: str
    arguments: dict[str, Any]
    invalid: str | None = None
    text: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready ``{id, name, arguments}``."""
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass(frozen=True, slots=True)
class Message:
    """One loaded entry of ``input_messages`` / ``expected_messages``."""

    role: Role
    segments: tuple[Segment, ...]
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None

    @property
    def visible(self) -> bool:
        """Has a non-blank text or file segment (guideline references never count)."""
        return any(seg.visible for seg in self.segments)


@dataclass(slots=True)
class ChatMessage:
    """One message of a chat prompt: what an LM API receives, vendor-neutral."""

    role: Role
    content: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """``{role, content}`` plus the tool fields that are set."""
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            out["tool_calls"] = [tc.to_dict() for tc in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        if self.name is not None:
            out["name"] = self.name
        return out


@dataclass(frozen=True, slots=True)
class GuidelineFile:
    """A guideline file used by a case, in order of first reference."""

    path: str  # as written at its first reference
    resolved: Path
    text: str


def chat_to_dicts(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    """JSON-ready form of a chat prompt."""
    return [m.to_dict() for m in messages]
