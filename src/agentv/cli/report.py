"""``agentv report RESULTS...``: one self-contained HTML file to look at a run (or several
side by side) in a browser, offline."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, TextIO

import typer


def report_command(
    results: Annotated[
        list[Path],
        typer.Argument(help="Results files (JSONL or YAML); several are shown side by side."),
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            metavar="FILE",
            help="The HTML file to write (default: next to the results, RESULTS.html; for "
            "several files LAST-vs-FIRST.html beside the last).",
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("--output", hidden=True, help="The old spelling of --out."),
    ] = None,
    open_it: Annotated[
        bool, typer.Option("--open", help="Open the report in the default browser.")
    ] = False,
    junit: Annotated[
        Path | None,
        typer.Option(
            "--junit", metavar="FILE", help="Also write the (first) results file as JUnit XML."
        ),
    ] = None,
) -> None:
    """Write an HTML report of results files: the run, every case with sort, filters and
    search, and each case's conversation as sent with every evaluator's grade. One file
    with no server and no network; nothing from the results runs in it."""
    from agentv.cli.common import stopped_by_sigterm

    with stopped_by_sigterm():  # SIGTERM while writing leaves no temporary file behind
        code = write_report(results, out or output, open_it=open_it)
        if code == 0 and junit is not None:
            code = _write_junit(results[0], junit)
    if code:
        raise typer.Exit(code)


def _write_junit(results: Path, target: Path) -> int:
    """JUnit XML of a results file, as ``agentv eval --junit`` writes it."""
    from agentv.api import write_junit
    from agentv.cli.common import printable
    from agentv.errors import AgentVError

    try:
        write_junit(results, target)
    except AgentVError as exc:
        sys.stderr.write(f"error: {printable(str(exc))}\n")
        return 1
    sys.stdout.write(f"JUnit XML written to: {target}\n")
    return 0


def write_report(
    results: list[Path],
    output: Path | None = None,
    *,
    open_it: bool = False,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    """Build the report and say where it is; 0, or 1 (said on stderr) when it cannot."""
    from agentv.api import report, report_path
    from agentv.cli.common import printable
    from agentv.cli.diagnostics import print_diagnostics
    from agentv.errors import AgentVError, InputError

    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    target = output if output is not None else report_path(results)
    try:
        written = report(results, out=target)
    except InputError as exc:
        print_diagnostics(exc.diagnostics, stderr)
        stderr.write(f"error: {printable(str(exc.args[0]))}\n")
        return 1
    except AgentVError as exc:
        stderr.write(f"error: {printable(str(exc))}\n")
        return 1
    except OSError as exc:
        stderr.write(f"error: cannot write the report {target}: {exc.strerror or exc}\n")
        return 1
    print_diagnostics(written.notes, stderr)
    for path, count in written.skipped.items():
        stderr.write(
            f"warning: {printable(path)}: {count} line(s) are not results and were left out\n"
        )
    stdout.write(f"Report written to: {written.path} ({written.records} results)\n")
    if open_it:
        import webbrowser

        if not webbrowser.open(written.path.resolve().as_uri()):
            stderr.write("warning: no browser could be opened; open the file above\n")
    return 0
