"""``agentv view``: the local workbench over the run store, in a browser."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from agentv.cli.common import printable


def view_command(
    store: Annotated[
        Path | None,
        typer.Option("--store", help="The run store (default: the project's).", show_default=False),
    ] = None,
    host: Annotated[
        str,
        typer.Option(
            "--host",
            help="The address to listen on; another than 127.0.0.1 needs an access token "
            "(--token, else one is generated and printed).",
        ),
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="The port (0: a free one).")
    ] = 0,
    token: Annotated[
        str | None,
        typer.Option(
            "--token", help="The access token for another host than 127.0.0.1.", show_default=False
        ),
    ] = None,
    reviewer: Annotated[
        str | None,
        typer.Option(
            "--reviewer", help="The name reviews are recorded under (default: git's user.name)."
        ),
    ] = None,
    no_open: Annotated[
        bool, typer.Option("--no-open", help="Do not open the browser; only print the URL.")
    ] = False,
) -> None:
    """Open the workbench: every run with trends, a run's records with filters and each
    conversation, two runs side by side, a case's history, reviews and the review queue,
    and each judge's agreement with people. Serves until Ctrl-C."""
    from agentv.api import workbench
    from agentv.errors import AgentVError

    try:
        bench = workbench(store=store, host=host, port=port, token=token, reviewer=reviewer)
    except AgentVError as exc:
        sys.stderr.write(f"error: {printable(str(exc))}\n")
        raise typer.Exit(1) from None
    sys.stdout.write(f"agentv view: {bench.url}\n")
    sys.stdout.write(f"Run store: {bench.store}\n")
    if bench.token_needed:
        sys.stdout.write(
            "Anyone who can reach this address and has the token can read every run and "
            "write reviews.\n"
        )
    if not bench.reviewer:
        sys.stdout.write(
            "No reviewer name (git's user.name is unset): give --reviewer to write reviews.\n"
        )
    sys.stdout.write("Press Ctrl-C to stop.\n")
    sys.stdout.flush()
    if not no_open:
        import webbrowser

        if not webbrowser.open(bench.url):
            sys.stderr.write("warning: no browser could be opened; open the URL above\n")
    bench.serve()
