"""The built cases of a large eval file, kept on disk between planning and running.

A run checks every case before the first request (so that a mistake is reported before
anything is spent), but holding 100,000 built cases would take hundreds of MB. So a file
with more cases than the plan keeps in memory sends each case, as soon as it is built, to
a ``CaseSpool``: a temporary file of compact records (``marshal``), read back one case at a
time while the cases run. The eval file itself is read once, whatever its size, and memory
stays flat. What many cases share is written once and shared again when read back: file
texts and paths (by value), evaluators written lately (by identity: a file's default
evaluators).

Each reader of the spool (one per target lane) keeps its own position: several lanes
read it at once.
"""

from __future__ import annotations

import marshal
import os
import pickle
import struct
import tempfile
from collections.abc import Iterator
from dataclasses import MISSING, fields
from typing import Any

from agentv.cases import EvalCase, EvaluatorConfig, InvalidCase, RowRef
from agentv.messages import (
    FileSegment,
    GuidelineFile,
    GuidelineRef,
    Message,
    Segment,
    TextSegment,
    ToolCall,
)

_LENGTH = struct.Struct("<I")
_READ_SIZE = 1 << 20
#: an evaluator is written once while among the last this many used (a file's defaults)
EVALUATOR_SLOTS = 8
# segment kinds in a record
_TEXT, _FILE, _GUIDELINE = 0, 1, 2
#: the fields a record holds in its own compact form; every other field of ``EvalCase``
#: (live conversations, tools, simulated users: rare in suites this large) is pickled
#: with the record when it differs from its default, so no field is ever lost
_COMPACT = frozenset(
    {
        "id", "dataset", "eval_file", "outcome", "input_messages", "expected_messages",
        "reference_answer", "guideline_files", "input_files", "evaluators",
        "default_evaluator", "conversation_id", "target", "line", "repeat", "row", "vars",
    }
)  # fmt: skip
_REST = tuple((f.name, f.default) for f in fields(EvalCase) if f.name not in _COMPACT)
assert all(default is not MISSING for _, default in _REST), "a new required field"


class CaseSpool:
    """Built cases written one at a time, read back in the same order as often as asked."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile(prefix="agentv-cases-")  # noqa: SIM115 - kept open
        self._writer = self._file  # buffered; flushed before reading
        self.count = 0
        self.size = 0  # bytes written
        #: values many cases share, written as their index (paths and file texts by value)
        self._values: list[Any] = []
        self._index: dict[Any, int] = {}
        self._slots: list[EvaluatorConfig] = []  # the evaluators used last, oldest first

    # --- writing ---------------------------------------------------------------------------

    def add(self, case: EvalCase, *flags: bool) -> None:
        """Write ``case`` (and ``flags``, given back with it) at the end."""
        record = (
            case.id,
            self._ref(case.dataset),
            self._ref(case.eval_file),
            case.outcome,
            tuple(self._message(m) for m in case.input_messages),
            tuple(self._message(m) for m in case.expected_messages),
            case.reference_answer,
            tuple((g.path, self._ref(g.resolved), self._ref(g.text)) for g in case.guideline_files),
            tuple(self._ref(p) for p in case.input_files),
            self._evaluators(case.evaluators),
            case.default_evaluator,
            case.conversation_id,
            case.target,
            case.line,
            case.repeat,
            flags,
            _rest(case),
            None if case.row is None else (self._ref(case.row.source), *_row_tail(case.row)),
            case.vars,
        )
        self._write(marshal.dumps(record))

    def add_invalid(self, invalid: InvalidCase) -> None:
        """Write a case that cannot run (a data row with a problem) at the end."""
        self._write(marshal.dumps((pickle.dumps(invalid, pickle.HIGHEST_PROTOCOL),)))

    def _write(self, data: bytes) -> None:
        self._writer.write(_LENGTH.pack(len(data)))
        self._writer.write(data)
        self.count += 1
        self.size += _LENGTH.size + len(data)

    def _ref(self, value: Any) -> int:
        """The index of a shared value (added at first sight)."""
        index = self._index.get(value)
        if index is None:
            index = self._index[value] = len(self._values)
            self._values.append(value)
        return index

    def _message(self, m: Message) -> tuple[Any, ...]:
        return (
            m.role,
            tuple(self._segment(s) for s in m.segments),
            tuple((c.id, c.name, c.arguments, c.invalid) for c in m.tool_calls),
            m.tool_call_id,
            m.name,
        )

    def _segment(self, s: Segment) -> tuple[Any, ...]:
        if isinstance(s, TextSegment):
            return (_TEXT, s.value)
        if isinstance(s, FileSegment):
            return (_FILE, s.path, self._ref(s.resolved), self._ref(s.text))
        return (_GUIDELINE, s.path, self._ref(s.resolved))

    def _evaluators(self, evaluators: tuple[EvaluatorConfig, ...]) -> tuple[Any, ...]:
        return tuple(self._evaluator(e) for e in evaluators)

    def _evaluator(self, e: EvaluatorConfig) -> Any:
        """The place of the same evaluator among the EVALUATOR_SLOTS used last (a file's
        defaults), or the evaluator itself; either way it becomes the last used, as when
        read back."""
        slots = self._slots
        for i, seen in enumerate(slots):
            if seen is e:
                slots.append(slots.pop(i))
                return i
        slots.append(e)
        if len(slots) > EVALUATOR_SLOTS:
            del slots[0]
        return (
            e.name,
            pickle.dumps(e.spec, pickle.HIGHEST_PROTOCOL),
            None if e.cwd is None else self._ref(e.cwd),
            e.prompt_text,
            None if e.prompt_path is None else self._ref(e.prompt_path),
        )

    # --- reading ---------------------------------------------------------------------------

    def cases(self) -> Iterator[tuple[EvalCase | InvalidCase, tuple[bool, ...]]]:
        """Every case with its flags, in the order written (each call reads from the start)."""
        reader = self.reader()
        while (found := reader.next()) is not None:
            yield found

    def reader(self) -> SpoolReader:
        """A reader of the cases from the first, with a position of its own."""
        return SpoolReader(self)

    def flush(self) -> None:
        """Make every case written so far readable."""
        self._writer.flush()

    def close(self) -> None:
        """Remove the spool's file."""
        self._file.close()


