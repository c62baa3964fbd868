"""``EvalCase``: one loaded, resolved test case, ready for prompt building; a live
conversation's ``Turn``s, the ``Tool``s a model may call and the ``Workspace`` an agent
works in come with it."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from agentv.messages import GuidelineFile, Message

if TYPE_CHECKING:
    from agentv.errors import Diagnostic


class EvaluatorSettings(Protocol):
    """An evaluator's settings as an eval file writes them: what a case and a run read of
    any kind (each kind's own model, with its grading, is in ``agentv.evaluators``)."""

    @property
    def type(self) -> str: ...
    @property
    def name(self) -> str | None: ...
    @property
    def weight(self) -> float: ...
    @property
    def required(self) -> bool: ...
    @property
    def threshold(self) -> float | None: ...
    def model_dump(self, *, mode: str = ...) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class EvaluatorConfig:
    """An evaluator of a case with its file references resolved."""

    name: str
    spec: EvaluatorSettings
    cwd: Path | None = None  # code evaluators: where the script runs
    prompt_text: str | None = None  # llm_judge: custom prompt (from a file or inline)
    prompt_path: Path | None = None

    @property
    def type(self) -> str:
        """The evaluator kind (``llm_judge``, ``code``, ``contains``...)."""
        return self.spec.type


@dataclass(frozen=True, slots=True)
class Tool:
    """A tool a model may call during a case, and the mock that answers it: ``result``
    (any call; with ``results``, the calls no canned answer matches), ``results`` (canned
    answers by arguments), or ``script`` (a shell command run in ``cwd``, the call's
    arguments as JSON on stdin, its stdout the result)."""

    name: str
    description: str
    parameters: dict[str, Any]  # JSON Schema of the arguments
    result: Any = None
    has_result: bool = False  # `result` was given (it may be null)
    results: tuple[tuple[dict[str, Any], Any], ...] = ()
    script: str | None = None
    cwd: Path | None = None
    timeout_seconds: float | None = None
    #: what the script inherits (``agentv.system.env.child_environment``)
    inherit_env: tuple[str, ...] | None = None

    def spec(self) -> dict[str, Any]:
        """What an API is told of the tool: ``{name, description, parameters}``."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


@dataclass(frozen=True, slots=True)
class Turn:
    """One user turn of a live conversation: the user's message, and how the target's
    answer to it is graded (its ``evaluators``, else a judge of its ``outcome``, else not
    at all)."""

    message: Message  # role "user"
    outcome: str = ""
    expected_messages: tuple[Message, ...] = ()
    reference_answer: str = ""
    evaluators: tuple[EvaluatorConfig, ...] = ()
    #: guideline files first referenced in this turn (they join the system message from it)
    guideline_files: tuple[GuidelineFile, ...] = ()
    input_files: tuple[Path, ...] = ()

    @property
    def graded(self) -> bool:
        """Whether the answer to this turn gets a grade of its own."""
        return bool(self.evaluators or self.outcome.strip())


Aggregation = Literal["mean", "min", "max"]


@dataclass(frozen=True, slots=True)
class SimulatedUser:
    """A simulated user: a model that plays the user toward a goal, turn by turn
    (docs/eval-files.md, "Simulated users"). ``target`` names the target that plays it."""

    target: str
    persona: str
    goal: str
    instructions: str = ""
    facts: tuple[str, ...] = ()  # what the user knows, one fact per entry
    first_message: str | None = None  # the user's opening message; None: the simulator opens
    max_turns: int = 10  # the most user turns (the opening included)
    #: a check of each answer that ends the conversation when it passes: evaluators, or
    #: (``stop_when_judge``) a question a judge answers about the answer
    stop_when: tuple[EvaluatorConfig, ...] = ()
    stop_when_judge: str = ""
    seed: int | None = None  # sent where the simulator's API takes one
    temperature: float | None = None  # the simulator's; None: its target's own
    role_judge: bool = False  # also ask the case's judge whether each message stays in role

    def spec(self) -> dict[str, Any]:
        """Everything that decides what the simulator is asked (for ``--resume``)."""
        return {
            "target": self.target,
            "persona": self.persona,
            "goal": self.goal,
            "instructions": self.instructions,
            "facts": list(self.facts),
            "first_message": self.first_message,
            "max_turns": self.max_turns,
            "stop_when": [c.spec.model_dump(mode="json") for c in self.stop_when],
            "stop_when_judge": self.stop_when_judge,
            "seed": self.seed,
            "temperature": self.temperature,
            "role_judge": self.role_judge,
        }


#: the hooks a workspace may have, in the order they run
HOOK_NAMES = ("before_all", "before_each", "after_each", "after_all")
WorkspaceMode = Literal["temp", "pooled", "static"]
KeepWhen = Literal["never", "on_failure", "always"]
IsolationKind = Literal["none", "bwrap", "docker"]


@dataclass(frozen=True, slots=True)
class Repo:
    """A git repository checked out into a workspace: ``repo`` (a local path, made
    absolute, or a URL) at ``commit`` (a branch, a tag or a SHA), at ``path`` inside the
    workspace (``.``: the workspace itself), only ``sparse`` paths when given."""

    path: str
    repo: str
    commit: str = "HEAD"
    sparse: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Hook:
    """A shell command run at one point of a workspace's life (``HOOK_NAMES``)."""

    command: str
    timeout_seconds: float | None = None


@dataclass(frozen=True, slots=True)
class Isolation:
    """Where the agent and the workspace's graders run: on the machine (``none``), under
    bubblewrap or in a Docker container (``image``); ``network`` lets them connect out,
    ``writable`` names folders besides the workspace they may write."""

    kind: IsolationKind = "none"
    network: bool = False
    image: str | None = None
    writable: tuple[Path, ...] = ()


@dataclass(frozen=True, slots=True)
class Workspace:
    """The folder an agent works in for one run of a case (docs/eval-files.md,
    "Workspaces"): made from a ``template`` folder and ``repos`` pinned to commits, fresh
    for each run (``temp``), reused and reset (``pooled``), or an existing folder
    (``static``: ``path``); with its hooks, its sandbox and what the record keeps of it."""

    mode: WorkspaceMode = "temp"
    template: Path | None = None
    repos: tuple[Repo, ...] = ()
    path: Path | None = None  # static: the folder itself
    keep: KeepWhen = "never"  # temp: keep the folder after the run (its path is recorded)
    hooks: dict[str, Hook] = field(default_factory=dict)
    isolation: Isolation = Isolation()
    #: the most of the workspace's diff a record keeps (bytes)
    max_diff_bytes: int = 262_144
    #: the most disk the run's workspaces may take together (bytes; None: no limit)
    disk_limit: int | None = None
    eval_file: Path | None = None  # where it is written (hooks before_all/after_all run there)

    def spec(self) -> dict[str, Any]:
        """Everything that decides what the agent starts from and runs in (``digest``)."""
        return {
            "mode": self.mode,
            "template": str(self.template) if self.template else None,
            "repos": [
                {"path": r.path, "repo": r.repo, "commit": r.commit, "sparse": list(r.sparse)}
                for r in self.repos
            ],
            "path": str(self.path) if self.path else None,
            "hooks": {
                name: hook.command
                for name, hook in self.hooks.items()
                if name in ("before_all", "before_each")
            },
            "isolation": {
                "kind": self.isolation.kind,
                "network": self.isolation.network,
                "image": self.isolation.image,
                "writable": [str(p) for p in self.isolation.writable],
            },
        }

    def digest(self) -> str:
        """A fingerprint of ``spec``: ``--resume`` runs a case again when it changed."""
        text = json.dumps(self.spec(), sort_keys=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True, slots=True)
class RowRef:
    """The data row a case was made from (docs/eval-files.md, "Cases from data")."""

    source: str  # the data file's path, or ``hf:owner/name``
    number: int  # among its data rows, from 1
    line: int | None = None  # where the row starts in the file (text formats)

    def as_dict(self) -> dict[str, Any]:
        """As a record writes it."""
        out: dict[str, Any] = {"source": self.source, "number": self.number}
        if self.line is not None:
            out["line"] = self.line
        return out


@dataclass(frozen=True, slots=True)
class EvalCase:
    """One eval case after loading: messages with their segments, files read, evaluators."""

    id: str
    dataset: str
    eval_file: Path
    outcome: str
    input_messages: tuple[Message, ...]
    expected_messages: tuple[Message, ...] = ()
    reference_answer: str = ""
    guideline_files: tuple[GuidelineFile, ...] = ()
    input_files: tuple[Path, ...] = ()  # non-guideline attachments, absolute, de-duplicated
    evaluators: tuple[EvaluatorConfig, ...] = ()
    default_evaluator: str = "llm_judge"
    conversation_id: str | None = None
    target: str | None = None  # execution.target: run this case on that target
    line: int | None = None  # where the case starts in its file (1-based)
    repeat: int | None = None  # runs of this case (`repeat:` on the case)
    #: a live conversation: the user turns after ``input_messages`` (the opening context)
    turns: tuple[Turn, ...] = ()
    aggregation: Aggregation = "mean"  # turn scores and the conversation's into one
    stop_on_failure: bool = False  # `on_turn_failure: stop`
    tools: tuple[Tool, ...] = ()
    max_tool_rounds: int = 8  # tool calls answered per turn before the answer counts
    #: a simulated user plays the user turns instead of ``turns``
    user: SimulatedUser | None = None
    #: evaluators of every turn's answer that has none of its own (live conversations)
    turn_evaluators: tuple[EvaluatorConfig, ...] = ()
    row: RowRef | None = None  # the data row the case was made from
    #: the variables of this case's combination (``vars:``), in the order written
    vars: dict[str, Any] | None = None
    #: the folder the agent works in, made for each run (None: the target's own folder)
    workspace: Workspace | None = None

    @property
    def live(self) -> bool:
        """A conversation the target takes part in (turns, or a simulated user), or a case
        whose model may call tools: it runs turn by turn (``agentv.run.conversation``)."""
        return bool(self.turns or self.tools or self.user)

    @property
    def guideline_paths(self) -> list[Path]:
        """Absolute paths of the guideline files, in order of first reference."""
        return [g.resolved for g in self.guideline_files]


@dataclass(frozen=True, slots=True)
class InvalidCase:
    """A case that cannot run, and why: it still gets a result (``status: invalid``)."""

    eval_file: Path
    dataset: str
    index: int  # position in the file's `evalcases`
    id: str | None  # when the case has a usable id
    line: int | None
    diagnostics: tuple[Diagnostic, ...]  # the errors that make it invalid (at least one)
    #: what it was written to run on, as far as it could be read: its (or its file's)
    #: ``execution.target`` and its ``repeat``; its invalid records are keyed by them
    target: str | None = None
    repeat: int | None = None
    row: RowRef | None = None  # the data row it was made from
    vars: dict[str, Any] | None = None  # its combination of variables

    @property
    def reason(self) -> str:
        """The errors in one line each, joined by ``; ``."""
        return "; ".join(d.message for d in self.diagnostics)
