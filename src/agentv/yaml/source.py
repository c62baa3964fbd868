"""Reading YAML files fast, and finding where a value stands in them when reporting errors.

Loading uses libyaml's C parser (``yamlstream``) into plain Python values; that is the
fast path every run takes. Line numbers are only needed when something is wrong, so the
node tree that carries them is composed lazily, once per file, by ``YamlSource.locate``.
A file read by the stream reader (``StreamSource``) is located from the marks the reader
kept instead; only a problem inside a list item has that item read again.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml import events as ev

from agentv.errors import Diagnostic, InputError
from agentv.system.readfile import LOOP, NotARegularFileError, read_input
from agentv.yaml.budget import ExpansionTooLargeError, budget_hint
from agentv.yaml.stream import (
    MAX_DEPTH,
    MERGE_TAG,
    NestingTooDeepError,
    NotUtf8Error,
    StreamResult,
    stream_yaml,
)
from agentv.yaml.syntax_hints import Lines, syntax_hint

try:  # libyaml is bundled with PyYAML's wheels; the pure-Python loader is the fallback.
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on the PyYAML build
    _Loader = yaml.SafeLoader

PathKey = tuple[str | int, ...]


def read_text(path: Path, *, strict: bool = False) -> str:
    """Read a text file as UTF-8 with CRLF normalised to LF (a lone CR is kept); only a
    regular file is read (``agentv.system.readfile``: ``OSError`` for a FIFO, a device, a loop).

    A leading byte-order mark is dropped (it is not content). With ``strict``, bytes that
    are not UTF-8 raise ``UnicodeDecodeError``; otherwise they become U+FFFD.
    """
    data = read_input(path).decode("utf-8", errors="strict" if strict else "replace")
    if data.startswith("\ufeff"):
        data = data[1:]
    return data.replace("\r\n", "\n") if "\r\n" in data else data


def decode_error_line(exc: UnicodeDecodeError) -> int:
    """The 1-based line of the first byte that is not UTF-8."""
    return bytes(exc.object)[: exc.start].count(b"\n") + 1


def describe_decode_error(exc: UnicodeDecodeError, *, with_line: bool = True) -> str:
    """``not UTF-8 text (byte 0xff on line 3)``: what the first bad byte is, and where."""
    byte = bytes(exc.object)[exc.start : exc.start + 1].hex()
    where = f" on line {decode_error_line(exc)}" if with_line else ""
    return f"not UTF-8 text (byte 0x{byte}{where})"


@dataclass
class YamlSource:
    """A parsed YAML file: its data, and the means to locate a value in it."""

    path: Path
    text: str | None  # None: read from `path` when a location is first needed
    data: Any
    #: the keys the parse saw written twice: (key, line, column); None: not known, the tree
    #: is searched
    stream_duplicates: list[tuple[str, int, int]] | None = None
    _root: yaml.Node | None = field(default=None, repr=False)
    _composed: bool = field(default=False, repr=False)

    def locate(self, key: PathKey) -> tuple[int | None, int | None]:
        """1-based (line, column) of the value at ``key``, or of its nearest ancestor.

        ``key`` is a path of mapping keys and list indexes, like ``("evalcases", 2, "id")``.
        A mapping key that does not exist in the file resolves to its parent mapping.
        """
        node, rest = self._start(key)
        if node is None:
            return None, None
        node = _descend(node, rest)
        return node.start_mark.line + 1, node.start_mark.column + 1

    def locate_key(self, key: PathKey) -> tuple[int | None, int | None]:
        """Like ``locate`` but points at the mapping *key* of the last part (for unknown keys)."""
        if not key or not isinstance(key[-1], str):
            return self.locate(key)
        parent, rest = self._start(key[:-1])
        for part in rest:
            parent = _child(parent, part) if parent is not None else None
        if isinstance(parent, yaml.MappingNode):
            for k, _v in parent.value:
                if getattr(k, "value", None) == key[-1]:
                    return k.start_mark.line + 1, k.start_mark.column + 1
        return self.locate(key)

    def _start(self, key: PathKey) -> tuple[yaml.Node | None, PathKey]:
        """The node to look ``key`` up from, and what is left of ``key`` below it."""
        return self._tree(), key

    def _tree(self) -> yaml.Node | None:
        """The file's node tree, composed the first time it is needed."""
        if not self._composed:
            self._composed = True
            try:
                if self.text is None:
                    self.text = read_text(self.path)
                self._root = yaml.compose(self.text, Loader=_Loader)
            except yaml.YAMLError:
                self._root = None
        return self._root

    def duplicate_keys(self) -> list[Diagnostic]:
        """A diagnostic for every mapping key written twice (YAML keeps the last silently):
        keys that load as the same value (``true`` and ``yes``, ``1`` and ``1.0``), as the
        reader builds them; ``1`` and ``'1'`` are two keys."""
        if self.stream_duplicates is not None and not self.stream_duplicates:
            # the parse already looked: composing a large file's tree costs seconds
            return []
        if self.stream_duplicates and self._size() > COMPOSE_LIMIT:
            # the reader's own record, without the first key's line
            return [self._twice(repr(k), line, col, "") for k, line, col in self.stream_duplicates]
        root = self._tree()
        keys = yaml.constructor.SafeConstructor()  # one per search: it keeps what it built
        out: list[Diagnostic] = []
        stack: list[yaml.Node] = [root] if root is not None else []
        visited: set[int] = set()  # aliases share nodes: visit each once
        while stack:
            node = stack.pop()
            if id(node) in visited:
                continue
            visited.add(id(node))
            if isinstance(node, yaml.MappingNode):
                first: dict[Any, yaml.ScalarNode] = {}
                for k, v in node.value:
                    stack.append(v)
                    if not isinstance(k, yaml.ScalarNode) or k.tag == MERGE_TAG:
                        continue
                    key = _key_value(k, keys)
                    if key not in first:
                        first[key] = k
                        continue
                    was = first[key]
                    spelled = "" if was.value == k.value else f", as {was.value!r}"
                    out.append(
                        self._twice(
                            f"{k.value!r}",
                            k.start_mark.line + 1,
                            k.start_mark.column + 1,
                            f" (first on line {was.start_mark.line + 1}{spelled})",
                        )
                    )
            elif isinstance(node, yaml.SequenceNode):
                stack.extend(node.value)
        if root is None and self.stream_duplicates:
            # the tree cannot be composed (a second document): the reader's own record
            out = [self._twice(repr(k), line, col, "") for k, line, col in self.stream_duplicates]
        return sorted(out, key=lambda d: (d.line or 0, d.column or 0))

    def _size(self) -> int:
        if self.text is not None:
            return len(self.text)
        try:
            return self.path.stat().st_size
        except OSError:
            return 0

    def _twice(self, key: str, line: int, column: int, where: str) -> Diagnostic:
        return Diagnostic(
            self.path,
            f"key {key} is written twice in the same mapping{where}; only the last one counts",
            line=line,
            column=column,
            hint="remove or merge one of them",
        )

    def diagnostic(
        self,
        key: PathKey,
        message: str,
        *,
        hint: str | None = None,
        severity: str = "error",
        at_key: bool = False,
    ) -> Diagnostic:
        """A diagnostic located at ``key`` in this file."""
        line, col = self.locate_key(key) if at_key else self.locate(key)
        return Diagnostic(
            file=self.path,
            message=message,
            severity=severity,  # type: ignore[arg-type]
            line=line,
            column=col,
            hint=hint,
            location=format_key(key) or None,
        )