class SpoolReader:
    """Reads a spool's cases in order with a position of its own (``pread``): readers
    never disturb each other or the writer, and one that has read every case written so
    far goes on with those written after (``next`` gives None until then)."""

    def __init__(self, spool: CaseSpool) -> None:
        self._spool = spool
        self._fd = spool._file.fileno()
        self._buffer, self._position, self._offset = b"", 0, 0
        self._slots: list[EvaluatorConfig] = []  # the evaluators read last, as written
        self.read = 0  # cases read so far

    def next(self) -> tuple[EvalCase | InvalidCase, tuple[bool, ...]] | None:
        """The next case and its flags, or None when every case written was read."""
        if self.read >= self._spool.count:
            return None
        record = self._record()
        self.read += 1
        if len(record) == 1:  # a case that cannot run
            return pickle.loads(record[0]), ()
        values = self._spool._values
        slots = self._slots
        evaluators = []
        for raw in record[9]:
            if isinstance(raw, int):
                evaluator = slots.pop(raw)
            else:
                evaluator = _evaluator(raw, values)
                if len(slots) == EVALUATOR_SLOTS:
                    del slots[0]
            evaluators.append(evaluator)
            slots.append(evaluator)
        row = record[17]
        case = EvalCase(
            id=record[0],
            dataset=values[record[1]],
            eval_file=values[record[2]],
            outcome=record[3],
            input_messages=tuple(_message(m, values) for m in record[4]),
            expected_messages=tuple(_message(m, values) for m in record[5]),
            reference_answer=record[6],
            guideline_files=tuple(
                GuidelineFile(path, values[resolved], values[text])
                for path, resolved, text in record[7]
            ),
            input_files=tuple(values[p] for p in record[8]),
            evaluators=tuple(evaluators),
            default_evaluator=record[10],
            conversation_id=record[11],
            target=record[12],
            line=record[13],
            repeat=record[14],
            row=None if row is None else RowRef(values[row[0]], row[1], row[2]),
            vars=record[18],
            **(pickle.loads(record[16]) if record[16] is not None else {}),
        )
        return case, record[15]

    def _record(self) -> tuple[Any, ...]:
        buffer, position = self._buffer, self._position
        if len(buffer) - position < _LENGTH.size:
            self._spool.flush()
            buffer, position, self._offset = _fill(
                self._fd, buffer, position, self._offset, _LENGTH.size, self._spool.size
            )
        (size,) = _LENGTH.unpack_from(buffer, position)
        whole = _LENGTH.size + size
        if len(buffer) - position < whole:
            self._spool.flush()
            buffer, position, self._offset = _fill(
                self._fd, buffer, position, self._offset, whole, self._spool.size
            )
        record = marshal.loads(buffer[position + _LENGTH.size : position + whole])
        self._buffer, self._position = buffer, position + whole
        return record


def _rest(case: EvalCase) -> bytes | None:
    """The fields outside the compact record that differ from their defaults, pickled."""
    rest = {name: getattr(case, name) for name, default in _REST if getattr(case, name) != default}
    return pickle.dumps(rest, pickle.HIGHEST_PROTOCOL) if rest else None


def _row_tail(row: RowRef) -> tuple[int, int | None]:
    return row.number, row.line


def _message(raw: tuple[Any, ...], values: list[Any]) -> Message:
    role, segments, tool_calls, tool_call_id, name = raw
    return Message(
        role=role,
        segments=tuple(_segment(s, values) for s in segments),
        tool_calls=tuple(ToolCall(*call) for call in tool_calls),
        tool_call_id=tool_call_id,
        name=name,
    )


def _segment(raw: tuple[Any, ...], values: list[Any]) -> Segment:
    kind = raw[0]
    if kind == _TEXT:
        return TextSegment(raw[1])
    if kind == _FILE:
        return FileSegment(raw[1], values[raw[2]], values[raw[3]])
    return GuidelineRef(raw[1], values[raw[2]])


def _evaluator(raw: tuple[Any, ...], values: list[Any]) -> EvaluatorConfig:
    name, spec, cwd, prompt_text, prompt_path = raw
    return EvaluatorConfig(
        name=name,
        spec=pickle.loads(spec),
        cwd=None if cwd is None else values[cwd],
        prompt_text=prompt_text,
        prompt_path=None if prompt_path is None else values[prompt_path],
    )


def _fill(
    fd: int, buffer: bytes, position: int, offset: int, need: int, size: int
) -> tuple[bytes, int, int]:
    """The unread part of ``buffer`` with at least ``need`` bytes, read from ``offset`` on
    (``size``: the bytes written so far). A reader that follows the writer closely asks
    for what there is, not for ``_READ_SIZE``: a large buffer shrunk at every record
    would fragment memory."""
    rest = buffer[position:]
    while len(rest) < need:
        want = max(need - len(rest), min(_READ_SIZE, size - offset))
        more = os.pread(fd, want, offset)
        if not more:
            raise EOFError("the spool of cases ended early")
        offset += len(more)
        rest += more
    return rest, 0, offset
