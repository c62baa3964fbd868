"""What several commands share: options written once, so they read the same everywhere."""

from __future__ import annotations

import re
from typing import Annotated, Any

import typer

#: characters a terminal may act on rather than show: C0 controls but newline and tab, DEL,
#: and C1 controls (some terminals take U+009B as the start of an escape sequence)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _escape(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


def printable(text: str) -> str:
    """``text`` safe to print on a terminal: each control character but newline and tab is
    shown as its escape (``ESC`` as ``\\x1b``), so that text from users' files (case ids,
    labels, messages, answers) can neither clear the screen nor set the window's title.
    What agentv writes to files keeps the exact text; only the terminal gets this."""
    return _CONTROL.sub(_escape, text)


def printable_all(value: Any) -> Any:
    """``value`` with ``printable`` applied to every string inside it (lists, dicts)."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {printable_all(k): printable_all(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [printable_all(v) for v in value]
    return value


#: ``--allow-outside-root``, for the commands that read eval files
AllowOutsideRoot = Annotated[
    bool,
    typer.Option(
        "--allow-outside-root",
        help="Accept file references that resolve outside the repository root.",
    ),
]


def format_usd(value: float | None) -> str:
    """``$0.0123``: dollars and cents from $1, four decimals below, two significant
    digits below $0.0001; ``?`` for unknown."""
    if value is None:
        return "?"
    if value == 0:
        return "$0"
    if value >= 1:
        return f"${value:,.2f}"
    return f"${value:.4f}" if value >= 0.0001 else f"${value:.2g}"
