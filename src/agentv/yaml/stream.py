"""A fast, memory-lean YAML reader for large eval files.

PyYAML's loaders build the whole node graph of a document before turning it into Python
values; for a 10,000-case eval file that costs seconds and hundreds of megabytes. Here
libyaml's C parser produces events and values are built directly from them, one list item
of the streamed key (``evalcases``) at a time, which is handed to a callback and dropped.
Mapping keys and short strings are interned, since eval files repeat them case after case.

Semantics follow YAML 1.1 as PyYAML's safe loader applies them (implicit typing of plain
scalars, anchors and aliases, ``<<`` merge keys); duplicate keys are reported. Values nest
at most ``MAX_DEPTH`` levels (``NestingTooDeepError`` beyond, aliases counted as what they
stand for), so that nothing built from a file can exhaust the stack, and what aliases
repeat is bounded by ``agentv.yaml.budget`` (``ExpansionTooLargeError`` beyond), so that
nothing built from a few bytes can exhaust memory or time.

The file is read once. What reporting a problem needs later is kept on the way: the marks
of the top-level keys, where the streamed list starts, and enough of the text to describe a
syntax error. Locating a problem inside the list item being handed out needs that item's
events: only then (rarely) are they read again, by a second parser that follows the first
one and never goes back (``result.replay()``), so that a file is read at most twice
however many of its items have problems.
"""

from __future__ import annotations

import codecs
import sys
from collections import deque
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import yaml
from yaml import events as ev

from agentv.system.readfile import open_input
from agentv.yaml.budget import AliasMeter

try:
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML without libyaml
    _Loader = yaml.SafeLoader

_STR_TAG = "tag:yaml.org,2002:str"
MERGE_TAG = "tag:yaml.org,2002:merge"  # a `<<` key
_INTERN_MAX = 256
_WORD_FIRST = frozenset("yYnNtTfFoO")
#: the only plain scalars starting with one of those letters that are not strings (YAML 1.1
#: booleans and null, as PyYAML's resolver spells them)
_WORDS = frozenset(
    spell(word)
    for word in ("yes", "no", "true", "false", "on", "off", "null")
    for spell in (str.lower, str.capitalize, str.upper)
)
_IMPLICIT_FIRST = frozenset(
    ch for ch in yaml.resolver.Resolver.yaml_implicit_resolvers if ch is not None
)
#: the deepest nesting of mappings and lists a file may have (the top-level mapping is level
#: 1; an eval case's deepest values are at about 8). Far more than any real file needs, and
#: far below Python's recursion limit (1000), which everything that walks values afterwards
#: (validation, copies, JSON) must stay under.
MAX_DEPTH = 200
_STARTS = (ev.SequenceStartEvent, ev.MappingStartEvent)
_ENDS = (ev.SequenceEndEvent, ev.MappingEndEvent)


class NestingTooDeepError(yaml.MarkedYAMLError):
    """A value nested more than ``MAX_DEPTH`` levels; ``problem_mark`` is where it crosses."""

    def __init__(self, mark: yaml.Mark, anchor: str | None = None) -> None:
        problem = f"nested too deeply (more than {MAX_DEPTH} levels)"
        if anchor is not None:  # `&a [*a]`: a value holding itself has no end
            problem = f"nested too deeply: the alias *{anchor} repeats a value that contains it"
        super().__init__(problem=problem, problem_mark=mark)


#: lines above a syntax error kept to describe it (``agentv.yaml.syntax_hints``)
CONTEXT_LINES = 60


