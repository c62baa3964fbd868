"""What to do about a YAML syntax error, said from the lines around it.

The parser's own words (``mapping values are not allowed here``) say what it met, not what
the writer got wrong; the same words come from a value with ``: `` in it and from a key
indented one space too far. ``syntax_hint`` reads the error's line and the lines above it
and picks the hint that fits: the indentation (with the keys the line may line up with),
a missing ``:``, a quote or bracket never closed, a value that must be quoted, a tab.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import yaml

#: the hint when nothing more precise fits
GENERIC = "fix the YAML syntax at this position (indentation, quotes, colons)"
UNCLOSED = "the file ends inside something never closed: a quote, a [ or a {"
TABS = "YAML does not allow tabs for indentation; use spaces"

# `key:` or `- key:` at the start of a line (a key as people write them, not a flow value)
_KEY = re.compile(
    r"^(?P<dash>-\s+)?(?P<key>[^\s#'\"\[\]{}&*!|>%@`,-][^:#]*?|'[^']*'|\"[^\"]*\"):(?:\s|$)"
)


@dataclass(frozen=True, slots=True)
class Lines:
    """The error's line and the lines above it, as far as the reader still has them."""

    lines: Sequence[str]  # the error's line last
    first: int  # the 1-based number of ``lines[0]``

    @property
    def here(self) -> str:
        return self.lines[-1] if self.lines else ""

    def above(self) -> list[tuple[int, str]]:
        """``(line number, text)`` of the lines above, nearest first, blank lines and
        comments left out."""
        found = []
        for offset in range(len(self.lines) - 2, -1, -1):
            text = self.lines[offset]
            if text.strip() and not text.lstrip().startswith("#"):
                found.append((self.first + offset, text))
        return found


@dataclass(frozen=True, slots=True)
class _Key:
    line: int
    name: str
    column: int  # where the key starts (after a list item's `- `)
    has_value: bool  # something follows `key:` on its line


def _indent(text: str) -> int:
    return len(text) - len(text.lstrip(" "))


def _key_of(line: int, text: str) -> _Key | None:
    body = text.lstrip(" ")
    match = _KEY.match(body)
    if match is None:
        return None
    column = _indent(text) + (len(match.group("dash")) if match.group("dash") else 0)
    rest = body[match.end() :].split(" #", 1)[0].strip()
    return _Key(line, match.group("key").strip(), column, bool(rest))


def _levels(lines: Lines) -> list[_Key]:
    """The keys that enclose the error's line, or could: going up, each key less indented
    than every key seen below it (nearest first)."""
    levels: list[_Key] = []
    for line, text in lines.above():
        key = _key_of(line, text)
        if key is None:
            continue
        if not levels or key.column < levels[-1].column:
            levels.append(key)
        if key.column == 0:
            break
    return levels


def _spaces(n: int) -> str:
    return f"{n} space{'s' if n != 1 else ''}"


def _indentation(lines: Lines) -> str | None:
    """Where the error's line could line up, from the keys above it."""
    here = lines.here
    column = _indent(here)
    if here.lstrip().startswith("- "):
        return None
    levels = _levels(lines)
    below = next((k for k in levels if k.column < column), None)
    over = [k for k in levels if k.column > column and (below is None or k.line > below.line)]
    above = min(over, key=lambda k: k.column) if over else None
    if above is not None and below is not None:
        return (
            f"this line is indented {_spaces(column)}, between `{below.name}:` "
            f"(line {below.line}, {_spaces(below.column)}) and `{above.name}:` (line "
            f"{above.line}, {_spaces(above.column)}): the keys of one mapping line up, so "
            "indent it as the key it goes with"
        )
    if below is not None and below.has_value:
        return (
            f"this line is indented {_spaces(column)}, more than `{below.name}:` (line "
            f"{below.line}, {_spaces(below.column)}), so it reads as part of that value: "
            f"line it up with `{below.name}:`"
        )
    return None