def _child(node: yaml.Node, part: str | int) -> yaml.Node | None:
    """The value under ``part`` in ``node`` (the first one if a key is written twice)."""
    if isinstance(node, yaml.MappingNode) and isinstance(part, str):
        for k, v in node.value:
            if isinstance(k, yaml.ScalarNode) and k.value == part:
                return v
    elif (
        isinstance(node, yaml.SequenceNode)
        and isinstance(part, int)
        and 0 <= part < len(node.value)
    ):
        return node.value[part]
    return None


def _descend(node: yaml.Node, key: PathKey) -> yaml.Node:
    """The node at ``key`` below ``node``, or the deepest one on the way that exists."""
    for part in key:
        nxt = _child(node, part)
        if nxt is None:
            break
        node = nxt
    return node


_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"


class StreamSource(YamlSource):
    """A file read by the stream reader, located from the marks the reader kept.

    The top-level keys and values are located from their marks; inside the streamed list,
    the item being handed out is located from its events (read again and composed into
    nodes only when a problem in it is reported). Anything else resolves to the list
    itself. ``data`` is the document as ``StreamResult.data`` holds it (the streamed list
    replaced by its length).
    """

    def __init__(self, path: Path, result: StreamResult, stream_key: str) -> None:
        super().__init__(path=path, text=None, data=result.data)
        self.result = result
        self.stream_key = stream_key
        self._item: tuple[object, yaml.Node | None] = (None, None)  # (first event, its node)

    def _start(self, key: PathKey) -> tuple[yaml.Node | None, PathKey]:
        result = self.result
        if (
            len(key) >= 2
            and key[0] == self.stream_key
            and key[1] == result.item_index
            and result.replay is not None
        ):
            events = result.replay()
            if events:
                first = events[0]
                if self._item[0] is not first:
                    self._item = (first, _compose_events(events))
                if self._item[1] is not None:
                    return self._item[1], key[2:]
        return self._top(), key

    def _top(self) -> yaml.Node | None:
        """The top-level mapping as far as read: its keys, each value a mark only."""
        result = self.result
        mark = result.root_mark
        if mark is None:
            return None
        if not isinstance(result.data, dict):
            return yaml.ScalarNode(_STR, "", mark, mark)
        pairs = [
            (yaml.ScalarNode(_STR, name, key_mark, key_mark), yaml.ScalarNode(_STR, "", at, at))
            for name, key_mark, at in result.top_keys
        ]
        return yaml.MappingNode(_MAP, pairs, mark, mark)

    def duplicate_keys(self) -> list[Diagnostic]:
        """Not kept while streaming: ``load_yaml`` reads a file whole for this (``validate``)."""
        raise NotImplementedError("duplicate keys are reported from load_yaml's YamlSource")