@dataclass(slots=True)
class StreamResult:
    """The document with the streamed list replaced by its length, and what was noticed."""

    data: Any
    duplicate_keys: list[tuple[str, int, int]] = field(
        default_factory=list
    )  # as written, line, col
    items: int | None = None  # items in the streamed list; None when the key holds no list
    root_mark: yaml.Mark | None = None  # where the document's top value starts
    #: each top-level key written as a scalar, in file order: (key, its mark, its value's mark)
    top_keys: list[tuple[str, yaml.Mark, yaml.Mark]] = field(default_factory=list)
    item_index: int = -1  # the streamed item being handed out (-1: none)
    #: while an item is handed out: gives the events it was built from (None if they cannot
    #: be read again); set by ``iter_stream``, a new one for each reading
    replay: Callable[[], list[ev.Event] | None] | None = None
    #: on a syntax error: where the text's last non-blank character ends (the text as parsed)
    text_end: int = 0
    error_char: str = ""  # ... and the character at the error's mark
    #: ... and the error's line with up to ``CONTEXT_LINES`` lines above it, as far as the
    #: reader still had them (the error's line last; empty when it had not)
    error_lines: tuple[str, ...] = ()


class NotUtf8Error(ValueError):
    """The file holds bytes that are not UTF-8: ``error`` tells which, ``line`` where."""

    def __init__(self, error: UnicodeDecodeError, line: int) -> None:
        super().__init__(f"not UTF-8 text (line {line}): {error}")
        self.error = error
        self.line = line  # 1-based


class _TextReader:
    """The parser's input: a file's text as ``yamlio.read_text`` gives it, read in pieces.

    Bytes are checked as UTF-8 on the way (the first bad one raises ``NotUtf8Error`` with
    its line), a byte-order mark is dropped and CRLF becomes LF, so the parser's marks and
    messages are those of parsing the whole decoded text; nothing needs reading again to
    report a problem. The last pieces are kept to describe a syntax error.
    """

    # PyYAML names its input in reader errors; the parser reads decoded text, as it would
    # from a string (which is what `load_yaml` gives it).
    name = "<unicode string>"
    _KEPT = 8  # pieces kept: more than libyaml reads ahead of the mark it reports

    def __init__(self, raw: BinaryIO | None, text: str | None = None) -> None:
        self._raw = raw
        self._text = text  # a string source is handed over whole, in one piece
        self._decoder = codecs.getincrementaldecoder("utf-8-sig")("strict")
        self._newlines = 0  # in the bytes decoded so far
        self._carry = ""  # a CR at the end of a piece: its LF may start the next one
        self._index = 0  # characters handed out so far
        self._pieces: deque[tuple[int, str]] = deque()  # (index of its first character, piece)
        self._end = 0  # `text_end` of the pieces no longer kept

    def read(self, size: int) -> str:
        """Up to about ``size`` characters of text; "" at the end."""
        if self._raw is None:
            text, self._text = self._text or "", None
        else:
            text = self._decode(size)
        if text:
            if len(self._pieces) == self._KEPT:
                start, dropped = self._pieces.popleft()
                self._end = self._end_of(start, dropped, self._end)
            self._pieces.append((self._index, text))
            self._index += len(text)
        return text

    def _decode(self, size: int) -> str:
        assert self._raw is not None
        while True:
            data = self._raw.read(size)
            try:
                text = self._decoder.decode(data, final=not data)
            except UnicodeDecodeError as exc:
                # `exc.object` starts with the bytes of an unfinished character kept from
                # the previous piece: never a newline.
                line = self._newlines + bytes(exc.object)[: exc.start].count(b"\n") + 1
                raise NotUtf8Error(exc, line) from None
            self._newlines += data.count(b"\n")
            if self._carry:
                text, self._carry = self._carry + text, ""
            if data and text.endswith("\r"):
                text, self._carry = text[:-1], "\r"
            if "\r\n" in text:
                text = text.replace("\r\n", "\n")
            if text or not data:
                return text

    def drain(self) -> None:
        """Read the rest: bytes that are not UTF-8 anywhere are reported, as by ``read_text``."""
        while self.read(1 << 16):
            pass

    def text_end(self) -> int:
        """Index just past the last non-blank character read (``len(text.rstrip())``)."""
        end = self._end
        for start, piece in self._pieces:
            end = self._end_of(start, piece, end)
        return end

    @staticmethod
    def _end_of(start: int, piece: str, end: int) -> int:
        kept = len(piece.rstrip())
        return start + kept if kept else end

    def lines_to(self, index: int, above: int) -> tuple[str, ...]:
        """The line holding ``index`` and up to ``above`` whole lines before it, as far as
        still kept (the line holding ``index`` last; () when it is no longer kept)."""
        if not self._pieces:
            return ()
        start = self._pieces[0][0]
        text = "".join(piece for _, piece in self._pieces)
        at = index - start
        if not 0 <= at <= len(text):
            return ()
        end = text.find("\n", at)
        lines = text[: len(text) if end < 0 else end].split("\n")
        if start > 0:
            lines = lines[1:]  # the first kept line may be cut: left out
        return tuple(lines[-(above + 1) :])

    def char_at(self, index: int) -> str:
        """The character at ``index``, if still kept ("" otherwise)."""
        for start, piece in self._pieces:
            if start <= index < start + len(piece):
                return piece[index - start]
        return ""


