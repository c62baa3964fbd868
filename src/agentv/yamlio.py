"""Reading YAML files fast, and finding where a value stands in them when reporting errors.

Loading uses libyaml's C loader (``CSafeLoader``) into plain Python values; that is the
fast path every run takes. Line numbers are only needed when something is wrong, so the
node tree that carries them is composed lazily, once per file, by ``YamlSource.locate``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agentv.errors import Diagnostic, InputError
from agentv.yamlstream import stream_yaml

try:  # libyaml is bundled with PyYAML's wheels; the pure-Python loader is the fallback.
    _Loader: type = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on the PyYAML build
    _Loader = yaml.SafeLoader

PathKey = tuple[str | int, ...]


def read_text(path: Path, *, strict: bool = False) -> str:
    """Read a text file as UTF-8 with CRLF normalised to LF (a lone CR is kept).

    A leading byte-order mark is dropped (it is not content). With ``strict``, bytes that
    are not UTF-8 raise ``UnicodeDecodeError``; otherwise they become U+FFFD.
    """
    data = path.read_bytes().decode("utf-8", errors="strict" if strict else "replace")
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
    _root: yaml.Node | None = field(default=None, repr=False)
    _composed: bool = field(default=False, repr=False)

    def locate(self, key: PathKey) -> tuple[int | None, int | None]:
        """1-based (line, column) of the value at ``key``, or of its nearest ancestor.

        ``key`` is a path of mapping keys and list indexes, like ``("evalcases", 2, "id")``.
        A mapping key that does not exist in the file resolves to its parent mapping.
        """
        if not self._composed:
            self._composed = True
            try:
                if self.text is None:
                    self.text = read_text(self.path)
                self._root = yaml.compose(self.text, Loader=_Loader)
            except yaml.YAMLError:
                self._root = None
        node = self._root
        if node is None:
            return None, None
        best = node
        for part in key:
            nxt = None
            if isinstance(node, yaml.MappingNode) and isinstance(part, str):
                for k, v in node.value:
                    if isinstance(k, yaml.ScalarNode) and k.value == part:
                        nxt = v
                        break
            elif (
                isinstance(node, yaml.SequenceNode)
                and isinstance(part, int)
                and 0 <= part < len(node.value)
            ):
                nxt = node.value[part]
            if nxt is None:
                break
            node = best = nxt
        return best.start_mark.line + 1, best.start_mark.column + 1

    def locate_key(self, key: PathKey) -> tuple[int | None, int | None]:
        """Like ``locate`` but points at the mapping *key* of the last part (for unknown keys)."""
        if not key or not isinstance(key[-1], str):
            return self.locate(key)
        self.locate(())  # make sure the tree is composed
        node = self._root
        for part in key[:-1]:
            if isinstance(node, yaml.MappingNode) and isinstance(part, str):
                node = next((v for k, v in node.value if getattr(k, "value", None) == part), None)
            elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
                node = node.value[part] if 0 <= part < len(node.value) else None
            else:
                node = None
            if node is None:
                return self.locate(key)
        if isinstance(node, yaml.MappingNode):
            for k, _v in node.value:
                if getattr(k, "value", None) == key[-1]:
                    return k.start_mark.line + 1, k.start_mark.column + 1
        return self.locate(key)

    def duplicate_keys(self) -> list[Diagnostic]:
        """A diagnostic for every mapping key written twice (YAML keeps the last silently)."""
        self.locate(())  # make sure the tree is composed
        out: list[Diagnostic] = []
        stack: list[yaml.Node] = [self._root] if self._root is not None else []
        visited: set[int] = set()  # aliases share nodes: visit each once
        while stack:
            node = stack.pop()
            if id(node) in visited:
                continue
            visited.add(id(node))
            if isinstance(node, yaml.MappingNode):
                first: dict[str, yaml.Node] = {}
                for k, v in node.value:
                    stack.append(v)
                    if not isinstance(k, yaml.ScalarNode) or k.value == "<<":
                        continue
                    if k.value in first:
                        line = first[k.value].start_mark.line + 1
                        out.append(
                            Diagnostic(
                                self.path,
                                f"key {k.value!r} is written twice in the same mapping "
                                f"(first on line {line}); only the last one counts",
                                line=k.start_mark.line + 1,
                                column=k.start_mark.column + 1,
                                hint="remove or merge one of them",
                            )
                        )
                    else:
                        first[k.value] = k
            elif isinstance(node, yaml.SequenceNode):
                stack.extend(node.value)
        return sorted(out, key=lambda d: (d.line or 0, d.column or 0))

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


def _syntax_diagnostic(path: Path, text: str, exc: yaml.MarkedYAMLError) -> Diagnostic:
    problem = exc.problem or str(exc)
    mark = exc.problem_mark or exc.context_mark
    hint = "fix the YAML syntax at this position (indentation, quotes, colons)"
    at_end = mark is not None and mark.index >= len(text.rstrip())
    if at_end or "end of stream" in problem:
        # The parser only noticed at the end of the file; what is unfinished started earlier.
        if exc.context_mark is not None and exc.context_mark.index < len(text.rstrip()):
            mark = exc.context_mark
        hint = "the file ends inside something never closed: a quote, a [ or a {"
    elif mark is not None and text[mark.index : mark.index + 1] == "\t":
        hint = "YAML does not allow tabs for indentation; use spaces"
    elif "mapping values are not allowed" in problem:
        hint = "quote a value that contains ': ' (for example value: \"a: b\")"
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


def format_key(key: PathKey) -> str:
    """``("evalcases", 2, "id")`` -> ``evalcases[2].id``."""
    out = ""
    for part in key:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def load_yaml(path: Path) -> YamlSource:
    """Parse a YAML file; a missing file or a syntax error raises ``InputError`` with a location."""
    try:
        text = read_text(path, strict=True)
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{path}: not UTF-8",
            [
                Diagnostic(
                    path,
                    describe_decode_error(exc, with_line=False),
                    line=decode_error_line(exc),
                    hint="save the file with UTF-8 encoding",
                )
            ],
        ) from None
    except FileNotFoundError:
        raise InputError(
            f"{path}: file not found",
            [Diagnostic(path, "file not found", hint="check the path you passed")],
        ) from None
    except IsADirectoryError:
        raise InputError(
            f"{path}: is a folder",
            [Diagnostic(path, "expected a YAML file but this is a folder")],
        ) from None
    except OSError as exc:
        raise InputError(
            f"{path}: cannot be read",
            [Diagnostic(path, f"cannot read the file: {exc.strerror or exc}")],
        ) from None
    try:
        # Values straight from libyaml's events: several times faster than yaml.load.
        data = stream_yaml(text).data
    except yaml.MarkedYAMLError as exc:
        raise InputError(f"{path}: invalid YAML", [_syntax_diagnostic(path, text, exc)]) from None
    except yaml.YAMLError as exc:
        raise InputError(
            f"{path}: invalid YAML", [Diagnostic(path, f"invalid YAML: {exc}")]
        ) from None
    return YamlSource(path=path, text=text, data=data)
