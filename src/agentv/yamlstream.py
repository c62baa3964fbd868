"""A fast, memory-lean YAML reader for large eval files.

PyYAML's loaders build the whole node graph of a document before turning it into Python
values; for a 10,000-case eval file that costs seconds and hundreds of megabytes. Here
libyaml's C parser produces events and values are built directly from them, one list item
of the streamed key (``evalcases``) at a time, which is handed to a callback and dropped.
Mapping keys and short strings are interned, since eval files repeat them case after case.

Semantics follow YAML 1.1 as PyYAML's safe loader applies them (implicit typing of plain
scalars, anchors and aliases, ``<<`` merge keys); duplicate keys are reported.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

import yaml
from yaml import events as ev

try:
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML without libyaml
    _Loader = yaml.SafeLoader

_STR_TAG = "tag:yaml.org,2002:str"
_MERGE_TAG = "tag:yaml.org,2002:merge"
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


@dataclass(slots=True)
class StreamResult:
    """The document with the streamed list replaced by its length, and what was noticed."""

    data: Any
    duplicate_keys: list[tuple[str, int, int]] = field(default_factory=list)  # key, line, column


class _Builder:
    def __init__(self, loader: Any, result: StreamResult) -> None:
        self.loader = loader
        self.anchors: dict[str, Any] = {}
        self.result = result
        self.constructors = yaml.constructor.SafeConstructor.yaml_constructors
        self._last_key: Any = None

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
        if tag == _MERGE_TAG:
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
        get = self.loader.get_event
        if isinstance(event, ev.ScalarEvent):
            out = self.scalar(event)
        elif isinstance(event, ev.AliasEvent):
            try:
                return self.anchors[event.anchor]
            except KeyError:
                raise yaml.composer.ComposerError(
                    None, None, f"found undefined alias {event.anchor!r}", event.start_mark
                ) from None
        elif isinstance(event, ev.SequenceStartEvent):
            out = []
            if event.anchor:
                self.anchors[event.anchor] = out
            nxt = get()
            while not isinstance(nxt, ev.SequenceEndEvent):
                out.append(self.value(nxt))
                nxt = get()
            return out
        elif isinstance(event, ev.MappingStartEvent):
            out = {}
            if event.anchor:
                self.anchors[event.anchor] = out
            self.mapping_body(out)
            return out
        else:  # pragma: no cover - the parser guarantees well-formed event streams
            raise yaml.YAMLError(f"unexpected YAML event {event!r}")
        if event.anchor:
            self.anchors[event.anchor] = out
        return out

    def mapping_body(self, out: dict[Any, Any]) -> None:
        get = self.loader.get_event
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
            merges.append(self.value(self.loader.get_event()))
            return False
        if isinstance(key, list):
            key = tuple(key)
        if key in out:
            mark = key_event.start_mark
            self.result.duplicate_keys.append((str(key), mark.line + 1, mark.column + 1))
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
    stream_key: str,
    result: StreamResult,
) -> Iterator[tuple[int, Any, int]]:
    """Yield ``(index, item, line)`` for each item of the top-level list ``stream_key``.

    Items are built one at a time as the file is read, and not kept. Everything else in the
    document goes into ``result.data`` (the streamed key then holds the number of items);
    ``result.data`` is filled as reading goes, so keys written before the list are already
    there when the first item arrives. Raises ``yaml.YAMLError`` on bad YAML.
    """
    if isinstance(source, Path):
        with source.open("rb") as fh:
            yield from iter_stream(fh, stream_key, result)
        return
    loader = _Loader(source)
    builder = _Builder(loader, result)
    try:
        get = loader.get_event
        get()  # stream start
        if isinstance(loader.peek_event(), ev.StreamEndEvent):
            return  # empty file
        get()  # document start
        first = get()
        if not isinstance(first, ev.MappingStartEvent):
            result.data = builder.value(first)
            return
        data: dict[Any, Any] = {}
        if first.anchor:
            builder.anchors[first.anchor] = data
        result.data = data
        merges: list[Any] = []
        key_event = get()
        while not isinstance(key_event, ev.MappingEndEvent):
            if builder.key(data, key_event, merges):
                key = builder._last_key
                value_event = get()
                if key == stream_key and isinstance(value_event, ev.SequenceStartEvent):
                    index = 0
                    nxt = get()
                    while not isinstance(nxt, ev.SequenceEndEvent):
                        line = nxt.start_mark.line + 1
                        yield index, builder.value(nxt), line
                        index += 1
                        nxt = get()
                    data[key] = index
                else:
                    data[key] = builder.value(value_event)
            key_event = get()
        builder.merge(data, merges)
    finally:
        loader.dispose()


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
    ``yaml.YAMLError`` on bad YAML.
    """
    result = result if result is not None else StreamResult(data=None)
    key = stream_key if on_item is not None else None
    for index, value, line in iter_stream(source, key or "\0none", result):
        if on_item is not None:
            on_item(index, value, line)
    return result