class _Builder:
    def __init__(self, loader: Any, result: StreamResult) -> None:
        self.loader = loader
        self.anchors: dict[str, Any] = {}
        self.result = result
        self.constructors = yaml.constructor.SafeConstructor.yaml_constructors
        self._last_key: Any = None
        self.get: Callable[[], ev.Event] = loader.get_event
        self.depth = 0  # collections open around the value being built
        self.reached = 0  # the deepest level reached (measures anchored values)
        self.heights: dict[str, int] = {}  # anchor -> the levels its collection spans
        self.meter = AliasMeter()  # what the aliases repeat, bounded

    def enter(self, mark: yaml.Mark, levels: int = 1) -> None:
        """A collection spanning ``levels`` levels starts here; refused beyond ``MAX_DEPTH``."""
        deepest = self.depth + levels
        if deepest > MAX_DEPTH:
            raise NestingTooDeepError(mark)
        if deepest > self.reached:
            self.reached = deepest

    def record(self, events: list[ev.Event] | None) -> None:
        """From now on, append every event read to ``events`` (None: stop recording)."""
        get_event = self.loader.get_event
        if events is None:
            self.get = get_event
            return
        append = events.append

        def get() -> ev.Event:
            event = get_event()
            append(event)
            return event

        self.get = get

    def scalar(self, event: ev.ScalarEvent) -> Any:
        value = event.value
        tag = event.tag
        if tag is None or tag == "!":
            plain = event.implicit[0]
            if (
                not plain
                or not value
                or value[0] not in _IMPLICIT_FIRST
                # a letter can only start a bool or null word
                or (value[0] in _WORD_FIRST and value not in _WORDS)
            ):
                if value == "" and plain:
                    return None  # an empty plain scalar is null
                return sys.intern(value) if len(value) <= _INTERN_MAX else value
            tag = self.loader.resolve(yaml.ScalarNode, value, event.implicit)
        if tag == _STR_TAG:
            return sys.intern(value) if len(value) <= _INTERN_MAX else value
        if tag == MERGE_TAG:
            return _MERGE
        node = yaml.ScalarNode(tag, value, event.start_mark, event.end_mark, event.style)
        constructor = self.constructors.get(tag)
        if constructor is None:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"could not determine a constructor for the tag {tag!r}",
                event.start_mark,
            )
        return constructor(self.loader, node)

    def value(self, event: ev.Event) -> Any:
        """Build the value that starts with ``event`` (already taken from the parser)."""
        get = self.get
        if isinstance(event, ev.ScalarEvent):
            out = self.scalar(event)
        elif isinstance(event, ev.AliasEvent):
            try:
                out = self.anchors[event.anchor]
            except KeyError:
                raise yaml.composer.ComposerError(
                    None, None, f"found undefined alias {event.anchor!r}", event.start_mark
                ) from None
            height = self.heights.get(event.anchor, 0)
            if height < 0:  # the collection is still being built: the alias is inside it
                raise NestingTooDeepError(event.start_mark, event.anchor)
            if height:  # an alias to a collection nests it here again
                self.enter(event.start_mark, height)
            self.meter.alias(out, event.start_mark, event.anchor)
            return out
        elif isinstance(event, _STARTS):
            start = self.depth
            if start >= MAX_DEPTH:
                raise NestingTooDeepError(event.start_mark)
            self.depth = start + 1
            anchor = event.anchor
            if anchor:  # measure how many levels it spans, for its aliases
                reached, self.reached = self.reached, start + 1
                self.heights[anchor] = -1  # being built
            elif start >= self.reached:
                self.reached = start + 1
            if isinstance(event, ev.SequenceStartEvent):
                out = []
                if anchor:
                    self.anchors[anchor] = out
                nxt = get()
                while not isinstance(nxt, ev.SequenceEndEvent):
                    out.append(self.value(nxt))
                    nxt = get()
            else:
                out = {}
                if anchor:
                    self.anchors[anchor] = out
                self.mapping_body(out)
            if anchor:
                self.heights[anchor] = self.reached - start
                self.reached = max(reached, self.reached)
            self.depth = start
            return out
        else:  # pragma: no cover - the parser guarantees well-formed event streams
            raise yaml.YAMLError(f"unexpected YAML event {event!r}")
        if event.anchor:
            self.anchors[event.anchor] = out
            self.heights.pop(event.anchor, None)  # an anchor written again names a scalar now
        return out

    def mapping_body(self, out: dict[Any, Any]) -> None:
        get = self.get
        scalar = self.scalar
        merges: list[Any] = []
        key_event = get()
        while not isinstance(key_event, ev.MappingEndEvent):
            if self.key(out, key_event, merges):
                key = self._last_key  # read before the value: nested mappings reset it
                nxt = get()
                # Most values are plain scalars: skip `value`'s dispatch (a hot loop).
                if type(nxt) is ev.ScalarEvent and not nxt.anchor:
                    out[key] = scalar(nxt)
                else:
                    out[key] = self.value(nxt)
            key_event = get()
        self.merge(out, merges)

    def key(self, out: dict[Any, Any], key_event: ev.Event, merges: list[Any]) -> bool:
        """Read a mapping key; False when it was a ``<<`` merge (its value already read)."""
        if type(key_event) is ev.ScalarEvent and not key_event.anchor:
            key = self.scalar(key_event)
        else:
            key = self.value(key_event)
        if key is _MERGE:
            merges.append(self.value(self.get()))
            return False
        if type(key) is not str:  # almost every key is text, which always hashes
            if isinstance(key, list):
                key = tuple(key)
            try:
                hash(key)
            except TypeError:  # a mapping as a key: PyYAML's safe loader refuses it too
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    None,
                    "found unhashable key",
                    key_event.start_mark,
                ) from None
        if key in out:
            mark = key_event.start_mark
            written = key_event.value if type(key_event) is ev.ScalarEvent else str(key)
            self.result.duplicate_keys.append((written, mark.line + 1, mark.column + 1))
        self._last_key = key
        return True

    @staticmethod
    def merge(out: dict[Any, Any], merges: list[Any]) -> None:
        # Keys written in the mapping win over merged ones; earlier merges win over later.
        for merged in reversed(merges):
            for source in merged if isinstance(merged, list) else [merged]:
                if isinstance(source, dict):
                    for k, v in source.items():
                        out.setdefault(k, v)


