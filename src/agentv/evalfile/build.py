"""Step 2 of the data flow: one raw case of an eval file becomes an ``EvalCase``.

``CaseBuilder`` builds a case from its mapping as written: its messages and their
segments (text, files read once per run, guideline references, tool calls paired with
their results), its expected messages, its tools and its evaluators (each resolved and
checked by the evaluator itself, ``EvaluatorSpec.resolve`` and ``check``, before anything
is sent). Every problem becomes a located
``Diagnostic``; a case with an error is not built. Reading and settling the file around
it is ``loader.py``'s.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from agentv.cases import EvalCase, EvaluatorConfig, RowRef, SimulatedUser, Tool, Turn, Workspace
from agentv.errors import Diagnostic
from agentv.evalfile import schema as sc
from agentv.evalfile.context import LoadContext
from agentv.evalfile.files import is_within
from agentv.evalfile.guidelines import is_guideline
from agentv.evalfile.schema_errors import closest_key, translate
from agentv.evalfile.workspace import WorkspaceReader, merged
from agentv.evaluators.base import EvaluatorSpec
from agentv.evaluators.schemas import check_schema
from agentv.messages import (
    FileSegment,
    GuidelineFile,
    GuidelineRef,
    Message,
    Segment,
    TextSegment,
    ToolCall,
)
from agentv.system.scripts import script_problem
from agentv.yaml.source import PathKey, YamlSource, describe_decode_error

T = TypeVar("T")

_CASE_ADAPTER = sc.RawEvalCase

#: tool calls answered per turn before the answer counts, unless a case says otherwise
DEFAULT_TOOL_ROUNDS = 8
#: user turns of a simulated user's conversation, unless ``max_turns`` says otherwise
DEFAULT_USER_TURNS = 10
#: a tool without `parameters` takes no arguments
EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}

#: an attachment larger than this (characters) is worth a warning: it goes whole into
#: every request of the cases that attach it
LARGE_ATTACHMENT = 10 * 2**20

ROLE_MARKER_RE = re.compile(r"@\[(?:system|user|assistant|tool)\]:", re.IGNORECASE)
"""A role marker as written in ``question`` texts (docs/prompt-rules.md section 4)."""


def _enumerate_list(value: Any) -> list[tuple[int, Any]]:
    return list(enumerate(value)) if isinstance(value, list) else []


def block_is_file(block: Any) -> bool:
    """Whether a raw content block is ``{type: file, ...}``."""
    return isinstance(block, dict) and block.get("type") == "file"


def text_or_none(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


#: what to write instead of `parameters` that cannot be used
PARAMETERS_HINT = (
    "write a JSON Schema of type `object`, e.g. {type: object, properties: {city: {type: string}}}"
)


def _own_grade(turn: sc.RawTurn) -> bool:
    """Whether a turn is graded by its own `evaluators` or `outcome` (not the case's
    `turn_evaluators`)."""
    return turn.evaluators is not None or bool((turn.outcome or "").strip())


def parameters_problem(parameters: Any) -> tuple[str, str] | None:
    """Why a tool's ``parameters`` cannot be sent to an API or check a call (the APIs take
    a JSON Schema of type ``object``) and what to do, or None."""
    if not isinstance(parameters, dict):
        return "must be a JSON Schema (a mapping)", PARAMETERS_HINT
    if parameters.get("type", "object") != "object":
        return (
            f"must be of type `object` (the arguments of a call), not {parameters['type']!r}",
            PARAMETERS_HINT,
        )
    problem = check_schema(parameters, "")
    if problem is None:
        return None
    text = problem.message.removeprefix("invalid JSON Schema").strip()
    # "at `where`: why" stays as it is; ": why" loses its colon
    text = text if text.startswith("at ") else text.removeprefix(":").strip().removeprefix("it ")
    hint = PARAMETERS_HINT if "without end" not in text else (problem.hint or PARAMETERS_HINT)
    return text, hint


class CaseBuilder:
    """Turns one raw case mapping into an ``EvalCase`` (or diagnostics)."""

    def __init__(
        self,
        *,
        src: YamlSource,
        ctx: LoadContext,
        roots: list[Path],
        repo_root: Path,
        patterns: tuple[str, ...],
        dataset: str,
        default_evaluator: str,
        user_target: str | None = None,
    ) -> None:
        self.src = src
        #: the target of simulated users without one of their own (the file's, else the
        #: config's ``user_target``)
        self.user_target = user_target
        self.ctx = ctx
        self.roots = roots
        self.repo_root = repo_root
        self.patterns = patterns
        self.dataset = dataset
        self.default_evaluator = default_evaluator
        self._classified: dict[Path, bool] = {}
        self._checked: dict[Path, tuple[bool, bool]] = {}  # path -> (inside root, is a file)
        self._warned_large: set[Path] = set()  # attachments already said to be large
        #: what the evaluators' checks keep for the whole file (``_EvaluatorLoading.memo``)
        self._memo: dict[Hashable, Any] = {}
        # The file-level `execution:` block (the original AgentV's): the defaults of the
        # cases that have no target or evaluators of their own.
        self.execution_seen = False
        self.default_target: str | None = None
        self.default_evaluators: tuple[EvaluatorConfig, ...] | None = None
        self.default_diags: list[Diagnostic] = []  # its problems (header problems)
        #: the file-level `tools:` (the tools of every case without its own), its problems
        self.tools_seen = False
        self.default_tools: tuple[Tool, ...] = ()
        self.tools_diags: list[Diagnostic] = []
        #: the file-level `workspace:` (as written: a case's own block is merged over it),
        #: the workspace of every case without its own, its problems
        self.workspace_seen = False
        self.file_workspace: dict[str, Any] | None = None
        self.default_workspace: Workspace | None = None
        self.workspace_diags: list[Diagnostic] = []
        self._workspaces = WorkspaceReader(self, src.path)
        self._said_unsandboxed = False  # the file's agents run without a sandbox: said once
        #: cases built before any file-level `workspace:` was read whose graders need one:
        #: by index, the problem the loader reports if the file has none after all
        self.deferred: dict[int, Diagnostic] = {}

    def adopt_file_defaults(self, file: CaseBuilder) -> None:
        """Take the file-level defaults ``file`` read (target, evaluators, tools,
        workspace): this builder builds the same file's cases from data rows."""
        self.default_target = file.default_target
        self.default_evaluators = file.default_evaluators
        self.default_tools = file.default_tools
        self.workspace_seen = True  # the whole header is read before any row
        self.file_workspace = file.file_workspace
        self.default_workspace = file.default_workspace
        self._said_unsandboxed = file._said_unsandboxed or file.file_workspace is not None

    # --- what the workspace reader asks of the builder -----------------------------------

    def memo(self, key: Hashable, make: Callable[[], T]) -> T:
        """``make()``, once per eval file for each ``key``."""
        if key not in self._memo:
            self._memo[key] = make()
        return self._memo[key]  # type: ignore[no-any-return]

    def folder(
        self, raw: str | None, key: PathKey, diags: list[Diagnostic], what: str
    ) -> Path | None:
        """A folder the file names, relative to its folder (inside the repository root)."""
        return self._script_folder(raw, key, diags, what)

    def set_file_execution(self, value: Any) -> None:
        """Read the file-level ``execution:`` block: its ``target`` and ``evaluators``."""
        self.execution_seen = True
        self.default_target, self.default_evaluators, self.default_diags = None, None, []
        if value is None:
            return
        wrapped = {"execution": value}  # so that its errors are located under `execution`
        try:
            raw = sc.RawFileExecution.model_validate(wrapped)
        except ValidationError as exc:
            self.default_diags = translate(self.src, exc, wrapped, ())
            self._name_places(self.default_diags)
            return
        self.default_target = text_or_none(raw.execution.target)
        if raw.execution.evaluators is not None:
            self.default_evaluators = tuple(
                self._evaluator_configs(
                    raw.execution.evaluators, ("execution", "evaluators"), self.default_diags
                )
            )
        self._name_places(self.default_diags)

    @staticmethod
    def _name_places(diags: list[Diagnostic]) -> None:
        """Start the messages about the file's ``execution`` with the key they are about.

        A streamed file's header is located by its top-level keys only (the file is not
        read twice), so the line is that of ``execution``: the key path says the rest.
        """
        for d in diags:
            if d.location and d.location != "execution":
                d.message = f"`{d.location}`: {d.message}"

    def build(
        self,
        index: int,
        entry: Any,
        line: int | None = None,
        *,
        name_case: bool = True,
        row: RowRef | None = None,
        variables: dict[str, Any] | None = None,
    ) -> tuple[EvalCase | None, list[Diagnostic]]:
        """The case at ``evalcases[index]`` (starting on ``line``), or None when it has an
        error; plus diagnostics, each starting ``case 'id': `` unless not ``name_case``.
        ``row`` and ``variables``: the data row and the variables it was filled from."""
        case, diags = self._build(index, entry, line, row, variables)
        if isinstance(entry, dict):
            diags.extend(self._marker_warnings(entry, ("evalcases", index)))
        case_id = entry.get("id") if isinstance(entry, dict) else None
        if name_case and isinstance(case_id, str) and case_id.strip():
            for d in diags:
                if d.file == self.src.path:
                    d.message = f"case {case_id!r}: {d.message}"
        diags.sort(key=lambda d: (d.line or 0, d.column or 0))
        return case, diags

    def _build(
        self,
        index: int,
        entry: Any,
        line: int | None,
        row: RowRef | None = None,
        variables: dict[str, Any] | None = None,
    ) -> tuple[EvalCase | None, list[Diagnostic]]:
        base: PathKey = ("evalcases", index)
        if not isinstance(entry, dict):
            return None, [
                self.src.diagnostic(
                    base,
                    "an eval case must be a mapping",
                    hint="start each case with `- id: ...` followed by `outcome` and `input_messages`",
                )
            ]
        missing = self._missing_input(entry, base)
        try:
            raw = _CASE_ADAPTER.model_validate(entry)
        except ValidationError as exc:
            diags = [*missing, *translate(self.src, exc, entry, base)]
            # Report the missing files too, so that one `validate` shows every problem.
            self._check_raw_files(entry, base, diags)
            return None, diags
        diags = list(missing)
        guideline_files: dict[Path, GuidelineFile] = {}
        input_files: dict[Path, None] = {}
        messages = []
        for i, msg in enumerate(raw.input_messages or []):
            loaded = self._message(
                msg, (*base, "input_messages", i), diags, guideline_files, input_files, True
            )
            messages.append(loaded)
        expected = []
        for i, msg in enumerate(raw.expected_messages or []):
            expected.append(
                self._message(msg, (*base, "expected_messages", i), diags, None, None, False)
            )
        diags.extend(self._check_tool_pairing(raw, base))
        evaluators = self._evaluators(raw, base, diags)
        turn_evaluators: list[EvaluatorConfig] = []
        if raw.turn_evaluators is not None:
            turn_evaluators = self._evaluator_configs(
                raw.turn_evaluators, (*base, "turn_evaluators"), diags
            )
        # a turn's guideline files join the conversation at that turn: the case's own are
        # its opening messages' (``seen`` is every file referenced so far)
        seen = dict(guideline_files)
        turns = [
            self._turn(turn, (*base, "turns", i), diags, seen, turn_evaluators)
            for i, turn in enumerate(raw.turns or [])
        ]
        user = None
        if raw.user is not None:
            user = self._user(raw, (*base, "user"), diags)
        tools = self.default_tools
        if raw.tools is not None:
            tools = tuple(self._tools(raw.tools, (*base, "tools"), diags))
        workspace = self.default_workspace
        if raw.workspace is not None:
            workspace = self._case_workspace(entry["workspace"], base, diags)
        has_block = raw.workspace is not None or self.file_workspace is not None
        problem = None
        if not has_block:  # a block with an error is said with it
            problem = self._grader_problem(workspace, evaluators, turns, turn_evaluators, base)
        if problem is not None:
            if self.workspace_seen:
                diags.append(problem)
            else:  # the file's `workspace:` may come after the cases: the loader decides
                self.deferred[index] = problem
        if turns and not evaluators and not any(t.graded for t in turns):
            diags.append(
                self.src.diagnostic(
                    (*base, "turns"),
                    "this live conversation has nothing to grade",
                    hint="give a turn `evaluators` (or an `outcome` for a judge), or the case "
                    "`evaluators` that grade the whole conversation",
                )
            )
        diags.extend(self._unused_live_keys(raw, base, tools))
        if any(d.severity == "error" for d in diags):
            return None, diags
        case = EvalCase(
            id=raw.id,
            dataset=self.dataset,
            eval_file=self.src.path,
            outcome=raw.outcome,
            input_messages=tuple(messages),
            expected_messages=tuple(expected),
            reference_answer=_reference_answer(expected),
            guideline_files=tuple(guideline_files.values()),
            input_files=tuple(input_files),
            evaluators=tuple(evaluators),
            default_evaluator=raw.evaluator or self.default_evaluator,
            conversation_id=raw.conversation_id,
            target=raw.execution.target if raw.execution and raw.execution.target else None,
            line=line,
            repeat=raw.repeat,
            turns=tuple(turns),
            aggregation=raw.aggregation or "mean",
            stop_on_failure=raw.on_turn_failure == "stop",
            tools=tools,
            max_tool_rounds=raw.max_tool_rounds or DEFAULT_TOOL_ROUNDS,
            user=user,
            turn_evaluators=tuple(turn_evaluators),
            row=row,
            vars=variables,
            workspace=workspace,
        )
        return case, diags

    def set_file_workspace(self, value: Any) -> None:
        """Read the file-level ``workspace:``: every case's workspace, or the defaults a
        case's own block is merged over."""
        self.workspace_seen = True
        self.file_workspace, self.default_workspace, self.workspace_diags = None, None, []
        if value is None:
            return
        wrapped = {"workspace": value}  # so that its errors are located under `workspace`
        try:
            raw = sc.RawFileWorkspace.model_validate(wrapped)
        except ValidationError as exc:
            self.workspace_diags = translate(self.src, exc, wrapped, ())
            return
        self.file_workspace = dict(value)
        places = {key: ("workspace",) for key in value}
        self.default_workspace = self._workspaces.read(raw.workspace, places, self.workspace_diags)
        if self.default_workspace is not None:
            self._unsandboxed(self.default_workspace, value, ("workspace",), self.workspace_diags)

    def _case_workspace(
        self, own: dict[str, Any], base: PathKey, diags: list[Diagnostic]
    ) -> Workspace | None:
        """A case's own ``workspace:`` merged over the file's."""
        for name in ("before_all", "after_all"):
            hooks = own.get("hooks")
            if isinstance(hooks, dict) and name in hooks:
                diags.append(
                    self.src.diagnostic(
                        (*base, "workspace", "hooks", name),
                        f"`{name}` runs once for the whole file, not for one case",
                        hint="write it in the file's `workspace:` block (at the top level)",
                        at_key=True,
                    )
                )
        combined = merged(self.file_workspace, own)
        try:
            raw = sc.RawWorkspace.model_validate(combined)
        except ValidationError:
            return None  # the file's block is broken: said with it
        own_place = (*base, "workspace")
        places = {key: own_place if key in own else ("workspace",) for key in combined}
        from_file = frozenset(key for key in combined if key not in own)
        found = self._workspaces.read(raw, places, diags, file_keys=from_file)
        if found is not None:
            self._unsandboxed(found, combined, own_place, diags)
        return found

    def _unsandboxed(
        self, workspace: Workspace, written: dict[str, Any], key: PathKey, diags: list[Diagnostic]
    ) -> None:
        """Say once per file that an agent runs on this machine without a sandbox (unless
        the file says so itself: `isolation: none`)."""
        if workspace.isolation.kind != "none" or "isolation" in written:
            return
        if self._said_unsandboxed:
            return
        self._said_unsandboxed = True
        diags.append(
            self.src.diagnostic(
                key,
                "the agent works in this workspace without a sandbox: it can read and change "
                "anything you can on this machine",
                hint="set `isolation: bwrap` (Linux) or `isolation: docker` to confine it to "
                "its workspace, or `isolation: none` to say you mean it",
                severity="warning",
                at_key=True,
            )
        )

    def _grader_problem(
        self,
        workspace: Workspace | None,
        evaluators: list[EvaluatorConfig],
        turns: list[Turn],
        turn_evaluators: list[EvaluatorConfig],
        base: PathKey,
    ) -> Diagnostic | None:
        """An evaluator that grades the workspace, on a case that has none."""
        if workspace is not None:
            return None
        graders = [*evaluators, *turn_evaluators, *(e for t in turns for e in t.evaluators)]
        needing = next((c for c in graders if getattr(c.spec, "needs_workspace", False)), None)
        if needing is None:
            return None
        return self.src.diagnostic(
            base,
            f"evaluator {needing.name!r} ({needing.type}) grades the workspace the agent "
            "left, but this case has no `workspace:`",
            hint="give the case (or the file) a `workspace:` block",
        )

    def _missing_input(self, entry: dict[str, Any], base: PathKey) -> list[Diagnostic]:
        """``input_messages`` is required unless ``turns`` or a simulated ``user`` say the
        user turns; a key misspelt for one of the three is reported as unknown instead."""
        said = ("input_messages", "turns", "user")
        if any(key in entry for key in said):
            return []
        if any(closest_key(str(k), said) for k in entry if k not in sc.CASE_KEYS):
            return []
        return [
            self.src.diagnostic(
                base,
                "missing required key `input_messages`",
                hint="add `input_messages:` with at least one `- role: user` turn (or `turns:` "
                "for a live conversation, `user:` for a simulated user)",
            )
        ]

    def _unused_live_keys(
        self, raw: sc.RawEvalCase, base: PathKey, tools: tuple[Tool, ...]
    ) -> list[Diagnostic]:
        """The keys of live conversations this case cannot use. `turn_evaluators` that no
        turn would run are an error: the case would be graded by something else than what
        it says (a judge of its outcome). The others change nothing where they cannot
        apply, and are warnings."""
        out: list[Diagnostic] = []
        conversation = raw.turns is not None or raw.user is not None
        if raw.turn_evaluators is not None and not conversation:
            out.append(
                self.src.diagnostic(
                    (*base, "turn_evaluators"),
                    "`turn_evaluators` grade the answers of a live conversation, and this "
                    "case has no `turns` and no simulated `user`: they would never run (a "
                    "judge of the outcome would grade the case instead)",
                    hint="move them to the case's `evaluators`, or give the case `turns`",
                    at_key=True,
                )
            )
        elif raw.turn_evaluators and raw.turns and all(_own_grade(t) for t in raw.turns):
            out.append(
                self.src.diagnostic(
                    (*base, "turn_evaluators"),
                    "`turn_evaluators` are never used: every turn has evaluators (or an "
                    "outcome) of its own",
                    hint="leave them out, or take `evaluators` off the turns they should grade",
                    severity="warning",
                    at_key=True,
                )
            )
        effects = {
            "aggregation": "there is one score",
            "on_turn_failure": "there is no later turn to stop",
        }
        for key, effect in effects.items():
            if getattr(raw, key) is not None and not conversation:
                out.append(
                    self.src.diagnostic(
                        (*base, key),
                        f"`{key}` has no effect here: the case has no `turns` and no "
                        f"simulated `user`, so {effect}",
                        hint=f"leave `{key}` out, or give the case `turns`",
                        severity="warning",
                        at_key=True,
                    )
                )
        if raw.max_tool_rounds is not None and not tools:
            out.append(
                self.src.diagnostic(
                    (*base, "max_tool_rounds"),
                    "`max_tool_rounds` has no effect here: the case has no `tools` (and its "
                    "file none)",
                    hint="leave `max_tool_rounds` out, or give the case `tools` to call",
                    severity="warning",
                    at_key=True,
                )
            )
        return out

    def _user(
        self, raw: sc.RawEvalCase, key: PathKey, diags: list[Diagnostic]
    ) -> SimulatedUser | None:
        """The case's simulated user, its target resolved (its own, else the default)."""
        user = raw.user
        assert user is not None
        if raw.turns is not None:
            diags.append(
                self.src.diagnostic(
                    key,
                    "a case has either scripted `turns` or a simulated `user`, not both",
                    hint="keep `turns` to say each user turn yourself, or `user` to let a "
                    "model play the user",
                    at_key=True,
                )
            )
            return None
        target = text_or_none(user.target) or self.user_target
        if target is None:
            diags.append(
                self.src.diagnostic(
                    key,
                    "this simulated user has no target to play it",
                    hint="name one with `target:` under `user`, or `user_target:` at the top "
                    "of the file or in .agentv/config.yaml",
                    at_key=True,
                )
            )
            return None
        stop_when: list[EvaluatorConfig] = []
        stop_question = ""
        if isinstance(user.stop_when, str):
            stop_question = user.stop_when.strip()
        elif user.stop_when is not None:
            stop_when = self._evaluator_configs([user.stop_when], (*key, "stop_when"), diags)
        facts = user.facts
        if isinstance(facts, str):
            listed = [facts]
        elif isinstance(facts, dict):
            listed = [f"{k}: {_fact_text(v)}" for k, v in facts.items()]
        else:
            listed = [str(f) for f in facts or ()]
        return SimulatedUser(
            target=target,
            persona=user.persona.strip(),
            goal=user.goal.strip(),
            instructions=(user.instructions or "").strip(),
            facts=tuple(f.strip() for f in listed if f.strip()),
            first_message=user.first_message,
            max_turns=user.max_turns or DEFAULT_USER_TURNS,
            stop_when=tuple(stop_when),
            stop_when_judge=stop_question,
            seed=user.seed,
            temperature=user.temperature,
            role_judge=user.role_judge,
        )

    def _turn(
        self,
        raw: sc.RawTurn,
        key: PathKey,
        diags: list[Diagnostic],
        seen: dict[Path, GuidelineFile],
        default_evaluators: list[EvaluatorConfig] | None = None,
    ) -> Turn:
        """One user turn of a live conversation; guideline files it is the first to
        reference join the conversation's (``seen``) from this turn on."""
        found: dict[Path, GuidelineFile] = {}
        inputs: dict[Path, None] = {}
        message = self._message(
            sc.RawMessage(role="user", content=raw.content), key, diags, found, inputs, True
        )
        new = {path: g for path, g in found.items() if path not in seen}
        seen.update(new)
        expected = [
            self._message(m, (*key, "expected_messages", j), diags, None, None, False)
            for j, m in enumerate(raw.expected_messages or [])
        ]
        evaluators: list[EvaluatorConfig] = []
        if raw.evaluators is not None:
            evaluators = self._evaluator_configs(raw.evaluators, (*key, "evaluators"), diags)
        elif not (raw.outcome or "").strip():  # the case's `turn_evaluators`, if any
            evaluators = list(default_evaluators or ())
        return Turn(
            message=message,
            outcome=raw.outcome or "",
            expected_messages=tuple(expected),
            reference_answer=_reference_answer(expected),
            evaluators=tuple(evaluators),
            guideline_files=tuple(new.values()),
            input_files=tuple(inputs),
        )

    def set_file_tools(self, value: Any) -> None:
        """Read the file-level ``tools:`` list: the tools of every case without its own."""
        self.tools_seen = True
        self.default_tools, self.tools_diags = (), []
        if value is None:
            return
        wrapped = {"tools": value}  # so that its errors are located under `tools`
        try:
            raw = sc.RawFileTools.model_validate(wrapped)
        except ValidationError as exc:
            self.tools_diags = translate(self.src, exc, wrapped, ())
            return
        self.default_tools = tuple(self._tools(raw.tools, ("tools",), self.tools_diags))

    def _tools(self, raws: list[sc.RawTool], key: PathKey, diags: list[Diagnostic]) -> list[Tool]:
        """The tools listed at ``key``, each with a mock that can answer, checked now."""
        out: list[Tool] = []
        names: set[str] = set()
        for k, raw in enumerate(raws):
            at: PathKey = (*key, k)
            if raw.name in names:
                diags.append(
                    self.src.diagnostic(
                        (*at, "name"),
                        f"tool {raw.name!r} is listed twice",
                        hint="give each tool its own name",
                    )
                )
            names.add(raw.name)
            given = [m for m in ("result", "results", "script") if m in raw.model_fields_set]
            if not given:
                diags.append(
                    self.src.diagnostic(
                        at,
                        f"tool {raw.name!r} has no mock to answer its calls",
                        hint="give it a `result`, canned `results` by arguments, or a `script`",
                    )
                )
            elif "script" in given and len(given) > 1:
                diags.append(
                    self.src.diagnostic(
                        (*at, "script"),
                        f"tool {raw.name!r} has a `script` and a {given[0]!r}",
                        hint="a script answers every call: leave out `result` and `results`",
                    )
                )
            parameters = raw.parameters if raw.parameters is not None else EMPTY_PARAMETERS
            found = parameters_problem(parameters)
            if found is not None:
                problem, hint = found
                diags.append(
                    self.src.diagnostic(
                        (*at, "parameters"), f"tool {raw.name!r}: `parameters` {problem}", hint=hint
                    )
                )
            cwd = None
            if raw.script is not None:
                cwd = self._script_folder(raw.cwd, (*at, "cwd"), diags, "tool script folder")
                if cwd is not None:
                    problem_ = script_problem(raw.script, cwd, "tool")
                    if problem_ is not None:
                        diags.append(
                            self.src.diagnostic(
                                (*at, "script"), problem_.message, hint=problem_.hint
                            )
                        )
            out.append(
                Tool(
                    name=raw.name,
                    description=raw.description,
                    parameters=parameters,
                    result=raw.result,
                    has_result="result" in raw.model_fields_set,
                    results=tuple((a.arguments, a.result) for a in raw.results or ()),
                    script=raw.script,
                    cwd=cwd,
                    timeout_seconds=raw.timeout_seconds,
                    inherit_env=None if raw.inherit_env is None else tuple(raw.inherit_env),
                )
            )
        return out

    def _check_raw_files(
        self, entry: dict[str, Any], base: PathKey, diags: list[Diagnostic]
    ) -> None:
        for field_name in ("input_messages", "expected_messages"):
            for i, msg in _enumerate_list(entry.get(field_name)):
                content = msg.get("content") if isinstance(msg, dict) else None
                for j, block in _enumerate_list(content):
                    value = block.get("value") if isinstance(block, dict) else None
                    if block_is_file(block) and isinstance(value, str) and value:
                        key = (*base, field_name, i, "content", j, "value")
                        self._file(value, key, diags, classify=False)

    def _marker_warnings(self, entry: dict[str, Any], base: PathKey) -> list[Diagnostic]:
        """Warn about ``@[Role]:`` written inside content: it can pass for a real turn."""
        out: list[Diagnostic] = []
        for field_name in ("input_messages", "expected_messages"):
            for i, msg in _enumerate_list(entry.get(field_name)):
                if not isinstance(msg, dict):
                    continue
                content = msg.get("content")
                # (where, text): a location is only spelled out for a text with a marker
                texts: list[tuple[tuple[Any, ...], Any]] = [((), content)]
                for j, block in _enumerate_list(content):
                    if isinstance(block, dict) and block.get("type") == "text":
                        texts.append(((j, "value"), block.get("value")))
                    else:
                        texts.append(((j,), block))
                for where, text in texts:
                    # Every marker starts with "@[": the substring test spares most texts the regex.
                    if not (isinstance(text, str) and "@[" in text):
                        continue
                    found = ROLE_MARKER_RE.search(text)
                    if found:
                        out.append(
                            self.src.diagnostic(
                                (*base, field_name, i, "content", *where),
                                f"content contains the role marker {found.group(0)!r}",
                                hint="agentv writes role markers itself; one inside content can "
                                "pass for a real turn (prompt injection). Rephrase it unless the "
                                "case tests exactly that",
                                severity="warning",
                            )
                        )
        return out

    def _message(
        self,
        msg: sc.RawMessage,
        key: PathKey,
        diags: list[Diagnostic],
        guidelines: dict[Path, GuidelineFile] | None,
        input_files: dict[Path, None] | None,
        classify: bool,
    ) -> Message:
        segments: list[Segment] = []
        if isinstance(msg.content, str):
            segments.append(TextSegment(msg.content))
        else:
            for j, block in enumerate(msg.content):
                if isinstance(block, sc.TextBlock):
                    segments.append(TextSegment(block.value))
                    continue
                seg = self._file(block.value, (*key, "content", j, "value"), diags, classify)
                if seg is None:
                    continue
                segments.append(seg)
                if isinstance(seg, GuidelineRef):
                    if guidelines is not None and seg.resolved not in guidelines:
                        guidelines[seg.resolved] = GuidelineFile(
                            seg.path, seg.resolved, self.ctx.store.text(seg.resolved)
                        )
                elif input_files is not None:
                    input_files.setdefault(seg.resolved, None)
        tool_calls: tuple[ToolCall, ...] = ()
        if msg.tool_calls:
            calls = []
            for k, call in enumerate(msg.tool_calls):
                args = call.arguments
                if isinstance(args, str):
                    try:
                        args = json.loads(args) if args.strip() else {}
                    except json.JSONDecodeError as exc:
                        diags.append(
                            self.src.diagnostic(
                                (*key, "tool_calls", k, "arguments"),
                                f"tool call arguments are not valid JSON: {exc.msg} "
                                f"at character {exc.pos + 1}",
                                hint="write the arguments as a YAML mapping instead of a string",
                            )
                        )
                        args = {}
                    except RecursionError:
                        diags.append(
                            self.src.diagnostic(
                                (*key, "tool_calls", k, "arguments"),
                                "tool call arguments are nested too deeply",
                                hint="write the arguments as a YAML mapping instead of a string",
                            )
                        )
                        args = {}
                    if not isinstance(args, dict):
                        diags.append(
                            self.src.diagnostic(
                                (*key, "tool_calls", k, "arguments"),
                                "tool call arguments must be a JSON object",
                            )
                        )
                        args = {}
                calls.append(ToolCall(call.id, call.name, args))
            tool_calls = tuple(calls)
            if msg.role != "assistant":
                diags.append(
                    self.src.diagnostic(
                        (*key, "tool_calls"),
                        f"`tool_calls` is only allowed on assistant messages, not on {msg.role!r}",
                        hint="move the tool calls to the assistant turn that made them",
                    )
                )
        if msg.tool_call_id is not None and msg.role != "tool":
            diags.append(
                self.src.diagnostic(
                    (*key, "tool_call_id"),
                    "`tool_call_id` is only allowed on tool messages",
                    hint="set it on the `role: tool` message that answers the call",
                )
            )
        return Message(
            role=msg.role,
            segments=tuple(segments),
            tool_calls=tool_calls,
            tool_call_id=msg.tool_call_id,
            name=msg.name,
        )

    def _file(
        self, raw: str, key: PathKey, diags: list[Diagnostic], classify: bool
    ) -> Segment | None:
        found = self._read_reference(raw, key, diags, "referenced file")
        if found is None:
            return None
        path, text = found
        if classify and self._is_guideline(path):
            return GuidelineRef(path=raw, resolved=path)
        return FileSegment(path=raw, resolved=path, text=text)

    def _read_reference(
        self, raw: str, key: PathKey, diags: list[Diagnostic], what: str, *, must_exist: bool = True
    ) -> tuple[Path, str] | None:
        """Resolve, check and read a file reference; problems become diagnostics."""
        res = self.ctx.store.resolve(raw, self.roots)
        if res.resolved is None:
            if must_exist:
                tried = "\n".join(f"      {p}" for p in res.tried)
                diags.append(
                    self.src.diagnostic(
                        key,
                        f"{what} not found: {raw}",
                        hint=f"create the file or fix the path; looked in:\n{tried}",
                    )
                )
            return None
        path = res.resolved
        checked = self._checked.get(path)
        if checked is None:  # one check per file per eval file, however many cases use it
            inside = self.ctx.allow_outside_root or is_within(path, self.repo_root)
            checked = self._checked[path] = (inside, path.is_file())
        inside, is_file = checked
        if not inside:
            diags.append(
                self.src.diagnostic(
                    key,
                    f"{what} {raw} resolves outside the repository root ({path})",
                    hint=f"keep referenced files inside {self.repo_root}, or pass "
                    "--allow-outside-root if you trust this eval file",
                )
            )
            return None
        if not is_file:
            diags.append(
                self.src.diagnostic(
                    key, f"{what} {raw} is a folder, not a file", hint="point at a file"
                )
            )
            return None
        try:
            text = self.ctx.store.text(path)
        except UnicodeDecodeError as exc:
            diags.append(
                self.src.diagnostic(
                    key,
                    f"{what} {raw} is {describe_decode_error(exc)}",
                    hint="reference text files only, saved as UTF-8",
                )
            )
            return None
        except OSError as exc:
            diags.append(
                self.src.diagnostic(
                    key,
                    f"cannot read {what} {raw}: {exc.strerror or exc}",
                    hint="check the file's permissions",
                )
            )
            return None
        if len(text) > LARGE_ATTACHMENT and path not in self._warned_large:
            self._warned_large.add(path)  # said once per file, however many cases use it
            diags.append(
                self.src.diagnostic(
                    key,
                    f"{what} {raw} is {len(text) / 2**20:.0f} MiB of text: it is sent whole "
                    "with every request of the cases that attach it",
                    hint="attach an excerpt if the whole file is not needed (it costs "
                    "tokens, time and memory); results store it once per record",
                    severity="warning",
                )
            )
        return path, text

    def _is_guideline(self, path: Path) -> bool:
        hit = self._classified.get(path)
        if hit is None:
            try:
                rel = path.relative_to(self.repo_root).as_posix()
            except ValueError:
                rel = "../" + path.as_posix()  # outside the root: never a guideline
            hit = is_guideline(rel, self.patterns)
            self._classified[path] = hit
        return hit

    def _check_tool_pairing(self, raw: sc.RawEvalCase, base: PathKey) -> list[Diagnostic]:
        diags: list[Diagnostic] = []
        call_ids: set[str] = set()
        for i, msg in enumerate(raw.input_messages or []):
            if msg.tool_calls:
                call_ids.update(c.id for c in msg.tool_calls)
            if msg.role == "tool" and (
                msg.tool_call_id is None or msg.tool_call_id not in call_ids
            ):
                why = (
                    "has no `tool_call_id`"
                    if msg.tool_call_id is None
                    else f"answers call {msg.tool_call_id!r}, which no earlier assistant message made"
                )
                diags.append(
                    self.src.diagnostic(
                        (*base, "input_messages", i),
                        f"tool message {why}; it will be sent to LM APIs as a user turn starting with @[Tool]:",
                        hint="add `tool_calls` with a matching `id` to the assistant message before it "
                        "and set `tool_call_id` here",
                        severity="warning",
                    )
                )
        return diags

    def _evaluators(
        self, raw: sc.RawEvalCase, base: PathKey, diags: list[Diagnostic]
    ) -> list[EvaluatorConfig]:
        if raw.execution is not None and raw.execution.evaluators is not None:
            specs = raw.execution.evaluators
            key: PathKey = (*base, "execution", "evaluators")
        elif raw.evaluators is not None:
            specs, key = raw.evaluators, (*base, "evaluators")
        else:  # none of its own: the file's `execution.evaluators`, checked once
            return list(self.default_evaluators or ())
        return self._evaluator_configs(specs, key, diags)

    def _evaluator_configs(
        self, specs: list[EvaluatorSpec], key: PathKey, diags: list[Diagnostic]
    ) -> list[EvaluatorConfig]:
        """The evaluators listed at ``key``: each resolves the files its settings name and
        checks its settings as it will use them when grading (``EvaluatorSpec.resolve``,
        ``check``); what they find is reported at their keys."""
        out: list[EvaluatorConfig] = []
        seen: set[str] = set()
        for k, spec in enumerate(specs):
            name = spec.name or spec.type
            if name in seen:
                name = f"{name}_{k + 1}"
            seen.add(name)
            at = _EvaluatorLoading(self, (*key, k), diags)
            config = spec.resolve(name, at)
            for problem in spec.check(config, at):
                diags.append(
                    self.src.diagnostic(
                        (*key, k, *problem.path), problem.message, hint=problem.hint
                    )
                )
            out.append(config)
        if specs and not any(spec.weight > 0 for spec in specs):
            diags.append(
                self.src.diagnostic(
                    (*key, 0, "weight"),
                    "every evaluator here has `weight: 0`: the score would be a mean of nothing",
                    hint="give at least one evaluator a weight above 0 (the default is 1)",
                )
            )
        return out

    def _script_folder(
        self, raw: str | None, key: PathKey, diags: list[Diagnostic], what: str
    ) -> Path | None:
        """Where a script runs (a code evaluator's, a tool's): ``raw`` relative to the eval
        file's folder, else that folder; None (said in ``diags``) when it cannot be used."""
        if not raw:
            return self.src.path.parent
        res = self.ctx.store.resolve(raw, [self.src.path.parent])
        if res.resolved is None or not res.resolved.is_dir():
            diags.append(
                self.src.diagnostic(
                    key,
                    f"{what} not found: {raw}",
                    hint=f"`{_key_name(key)}` is relative to the eval file's folder "
                    f"({self.src.path.parent})",
                )
            )
            return None
        if not (self.ctx.allow_outside_root or is_within(res.resolved, self.repo_root)):
            # as every other path: the script would run there
            diags.append(
                self.src.diagnostic(
                    key,
                    f"{what} {raw} resolves outside the repository root ({res.resolved})",
                    hint=f"keep `{_key_name(key)}` inside {self.repo_root}, or pass "
                    "--allow-outside-root if you trust this eval file",
                )
            )
            return None
        return res.resolved


