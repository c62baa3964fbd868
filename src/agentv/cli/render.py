"""``agentv render EVAL_FILE...``: show what each case would send, without calling anything.

``--format json`` prints one JSON array (one object per case) for tools and tests;
``--format text`` (the default) is a coloured view for people. Problems go to stderr: a bad
case is skipped with its diagnostics and the others still render; a file that cannot be
used at all fails on its own and makes the exit code 1.
"""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentv.cli.common import AllowOutsideRoot

if TYPE_CHECKING:
    from rich.console import Console


class ModeChoice(StrEnum):
    """How the ``question`` is rendered (docs/prompt-rules.md section 4)."""

    lm = "lm"
    agent = "agent"


class FormatChoice(StrEnum):
    """Output format of ``render``."""

    text = "text"
    json = "json"


def render_command(
    eval_files: Annotated[
        list[Path], typer.Argument(help="Eval files to render.", show_default=False)
    ],
    eval_id: Annotated[
        str | None, typer.Option("--eval-id", help="Render only the case with this id.")
    ] = None,
    mode: Annotated[
        ModeChoice | None,
        typer.Option(
            "--mode",
            help="Question for LM targets (lm: files inlined) or agents (agent: files "
            "referenced). Default: the target's mode, else lm.",
        ),
    ] = None,
    output_format: Annotated[
        FormatChoice, typer.Option("--format", help="text for people, json for tools.")
    ] = FormatChoice.text,
    target: Annotated[
        str | None,
        typer.Option(
            "--target",
            help="Also show the request this target would send (from targets.yaml).",
        ),
    ] = None,
    targets_path: Annotated[
        Path | None,
        typer.Option(
            "--targets", help="The targets file (default: discovered from the eval file)."
        ),
    ] = None,
    allow_outside_root: AllowOutsideRoot = False,
) -> None:
    """Show the question, guidelines and messages each case would send, without sending."""
    from rich.console import Console

    from agentv.cli.diagnostics import print_diagnostics
    from agentv.preview import preview

    result = preview(
        eval_files,
        eval_id=eval_id,
        mode=mode.value if mode else None,  # type: ignore[arg-type]
        target=target,
        targets_path=targets_path,
        allow_outside_root=allow_outside_root,
    )
    print_diagnostics(result.diagnostics, Console(stderr=True, highlight=False, soft_wrap=True))
    if output_format is FormatChoice.json:
        sys.stdout.write(json.dumps(result.cases, indent=2, ensure_ascii=False) + "\n")
    else:
        _print_text(result.cases, Console(highlight=False, soft_wrap=True))
    if result.failed:
        raise typer.Exit(code=1)


# --- the text view ------------------------------------------------------------------------

_ROLE_STYLES = {
    "system": "bold white on dark_orange3",
    "user": "bold white on blue",
    "assistant": "bold white on green4",
    "tool": "bold white on magenta",
}


def _highlighted(text: str) -> Any:
    """Content with the parts agentv added made visible: files, guidelines, markers."""
    from rich.text import Text

    out = Text(text)
    out.highlight_regex(r"(?m)^=== .+ ===$", "bold cyan")
    out.highlight_regex(r"<Attached: [^>\n]+>", "bold magenta")
    out.highlight_regex(r"(?m)^\[\[ ## Guidelines ## \]\]$", "bold yellow")
    out.highlight_regex(r"(?m)^@\[(System|User|Assistant|Tool)\]:$", "bold")
    out.highlight_regex(r'<file:? path="[^"\n]*">|</file>', "cyan")
    out.highlight_regex(r"<tool_call [^>\n]*>|</tool_call>", "magenta")
    return out


def _indented(text: Any, by: int = 2) -> Any:
    from rich.text import Text

    lines = text.split("\n", allow_blank=True)
    return Text("\n").join(Text(" " * by) + line if line.plain else line for line in lines)


def _print_text(cases: list[dict[str, Any]], out: Console) -> None:
    from rich.rule import Rule
    from rich.text import Text

    from agentv.evalfile.files import display_path

    for view in cases:
        title = Text(f" {view['eval_id']} ", style="bold")
        title.append(f"{display_path(view['eval_file'])} ", style="dim")
        out.print(Rule(title, align="left"))
        facts = [("mode", view["mode"]), ("outcome", view["outcome"])]
        if "target" in view:
            facts.insert(0, ("target", f"{view['target']} ({view['provider']})"))
        for label, value in facts:
            out.print(Text(f"{label:>9}: ", style="dim") + Text(str(value)))
        for label, paths, style in (
            ("guideline", view["guideline_paths"], "yellow"),
            ("file", view["input_files"], "cyan"),
        ):
            for path in paths:
                out.print(
                    Text(f"{label:>9}: ", style="dim") + Text(display_path(path), style=style)
                )
        out.print()
        if view.get("target_mode") == "agent":
            heading = "Messages an LM API would get (this agent target gets the question)"
        else:
            heading = "Messages sent to an LM API"
        out.print(Text(heading, style="bold underline"))
        for msg in view["sent_messages"]:
            header = Text(f" {msg['role'].upper()} ", style=_ROLE_STYLES.get(msg["role"], "bold"))
            if msg.get("tool_call_id"):
                header.append(f"  result of call {msg['tool_call_id']}", style="magenta")
            out.print(header)
            if msg["content"]:
                out.print(_indented(_highlighted(msg["content"])))
            for call in msg.get("tool_calls", []):
                args = json.dumps(call["arguments"], ensure_ascii=False)
                call_text = Text(f"calls {call['name']}({args})  id {call['id']}", style="magenta")
                out.print(_indented(call_text))
        out.print()
        out.print(Text(f"Question ({view['mode']} mode)", style="bold underline"))
        out.print(_indented(_highlighted(view["question"])))
        if "request" in view:
            from rich.syntax import Syntax

            out.print()
            out.print(Text(f"Request for target {view['target']}", style="bold underline"))
            payload = json.dumps(view["request"], indent=2, ensure_ascii=False, default=str)
            out.print(
                Syntax(payload, "json", word_wrap=True, background_color="default"), soft_wrap=False
            )
        out.print()
