"""Reading a results file back: the one reader that every view of results uses (summary,
``agentv report``, ``agentv compare``, JUnit, ``--resume`` and reruns, the Python API).

A results file is JSON Lines (one record a line, as ``agentv eval`` writes it) or, for
``.yaml`` / ``.yml``, a stream of YAML documents (one record each). Records come one at a
time (a file of any size reads in flat memory), each checked against ``EvalResult``: a line
that is not a result (not JSON, not a mapping, a field of the wrong type, nested deeper than
``MAX_DEPTH``, larger than ``MAX_RECORD_BYTES``, aliases repeating more than the YAML budget
allows) never stops the reading; it is reported as a ``Diagnostic`` with its line number and
left out. A strict reader (``compare``, JUnit) raises ``InputError`` for it instead, except
for an unfinished last line: a run stopped while writing it, which every reader leaves out.
Only a regular file is read (never a FIFO, a device or a loop of symbolic links).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson
from pydantic import ValidationError

from agentv.errors import Diagnostic, DiagnosticsView, InputError
from agentv.results.record import EvalResult, RunKey
from agentv.system.readfile import open_input, special
from agentv.yaml.budget import ExpansionTooLargeError
from agentv.yaml.source import decode_error_line, describe_decode_error
from agentv.yaml.stream import MAX_DEPTH, NestingTooDeepError, StreamResult, stream_yaml

YAML_SUFFIXES = (".yaml", ".yml")
#: the largest record read (a line of JSON Lines, a YAML document): records hold answers
#: bounded far below this (``max_output_bytes``, ``max_response_bytes``); a larger one is
#: reported and left out, never held in memory
MAX_RECORD_BYTES = 256 * 1024 * 1024
#: how a user is told to fix a file that is not results
_HINT = "give a results file written by agentv eval (JSON Lines, or YAML for .yaml/.yml)"


def results_format(path: Path) -> str:
    """``"yaml"`` for ``.yaml`` / ``.yml`` files, else ``"jsonl"``."""
    return "yaml" if path.suffix.lower() in YAML_SUFFIXES else "jsonl"


@dataclass
class ResultsReader(DiagnosticsView):
    """The records of one results file, one at a time: ``for line, result in reader``.

    ``diagnostics`` collects, as warnings, every line that is not a result (so far);
    ``strict`` makes such a line an ``InputError`` instead (an unfinished last line aside).
    """

    path: Path
    strict: bool = False
    diagnostics: list[Diagnostic] = field(default_factory=list)
    #: records left out by ``latest`` because a later one is about the same run
    superseded: int = 0
    #: records read with something put right, as warnings: a ``score`` written as null (a
    #: score that was not a number when written) is read as 0
    notes: list[Diagnostic] = field(default_factory=list)
    #: whether a record read so far names its case, or why it has none (an ``eval_id`` or
    #: an ``error``): every file agentv writes has one; mappings that all lack both are
    #: something else (a config file, say): ``check_named``
    named: bool = False

    @property
    def format(self) -> str:
        """``"jsonl"`` or ``"yaml"``."""
        return results_format(self.path)

    def __iter__(self) -> Iterator[tuple[int, EvalResult]]:
        for found in self.located():
            yield found.line, found.result

    def located(self) -> Iterator[Located]:
        """Every record with where it is in the file: its line, and the byte offset and
        length of its line (a YAML document: from its first line to the next document),
        so that it can be read again alone (``read_record_at``)."""
        try:
            handle = open_input(self.path)  # a regular file only
        except OSError as exc:
            raise InputError(
                f"cannot read results file {self.path}: {exc.strerror or exc}"
            ) from None
        with handle:
            items = _yaml_items(handle) if self.format == "yaml" else _json_items(handle)
            for number, data, problem, offset, size in items:
                if problem == "":  # an empty YAML document: nothing to read
                    continue
                if problem is None:
                    if data.get("score", 0.0) is None:
                        self.notes.append(
                            Diagnostic(
                                self.path,
                                "score is null (it was not a number when written): read as 0",
                                severity="warning",
                                line=number,
                            )
                        )
                    result, problem = _validated(data)
                    if result is not None:
                        result._read_at = number
                        self.named = self.named or (
                            result.eval_id is not None or result.error is not None
                        )
                        yield Located(number, offset, size, result)
                        continue
                self._bad(number, problem or "not a result")

    def latest(self) -> Iterator[tuple[int, EvalResult]]:
        """The latest record of every run (``EvalResult.run_key``) in file order: a record
        written again for a run (a resumed or rerun run) supersedes the earlier ones. The
        file is read twice, holding only each run's line number in between; ``superseded``
        counts the records left out."""
        last: dict[RunKey, int] = {}
        total = 0
        for line, result in self:
            last[result.run_key] = line
            total += 1
        self.superseded = total - len(last)
        keep = set(last.values())
        again = ResultsReader(self.path, strict=False)
        for line, result in again:
            if line in keep:
                yield line, result

    def check_named(self, read: int) -> None:
        """After reading ``read`` records: ``InputError`` when there were some and none
        named its case (mappings of another kind: not a results file)."""
        if read and not self.named:
            raise InputError(
                f"{self.path} is not a results file (no record names an eval case); {_HINT}"
            )

    def _bad(self, line: int, problem: str) -> None:
        partial = problem == _UNFINISHED
        if self.strict and not partial:
            raise InputError(f"{self.path}:{line}: not a result ({problem}); {_HINT}")
        hint = None if partial else _HINT
        self.diagnostics.append(
            Diagnostic(
                self.path, f"not a result: {problem}", severity="warning", line=line, hint=hint
            )
        )


@dataclass(frozen=True, slots=True)
class Located:
    """A record and where it is: its ``line`` (1-based), and the ``offset`` and ``size`` in
    bytes of the text it was read from."""

    line: int
    offset: int
    size: int
    result: EvalResult


def _validated(data: Any) -> tuple[EvalResult | None, str | None]:
    """A record's mapping as a model, or why it is not a result (a score written as null
    is read as 0: the reader notes it)."""
    problem = _not_a_record(data)
    if problem is not None:
        return None, problem
    if data.get("score", 0.0) is None:
        data = {**data, "score": 0.0}
    try:
        return EvalResult.model_validate(data), None
    except ValidationError as exc:
        return None, _field_problem(exc)
    except RecursionError:
        return None, "nested too deep"


def read_record_at(path: Path, offset: int, size: int, *, line: int = 0) -> EvalResult | None:
    """The record at ``offset`` (``size`` bytes) of a results file, as ``Located`` said
    where it was; None when the bytes there are not a result any more (the file was
    changed). ``InputError`` when the file cannot be read."""
    if size < 0 or size > MAX_RECORD_BYTES or offset < 0:
        return None
    try:
        with open_input(path) as handle:
            handle.seek(offset)
            data = handle.read(size)
    except OSError as exc:
        raise InputError(f"cannot read results file {path}: {exc.strerror or exc}") from None
    if len(data) != size:
        return None
    if results_format(path) == "yaml":
        value = yaml_record(data)
    else:
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError:
            try:
                value = json.loads(data.decode("utf-8", errors="surrogateescape"))
            except (ValueError, RecursionError):
                return None
    if not isinstance(value, dict):
        return None
    result, _ = _validated(value)
    if result is not None:
        result._read_at = line or None
    return result


def read_results(path: Path, *, strict: bool = False) -> ResultsReader:
    """A reader of the results file at ``path`` (nothing is read before it is iterated);
    ``InputError`` when the file is missing or not a regular file (a folder, a FIFO, a
    device, a loop of symbolic links)."""
    what = special(path)
    if what is not None:
        raise InputError(f"{path} is {what}, not a results file; {_HINT}")
    if not path.exists():
        raise InputError(f"results file not found: {path}; {_HINT}")
    if path.is_dir():
        raise InputError(f"{path} is a folder, not a results file; {_HINT}")
    return ResultsReader(path, strict=strict)


_UNFINISHED = "an unfinished last line (a run stopped while writing it)"


def _too_large(size: int) -> str:
    limit = MAX_RECORD_BYTES
    shown = f"{limit // 2**20} MiB" if limit % 2**20 == 0 else f"{limit:,} bytes"
    return f"a record of {size:,} bytes, more than agentv reads in one record ({shown})"


def _too_deep() -> str:
    return f"nested more than {MAX_DEPTH} levels"


def _lines(handle: IO[bytes]) -> Iterator[tuple[int, bytes | None, int, int]]:
    """(number, line, size, offset) for each line; a line longer than ``MAX_RECORD_BYTES``
    is skipped, never held (``None`` and its size)."""
    limit = MAX_RECORD_BYTES
    number = 0
    offset = 0
    while line := handle.readline(limit + 1):
        number += 1
        if len(line) > limit and not line.endswith(b"\n"):
            size = len(line)
            while more := handle.readline(1 << 20):
                size += len(more)
                if more.endswith(b"\n"):
                    break
            yield number, None, size, offset
            offset += size
            continue
        yield number, line, len(line), offset
        offset += len(line)


def _json_items(handle: IO[bytes]) -> Iterator[tuple[int, Any, str | None, int, int]]:
    """(line, data, problem, offset, size) for each non-blank line of a JSON Lines file."""
    for number, line, size, offset in _lines(handle):
        if line is not None and not line.strip():
            continue
        data, problem = _json_line(line, size)
        yield number, data, problem, offset, size


def _json_line(line: bytes | None, size: int) -> tuple[Any, str | None]:
    """(data, problem) of one line of JSON Lines that is not blank."""
    if line is None:
        return None, _too_large(size)
    if not line.endswith(b"\n") and not _parses(line):
        return None, _UNFINISHED
    try:
        data = orjson.loads(line)
    except orjson.JSONDecodeError:
        try:  # NaN, Infinity, lone surrogates: what Python's json accepts
            data = json.loads(line.decode("utf-8", errors="surrogateescape"))
        except RecursionError:
            return None, _too_deep()
        except ValueError:
            return None, _too_deep() if _deeper(line) else "not JSON"
    if not isinstance(data, dict):
        return None, "not a JSON object"
    # Everything that reads a record walks it (validation, copies, the report's JSON):
    # a record is nested at most as deep as a YAML file may be. Counting brackets first
    # keeps the walk to the rare records that could be that deep.
    if line.count(b"[") + line.count(b"{") > MAX_DEPTH and _depth(data) > MAX_DEPTH:
        return None, _too_deep()
    return data, None


def _parses(line: bytes) -> bool:
    try:
        orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return True


def _deeper(line: bytes) -> bool:
    """Whether a line that is not JSON opens more brackets than a record may nest."""
    return line.count(b"[") + line.count(b"{") > MAX_DEPTH


def _depth(value: Any) -> int:
    """How deep lists and mappings nest in ``value`` (without recursion)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, level = stack.pop()
        if level > deepest:
            deepest = level
            if deepest > MAX_DEPTH:
                return deepest
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, level + 1) for child in children if isinstance(child, dict | list))
    return deepest


