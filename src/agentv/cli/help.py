"""``--help`` for people: plain text that reads the same in a terminal, a pipe and a CI log.

Every command's options are grouped in panels, each option naming its own
(``typer.Option(..., rich_help_panel=panels.RUNNING)``); the panels come in the order of
``PANEL_ORDER``, a panel this module does not know after them, in the order its first
option is declared, and options that name none last, under "Options". A new option slots
in by its declaration alone. Option names are never cut: a label too long for its column
puts its help on the next line. Flags show no type; the usage line names the arguments
as ``[PATHS]...``; a command's exit codes (``exit_codes``, set where it is registered) are
one line each, wrapped under their code.

``docs/hooks/cli_reference.py`` builds the command-line reference page from the same
functions (``panels``, ``option_label``, ``usage``), so the page and ``--help`` agree.
"""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Sequence
from enum import Enum
from typing import Any

from typer.core import TyperCommand, TyperGroup

# the panels, in the order ``--help`` shows them
TARGETS = "Targets"
RUNNING = "Running"
JUDGING = "Judging"
RESULTS = "Results"
AFTER_THE_RUN = "After the run"
SCALE_OUT = "Scale-out"
DEBUGGING = "Debugging"
PANEL_ORDER = (TARGETS, RUNNING, JUDGING, RESULTS, AFTER_THE_RUN, SCALE_OUT, DEBUGGING)
#: the panel of an option that names none
OTHER = "Options"

#: help lines are never wider than this, whatever the terminal
MAX_WIDTH = 100
#: the option column's width at most; a longer label puts its help on the next line
LABEL_MAX = 28

#: what the value of an option is called wherever the option appears, when it names no
#: ``metavar`` of its own: one word for one idea across commands
NAMED_METAVARS = {
    "--target": "NAME",
    "--targets": "FILE",
    "--eval-id": "ID",
    "--store": "FILE",
    "--summary-json": "FILE",
    "--junit": "FILE",
    "--out": "FILE",
    "--run": "ID",
    "--evals": "PATHS",
    "--pass-threshold": "SCORE",
    "--threshold": "SCORE",
    "--min-delta": "SCORE",
    "--answer-tokens": "N",
    "--since": "DAY",
    "--until": "DAY",
    "--host": "ADDRESS",
    "--token": "TOKEN",
    "--reviewer": "NAME",
    "--eval-file": "TEXT",
    "--search": "TEXT",
}

#: what a value is called when the option names no ``metavar`` (from ``display_type``)
_METAVARS = {
    "int": "N",
    "int range": "N",
    "integer": "N",
    "float": "NUMBER",
    "float range": "NUMBER",
    "str": "TEXT",
    "path": "PATH",
}


class HelpCommand(TyperCommand):
    """A command whose ``--help`` is written by ``command_help``."""

    #: ``(code, meaning)`` pairs listed under "Exit codes" (set by ``with_exit_codes``)
    exit_codes: tuple[tuple[str, str], ...] = ()

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        """``[OPTIONS] [PATHS]...``: the arguments by name, as people write them."""
        return usage_pieces(self, ctx)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        """The help page (click's public hook for it)."""
        formatter.write(command_help(self, ctx))


class HelpGroup(TyperGroup):
    """A command with commands of its own (``agentv``, ``agentv runs``): the same layout, and
    its commands with their one-line summaries."""

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        """``[OPTIONS] COMMAND [ARGS]...``."""
        return [*usage_pieces(self, ctx), self.subcommand_metavar]

    def format_help(self, ctx: Any, formatter: Any) -> None:
        """The help page (click's public hook for it)."""
        formatter.write(command_help(self, ctx))


def with_exit_codes(codes: Sequence[tuple[str, str]]) -> type[HelpCommand]:
    """The command class of a command whose help lists ``codes``."""
    return type("HelpCommandWithExitCodes", (HelpCommand,), {"exit_codes": tuple(codes)})


# --- what the page and the reference both read ---------------------------------------------


def visible_params(command: Any, ctx: Any) -> list[Any]:
    """The command's parameters that help shows (not hidden; ``--help`` itself included)."""
    return [p for p in command.get_params(ctx) if not getattr(p, "hidden", False)]


def arguments(command: Any, ctx: Any) -> list[Any]:
    """The command's arguments, in order."""
    return [p for p in visible_params(command, ctx) if p.param_type_name == "argument"]


def panels(command: Any, ctx: Any, *, with_help: bool = True) -> list[tuple[str, list[Any]]]:
    """The command's options by panel: ``PANEL_ORDER`` first, then any other panel in the
    order its first option comes, then the options that name none (``OTHER``)."""
    grouped: dict[str, list[Any]] = {}
    for param in visible_params(command, ctx):
        if param.param_type_name != "option":
            continue
        if param.name == "help" and not with_help:
            continue
        panel = getattr(param, "rich_help_panel", None) or OTHER
        grouped.setdefault(panel, []).append(param)
    order = [p for p in PANEL_ORDER if p in grouped]
    order += [p for p in grouped if p not in PANEL_ORDER and p != OTHER]
    if OTHER in grouped:
        order.append(OTHER)
    return [(name, grouped[name]) for name in order]


