"""How much a YAML document may repeat through anchors, aliases and merges.

An alias (``*name``) repeats what its anchor (``&name``) holds without writing it again:
ten aliases of a list of ten aliases of ... make a billion values out of a kilobyte, and
``<<`` merges do the same with mappings. The reader builds such a value once and shares
it, but everything that walks it afterwards (validation, copies, JSON, a prompt, a report)
meets every repetition. So every alias is counted as what it repeats, written out: its
values (each scalar, list and mapping) and the characters of its text. A document whose
aliases repeat more than ``MAX_ALIAS_VALUES`` values or ``MAX_ALIAS_CHARS`` characters is
refused at the alias that crosses the limit (``ExpansionTooLargeError``), before anything
walks it. Text written out in the file is not counted: it is bounded by the file itself.

The limits are far above what a hand-written file repeats (an anchored evaluator list used
by ten thousand cases is some hundred thousand values) and far below what would exhaust
memory. One budget serves every YAML file agentv reads: eval, targets, config, JSON Schema
and results files (``agentv.yaml.stream``).
"""

from __future__ import annotations

from typing import Any

import yaml

#: the most values (scalars, lists, mappings) the aliases of one document may repeat
MAX_ALIAS_VALUES = 1_000_000
#: the most characters of text the aliases of one document may repeat
MAX_ALIAS_CHARS = 64 * 1024 * 1024


class ExpansionTooLargeError(yaml.MarkedYAMLError):
    """The aliases of a document repeat more than the budget allows; ``problem_mark`` is
    the alias that crossed it."""

    def __init__(self, mark: yaml.Mark, anchor: str, what: str) -> None:
        super().__init__(
            problem=f"aliases repeat more than {what} in this document (crossed at *{anchor})",
            problem_mark=mark,
        )


def budget_hint() -> str:
    """How the user is told to fix a document refused by the budget."""
    return (
        f"agentv reads at most {MAX_ALIAS_VALUES:,} values and {MAX_ALIAS_CHARS // 2**20} MiB "
        "of text repeated by aliases (*name) and merges (<<) in one document; write the "
        "repeated part out, or put a long shared text in a file and attach it"
    )


class AliasMeter:
    """Counts what the aliases of one document repeat, refusing what exceeds the budget.

    The size of an anchored value is measured once, the first time it is aliased (values
    it shares are measured once too), so a file without aliases costs nothing and a bomb
    is refused after a walk of the values actually built, which the file's size bounds.
    """

    __slots__ = ("_sizes", "chars", "max_chars", "max_values", "values")

    def __init__(self) -> None:
        # read at the start of each document: a test (or a caller) may lower them
        self.max_values = MAX_ALIAS_VALUES
        self.max_chars = MAX_ALIAS_CHARS
        self.values = 0
        self.chars = 0
        # id -> (the value, kept alive so that its id is never reused; values; characters)
        self._sizes: dict[int, tuple[Any, int, int]] = {}

    def alias(self, value: Any, mark: yaml.Mark, anchor: str) -> None:
        """``value`` is repeated at ``mark`` by ``*anchor``: count it written out."""
        values, chars = self.size(value)
        self.values += values
        self.chars += chars
        if self.values > self.max_values:
            raise ExpansionTooLargeError(mark, anchor, f"{self.max_values:,} values")
        if self.chars > self.max_chars:
            raise ExpansionTooLargeError(mark, anchor, f"{self.max_chars:,} characters of text")

    def size(self, value: Any) -> tuple[int, int]:
        """(values, characters of text) of ``value`` written out in full."""
        if not isinstance(value, list | dict):
            return 1, _chars(value)
        sizes = self._sizes
        # post-order without recursion: a value may be nested as deep as the reader allows
        stack: list[tuple[Any, bool]] = [(value, False)]
        while stack:
            node, ready = stack.pop()
            if id(node) in sizes:
                continue
            children = _children(node)
            if not ready:
                stack.append((node, True))
                stack.extend(
                    (child, False)
                    for child in children
                    if isinstance(child, list | dict) and id(child) not in sizes
                )
                continue
            values, chars = 1, 0
            for child in children:
                if isinstance(child, list | dict):
                    _, more_values, more_chars = sizes[id(child)]
                else:
                    more_values, more_chars = 1, _chars(child)
                values += more_values
                chars += more_chars
            sizes[id(node)] = (node, values, chars)
        _, values, chars = sizes[id(value)]
        return values, chars


def _children(node: list[Any] | dict[Any, Any]) -> list[Any]:
    if isinstance(node, list):
        return node
    out: list[Any] = []
    for key, item in node.items():
        out.append(key)
        out.append(item)
    return out


def _chars(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, bytes):
        return len(value)
    if isinstance(value, tuple):  # a list written as a mapping key
        return sum(_chars(item) for item in value)
    return 0