class _MergeMarker:
    __slots__ = ()


_MERGE = _MergeMarker()


def iter_stream(
    source: Path | BinaryIO | str,
    stream_key: str | None,
    result: StreamResult,
) -> Iterator[tuple[int, Any, int]]:
    """Yield ``(index, item, line)`` for each item of the top-level list ``stream_key``
    (None: nothing is streamed, the whole document goes into ``result.data``).

    Items are built one at a time as the file is read, and not kept. Everything else in the
    document goes into ``result.data`` (the streamed key then holds the number of items);
    ``result.data`` is filled as reading goes, so keys written before the list are already
    there when the first item arrives. While an item is handed out, ``result.item_index``
    tells which it is and ``result.replay()`` gives the events it was built from.

    A path or binary file is read as ``yamlio.read_text`` reads it (UTF-8, BOM dropped,
    CRLF as LF); bytes that are not UTF-8 raise ``NotUtf8Error``. Raises
    ``yaml.YAMLError`` on bad YAML; on a syntax error, ``result.text_end`` and
    ``result.error_char`` are set for describing it.
    """
    if isinstance(source, Path):
        with open_input(source) as fh:  # a regular file only: never a FIFO or a device
            yield from _iter_stream(fh, stream_key, result, _Replay(source, result))
        return
    replay = _Replay(source, result) if isinstance(source, str) else None
    yield from _iter_stream(source, stream_key, result, replay)