class _EvaluatorLoading:
    """What the loader offers one evaluator entry while it is read (the evaluators'
    ``Loading``): its folder and file references resolved as every reference of the file
    is, and what is wrong with them reported at the entry's keys."""

    __slots__ = ("_builder", "_diags", "_key")

    def __init__(self, builder: CaseBuilder, key: PathKey, diags: list[Diagnostic]) -> None:
        self._builder = builder
        self._key = key
        self._diags = diags

    @property
    def eval_dir(self) -> Path:
        return self._builder.src.path.parent

    @property
    def root(self) -> Path | None:
        builder = self._builder
        return None if builder.ctx.allow_outside_root else builder.repo_root

    def memo(self, key: Hashable, make: Callable[[], T]) -> T:
        memo = self._builder._memo
        if key not in memo:
            memo[key] = make()
        return memo[key]  # type: ignore[no-any-return]

    def folder(self, raw: str | None, key: str, what: str) -> Path | None:
        return self._builder._script_folder(raw, (*self._key, key), self._diags, what)

    def reference(
        self, raw: str, key: str, what: str, *, must_exist: bool
    ) -> tuple[Path, str] | None:
        return self._builder._read_reference(
            raw, (*self._key, key), self._diags, what, must_exist=must_exist
        )


def _key_name(key: PathKey) -> str:
    """The last named key of ``key`` (``repo`` of ``workspace.repos[0].repo``)."""
    return next((part for part in reversed(key) if isinstance(part, str)), "cwd")


def _reference_answer(expected: list[Message]) -> str:
    """The first expected message's content: a string as written, blocks joined by a space."""
    if not expected:
        return ""
    first = expected[0]
    if len(first.segments) == 1 and isinstance(first.segments[0], TextSegment):
        return first.segments[0].value
    parts = []
    for seg in first.segments:
        if isinstance(seg, TextSegment):
            parts.append(seg.value)
        elif isinstance(seg, FileSegment):
            parts.append(seg.text)
    return " ".join(parts)


def _fact_text(value: Any) -> str:
    """A fact's value as the simulated user is told it."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
