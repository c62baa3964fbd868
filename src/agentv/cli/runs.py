"""``agentv runs``: the run history (newest first, filtered), and ``agentv runs import``:
results files made elsewhere or before, indexed into the store."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from agentv.cli.common import format_usd, printable
from agentv.cli.console_text import printable_json
from agentv.cli.help import HelpCommand, HelpGroup

if TYPE_CHECKING:
    from agentv.api import StoredRun


class RunsFormat(StrEnum):
    """Output format of ``runs``."""

    table = "table"
    json = "json"


Store = Annotated[
    Path | None,
    typer.Option(
        "--store",
        help="The run store (default: run_store in .agentv/config.yaml, else "
        ".agentv/runs.sqlite in the project).",
        show_default=False,
    ),
]

runs_app = typer.Typer(
    cls=HelpGroup,
    invoke_without_command=True,
    no_args_is_help=False,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain text in pipes and CI logs: agentv.cli.help
)


@runs_app.callback()
def runs_command(
    ctx: typer.Context,
    eval_file: Annotated[
        str | None,
        typer.Option("--eval-file", help="Only runs of an eval file whose path contains this."),
    ] = None,
    target: Annotated[
        str | None, typer.Option("--target", help="Only runs on this target.")
    ] = None,
    since: Annotated[
        str | None,
        typer.Option("--since", help="Only runs started on this day or later (YYYY-MM-DD)."),
    ] = None,
    until: Annotated[
        str | None,
        typer.Option("--until", help="Only runs started on this day or earlier (YYYY-MM-DD)."),
    ] = None,
    search: Annotated[
        str | None,
        typer.Option(
            "--search", help="Only runs whose id, command, files, targets or commit contain this."
        ),
    ] = None,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="At most this many runs.")
    ] = None,
    output_format: Annotated[
        RunsFormat, typer.Option("--format", help="table, or json for tools.")
    ] = RunsFormat.table,
    store: Store = None,
) -> None:
    """List the run history, newest first: every run agentv eval registered and every
    results file imported, with its figures; a results file that moved or vanished is
    shown as missing. `agentv runs import PATH...` adds results files."""
    if ctx.invoked_subcommand is not None:
        return
    from agentv.api import runs
    from agentv.errors import AgentVError

    try:
        found = runs(
            store=store,
            eval_file=eval_file,
            target=target,
            since=since,
            until=until,
            search=search,
            limit=limit,
        )
    except AgentVError as exc:
        sys.stderr.write(f"error: {printable(str(exc))}\n")
        raise typer.Exit(1) from None
    if output_format is RunsFormat.json:
        data = [run.to_dict() for run in found]
        sys.stdout.write(printable_json(json.dumps(data, indent=2)) + "\n")
        return
    if not found:
        sys.stdout.write(
            "No runs yet: agentv eval registers each run, and agentv runs import adds "
            "results files made before.\n"
        )
        return
    sys.stdout.write(runs_table(found) + "\n")


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _mean(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _files(run: StoredRun) -> str:
    names = [Path(f.path).name for f in run.eval_files]
    return ", ".join(names) if names else "-"


def runs_table(found: list[StoredRun]) -> str:
    """The runs as a table for a terminal; text from files made printable."""
    header = (
        "id",
        "started (UTC)",
        "state",
        "eval files",
        "targets",
        "runs",
        "pass rate",
        "mean",
        "cost",
        "results",
    )
    rows = []
    for run in found:
        results = Path(run.results_path).name if run.results_path else "-"
        if run.missing:
            results += " (missing)"
        elif run.changed:
            results += " (changed: import it again)"
        rows.append(
            (
                str(run.id),
                run.started_at[:19].replace("T", " "),
                run.state,
                _files(run),
                ", ".join(run.targets) or "-",
                "-" if run.total is None else str(run.total),
                _rate(run.pass_rate),
                _mean(run.mean),
                "-" if run.cost_usd is None else format_usd(run.cost_usd),
                results,
            )
        )
    widths = [min(40, max(len(h), *(len(r[i]) for r in rows))) for i, h in enumerate(header)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip()]
    for row in rows:
        cells = [c if len(c) <= w else c[: w - 1] + "…" for c, w in zip(row, widths, strict=True)]
        lines.append("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip())
    return "\n".join(printable(line) for line in lines)


@runs_app.command(
    "import", cls=HelpCommand, short_help="Index results files made elsewhere or before."
)
def import_command(
    paths: Annotated[list[Path], typer.Argument(help="Results files (JSONL or YAML).")],
    store: Store = None,
) -> None:
    """Index results files made elsewhere or before into the run store (a file already
    there is indexed again: after it changed, or moved back)."""
    from agentv.api import import_runs
    from agentv.errors import AgentVError

    code = 0
    for path in paths:
        try:
            (done,) = import_runs([path], store=store)
        except AgentVError as exc:
            sys.stderr.write(f"error: {printable(str(exc))}\n")
            code = 1
            continue
        what = "imported as run" if done.new else "indexed again: run"
        sys.stdout.write(printable(f"{path}: {what} {done.id} ({done.records} records)") + "\n")
        if done.bad_lines:
            sys.stderr.write(
                printable(
                    f"warning: {path}: {done.bad_lines} line(s) are not results and were left out"
                )
                + "\n"
            )
    if code:
        raise typer.Exit(code)
