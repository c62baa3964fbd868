"""Known secret values, masked wherever agentv writes or forwards text.

A run knows some of its secrets: the value of every ``${{ VAR }}`` its targets substituted,
each target's ``api_key``, and the vendors' key variables (``OPENAI_API_KEY``...). An agent
may still print one (``echo $API_KEY``); its answer then goes to a judge, to code
evaluators, to the results file and to the screen. ``Masker`` replaces each such value with
``***`` in the answer before it is graded, and in the record before it is written or shown;
the record then says so (``masked_secrets: true``). Values shorter than ``MIN_LENGTH`` are
never masked: they are too likely to be ordinary words, and masking them would wreck text.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

if TYPE_CHECKING:
    from agentv.trajectory import Trajectory

MASK = "***"
MIN_LENGTH = 8


class _Answer(Protocol):
    """What is masked of a target's answer (an ``agentv.providers.base.ProviderResponse``,
    a dataclass): its text, reasoning, raw data, what was sent, and its trajectory."""

    text: str
    reasoning: str | None
    raw: Any
    sent: dict[str, Any]
    trajectory: Trajectory | None


_AnswerT = TypeVar("_AnswerT", bound=_Answer)


class Masker:
    """Replaces known secret values (``MIN_LENGTH`` characters or more) with ``***``."""

    __slots__ = ("_pattern", "secrets")

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        kept = {s.strip() for s in secrets if isinstance(s, str)}
        #: longest first, so that a secret holding another is masked whole
        self.secrets = tuple(
            sorted((s for s in kept if len(s) >= MIN_LENGTH), key=len, reverse=True)
        )
        self._pattern = re.compile("|".join(map(re.escape, self.secrets))) if self.secrets else None

    def __bool__(self) -> bool:
        return self._pattern is not None

    def text(self, text: str) -> tuple[str, bool]:
        """``text`` masked, and whether anything was."""
        if self._pattern is None or not text:
            return text, False
        masked, count = self._pattern.subn(MASK, text)
        return masked, count > 0

    def value(self, value: Any) -> tuple[Any, bool]:
        """``value`` (text, or lists and mappings holding text) masked, and whether anything
        was; a value with nothing to mask is returned as it is."""
        if self._pattern is None:
            return value, False
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            out: dict[Any, Any] = {}
            changed = False
            for key, item in value.items():
                new_key, key_changed = self.value(key) if isinstance(key, str) else (key, False)
                out[new_key], item_changed = self.value(item)
                changed = changed or key_changed or item_changed
            return (out, True) if changed else (value, False)
        if isinstance(value, list | tuple):
            items = [self.value(item) for item in value]
            if any(changed for _, changed in items):
                return [item for item, _ in items], True
            return value, False
        return value, False

    def response(self, response: _AnswerT) -> tuple[_AnswerT, bool]:
        """A target's answer with its text, reasoning, raw data and request masked."""
        if self._pattern is None:
            return response, False
        text, a = self.text(response.text)
        reasoning, b = self.value(response.reasoning)
        raw, c = self.value(response.raw)
        sent, d = self.value(response.sent)
        trajectory, e = self.steps(response.trajectory)
        if not (a or b or c or d or e):
            return response, False
        masked = dataclasses.replace(
            response, text=text, reasoning=reasoning, raw=raw, sent=sent, trajectory=trajectory
        )
        return masked, True

    def steps(self, steps: Trajectory | None) -> tuple[Trajectory | None, bool]:
        """A trajectory with the arguments, results and errors of its steps masked."""
        if self._pattern is None or not steps:
            return steps, False
        out = []
        changed = False
        for step in steps:
            arguments, a = self.value(step.arguments)
            result, b = self.value(step.result)
            error, c = self.value(step.error)
            if a or b or c:
                changed = True
                step = dataclasses.replace(step, arguments=arguments, result=result, error=error)
            out.append(step)
        return (tuple(out), True) if changed else (steps, False)

    def record(self, record: dict[str, Any]) -> dict[str, Any]:
        """A result record with every secret masked; ``masked_secrets: true`` ends it when
        anything was (an answer masked before grading already says so in the record)."""
        out, changed = self.value(record)
        if changed:
            out = dict(out)
            out.pop("masked_secrets", None)
            out["masked_secrets"] = True
        return out


