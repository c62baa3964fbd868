"""``agentv validate PATH...``: check eval, targets and config files without running them."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agentv.cli.common import AllowOutsideRoot


def validate_command(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="Files or folders (searched recursively for .yaml/.yml files).",
            show_default=False,
        ),
    ],
    allow_outside_root: AllowOutsideRoot = False,
) -> None:
    """Check eval, targets and config files: every problem, with file:line:column and a fix.

    Exits with code 1 when any file has an error; warnings alone exit with 0.
    """
    from rich.console import Console
    from rich.text import Text

    from agentv.validation import hint_lines, validate_paths, where

    reports = validate_paths(paths, allow_outside_root=allow_outside_root)
    out = Console(highlight=False, soft_wrap=True)
    out.print()
    out.print(Text("Validation Summary", style="bold cyan"))
    out.print()
    for report in reports:
        line = Text()
        line.append("✓ " if report.valid else "✗ ", style="green" if report.valid else "red")
        line.append(where_file(report.path))
        if report.describe():
            line.append(f"  ({report.describe()})", style="dim")
        out.print(line)
        for diag in report.diagnostics:
            is_error = diag.severity == "error"
            entry = Text("  ")
            entry.append("✗ " if is_error else "⚠ ", style="red" if is_error else "yellow")
            entry.append(f"{where(diag)}: ", style="bold")
            entry.append(diag.message)
            out.print(entry)
            for hint in hint_lines(diag):
                out.print(Text(f"      {hint}", style="dim"))
    invalid = sum(1 for r in reports if not r.valid)
    warned = sum(1 for r in reports if r.warnings)
    out.print()
    out.print(f"Total files: {len(reports)}")
    out.print(Text(f"Valid: {len(reports) - invalid}", style="green" if reports else ""))
    out.print(Text(f"Invalid: {invalid}", style="red" if invalid else ""))
    if warned:
        out.print(Text(f"Files with warnings: {warned}", style="yellow"))
    out.print()
    if invalid:
        raise typer.Exit(code=1)


def where_file(path: Path) -> str:
    """How a file is named in the summary (relative to the working directory when inside)."""
    from agentv.validation import display_path

    return display_path(path)
