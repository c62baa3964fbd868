"""Small helpers shared by tests (import with ``from helpers import ...``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentv.prompts.builder import request_messages
from agentv.providers.base import ProviderRequest


def write(root: Path, rel: str, text: str) -> Path:
    """Write ``text`` to ``root/rel`` (creating folders) and return the path."""
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def ask(question: str, **fields: Any) -> ProviderRequest:
    """A request that is not a conversation: the question as the user turn after the
    default system message (with ``guidelines`` when given), as prompt building makes it."""
    messages = request_messages(question, guidelines=fields.get("guidelines", ""))
    return ProviderRequest(question=question, messages=messages, **fields)


def sent(gate: Any, count: int = 1) -> None:
    """``count`` requests through a ``TargetGate`` at its clock's time, whatever its pace
    says (each enters and ends at once)."""
    for _ in range(count):
        gate._enter(0.0)
        gate.release()


class Clock:
    """A clock for the schedulers that moves only when a test sets ``now``."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def record_collector() -> Any:
    """A ``SummaryCollector`` that also takes records as plain mappings (as they are
    written) with the grade of the run, read as the run reads them (``add_record``)."""
    from agentv.results.outcome import grading_fields
    from agentv.results.summary import SummaryCollector

    class RecordCollector(SummaryCollector):
        def add(self, result: Any, grade: Any = None) -> None:
            """``grade``: the record holds what the run writes of it (``grading_fields``)."""
            if not isinstance(result, Mapping):  # a model, or a record read as one
                super().add(result)
                return
            record = dict(result)
            if grade is not None:
                record.update(grading_fields(grade))
            super().add_record(record)

    return RecordCollector()


# --- a key across a cut (masking before shortening) -----------------------------------------

#: a key as a test plants it in text that agentv shortens
KEY = "sk-SECRETKEY-9F8E7D6C5B4A3210ZYXW"
#: what fills that text: it shares no character with KEY
FILL = "."
#: each offset at which a key crosses a cut (1 .. len - 1 characters before it)
OFFSETS = range(1, len(KEY))


def fragments(text: str, key: str = KEY) -> list[str]:
    """The parts of ``key`` (4 characters or more) found in ``text``."""
    return sorted({key[i : i + 4] for i in range(len(key) - 3) if key[i : i + 4] in text})


def across(size: int, cuts: list[int], offset: int, key: str = KEY) -> str:
    """``size`` characters of filler with ``key`` starting ``offset`` characters before
    each cut (``cuts`` ascending, far enough apart)."""
    text = list(FILL * size)
    for cut in cuts:
        start = cut - offset
        text[start : start + len(key)] = key
    return "".join(text)


def middle_cuts(size: int, limit: int) -> list[int]:
    """Where a text of ``size`` characters shortened to ``limit`` from the middle is cut
    (``agentv.system.masking.cut``): after two thirds of the limit, and before its last third."""
    head = limit * 2 // 3
    return [head, size - (limit - head)]


def clean(part: str) -> bool:
    """``part`` (a shortened text of ``FILL`` and keys) holds no character of a key: only
    filler, masks (``***``) and the cut's mark."""
    return set(part) <= {FILL, "*", " ", "…"}
