"""Variable matrices: ``vars: {tone: [formal, casual], lang: [en, fr]}`` at the top of an
eval file or on a case (or a rows file's template) runs each case once per combination of
the values (docs/eval-files.md, "Variables").

A combination is a mapping of each variable to one of its values, in the order the
variables are written (the file's first, then the case's; a case's variable replaces the
file's of the same name). A case's id carries its combination:
``capital[tone=formal,lang=fr]``.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

#: how many combinations one case may make (the product of its variables' lengths)
MAX_COMBINATIONS = 10_000
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

Vars = list[tuple[str, list[Any]]]


class VarsError(Exception):
    """A ``vars:`` mapping that cannot be used: ``key`` is the variable it is about."""

    def __init__(self, message: str, hint: str | None = None, key: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.key = key


def text_of(value: Any) -> str:
    """A value as templates and case ids write it into text: null as nothing, booleans as
    JSON writes them, lists and mappings as JSON."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, list | dict | tuple):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


def parse_vars(value: Any) -> Vars:
    """The variables of a ``vars:`` mapping, each with its list of values (a single value
    is a list of one). Raises ``VarsError``."""
    if not isinstance(value, dict):
        raise VarsError(
            "`vars` must be a mapping of names to lists of values",
            hint="write `vars: {tone: [formal, casual]}`",
        )
    out: Vars = []
    for name, values in value.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise VarsError(
                f"variable name {name!r} cannot be used in a template",
                hint="start it with a letter or _, then letters, digits or _",
                key=str(name),
            )
        listed = values if isinstance(values, list) else [values]
        if not listed:
            raise VarsError(
                f"variable {name!r} has no values",
                hint="give it at least one value, or remove it",
                key=name,
            )
        out.append((name, listed))
    return out


def combine(file_vars: Vars | None, case_vars: Vars | None) -> Vars:
    """The variables a case runs over: the file's, a case's own replacing those it names."""
    if not case_vars:
        return list(file_vars or [])
    own = dict(case_vars)
    merged = [(name, own.pop(name, values)) for name, values in file_vars or []]
    return merged + [(name, values) for name, values in case_vars if name in own]


def combinations(variables: Vars) -> list[dict[str, Any]]:
    """Every combination of the values, the first variable changing slowest; raises
    ``VarsError`` beyond ``MAX_COMBINATIONS``."""
    size = 1
    for _, values in variables:
        size *= len(values)
    if size > MAX_COMBINATIONS:
        raise VarsError(
            f"the variables make {size:,} combinations of each case, more than "
            f"{MAX_COMBINATIONS:,}",
            hint="use fewer values, or split the matrix across files",
        )
    names = [name for name, _ in variables]
    return [
        dict(zip(names, chosen, strict=True))
        for chosen in itertools.product(*(values for _, values in variables))
    ]


def case_id(base: str, combination: dict[str, Any] | None) -> str:
    """``capital[tone=formal,lang=fr]``: the case's id with its combination."""
    if not combination:
        return base
    inside = ",".join(f"{name}={text_of(value)}" for name, value in combination.items())
    return f"{base}[{inside}]"