def _compose_events(events: list[yaml.Event]) -> yaml.Node | None:
    """The node tree of one value's events (as ``yaml.compose`` would make it, merges kept).

    An alias to an anchor outside these events stands for itself: a node at the alias.
    """
    anchors: dict[str, yaml.Node] = {}
    it = iter(events)

    def compose(event: yaml.Event) -> yaml.Node:
        if isinstance(event, yaml.AliasEvent):
            found = anchors.get(event.anchor)
            return found or yaml.ScalarNode(_STR, "", event.start_mark, event.end_mark)
        node: yaml.Node
        if isinstance(event, yaml.ScalarEvent):
            node = yaml.ScalarNode(event.tag or "", event.value, event.start_mark, event.end_mark)
        elif isinstance(event, yaml.SequenceStartEvent):
            node = yaml.SequenceNode(event.tag or "", [], event.start_mark, event.end_mark)
        else:
            node = yaml.MappingNode(event.tag or "", [], event.start_mark, event.end_mark)
        if event.anchor:
            anchors[event.anchor] = node
        if isinstance(event, yaml.SequenceStartEvent):
            for nxt in it:
                if isinstance(nxt, yaml.SequenceEndEvent):
                    break
                node.value.append(compose(nxt))
        elif isinstance(event, yaml.MappingStartEvent):
            for nxt in it:
                if isinstance(nxt, yaml.MappingEndEvent):
                    break
                key = compose(nxt)
                node.value.append((key, compose(next(it))))
        return node

    try:
        return compose(next(it))
    except StopIteration:  # an item cut short: locate from its start instead
        return None


def _syntax_diagnostic(path: Path, result: StreamResult, exc: yaml.MarkedYAMLError) -> Diagnostic:
    """``invalid YAML: ...`` at the error's place, with the hint that fits the lines around
    it (``syntax_hints``)."""
    problem = exc.problem or str(exc)
    mark = exc.problem_mark or exc.context_mark
    at_end = mark is not None and mark.index >= result.text_end
    ctx = exc.context_mark
    if (at_end or "end of stream" in problem) and ctx is not None and ctx.index < result.text_end:
        mark = ctx  # noticed only at the end of the file: what is unfinished started earlier
    first = exc.problem_mark.line + 2 - len(result.error_lines) if exc.problem_mark else 0
    hint = syntax_hint(exc, Lines(result.error_lines, first), at_end=at_end, char=result.error_char)
    if exc.context:
        ctx = exc.context_mark
        if ctx is not None and mark is not None and ctx.line != mark.line:
            problem = f"{exc.context} (from line {ctx.line + 1}), {problem}"
        else:
            problem = f"{exc.context}, {problem}"
    return Diagnostic(
        path,
        f"invalid YAML: {problem}",
        line=mark.line + 1 if mark else None,
        column=mark.column + 1 if mark else None,
        hint=hint,
    )


