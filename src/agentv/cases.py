"""``EvalCase``: one loaded, resolved test case, ready for prompt building."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

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
