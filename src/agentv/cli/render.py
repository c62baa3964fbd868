"""``agentv render EVAL_FILE...``: show what each case would send, without calling anything.

``--format json`` prints one JSON array (one object per case) for tools and tests;
``--format text`` (the default) is a coloured view for people that shows what is sent once:
with an LM API target, the messages, a line on how the vendor's payload holds them and the
payload's other fields; with a target that runs a program, its request (command, prompt
document). Nothing is hard-wrapped, so a copied JSON block parses. Problems go to stderr: a bad
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

from agentv.cli.common import AllowOutsideRoot, printable_all
from agentv.cli.console_text import printable_json

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
        str | None,
        typer.Option(
            "--case",
            "--eval-id",
            help="Render only the case with this id (a data row's id renders each of its "
            "variables' combinations).",
        ),
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

    from agentv.api import preview
    from agentv.cli.diagnostics import print_diagnostics

    result = preview(
        eval_files,
        eval_id=eval_id,
        mode=mode.value if mode else None,
        target=target,
        targets_file=targets_path,
        allow_outside_root=allow_outside_root,
    )
    print_diagnostics(result.diagnostics, Console(stderr=True, highlight=False, soft_wrap=True))
    if output_format is FormatChoice.json:
        text = json.dumps(result.cases, indent=2, ensure_ascii=False)
        sys.stdout.write(printable_json(text) + "\n")  # the same JSON, safe in a CI log
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


def _json_block(value: Any) -> Any:
    """``value`` as indented JSON, highlighted but never wrapped: a block copied from the
    terminal (or a pipe) parses as it is."""
    from rich.highlighter import JSONHighlighter
    from rich.text import Text

    text = Text(json.dumps(value, indent=2, ensure_ascii=False, default=str))
    JSONHighlighter().highlight(text)
    return text


def _heading(out: Console, text: str) -> None:
    from rich.text import Text

    out.print()
    out.print(Text(text, style="bold underline"))


def _note(out: Console, text: str) -> None:
    from rich.text import Text

    out.print(_indented(Text(text, style="dim italic")))


def _print_messages(out: Console, messages: list[dict[str, Any]], heading: str) -> None:
    from rich.text import Text

    _heading(out, heading)
    for msg in messages:
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


def _print_question(out: Console, view: dict[str, Any]) -> None:
    _heading(out, f"Question ({view['mode']} mode)")
    out.print(_indented(_highlighted(view["question"])))


#: where LM API payloads carry the messages (``sent_messages`` in the vendor's shape)
_MESSAGE_FIELDS = ("system", "systemInstruction", "messages", "contents")


def _lm_payload(request: dict[str, Any]) -> dict[str, Any] | None:
    """The vendor payload of an LM API target's request (None: the target runs a program)."""
    return request if any(k in request for k in ("messages", "contents")) else None


def _wire_note(provider: str, body: dict[str, Any], messages: list[dict[str, Any]]) -> str:
    """One line saying how the payload holds the messages above, without repeating them."""
    parts: list[str] = []
    system_moved = "system" in body or "systemInstruction" in body
    if "system" in body:
        parts.append("the system message as the top-level `system` field")
    if "systemInstruction" in body:
        parts.append("the system message as `systemInstruction`")
    key = "messages" if "messages" in body else "contents"
    turns = body.get(key) or []
    count = sum(1 for m in messages if not (system_moved and m["role"] == "system"))
    rest = "the other messages" if system_moved else "the messages"
    if len(turns) < count:
        parts.append(
            f"{rest} as {len(turns)} `{key}` turn(s) (consecutive turns of one role merged)"
        )
    else:
        parts.append(f"{rest} as `{key}`")
    wire_roles = {t.get("role") for t in turns if isinstance(t, dict)}
    if "model" in wire_roles:
        parts.append("the assistant as role `model`")
    if any(m["role"] == "tool" for m in messages) and "tool" not in wire_roles:
        parts.append("tool results inside user turns")
    return f"as sent to {provider}: " + "; ".join(parts)


def _print_lm_request(out: Console, view: dict[str, Any], body: dict[str, Any]) -> None:
    """An LM API target: the messages once, how the vendor's payload holds them, and the
    payload's other fields (model, max_tokens, temperature, ...)."""
    messages = view["sent_messages"]
    _print_messages(out, messages, f"Messages sent to target {view['target']}")
    _note(out, _wire_note(view["provider"], body, messages))
    others = {k: v for k, v in body.items() if k not in _MESSAGE_FIELDS}
    if others:
        _heading(out, "The request's other fields")
        out.print(_json_block(others))
    if view["mode"] != view.get("target_mode", "lm"):
        _print_question(out, view)
    else:
        _heading(out, f"Question ({view['mode']} mode)")
        _note(
            out,
            "not sent to this target (judges and logs use it); "
            "`--format json` or a render without --target shows it",
        )