def _iter_stream(
    source: BinaryIO | str,
    stream_key: str | None,
    result: StreamResult,
    replay: _Replay | None,
) -> Iterator[tuple[int, Any, int]]:
    reader = _TextReader(None, source) if isinstance(source, str) else _TextReader(source)
    loader = _Loader(reader)
    try:
        yield from _read_document(loader, stream_key, result, replay)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        result.error_char = reader.char_at(mark.index) if mark is not None else ""
        if exc.problem_mark is not None:
            result.error_lines = reader.lines_to(exc.problem_mark.index, CONTEXT_LINES)
        reader.drain()  # bytes that are not UTF-8 are reported first, wherever they are
        result.text_end = reader.text_end()
        raise
    except yaml.YAMLError:
        reader.drain()
        raise
    finally:
        loader.dispose()
        if replay is not None:
            replay.close()
    reader.drain()


def _read_document(
    loader: Any, stream_key: str | None, result: StreamResult, replay: _Replay | None
) -> Iterator[tuple[int, Any, int]]:
    builder = _Builder(loader, result)
    get = loader.get_event
    get()  # stream start
    if isinstance(loader.peek_event(), ev.StreamEndEvent):
        return  # empty file
    get()  # document start
    first = get()
    result.root_mark = first.start_mark
    if not isinstance(first, ev.MappingStartEvent):
        result.data = builder.value(first)
        return
    data: dict[Any, Any] = {}
    if first.anchor:
        builder.anchors[first.anchor] = data
        builder.heights[first.anchor] = -1  # being built until the end
    builder.depth = builder.reached = 1
    result.data = data
    merges: list[Any] = []
    key_event = get()
    while not isinstance(key_event, ev.MappingEndEvent):
        if builder.key(data, key_event, merges):
            key = builder._last_key
            value_event = get()
            if isinstance(key_event, ev.ScalarEvent):
                result.top_keys.append(
                    (key_event.value, key_event.start_mark, value_event.start_mark)
                )
            streamed = stream_key is not None and key == stream_key
            if streamed and isinstance(value_event, ev.SequenceStartEvent):
                if replay is not None:
                    replay.list_at = value_event.start_mark.index
                count = yield from _stream_items(builder, result, replay)
                data[key] = result.items = count
            else:
                data[key] = builder.value(value_event)
                if streamed:
                    result.items = None  # written again, not as a list: the last one counts
        key_event = get()
    builder.merge(data, merges)


def _stream_items(
    builder: _Builder, result: StreamResult, replay: _Replay | None
) -> Generator[tuple[int, Any, int], None, int]:
    """Hand out the items of the streamed list (its start already read); returns how many."""
    get = builder.loader.get_event
    events: list[ev.Event] | None = None
    if replay is None:
        # A source that cannot be read again: the item's events are kept while it is
        # handed out (dropped with it, so memory stays that of one item).
        events = []
        builder.record(events)
        result.replay = lambda: events
    else:
        result.replay = replay
    builder.depth = 2  # the items are in the top-level mapping's list
    index = 0
    try:
        nxt = get()
        while not isinstance(nxt, ev.SequenceEndEvent):
            if events is not None:
                events.clear()
                events.append(nxt)
            line = nxt.start_mark.line + 1
            item = builder.value(nxt)
            result.item_index = index
            yield index, item, line
            index += 1
            nxt = get()
    finally:
        builder.depth = 1
        if events is not None:
            builder.record(None)
            events.clear()
        result.item_index = -1
        result.replay = None
    return index


