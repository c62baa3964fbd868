"""The ``agentv`` command line: a thin layer over ``agentv.api`` that owns every print and
exit code.

Each command lives in its own module and is registered here, explicitly; the modules
never import this one. They import the heavy parts of agentv only when they run, so
``agentv --version`` stays fast.
"""

from __future__ import annotations

import gc
import importlib
import inspect
import sys

import typer

from agentv import __version__
from agentv.cli.help import HelpCommand, HelpGroup, with_exit_codes

app = typer.Typer(
    name="agentv",
    cls=HelpGroup,
    help="Evaluate LLMs and AI agents on multi-turn eval suites written in YAML.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain text in pipes and CI logs: agentv.cli.help
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


#: the commands in the order ``--help`` lists them: name -> (module, function); a module is
#: imported only when its command is registered
_COMMANDS = {
    "eval": ("agentv.cli.eval", "eval_command"),
    "validate": ("agentv.cli.validate", "validate_command"),
    "render": ("agentv.cli.render", "render_command"),
    "init": ("agentv.cli.init", "init_command"),
    "compare": ("agentv.cli.compare", "compare_command"),
    "report": ("agentv.cli.report", "report_command"),
    "regrade": ("agentv.cli.regrade", "regrade_command"),
    "estimate": ("agentv.cli.estimate", "estimate_command"),
    "runs": ("agentv.cli.runs", "runs_app"),
    "view": ("agentv.cli.view", "view_command"),
    "calibrate": ("agentv.cli.calibrate", "calibrate_command"),
    "reviews": ("agentv.cli.reviews", "reviews_app"),
}


def _register(only: str | None = None) -> None:
    """Add the commands to ``app`` (importing their modules is cheap: no SDKs): all of them,
    or ``only`` the one being run, which is all a run needs."""
    registered = {command.name for command in app.registered_commands}
    registered |= {group.name for group in app.registered_groups}
    for name, (module_name, function) in _COMMANDS.items():
        if name in registered or only not in (None, name):
            continue
        module = importlib.import_module(module_name)
        command = getattr(module, function)
        if isinstance(command, typer.Typer):  # a command with commands of its own
            callback = command.registered_callback
            doc = callback.callback if callback is not None else None
            app.add_typer(
                command,
                name=name,
                cls=HelpGroup,
                short_help=_summary(doc),
                help=inspect.getdoc(doc),
            )
            continue
        codes = getattr(module, "EXIT_CODES", None)  # the exit codes, under ``--help``
        cls = with_exit_codes(codes) if codes else HelpCommand
        app.command(name, cls=cls, short_help=_summary(command))(command)


def _summary(command: object) -> str:
    """A command's docstring's first paragraph as one line: the command list shows it as
    given, so the docstring's own line breaks would cut its sentences."""
    doc = inspect.getdoc(command) or ""
    return " ".join(doc.split("\n\n", 1)[0].split())


def main() -> None:
    """Console-script entry point."""
    if sys.argv[1:] in (["--version"], ["-V"]):  # fast path: no command modules needed
        print(__version__)
        return
    command = sys.argv[1] if len(sys.argv) > 1 else None
    _register(command if command in _COMMANDS else None)
    try:
        app()
    finally:
        # The process ends next: without this, the interpreter's last collections walk every
        # object it is about to free anyway (a tenth of a second after a large run).
        gc.freeze()
