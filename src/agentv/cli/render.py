"""``agentv render EVAL_FILE...``: show what each case would send, without calling anything.

``--format json`` prints one JSON array (one object per case) for tools and tests;
``--format text`` (the default) is a coloured view for people. Problems go to stderr: a bad
case is skipped with its diagnostics and the others still render; a file that cannot be
used at all fails on its own and makes the exit code 1.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from agentv.cli.common import AllowOutsideRoot

if TYPE_CHECKING:
    from rich.console import Console

    from agentv.cases import EvalCase
    from agentv.errors import Diagnostic
    from agentv.evalfile.loader import LoadedEvalFile
    from agentv.providers.base import Provider
    from agentv.targets import TargetRegistry


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

    renderer = _Renderer(
        eval_id=eval_id,
        mode=mode.value if mode else None,
        target=target,
        targets_path=targets_path,
        allow_outside_root=allow_outside_root,
        err=Console(stderr=True, highlight=False, soft_wrap=True),
    )
    try:
        for path in eval_files:
            renderer.render_file(path)
    finally:
        renderer.close()
    if eval_id is not None and not renderer.cases and not renderer.failed:
        renderer.error(f"no case with id {eval_id!r} in {', '.join(map(str, eval_files))}")
    if output_format is FormatChoice.json:
        sys.stdout.write(json.dumps(renderer.cases, indent=2, ensure_ascii=False) + "\n")
    else:
        _print_text(renderer.cases, Console(highlight=False, soft_wrap=True))
    if renderer.failed:
        raise typer.Exit(code=1)


@dataclass
class _Renderer:
    """Loads eval files, builds each case's prompt inputs, and collects JSON-ready views."""

    eval_id: str | None
    mode: str | None
    target: str | None
    targets_path: Path | None
    allow_outside_root: bool
    err: Console
    cases: list[dict[str, Any]] = field(default_factory=list)
    failed: bool = False
    _registry: TargetRegistry | None = None  # built on first use: targets in preview mode
    _warned: set[int] = field(default_factory=set)  # targets whose unset variables were told
    _secrets: list[str] = field(default_factory=list)  # values redacted from requests
    _seen: set[tuple[str, int | None, int | None, str]] = field(default_factory=set)

    def __post_init__(self) -> None:
        from agentv.evalfile.loader import LoadContext

        self.context = LoadContext(allow_outside_root=self.allow_outside_root)

    def error(self, message: str, hint: str | None = None) -> None:
        """An error that makes the exit code 1."""
        from rich.text import Text

        self.failed = True
        self.err.print(Text("error: ", style="bold red") + Text(message))
        if hint:
            self.err.print(Text(f"    hint: {hint}", style="dim"))

    def report(self, diags: list[Diagnostic]) -> None:
        """Print diagnostics on stderr, each once (a shared config is seen by every file)."""
        from rich.text import Text

        from agentv.validation import hint_lines, where

        for diag in diags:
            key = (str(diag.file), diag.line, diag.column, diag.message)
            if key in self._seen:
                continue
            self._seen.add(key)
            style = "bold red" if diag.severity == "error" else "bold yellow"
            line = Text(f"{where(diag)}: ") + Text(f"{diag.severity}: ", style=style)
            self.err.print(line + Text(diag.message))
            for hint in hint_lines(diag):
                self.err.print(Text(f"    {hint}", style="dim"))

    def render_file(self, path: Path) -> None:
        """Load one eval file and add a view of each of its usable cases."""
        from agentv.errors import AgentVError, InputError
        from agentv.evalfile.loader import load_eval_file
        from agentv.validation import case_index, display_path

        try:
            loaded = load_eval_file(path, eval_id=self.eval_id, context=self.context)
        except InputError as exc:
            self.report(exc.diagnostics)
            self.error(f"{display_path(path)}: cannot be used, nothing rendered from it")
            return
        self.report(loaded.diagnostics)
        skipped = len({case_index(d) for d in loaded.errors} - {None})
        if skipped:
            self.err.print(
                f"warning: {display_path(path)}: skipped {skipped} of {loaded.total_cases} "
                "case(s) with errors (see above)",
                style="yellow",
            )
            if not loaded.cases:
                self.failed = True
        try:
            # every case's target first: like `agentv eval`, one that cannot be used stops
            # the whole file
            providers = [self._provider(loaded, case) for case in loaded.cases]
        except NotImplementedError:
            self.error(
                "--target cannot be used yet: this build of agentv cannot read targets files"
            )
            return
        except AgentVError as exc:
            self.error(f"{display_path(path)}: {exc}")
            return
        for case, provider in zip(loaded.cases, providers, strict=True):
            self.cases.append(self._case_view(case, provider))

    def _provider(self, loaded: LoadedEvalFile, case: EvalCase) -> Provider | None:
        """The case's target as ``agentv eval`` would choose and build it, except that a
        ``${{ VAR }}`` that is not set shows as ``<unset:VAR>``: rendering needs no secrets.

        Without ``--target`` a case shows a target only when it or its file names one
        (``execution.target``, ``target``) and a targets file is found; never ``default``.
        """
        from agentv.targets import DEFAULT_TARGET, TargetRegistry, choose_target, unset_placeholder

        given = self.target is not None
        name = choose_target(
            self.target, case.target, loaded.target, default=DEFAULT_TARGET if given else None
        )
        if name is None:
            return None
        if self._registry is None:
            self._registry = TargetRegistry(
                cwd=self.context.cwd,
                targets_path=self.targets_path.resolve() if self.targets_path else None,
                preview=True,
            )
        registry = self._registry
        if given:
            run_target = registry.target(loaded.path, loaded.repo_root, name)
        else:
            found = registry.find_target(loaded.path, loaded.repo_root, name)
            if found is None:
                return None  # no targets file to look in: the case shows no target
            run_target = found
        self._secrets = registry.secrets
        if id(run_target) not in self._warned:
            self._warned.add(id(run_target))
            for var in run_target.unset:
                self.err.print(
                    f"warning: target {name!r} uses {var}, which is not set; shown as "
                    f"{unset_placeholder(var)} (`agentv eval` needs it set)",
                    style="yellow",
                )
        return run_target.provider

    def _case_view(self, case: EvalCase, provider: Provider | None) -> dict[str, Any]:
        from agentv.messages import chat_to_dicts
        from agentv.prompts import LM, Mode, PromptSettings, build_prompt, build_question
        from agentv.providers.agents.common import redact
        from agentv.providers.base import request_for_case

        # The prompt is built as the target builds it; --mode only changes `question`.
        prompt = build_prompt(case, PromptSettings.of(provider) if provider else LM)
        target_mode: Mode = provider.mode if provider else "lm"
        mode: Mode = "agent" if (self.mode or target_mode) == "agent" else "lm"
        question = prompt.question
        if mode != target_mode:
            question = build_question(case.input_messages, mode)
        view: dict[str, Any] = {
            "eval_id": case.id,
            "eval_file": str(case.eval_file),
            "dataset": case.dataset,
            "mode": mode,
            "outcome": case.outcome,
            "question": question,
            "guidelines": prompt.guidelines,
            "guideline_paths": [str(p) for p in prompt.guideline_paths],
            "input_files": [str(p) for p in prompt.input_files],
            "sent_messages": chat_to_dicts(prompt.messages),
            **({"added_user_turn": True} if prompt.added_user_turn else {}),
            "reference_answer": case.reference_answer,
            "evaluators": [{"name": e.name, "type": e.type} for e in case.evaluators],
        }
        if provider is not None:
            view["target"] = provider.name
            view["provider"] = provider.kind
            view["target_mode"] = provider.mode
            view["request"] = redact(
                provider.preview(request_for_case(case, prompt)), self._secrets
            )
        return view

    def close(self) -> None:
        """Release what the providers hold (SDK clients); nothing was sent."""
        import asyncio

        if self._registry is not None:
            asyncio.run(self._registry.aclose())


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

    from agentv.validation import display_path

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
