"""The ``agentv`` command line: a thin layer over ``agentv.api`` that owns every print and
exit code.

Each command lives in its own module and is registered here, explicitly; the modules
never import this one. They import the heavy parts of agentv only when they run, so
``agentv --version`` stays fast.
"""

from __future__ import annotations

import gc
import sys

import typer

from agentv import __version__

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
    """Add the commands to ``app`` (importing their modules is cheap: no SDKs)."""
    if app.registered_commands:
        return
    from agentv.cli.compare import compare_command
    from agentv.cli.eval import EXIT_HELP, eval_command
    from agentv.cli.init import init_command
    from agentv.cli.render import render_command
    from agentv.cli.report import report_command
    from agentv.cli.validate import validate_command

    app.command("eval", epilog=EXIT_HELP)(eval_command)
    app.command("validate")(validate_command)
    app.command("render")(render_command)
    app.command("init")(init_command)
    app.command("compare")(compare_command)
    app.command("report")(report_command)


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
