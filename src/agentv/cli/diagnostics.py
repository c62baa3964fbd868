"""The one way problems in users' files are printed, by every command.

A problem reads ``file:line:column: error: message`` (``warning:`` for warnings), the file
relative to the working directory when it lies inside it, with its hint on indented lines
below. ``validate``, which lists problems under each file, shows the severity as a mark
instead (``✗`` / ``⚠``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from agentv.api import display_path
from agentv.cli.common import printable
from agentv.errors import Diagnostic

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

MARKS = {"error": "✗", "warning": "⚠"}
STYLES = {"error": "red", "warning": "yellow"}


def where(diag: Diagnostic, cwd: Path | None = None) -> str:
    """``file:line:column`` of a diagnostic, the file shown as by ``display_path``."""
    text = printable(display_path(diag.file, cwd))
    if diag.line is not None:
        text += f":{diag.line}"
        if diag.column is not None:
            text += f":{diag.column}"
    elif diag.location:
        text += f" [{printable(diag.location)}]"
    return text


def hint_lines(diag: Diagnostic) -> list[str]:
    """The hint as printable lines: ``hint: ...`` then its continuation lines, indented."""
    if not diag.hint:
        return []
    first, *rest = printable(diag.hint).splitlines()
    return [f"hint: {first}", *(f"  {line.strip()}" for line in rest)]


def diagnostic_text(diag: Diagnostic, *, indent: str = "", mark: bool = False) -> Text:
    """One problem as styled text: its line, then its hint lines indented under it."""
    from rich.text import Text

    style = STYLES[diag.severity]
    text = Text(indent)
    placed = diag.file is not None or diag.line is not None
    if mark:
        text.append(f"{MARKS[diag.severity]} ", style=style)
        text.append(f"{where(diag)}: ", style="bold")
    else:
        if placed:
            text.append(f"{where(diag)}: ")
        text.append(f"{diag.severity}: ", style=f"bold {style}")
    text.append(printable(diag.message))  # ids and values from users' files
    pad = indent + "    "
    for hint in hint_lines(diag):
        text.append("\n")
        text.append(f"{pad}{hint}", style="dim")
    return text


def print_diagnostics(diags: Iterable[Diagnostic], out: TextIO | Console) -> None:
    """Print problems, one after the other (a problem without a file: ``error: message``)."""
    diags = list(diags)
    if not diags:
        return  # nothing to print: rich is not even imported (start-up time)
    from rich.console import Console

    console = (
        out if isinstance(out, Console) else Console(file=out, highlight=False, soft_wrap=True)
    )
    for diag in diags:
        console.print(diagnostic_text(diag))
