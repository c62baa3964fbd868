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
    target: Annotated[
        list[str] | None,
        typer.Option(
            help="Check the eval files as `agentv eval --target NAME` would run them "
            "(repeatable); default: each case's own target, else `default`.",
            show_default=False,
        ),
    ] = None,
    targets: Annotated[
        Path | None,
        typer.Option(help="The targets.yaml to check the eval files against (default: found)."),
    ] = None,
) -> None:
    """Check eval, targets and config files: every problem, with file:line:column and a fix.

    Eval files also get the checks `agentv eval` makes before sending anything (each case's
    target and judge exist and can be built, their variables are set), so validate passes
    exactly when a run would start every case. Exits with code 1 when any file has an
    error; warnings alone exit with 0.
    """
    from rich.console import Console
    from rich.text import Text

    from agentv.api import display_path, validate
    from agentv.cli.common import printable
    from agentv.cli.diagnostics import diagnostic_text

    reports = validate(
        paths, allow_outside_root=allow_outside_root, target=target, targets_file=targets
    ).files
    out = Console(highlight=False, soft_wrap=True)
    out.print()
    out.print(Text("Validation Summary", style="bold cyan"))
    out.print()
    for report in reports:
        line = Text()
        line.append("✓ " if report.valid else "✗ ", style="green" if report.valid else "red")
        line.append(printable(display_path(report.path)))
        if report.describe():
            line.append(f"  ({report.describe()})", style="dim")
        out.print(line)
        for diag in report.diagnostics:
            out.print(diagnostic_text(diag, indent="  ", mark=True))
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