def metavar(param: Any, ctx: Any) -> str:
    """What an option's value is called: its own ``metavar``, else its choices
    (``[jsonl|yaml]``), else its type's word (``N``, ``PATH``, ``TEXT``)."""
    if param.metavar:
        return str(param.metavar)
    named = next((NAMED_METAVARS[o] for o in param.opts if o in NAMED_METAVARS), None)
    if named is not None:
        return named
    shown = str(param.display_type(ctx) or "").strip("<>")
    if shown.startswith("list[") and shown.endswith("]"):
        shown = shown[5:-1]
    if "|" in shown:
        return f"[{shown}]"
    return _METAVARS.get(shown, shown.upper() or "VALUE")


def is_flag(param: Any) -> bool:
    """An option that takes no value (``--cache``, ``--dry-run``)."""
    return bool(getattr(param, "is_flag", False) or getattr(param, "count", False))


def option_label(param: Any, ctx: Any) -> str:
    """``-o, --out FILE``, ``--cache``, ``--open / --no-open``: short names first."""
    names = sorted(param.opts, key=lambda o: (o.startswith("--"), o))
    label = ", ".join(names)
    if param.secondary_opts:
        label += " / " + ", ".join(param.secondary_opts)
    if not is_flag(param):
        label += f" {metavar(param, ctx)}"
    return label


def argument_label(param: Any) -> str:
    """``PATHS...``, in brackets when it may be left out."""
    word = str(param.metavar or param.name).upper()
    word = word if param.required else f"[{word}]"
    return f"{word}..." if param.nargs == -1 else word


def usage_pieces(command: Any, ctx: Any) -> list[str]:
    """What follows the command's name in its usage line."""
    pieces = (
        ["[OPTIONS]"]
        if any(p.param_type_name == "option" for p in visible_params(command, ctx))
        else []
    )
    return pieces + [argument_label(p) for p in arguments(command, ctx)]


def usage(command: Any, ctx: Any) -> str:
    """``agentv eval [OPTIONS] [PATHS]...``."""
    pieces = command.collect_usage_pieces(ctx)
    return " ".join([ctx.command_path, *pieces])


def default_note(param: Any) -> str:
    """``[default: 0.05]`` for an option whose help does not say its default, else ""."""
    value = param.default
    if is_flag(param) or param.required or value is None or value in ((), []):
        return ""
    if param.show_default is False:
        return ""
    if "default" in (param.help or "").lower():
        return ""
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"[default: {value}]"


def summary(command: Any) -> str:
    """A command's one-line summary: its ``short_help``, else its help's first paragraph."""
    text = command.short_help or (command.help or "").split("\n\n")[0]
    return " ".join(text.split())


# --- the page ---------------------------------------------------------------------------------


def width_for(ctx: Any) -> int:
    """The page's width: the terminal's (``COLUMNS``), at most ``MAX_WIDTH``, at least 50."""
    columns = getattr(ctx, "terminal_width", None) or shutil.get_terminal_size((80, 24)).columns
    return max(50, min(columns, MAX_WIDTH))


def command_help(command: Any, ctx: Any) -> str:
    """The whole help page of ``command``."""
    width = width_for(ctx)
    out = [f"Usage: {usage(command, ctx)}", ""]
    for paragraph in (command.help or "").strip().split("\n\n"):
        if paragraph.strip():
            out += _wrap(" ".join(paragraph.split()), width, "  ")
            out.append("")
    sections: list[tuple[str, list[tuple[str, str]]]] = []
    rows = [(argument_label(p), _param_help(p)) for p in arguments(command, ctx)]
    if rows:
        sections.append(("Arguments", rows))
    for name, params in panels(command, ctx):
        sections.append((name, [(option_label(p, ctx), _param_help(p)) for p in params]))
    subcommands = getattr(command, "commands", None) or {}
    listed = [(n, summary(c)) for n, c in subcommands.items() if not c.hidden]
    if listed:
        sections.append(("Commands", listed))
    # one column for every section, so that the page reads as one table
    # (a label longer than LABEL_MAX puts its help below it, and so widens nothing)
    longest = max(
        (len(label) for _, rows in sections for label, _ in rows if len(label) <= LABEL_MAX),
        default=0,
    )
    column = longest + 4  # 2 before the label, 2 after
    for title, rows in sections:
        out += _section(title, rows, width, column)
    codes = getattr(command, "exit_codes", ())
    if codes:
        out += _section("Exit codes", list(codes), width, max(len(c) for c, _ in codes) + 4)
    while out and not out[-1]:
        out.pop()
    return "\n".join(out) + "\n"


def _param_help(param: Any) -> str:
    text = " ".join((param.help or "").split())
    note = default_note(param) if param.param_type_name == "option" else ""
    return f"{text} {note}".strip()


def _section(title: str, rows: list[tuple[str, str]], width: int, column: int) -> list[str]:
    """``Title:`` then one entry per row: the label, its help beside it from ``column`` on
    (or, for a label too long for the column, on the lines below), wrapped to ``width``."""
    out = [f"{title}:"]
    for label, text in rows:
        lead = f"  {label}"
        if len(lead) + 2 > column:  # too long for the column: the help below it
            out.append(lead)
            out += _wrap(text, width, " " * column) if text else []
            continue
        lines = _wrap(text, width, " " * column) or [""]
        out.append(lead.ljust(column) + lines[0][column:])
        out += lines[1:]
    out.append("")
    return out


def _wrap(text: str, width: int, indent: str) -> list[str]:
    """``text`` wrapped to ``width``, every line indented; long words (a path) never cut."""
    return textwrap.wrap(
        text,
        width=width,
        initial_indent=indent,
        subsequent_indent=indent,
        break_long_words=False,
        break_on_hyphens=False,
    )