# --- masking before shortening ----------------------------------------------------------------
#
# Text that is shortened (an API's error message, the end of a program's stderr, the start of
# a body that is not JSON) is masked first: a secret crossing the cut would otherwise leave a
# part of itself that no later masking recognises. Providers and evaluators shorten text deep
# inside a case, far from the run's ``Masker``; the case pipeline makes it theirs for the
# time of the case (``masking_scope``) and learns from the scope whether anything was masked,
# so that the record says ``masked_secrets: true`` even when the secret never reached it.

#: what stands for the text left out of a shortened text
ELLIPSIS = "…"


@dataclasses.dataclass(slots=True)
class MaskScope:
    """The run's masker for one case, and whether text shortened in it had a secret."""

    masker: Masker
    masked: bool = False


_scope: ContextVar[MaskScope | None] = ContextVar("agentv_mask_scope", default=None)


@contextmanager
def masking_scope(masker: Masker) -> Iterator[MaskScope]:
    """Within the block (and the tasks it starts), ``shorten`` masks with ``masker`` too."""
    scope = MaskScope(masker)
    token = _scope.set(scope)
    try:
        yield scope
    finally:
        _scope.reset(token)


def _masker_for(secrets: Iterable[str]) -> Masker:
    scope = _scope.get()
    extra = [s for s in secrets if isinstance(s, str)]
    if scope is None:
        return Masker(extra)
    if not extra:
        return scope.masker
    return Masker([*scope.masker.secrets, *extra])


def _flag() -> None:
    scope = _scope.get()
    if scope is not None:
        scope.masked = True


def cut(text: str, limit: int, keep: str = "middle") -> str:
    """``text`` at most about ``limit`` characters: ``head`` keeps its start, ``tail`` its end
    (where a failing program explains itself), ``middle`` both (an error's cause is said at
    its start, and its last words are kept too). The cut is marked with ``…``."""
    if len(text) <= limit:
        return text
    if keep == "head":
        return text[:limit] + ELLIPSIS
    if keep == "tail":
        return ELLIPSIS + text[-limit:]
    head = limit * 2 // 3
    return f"{text[:head]} {ELLIPSIS} {text[len(text) - (limit - head) :]}"


def shorten(text: str, limit: int, *, keep: str = "middle", secrets: Iterable[str] = ()) -> str:
    """``text`` with every known secret masked (the case's, see ``masking_scope``, and
    ``secrets``), then ``cut`` to ``limit`` characters; the case's record will say that
    something was masked."""
    masked, changed = _masker_for(secrets).text(text)
    if changed:
        _flag()
    return cut(masked, limit, keep)


def masked_head(text: str, end: int, secrets: Iterable[str] = ()) -> str:
    """``text[:end]`` with every known secret masked; a secret crossing ``end`` is masked
    whole rather than cut (``text`` must run on past ``end`` by a secret's length: process
    output and answer files keep ``SECRET_ROOM`` more than their cap for this)."""
    return _masked_part(text, 0, end, secrets)


def masked_tail(text: str, start: int, secrets: Iterable[str] = ()) -> str:
    """``text[start:]``, masked as ``masked_head`` masks: a secret crossing ``start`` is
    masked whole (``text`` must begin a secret's length before ``start``)."""
    return _masked_part(text, start, len(text), secrets)


def _masked_part(text: str, start: int, end: int, secrets: Iterable[str]) -> str:
    masker = _masker_for(secrets)
    if masker._pattern is not None:
        # from a secret's length before the kept part to one after it: what crosses a cut
        window = masker._pattern.finditer(text, max(0, start - SECRET_ROOM), end + SECRET_ROOM)
        for match in window:
            if match.start() < start < match.end():
                start = match.start()
            if match.start() < end < match.end():
                end = match.end()
    masked, changed = masker.text(text[start:end])
    if changed:
        _flag()
    return masked


#: characters a capped text keeps beyond its cap, so that a secret crossing the cap is
#: still whole when it is masked (``masked_head``); longer secrets are not a thing
SECRET_ROOM = 4096