def syntax_hint(exc: yaml.MarkedYAMLError, lines: Lines, *, at_end: bool, char: str) -> str:
    """The hint for a syntax error.

    Args:
        exc: What the parser raised.
        lines: The error's line and those above it (``Lines(())``: not known).
        at_end: The parser only noticed at the end of the text.
        char: The character at the error's mark ("" when not known).

    Returns:
        The hint: one sentence saying what to change.
    """
    problem = exc.problem or ""
    context = exc.context or ""
    ctx = exc.context_mark
    opened = f" at line {ctx.line + 1}" if ctx is not None else ""
    if at_end or "end of stream" in problem:
        if "quoted scalar" in context:
            return f"the quote opened{opened} is never closed: end the value with the same quote"
        if "flow sequence" in context:
            return f"the [ opened{opened} is never closed: end the list with ]"
        if "flow mapping" in context:
            return f"the {{ opened{opened} is never closed: end the mapping with }}"
        return UNCLOSED
    if char == "\t" or "\t" in lines.here[: len(lines.here) - len(lines.here.lstrip(" \t"))]:
        return TABS
    if "flow sequence" in context:
        return (
            f"the [ opened{opened} is not closed before this line: end the list with ], or "
            "quote a value that starts with ["
        )
    if "flow mapping" in context:
        return (
            f"the {{ opened{opened} is not closed before this line: end the mapping with }}, "
            'or quote a value that starts with { (for example "{{ column }}")'
        )
    if "unhashable key" in problem:
        return (
            'a value that starts with { is read as a mapping: quote it (for example "{{ column }}")'
        )
    if "alias" in context or "anchor" in context or "undefined alias" in problem:
        return "a value that starts with * or & is read as an alias or anchor: quote it"
    if "cannot start any token" in problem and char in ("@", "`", "%"):
        return f"a value cannot start with {char}: quote it"
    if "mapping values are not allowed" in problem:
        return _mapping_value(exc, lines)
    if "expected key" in problem or "expected '-' indicator" in problem:
        return _misplaced(exc, lines)
    if "could not find expected ':'" in problem:
        line = ctx.line + 1 if ctx is not None else None
        where = f"line {line}" if line is not None else "the line above"
        return (
            f"{where} has no `:` after its key: write `key: value` (text that goes on over "
            "several lines goes under `key: |`)"
        )
    if "block end" in problem:
        return _indentation(lines) or (
            "check this line's indentation: the keys of one mapping line up, and a list's "
            "items start with `-` at the same column"
        )
    return GENERIC


def _mapping_value(exc: yaml.MarkedYAMLError, lines: Lines) -> str:
    """``mapping values are not allowed``: a `: ` inside a value, a key indented too far, or
    a line above with no `:`."""
    mark = exc.problem_mark
    here = lines.here
    head = here[: mark.column] if mark is not None else here
    key = _key_of(0, head + ":")  # the text before the `:` the parser stopped at
    if re.search(r":\s", head) or key is None:
        return "quote a value that contains ': ' (for example value: \"a: b\")"
    dash = _dash_without_space(lines)
    if dash is not None:
        return dash
    above = lines.above()
    if above:
        line, text = above[0]
        body = text.strip()
        body = body[2:].strip() if body.startswith("- ") else body
        if _key_of(line, body) is None and body[:1] not in ("{", "[", "-", "|", ">"):
            return (
                f"line {line} has no `:` after its key: write `key: value` (text that goes "
                "on over several lines goes under `key: |`)"
            )
    return _indentation(lines) or (
        "check this line's indentation against the keys above it, or quote a value that "
        "contains ': '"
    )


def _misplaced(exc: yaml.MarkedYAMLError, lines: Lines) -> str:
    """``did not find expected key`` / ``'-' indicator``: text after a closing quote, a list
    item among keys, or a line indented between two levels."""
    mark = exc.problem_mark
    here = lines.here
    if mark is not None and mark.column > _indent(here):
        return "text follows a closing quote: quote the whole value, or remove what follows"
    dash = _dash_without_space(lines)
    if dash is not None:
        return dash
    if here.lstrip().startswith("- "):
        items = [(line, text) for line, text in lines.above() if text.lstrip().startswith("- ")]
        if items and _indent(items[0][1]) != _indent(here):
            line, text = items[0]
            return (
                f"this list item is indented {_spaces(_indent(here))}, the one on line {line} "
                f"{_spaces(_indent(text))}: the items of one list line up"
            )
        return (
            "a list item where keys were expected: put the list under a key of its own "
            "(`key:`, then `- ...` on the lines below)"
        )
    ctx = exc.context_mark
    if "'-' indicator" in (exc.problem or "") and ctx is not None and _indent(here) == ctx.column:
        return (
            f"this line is at the column of the list's `-` (line {ctx.line + 1}) but is no "
            "item: indent it as the keys of the item above, or start it with `- `"
        )
    return _indentation(lines) or ("check this line's indentation: the keys of one mapping line up")


def _dash_without_space(lines: Lines) -> str | None:
    """``-key: value`` on the line above: a list item needs a space after its dash."""
    above = lines.above()
    if above and re.match(r"^-[^\s-]", above[0][1].strip()):
        return f"put a space after the `-` of the list item on line {above[0][0]}"
    return None