def _documents(handle: IO[bytes]) -> Iterator[tuple[int, bytes | None, int, int]]:
    """(first line, bytes, size, offset) of each document of a YAML stream, split at its
    ``---`` lines (a document marker at the start of a line ends any value: YAML allows it
    nowhere else). A document larger than ``MAX_RECORD_BYTES`` is skipped, never held
    (``None`` and its size)."""
    limit = MAX_RECORD_BYTES
    parts: list[bytes] = []
    size = 0
    first = 1
    start = 0
    for number, line, length, offset in _lines(handle):
        if (
            line is not None
            and line.startswith(b"---")
            and line[3:4] in (b"", b"\n", b"\r", b" ", b"\t")
        ):
            if size:
                yield first, b"".join(parts) if size <= limit else None, size, start
            parts, size, first, start = [], 0, number, offset
        size += length
        if line is not None and size <= limit:
            parts.append(line)
    if size:
        yield first, b"".join(parts) if size <= limit else None, size, start


def _yaml_items(handle: IO[bytes]) -> Iterator[tuple[int, Any, str | None, int, int]]:
    """(line, data, problem, offset, size) for each document of a YAML stream; the line is
    where the document's value starts. Each document is read on its own, as the eval files
    are (the same nesting limit and alias budget: ``agentv.yaml``), so a bad one does not
    hide the ones after it."""
    documents = _documents(handle)
    pending: tuple[int, bytes | None, int, int] | None = next(documents, None)
    while pending is not None:
        first, data, size, offset = pending
        pending = next(documents, None)
        last = pending is None
        if data is None:
            yield first, None, _too_large(size), offset, size
            continue
        yield (*_yaml_document(first, data, last), offset, size)