class _Replay:
    """The events of the list item being handed out, read again when asked for.

    A second parser follows the first one through the same source and never goes back:
    asking for the items of a file in order costs one more reading of it at most, and
    nothing until the first time a problem has to be located. Called while
    ``result.item_index`` is set; None when the events cannot be read again.
    """

    def __init__(self, source: Path | str, result: StreamResult) -> None:
        self.source = source
        self.result = result
        self.list_at = -1  # where the streamed list being handed out starts (mark index)
        self._items: Iterator[tuple[int, int, list[ev.Event]]] | None = None
        self._last: tuple[int, int, list[ev.Event]] | None = None
        self._loader: Any = None
        self._file: BinaryIO | None = None
        self._failed = False

    def __call__(self) -> list[ev.Event] | None:
        want = (self.list_at, self.result.item_index)
        if self._last is not None and self._last[:2] == want:
            return self._last[2]
        if self._failed or want[1] < 0:
            return None
        try:
            if self._items is None:
                self._items = self._walk()
            for found in self._items:
                if found[:2] == want:
                    self._last = found
                    return found[2]
                if found[:2] > want:
                    break
        except (OSError, ValueError, yaml.YAMLError):  # changed since: cannot locate
            self._failed = True
            self.close()
        return None

    def _walk(self) -> Iterator[tuple[int, int, list[ev.Event]]]:
        """``(list mark index, item index, events)`` of every item of the streamed lists."""
        if isinstance(self.source, Path):
            self._file = open_input(self.source)
            reader = _TextReader(self._file)
        else:
            reader = _TextReader(None, self.source)
        self._loader = _Loader(reader)
        get = self._loader.get_event
        depth = 0  # collections open
        while True:
            event = get()
            if isinstance(event, _STARTS):
                at = event.start_mark.index
                if depth == 1 and isinstance(event, ev.SequenceStartEvent) and at == self.list_at:
                    index = 0
                    event = get()
                    while not isinstance(event, ev.SequenceEndEvent):
                        events = [event]
                        level = 1 if isinstance(event, _STARTS) else 0
                        while level:
                            event = get()
                            events.append(event)
                            if isinstance(event, _STARTS):
                                level += 1
                            elif isinstance(event, _ENDS):
                                level -= 1
                        yield at, index, events
                        index += 1
                        event = get()
                    continue
                depth += 1
            elif isinstance(event, _ENDS):
                depth -= 1
            elif isinstance(event, ev.StreamEndEvent):
                return

    def close(self) -> None:
        if self._loader is not None:
            self._loader.dispose()
            self._loader = None
        if self._file is not None:
            self._file.close()
            self._file = None


def stream_yaml(
    source: Path | BinaryIO | str,
    *,
    stream_key: str | None = None,
    on_item: Callable[[int, Any, int], None] | None = None,
    result: StreamResult | None = None,
) -> StreamResult:
    """Parse the first document of ``source`` (a path, a binary file or a string).

    When ``on_item`` is given, each item of the top-level list ``stream_key`` is passed to
    ``on_item(index, value, line)`` instead of being kept (see ``iter_stream``). Raises
    ``yaml.YAMLError`` on bad YAML, ``NotUtf8Error`` on bytes that are not UTF-8.
    """
    result = result if result is not None else StreamResult(data=None)
    key = stream_key if on_item is not None else None
    for index, value, line in iter_stream(source, key, result):
        if on_item is not None:
            on_item(index, value, line)
    return result
