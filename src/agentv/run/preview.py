"""What each case would send, without sending anything (``agentv render``, ``agentv.render``).

A case is previewed exactly as ``agentv eval`` would run it: its target chosen by the same
rule (``agentv.targets.choose_target``) and built by the same pool, in preview mode (a
``${{ VAR }}`` that is not set shows as ``<unset:VAR>``, secrets are redacted), and its
prompt finished by ``agentv.prompts.builder.build_prompt``. So ``sent_messages`` here is the list
the run logs and sends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentv.errors import AgentVError, Diagnostic, DiagnosticsView, InputError
from agentv.evalfile.files import display_path
from agentv.evalfile.loader import LoadContext, LoadedEvalFile, load_eval_file
from agentv.messages import Message, TextSegment, chat_to_dicts
from agentv.prompts.builder import LM, Mode, PromptSettings, build_prompt, build_question
from agentv.providers.base import request_for_case

if TYPE_CHECKING:
    from agentv.cases import EvalCase
    from agentv.providers.base import Provider
    from agentv.targets import TargetPool


@dataclass
class Preview(DiagnosticsView):
    """The views of every usable case, and every problem met on the way, in order (``preview``).

    Attributes:
        cases: One view per case, as ``render`` returns them.
        diagnostics: Every problem met; one not tied to a place in a file has no ``file``.
        failed: A file could not be used at all, or lost every case to errors (``agentv
            render`` exits 1).
    """

    cases: list[dict[str, Any]] = field(default_factory=list)
    diagnostics: list[Diagnostic] = field(default_factory=list)
    failed: bool = False


@dataclass
class Previewer:
    """Previews eval files one after the other, sharing targets and the file cache."""

    eval_id: str | None = None
    mode: Mode | None = None  # the question's rendering; default: the target's
    target: str | None = None
    targets_path: Path | None = None
    allow_outside_root: bool = False
    cwd: Path | None = None
    result: Preview = field(default_factory=Preview)
    _registry: TargetPool | None = None  # built on first use
    _warned: set[int] = field(default_factory=set)  # targets whose unset variables were told
    _seen: set[tuple[str, int | None, int | None, str]] = field(default_factory=set)

    def __post_init__(self) -> None:
        from agentv.evalfile.files import FileStore

        store = FileStore(cwd=self.cwd) if self.cwd is not None else FileStore()
        self.context = LoadContext(store=store, allow_outside_root=self.allow_outside_root)

    def _problem(self, message: str, severity: str = "error") -> None:
        self.result.diagnostics.append(Diagnostic(None, message, severity=severity))  # type: ignore[arg-type]
        if severity == "error":
            self.result.failed = True

    def _report(self, diags: Iterable[Diagnostic]) -> None:
        # each once: a config file shared by several eval files is seen by every one
        for diag in diags:
            key = (str(diag.file), diag.line, diag.column, diag.message)
            if key not in self._seen:
                self._seen.add(key)
                self.result.diagnostics.append(diag)

    def add_file(self, path: Path) -> None:
        """Load one eval file and add a view of each of its usable cases."""
        try:
            loaded = load_eval_file(path, eval_id=self.eval_id, context=self.context)
        except InputError as exc:
            self._report(exc.diagnostics)
            self._problem(f"{display_path(path)}: cannot be used, nothing rendered from it")
            return
        self._report(loaded.diagnostics)
        skipped = len(loaded.invalid)
        if skipped:
            self._problem(
                f"{display_path(path)}: skipped {skipped} of {loaded.total_cases} "
                "case(s) with errors (see above)",
                "warning",
            )
            if not loaded.cases:
                self.result.failed = True
        try:
            # every case's target first: like `agentv eval`, one that cannot be used stops
            # the whole file
            providers = [self._provider(loaded, case) for case in loaded.cases]
        except AgentVError as exc:
            self._problem(f"{display_path(path)}: {exc}")
            return
        for case, provider in zip(loaded.cases, providers, strict=True):
            self.result.cases.append(self._view(case, provider))

    def finish(self, paths: list[Path]) -> Preview:
        """Release the targets' clients; say so when ``eval_id`` matched nothing."""
        if self._registry is not None:
            asyncio.run(self._registry.aclose())
        if self.eval_id is not None and not self.result.cases and not self.result.failed:
            self._problem(f"no case with id {self.eval_id!r} in {', '.join(map(str, paths))}")
        return self.result

    def _provider(self, loaded: LoadedEvalFile, case: EvalCase) -> Provider | None:
        """The case's target as ``agentv eval`` would choose and build it.

        Without ``target`` a case shows a target only when it or its file names one
        (``execution.target``, ``target``) and a targets file is found; never ``default``.
        """
        from agentv.targets import DEFAULT_TARGET, TargetPool, choose_target, unset_placeholder

        given = self.target is not None
        name = choose_target(
            self.target, case.target, loaded.target, default=DEFAULT_TARGET if given else None
        )
        if name is None:
            return None
        if self._registry is None:
            self._registry = TargetPool(
                cwd=self.context.cwd,
                targets_path=self.targets_path.resolve() if self.targets_path else None,
                preview=True,
            )
        pool = self._registry
        if given:
            run_target = pool.target(loaded.path, loaded.repo_root, name)
        else:
            found = pool.find_target(loaded.path, loaded.repo_root, name)
            if found is None:
                return None  # no targets file to look in: the case shows no target
            run_target = found
        if id(run_target) not in self._warned:
            self._warned.add(id(run_target))
            for var in run_target.unset:
                self._problem(
                    f"target {name!r} uses {var}, which is not set; shown as "
                    f"{unset_placeholder(var)} (`agentv eval` needs it set)",
                    "warning",
                )
        return run_target.provider

    def _view(self, case: EvalCase, provider: Provider | None) -> dict[str, Any]:
        from agentv.providers.agents.common import redact

        plan = None
        if case.turns:  # a live conversation: its first request, then the plan of the rest
            plan = _plan(case)
            case = first_request(case)
        elif case.user is not None:  # a simulated user plays the turns
            plan = _user_plan(case)
            case = first_simulated_request(case)
        # The prompt is built as the target builds it; `mode` only changes `question`.
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
        if case.tools:
            view["tools"] = [t.spec() for t in case.tools]
        if case.workspace is not None:  # made for each run: its settings, not a folder
            view["workspace"] = case.workspace.spec()
        if plan is not None:
            view.update(plan)
        if provider is not None:
            secrets = self._registry.secrets if self._registry is not None else []
            view["target"] = provider.name
            view["provider"] = provider.kind
            view["target_mode"] = provider.mode
            tools = tuple(t.spec() for t in case.tools) if not provider.is_agent else ()
            request = request_for_case(case, prompt, tools=tools)
            view["request"] = redact(provider.preview(request), secrets)
        return view