def read_error(path: Path, exc: Exception, result: StreamResult) -> InputError:
    """The ``InputError`` for a YAML file that cannot be read or parsed.

    ``exc`` is what reading raised (``OSError``, ``NotUtf8Error``, ``UnicodeDecodeError``
    or ``yaml.YAMLError``); ``result`` is the stream reader's, for locating a syntax error.
    """
    if isinstance(exc, NotUtf8Error | UnicodeDecodeError):
        error = exc.error if isinstance(exc, NotUtf8Error) else exc
        line = exc.line if isinstance(exc, NotUtf8Error) else decode_error_line(exc)
        return InputError(
            f"{path}: not UTF-8",
            [
                Diagnostic(
                    path,
                    describe_decode_error(error, with_line=False),
                    line=line,
                    hint="save the file with UTF-8 encoding",
                )
            ],
        )
    if isinstance(exc, FileNotFoundError):
        return InputError(
            f"{path}: file not found",
            [Diagnostic(path, "file not found", hint="check the path you passed")],
        )
    if isinstance(exc, IsADirectoryError):
        return InputError(
            f"{path}: is a folder",
            [Diagnostic(path, "expected a YAML file but this is a folder")],
        )
    if isinstance(exc, NotARegularFileError) or (isinstance(exc, OSError) and exc.strerror == LOOP):
        what = exc.what if isinstance(exc, NotARegularFileError) else LOOP
        return InputError(
            f"{path}: not a regular file",
            [
                Diagnostic(
                    path,
                    f"not a file agentv can read: it is {what}",
                    hint="agentv reads regular files only; remove it, or point at the file itself",
                )
            ],
        )
    if isinstance(exc, OSError):
        return InputError(
            f"{path}: cannot be read",
            [Diagnostic(path, f"cannot read the file: {exc.strerror or exc}")],
        )
    if isinstance(exc, NestingTooDeepError):
        hint = (
            f"agentv reads values nested at most {MAX_DEPTH} levels "
            "(aliases count as the value they repeat)"
        )
        return _at_mark(path, "nested too deeply", exc, hint)
    if isinstance(exc, ExpansionTooLargeError):
        return _at_mark(path, "aliases repeat too much", exc, budget_hint())
    if isinstance(exc, yaml.MarkedYAMLError):
        return InputError(f"{path}: invalid YAML", [_syntax_diagnostic(path, result, exc)])
    return InputError(f"{path}: invalid YAML", [Diagnostic(path, f"invalid YAML: {exc}")])


def _at_mark(path: Path, title: str, exc: yaml.MarkedYAMLError, hint: str) -> InputError:
    mark = exc.problem_mark
    return InputError(
        f"{path}: {title}",
        [
            Diagnostic(
                path,
                str(exc.problem),
                line=mark.line + 1 if mark else None,
                column=mark.column + 1 if mark else None,
                hint=hint,
            )
        ],
    )


def format_key(key: PathKey) -> str:
    """``("evalcases", 2, "id")`` -> ``evalcases[2].id``."""
    out = ""
    for part in key:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


#: the largest text whose node tree is composed to name where a key was first written:
#: composing takes about 0.75 s and 30 MB a megabyte (a 10,000-case suite is 6.6 MB)
COMPOSE_LIMIT = 2_000_000


def _key_value(node: yaml.ScalarNode, keys: yaml.constructor.SafeConstructor) -> Any:
    """A scalar key as the reader loads it (what makes two keys the same), else its text."""
    try:
        value = keys.construct_object(node)
        hash(value)
    except Exception:  # an unknown tag, a value that cannot be a key: compare the text
        return ("text", node.value)
    return value


def leading_schema(text: str) -> str | None:
    """The document's ``$schema`` when it is the first key of its top-level mapping, read
    without parsing the rest; None otherwise (not there, or not YAML)."""
    try:
        head = list(itertools.islice(yaml.parse(text, Loader=_Loader), 5))
    except yaml.YAMLError:
        return None
    if len(head) < 5 or not all(isinstance(e, t) for e, t in zip(head, _LEADING, strict=True)):
        return None
    key, value = head[3], head[4]
    return value.value if key.value == "$schema" else None


#: the events that open a document whose first key is a plain scalar with a scalar value
_LEADING = (
    ev.StreamStartEvent,
    ev.DocumentStartEvent,
    ev.MappingStartEvent,
    ev.ScalarEvent,
    ev.ScalarEvent,
)


def load_yaml(path: Path) -> YamlSource:
    """Parse a YAML file; a missing file or a syntax error raises ``InputError`` with a location."""
    result = StreamResult(data=None)
    try:
        text = read_text(path, strict=True)
        # Values straight from libyaml's events: several times faster than yaml.load.
        stream_yaml(text, result=result)
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise read_error(path, exc, result) from None
    return YamlSource(
        path=path, text=text, data=result.data, stream_duplicates=result.duplicate_keys
    )