def _print_program_request(out: Console, view: dict[str, Any]) -> None:
    """A target that runs a program (cli, codex, vscode): what the program gets, once."""
    from rich.text import Text

    request: dict[str, Any] = view["request"]
    _heading(out, f"Request for target {view['target']} (what its program gets)")
    others: dict[str, Any] = {}
    for key, value in request.items():
        if isinstance(value, str) and value:
            # a command line or a prompt document: as it is (not even indented, so that
            # a copied command keeps its quoted text), never wrapped
            out.print(Text(f"{key}:", style="dim"))
            out.print(_highlighted(value))
        else:
            others[key] = value
    if others:
        out.print(Text("other fields:", style="dim"))
        out.print(_json_block(others))
    if view["mode"] != view.get("target_mode"):
        _print_question(out, view)


def _print_text(cases: list[dict[str, Any]], out: Console) -> None:
    from rich.rule import Rule
    from rich.text import Text

    from agentv.api import display_path

    for view in cases:
        view = printable_all(view)  # the files' text, control characters escaped
        title = Text(f" {view['eval_id']} ", style="bold")
        title.append(f"{display_path(view['eval_file'])} ", style="dim")
        out.print(Rule(title, align="left"))
        facts = [("mode", view["mode"]), ("outcome", view["outcome"])]
        if "target" in view:
            facts.insert(0, ("target", f"{view['target']} ({view['provider']})"))
        if "workspace" in view:
            facts.append(("workspace", _workspace_line(view["workspace"])))
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
        request = view.get("request")
        body = _lm_payload(request) if isinstance(request, dict) else None
        if not request:  # no target, or one with nothing of its own to show
            # which target the case runs on is not resolved here (no key needed): both
            # forms, each said for whom it is
            _print_messages(out, view["sent_messages"], "Messages (what a model API target gets)")
            _print_question(out, view)
            _note(
                out,
                "what a target gets depends on its kind: `--target NAME` shows that "
                "target's own request",
            )
        elif body is not None:
            _print_lm_request(out, view, body)
        else:
            _print_program_request(out, view)
        if "turns" in view:
            _print_plan(out, view)
        if "user" in view:
            _print_user_plan(out, view)
        out.print()


def _print_user_plan(out: Console, view: dict[str, Any]) -> None:
    """A simulated conversation's plan: who plays the user, toward what, until when."""
    from rich.text import Text

    user = view["user"]
    how = f"aggregation: {view['aggregation']}, on_turn_failure: {view['on_turn_failure']}"
    out.print(Text(f"Simulated user, played by target {user['target']!r} ({how}):", style="bold"))
    for label, value in (("persona", user["persona"]), ("goal", user["goal"])):
        out.print(Text(f"  {label}: ", style="dim") + Text(value))
    for fact in user["facts"]:
        out.print(Text("  knows: ", style="dim") + Text(fact))
    graded = ", ".join(e["name"] for e in view.get("turn_evaluators", []))
    if graded:
        out.print(Text("  each answer graded by: ", style="dim") + Text(graded))
    out.print(Text("  the conversation ends when ", style="dim") + Text("; or ".join(user["ends"])))
    out.print(Text("  the simulator is told:", style="dim"))
    for line in user["simulator_prompt"].splitlines():
        out.print(Text(f"    {line}", style="dim"))


def _print_plan(out: Console, view: dict[str, Any]) -> None:
    """A live conversation's turns after the first request: what the user says, each
    answer a placeholder, and how each turn is graded."""
    from rich.text import Text

    how = f"aggregation: {view['aggregation']}, on_turn_failure: {view['on_turn_failure']}"
    out.print(
        Text(f"Live conversation ({how}); the target's answers carried forward:", style="bold")
    )
    for turn in view["turns"]:
        graded = ", ".join(e["name"] for e in turn.get("evaluators", []))
        if not graded and turn.get("outcome"):
            graded = f"a judge of: {turn['outcome']}"
        line = Text(f"  turn {turn['turn']}: ", style="dim") + Text(turn["content"])
        if graded:
            line.append(f"  [{graded}]", style="dim")
        out.print(line)
    for tool in view.get("tools", []):
        out.print(Text("     tool: ", style="dim") + Text(tool["name"], style="magenta"))


def _workspace_line(spec: dict[str, Any]) -> str:
    """A case's workspace in one line: ``temp: app@v1 in app/, template t, isolation bwrap``
    (the agent runs there, not in the request's folder shown below)."""
    parts = [f"{r['repo']}@{r['commit']} in {r['path']}" for r in spec.get("repos") or []]
    if spec.get("template"):
        parts.append(f"template {spec['template']}")
    if spec.get("path"):
        parts.append(str(spec["path"]))
    isolation = spec.get("isolation") or {}
    parts.append(f"isolation {isolation.get('kind', 'none')}")
    return f"{spec.get('mode', 'temp')}: " + ", ".join(parts) + " (made for each run)"
