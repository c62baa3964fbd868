"""MkDocs hook: the command-line reference of docs/cli.md, generated from the CLI itself.

The marker ``<!-- agentv-cli-reference -->`` in cli.md is replaced by a section per command
of the ``agentv`` typer app: its help text, usage, arguments, a table of its options per
panel (flags, type, default, help: the panels and their order are ``--help``'s, from
``agentv.cli.help``) and its exit codes where the command states them. The page cannot drift
from ``agentv --help``: both are read from the same objects by the same functions.
Registered in mkdocs.yml (``hooks:``); the build fails when the marker is missing.
"""

from __future__ import annotations

import html
import re
import sys
from enum import Enum
from pathlib import Path
from typing import Any

help_page: Any = None  # agentv.cli.help, imported with the app (agentv may not be installed)

MARKER = "<!-- agentv-cli-reference -->"
PAGE = "cli.md"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Replace the marker on the CLI page with the generated reference."""
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"{PAGE} lost its marker {MARKER}: the CLI reference goes there")
    reference = cli_reference(Path(config.config_file_path).parent)
    return markdown.replace(MARKER, f'<div class="cli-reference" markdown>\n\n{reference}\n</div>')


def cli_reference(root: Path) -> str:
    """The reference of every command, as Markdown."""
    import typer

    try:
        from agentv.cli.app import _register, app
    except ImportError:  # agentv not installed in this environment: use the checkout's src/
        sys.path.insert(0, str(root / "src"))
        from agentv.cli.app import _register, app
    global help_page
    from agentv.cli import help as help_page

    _register()
    group = typer.main.get_command(app)
    root_ctx = group.make_context("agentv", [], resilient_parsing=True)
    parts = [_root_section(group, root_ctx)]
    for name, command in group.commands.items():
        ctx = command.make_context(name, [], resilient_parsing=True, parent=root_ctx)
        parts.append(_command_section(name, command, ctx))
        # a command with commands of its own (``agentv runs import``): a section each
        for sub_name, sub in getattr(command, "commands", {}).items():
            full = f"{name} {sub_name}"
            sub_ctx = sub.make_context(sub_name, [], resilient_parsing=True, parent=ctx)
            parts.append(_command_section(full, sub, sub_ctx))
    return "\n\n".join(parts) + "\n"


# --- one section per command ----------------------------------------------------------------


def _root_section(group: Any, ctx: Any) -> str:
    lines = ["## `agentv`", "", _text(group.help or ""), ""]
    lines += ["```text", help_page.usage(group, ctx), "```", ""]
    lines += ["| command | what it does |", "|---|---|"]
    for name, command in group.commands.items():
        lines.append(f"| [`{name}`](#agentv-{name}) | {_cell(help_page.summary(command))} |")
    lines += ["", *_panels(group, ctx)]
    return "\n".join(lines).rstrip()


def _command_section(name: str, command: Any, ctx: Any) -> str:
    arguments = help_page.arguments(command, ctx)
    anchor = name.replace(" ", "-")
    lines = [f"## `agentv {name}` {{#agentv-{anchor}}}", ""]
    lines += [_text(command.help or ""), ""]
    lines += ["```text", help_page.usage(command, ctx), "```", ""]
    if arguments:
        lines += [
            "**Arguments**",
            "",
            "| argument | type | default | meaning |",
            "|---|---|---|---|",
        ]
        for p in arguments:
            label = help_page.argument_label(p)
            lines.append(f"| `{label}` | {_type(p, ctx)} | {_default(p)} | {_cell(p.help or '')} |")
        lines.append("")
    lines += _panels(command, ctx)
    codes = getattr(command, "exit_codes", ())
    if codes:
        lines += ["**Exit codes**", "", "| code | when |", "|---|---|"]
        lines += [f"| {code} | {_cell(text)} |" for code, text in codes]
        lines.append("")
    return "\n".join(lines).rstrip()


def _panels(command: Any, ctx: Any) -> list[str]:
    """The options' tables, one per panel of ``--help`` (one titled "Options" when the
    command has no panels), ``--help`` itself left out."""
    grouped = help_page.panels(command, ctx, with_help=False)
    lines: list[str] = []
    for title, options in grouped:
        lines += [f"**{title}**", "", *_options_table(options, ctx), ""]
    return lines


def _options_table(options: list[Any], ctx: Any) -> list[str]:
    lines = ["| option | type | default | meaning |", "|---|---|---|---|"]
    for p in options:
        flags = ", ".join(f"`{o}`" for o in sorted(p.opts, key=lambda o: (o.startswith("--"), o)))
        if p.secondary_opts:
            flags += " / " + ", ".join(f"`{o}`" for o in p.secondary_opts)
        help_text = p.help or ""
        if getattr(p, "multiple", False):
            help_text += " (May be given more than once.)"
        lines.append(f"| {flags} | {_type(p, ctx)} | {_default(p)} | {_cell(help_text)} |")
    return lines


# --- the columns ------------------------------------------------------------------------------

#: what the parameter types are called on the page
_TYPE_NAMES = {
    "str": "text",
    "text": "text",
    "string": "text",
    "path": "path",
    "int": "integer",
    "integer": "integer",
    "int range": "integer",
    "integer range": "integer",
    "float": "number",
    "float range": "number",
}


def _type(p: Any, ctx: Any) -> str:
    """``integer, 1 to 50``, ``path``, `` `jsonl` \\| `yaml` ``, ``flag``."""
    if getattr(p, "is_flag", False) or getattr(p, "is_bool_flag", False):
        return "flag"
    choices = getattr(getattr(p, "type", None), "choices", None)
    shown = _shown_type(p, ctx)
    if choices is None and "|" in shown:
        choices = shown.split("|")
    if choices:
        return " \\| ".join(f"`{_choice(c)}`" for c in choices)
    inner = re.fullmatch(r"list\[(.+)\]", shown)  # a repeated value: name its items
    if inner:
        shown = inner.group(1)
    name = _TYPE_NAMES.get(shown.lower(), shown.lower() or "text")
    low, high = _bounds(p)
    if low is not None and high is not None:
        return f"{name}, {_number(low)} to {_number(high)}"
    if low is not None:
        return f"{name}, at least {_number(low)}"
    if high is not None:
        return f"{name}, at most {_number(high)}"
    return name


def _shown_type(p: Any, ctx: Any) -> str:
    """The type as ``--help`` names it, without decoration."""
    for attr in ("display_type", "make_metavar"):
        method = getattr(p, attr, None)
        if callable(method):
            try:
                value = method(ctx)
            except TypeError:
                value = method()
            if isinstance(value, str) and value:
                return _undecorated(value)
    kind = getattr(p, "type", None)
    return str(getattr(kind, "name", "") or "")


def _undecorated(shown: str) -> str:
    """``<list[str]>``, ``[jsonl|yaml]`` or ``PATHS...`` without the brackets and dots."""
    shown = shown.strip().removesuffix("...")
    for left, right in ("<>", "[]"):
        if shown.startswith(left) and shown.endswith(right):
            shown = shown[1:-1]
    return shown


def _bounds(p: Any) -> tuple[Any, Any]:
    for holder in (p, getattr(p, "type", None)):
        low, high = getattr(holder, "min", None), getattr(holder, "max", None)
        if low is not None or high is not None:
            return low, high
    return None, None


def _choice(value: Any) -> str:
    return value.value if isinstance(value, Enum) else str(value)


def _number(value: Any) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _default(p: Any) -> str:
    """What a command uses when the parameter is not given."""
    if p.required:
        return "required"
    value = p.default
    if p.secondary_opts:  # --x / --no-x
        return f"`{p.opts[0] if value else p.secondary_opts[0]}`"
    if getattr(p, "is_flag", False):
        return "on" if value else "off"
    if value is None or value == () or value == []:
        return ""
    if isinstance(value, Enum):
        value = value.value
    elif isinstance(value, float):
        value = _number(value)
    return f"`{value}`"


# --- text -------------------------------------------------------------------------------------


def _escape(text: str) -> str:
    """Markdown-safe text: ``<time>`` shown, not taken for HTML; code spans kept as code."""
    pieces = text.split("`")
    for i in range(0, len(pieces), 2):  # outside code spans
        pieces[i] = html.escape(pieces[i], quote=False)
    return "`".join(pieces)


def _text(text: str) -> str:
    """A help text's paragraphs, each joined onto one line."""
    paragraphs = [" ".join(p.split()) for p in text.strip().split("\n\n")]
    return "\n\n".join(_escape(p) for p in paragraphs if p)


def _cell(text: str) -> str:
    return _escape(" ".join(text.split())).replace("|", "\\|")