def _yaml_document(first: int, data: bytes, last: bool) -> tuple[int, Any, str | None]:
    import yaml

    result = StreamResult(data=None)
    try:
        text = data.decode("utf-8-sig" if first == 1 else "utf-8")
        stream_yaml(text, result=result)
    except UnicodeDecodeError as exc:
        return first + decode_error_line(exc) - 1, None, describe_decode_error(exc, with_line=False)
    except NestingTooDeepError as exc:
        return _at(first, exc, first), None, _too_deep()
    except ExpansionTooLargeError as exc:
        return _at(first, exc, first), None, str(exc.problem)
    except yaml.MarkedYAMLError as exc:
        if last and not data.endswith(b"\n"):
            return first, None, _UNFINISHED
        return _at(first, exc, first), None, f"not YAML ({exc.problem or exc})"
    except (yaml.YAMLError, ValueError) as exc:
        return first, None, f"not YAML ({exc})"
    mark = result.root_mark
    line = first + mark.line if mark is not None else first
    value = result.data
    if value is None:  # an empty document
        return line, None, ""
    if not isinstance(value, dict):
        return line, None, "not a mapping"
    return line, value, None


def yaml_record(data: bytes) -> Any:
    """The value of one YAML document (a results record when it is a mapping), read as
    every document is (nesting and alias budget); None when it does not load."""
    _, value, problem = _yaml_document(1, data, last=False)
    return value if problem is None else None


def _at(first: int, exc: Any, default: int) -> int:
    """The file's line of a problem ``exc`` marks in a document starting at line ``first``."""
    mark = exc.problem_mark or exc.context_mark
    return first + mark.line if mark is not None else default


def _not_a_record(data: dict[str, Any]) -> str | None:
    """Why a mapping is not a record at all, whatever its fields' types: an eval, targets
    or config file (they say what they are in ``$schema``)."""
    schema = data.get("$schema")
    if schema is not None:
        shown = schema if isinstance(schema, str) and len(schema) <= 40 else "..."
        return f"an agentv input file ($schema: {shown}), not results"
    return None


def _field_problem(exc: ValidationError) -> str:
    """The first wrong field of a record, said briefly (``score: must be a number``)."""
    first = exc.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(part) for part in first["loc"]) or "the record"
    return f"{where}: {first['msg'].lower()}"