def first_request(case: EvalCase) -> EvalCase:
    """A live conversation as its first request sees it: the opening context and the first
    turn's message (with the guideline files and attachments so far)."""
    turn = case.turns[0]
    return replace(
        case,
        input_messages=(*case.input_messages, turn.message),
        guideline_files=(*case.guideline_files, *turn.guideline_files),
        input_files=(*case.input_files, *turn.input_files),
        turns=(),
    )


def first_simulated_request(case: EvalCase) -> EvalCase:
    """A simulated conversation's first request: the opening context and the user's first
    message (a placeholder when the simulator writes it)."""
    assert case.user is not None
    said = case.user.first_message or "<the simulated user's first message>"
    return replace(
        case, input_messages=(*case.input_messages, Message("user", (TextSegment(said),)))
    )


def _user_plan(case: EvalCase) -> dict[str, Any]:
    """A simulated conversation's plan: who plays the user, toward what, what it is told,
    and when the conversation ends."""
    from agentv.run.simulator import DONE, system_prompt

    user = case.user
    assert user is not None
    ends = [f"the simulated user is done (it says {DONE})"]
    if user.stop_when:
        ends.append("stop_when passes on an answer: " + ", ".join(c.name for c in user.stop_when))
    elif user.stop_when_judge:
        ends.append(f"a judge finds of an answer: {user.stop_when_judge}")
    ends.append(f"after {user.max_turns} user turn(s)")
    return {
        "user": {**user.spec(), "simulator_prompt": system_prompt(user), "ends": ends},
        "turn_evaluators": [{"name": e.name, "type": e.type} for e in case.turn_evaluators],
        "aggregation": case.aggregation,
        "on_turn_failure": "stop" if case.stop_on_failure else "continue",
    }


def _plan(case: EvalCase) -> dict[str, Any]:
    """A live conversation's plan: each turn (what the user says, how its answer is graded),
    and the conversation as it will unfold, the answers not yet known shown as
    placeholders (``<the target's answer to turn N>``)."""
    turns = []
    transcript = [m.to_dict() for m in build_prompt(case).messages if m.role != "system"]
    for i, turn in enumerate(case.turns, 1):
        said = build_question((turn.message,))
        entry: dict[str, Any] = {"turn": i, "content": said}
        if turn.outcome:
            entry["outcome"] = turn.outcome
        if turn.evaluators:
            entry["evaluators"] = [{"name": e.name, "type": e.type} for e in turn.evaluators]
        turns.append(entry)
        transcript.append({"role": "user", "content": said})
        transcript.append({"role": "assistant", "content": f"<the target's answer to turn {i}>"})
    plan: dict[str, Any] = {
        "turns": turns,
        "conversation": transcript,
        "aggregation": case.aggregation,
        "on_turn_failure": "stop" if case.stop_on_failure else "continue",
    }
    return plan


def preview(
    paths: Iterable[Path | str],
    *,
    eval_id: str | None = None,
    mode: Mode | None = None,
    target: str | None = None,
    targets_path: Path | str | None = None,
    allow_outside_root: bool = False,
    cwd: Path | str | None = None,
) -> Preview:
    """Preview every case of ``paths`` (eval files; relative ones start from ``cwd``, default
    the working directory); nothing is sent."""
    base = Path(cwd).resolve() if cwd is not None else None
    files = [base / p if base is not None else Path(p) for p in paths]
    previewer = Previewer(
        eval_id=eval_id,
        mode=mode,
        target=target,
        targets_path=Path(targets_path) if targets_path is not None else None,
        allow_outside_root=allow_outside_root,
        cwd=base,
    )
    try:
        for path in files:
            previewer.add_file(path)
    finally:
        result = previewer.finish(files)
    return result
