"""The one way problems in users' files are printed, by every command.

A problem reads ``file:line:column: error: message`` (``warning:`` for warnings), the file
relative to the working directory when it lies inside it, with its hint on indented lines
below. ``validate``, which lists problems under each file, shows the severity as a mark
instead (``✗`` / ``⚠``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, TextIO

from agentv.errors import Diagnostic

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

MARKS = {"error": "✗", "warning": "⚠"}
STYLES = {"error": "red", "warning": "yellow"}


def diagnostic_text(diag: Diagnostic, *, indent: str = "", mark: bool = False) -> Text:
    """One problem as styled text: its line, then its hint lines indented under it."""
    from rich.text import Text

    from agentv.validation import hint_lines, where

    style = STYLES[diag.severity]
    text = Text(indent)
    if mark:
        text.append(f"{MARKS[diag.severity]} ", style=style)
        text.append(f"{where(diag)}: ", style="bold")
    else:
        text.append(f"{where(diag)}: ")
        text.append(f"{diag.severity}: ", style=f"bold {style}")
    text.append(diag.message)
    pad = indent + ("    " if mark else "") + "    "
    for hint in hint_lines(diag):
        text.append("\n")
        text.append(f"{pad}{hint}", style="dim")
    return text


def print_diagnostics(
    diags: Iterable[Diagnostic],
    out: TextIO | Console,
    *,
    seen: set[tuple[str, int | None, int | None, str]] | None = None,
) -> None:
    """Print each problem once (``seen`` carries what was printed across calls: a config
    file shared by several eval files is reported once)."""
    from rich.console import Console

    console = (
        out if isinstance(out, Console) else Console(file=out, highlight=False, soft_wrap=True)
    )
    for diag in diags:
        if seen is not None:
            key = (str(diag.file), diag.line, diag.column, diag.message)
            if key in seen:
                continue
            seen.add(key)
        console.print(diagnostic_text(diag))
