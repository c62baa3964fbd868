"""``agentv reviews export`` and ``agentv reviews import``: people's reviews of answers as
JSON Lines, to keep, share, or bring in labels made elsewhere."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from agentv.cli.common import printable
from agentv.cli.help import HelpCommand, HelpGroup

reviews_app = typer.Typer(
    cls=HelpGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain text in pipes and CI logs: agentv.cli.help
)

Store = Annotated[
    Path | None,
    typer.Option("--store", help="The run store (default: the project's).", show_default=False),
]


@reviews_app.callback()
def reviews_command() -> None:
    """Export and import reviews (people's verdicts on answers) as JSON Lines."""


@reviews_app.command("export", cls=HelpCommand, short_help="Write every review as a line of JSON.")
def export_command(
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", metavar="FILE", help="The file to write (default: stdout)."),
    ] = None,
    output: Annotated[
        Path | None, typer.Option("--output", hidden=True, help="The old spelling of --out.")
    ] = None,
    run: Annotated[
        int | None, typer.Option("--run", help="Only the reviews of this run (its id).")
    ] = None,
    store: Store = None,
) -> None:
    """Write every review as a line of JSON: the run (its uid and results file), the
    case, the verdict, score, comment, reviewer and time."""
    from agentv.api import export_reviews
    from agentv.errors import AgentVError

    output = out or output
    try:
        lines = export_reviews(output, store=store, run=run)
    except AgentVError as exc:
        sys.stderr.write(f"error: {printable(str(exc))}\n")
        raise typer.Exit(1) from None
    if output is None:
        for line in lines:
            sys.stdout.write(printable(line) + "\n")
    else:
        sys.stdout.write(f"{len(lines)} review(s) written to {output}\n")


@reviews_app.command("import", cls=HelpCommand, short_help="Add reviews from JSON Lines.")
def import_command(
    path: Annotated[Path, typer.Argument(help="A JSON Lines file of reviews.")],
    reviewer: Annotated[
        str | None, typer.Option("--reviewer", help="The reviewer of lines that name none.")
    ] = None,
    store: Store = None,
) -> None:
    """Add reviews from JSON Lines (as exported, or labels made elsewhere naming the run by
    its results file and the case by dataset, eval_id and target); lines that are not
    reviews, or name no run or case of the store, are reported and left out."""
    from agentv.api import import_reviews
    from agentv.cli.diagnostics import print_diagnostics
    from agentv.errors import AgentVError

    try:
        done = import_reviews(path, store=store, reviewer=reviewer)
    except AgentVError as exc:
        sys.stderr.write(f"error: {printable(str(exc))}\n")
        raise typer.Exit(1) from None
    print_diagnostics(done.diagnostics, sys.stderr)
    sys.stdout.write(
        f"{done.added} review(s) added, {done.duplicates} already there, "
        f"{len(done.diagnostics)} line(s) left out\n"
    )
