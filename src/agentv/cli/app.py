"""The ``agentv`` command line.

Commands live in their own modules and import the heavy parts of agentv only when they
run, so ``agentv --version`` stays fast.
"""

from __future__ import annotations

import gc
import sys
from typing import Annotated

import typer

from agentv import __version__

#: ``--allow-outside-root``, shared by the commands that read eval files
AllowOutsideRoot = Annotated[
    bool,
    typer.Option(
        "--allow-outside-root",
        help="Accept file references that resolve outside the repository root.",
    ),
]

app = typer.Typer(
    name="agentv",
    help="Evaluate LLMs and AI agents on multi-turn eval suites written in YAML.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(__version__)
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False,
        "--version",
        "-V",
        help="Print the version and exit.",
        callback=_version,
        is_eager=True,
    ),
) -> None:
    """Evaluate LLMs and AI agents on multi-turn eval suites written in YAML."""


def _register() -> None:
    # Each module adds its command to `app`; importing them is cheap (no SDKs).
    from agentv.cli import eval as _eval  # noqa: F401
    from agentv.cli import init as _init  # noqa: F401
    from agentv.cli import render as _render  # noqa: F401
    from agentv.cli import validate as _validate  # noqa: F401


def main() -> None:
    """Console-script entry point."""
    if sys.argv[1:] in (["--version"], ["-V"]):  # fast path: no command modules needed
        print(__version__)
        return
    _register()
    try:
        app()
    finally:
        # The process ends next: without this, the interpreter's last collections walk every
        # object it is about to free anyway (a tenth of a second after a large run).
        gc.freeze()
