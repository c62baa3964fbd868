"""``EvalCase``: one loaded, resolved test case, ready for prompt building; a live
conversation's ``Turn``s and the ``Tool``s a model may call come with it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agentv.messages import GuidelineFile, Message

if TYPE_CHECKING:
    from agentv.errors import Diagnostic
    from agentv.evaluators.specs import EvaluatorSpec


@dataclass(frozen=True, slots=True)
class EvaluatorConfig:
    """An evaluator of a case with its file references resolved."""

    name: str
    spec: EvaluatorSpec
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

    @property
    def live(self) -> bool:
        """A conversation the target takes part in (turns), or a case whose model may call
        tools: it runs turn by turn (``agentv.run.conversation``)."""
        return bool(self.turns or self.tools)

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

    @property
    def reason(self) -> str:
        """The errors in one line each, joined by ``; ``."""
        return "; ".join(d.message for d in self.diagnostics)
