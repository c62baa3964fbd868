"""The eval file format (``$schema: agentv-eval-v2``) exactly as users write it.

These pydantic models forbid unknown keys so that a typo is reported (with a "did you
mean") instead of being silently ignored. The loader turns them into ``EvalCase`` objects.
An evaluator's settings are its own model, kept with its grading in ``agentv.evaluators``
(``registry.KINDS``).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from agentv.evaluators.registry import AnyEvaluatorSpec

EVAL_SCHEMA = "agentv-eval-v2"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TextBlock(_Strict):
    """``{type: text, value: ...}``"""

    type: Literal["text"]
    value: str


class FileBlock(_Strict):
    """``{type: file, value: PATH}``: PATH relative to the eval file's folder or its parents."""

    type: Literal["file"]
    value: Annotated[str, Field(min_length=1)]


ContentBlock = Annotated[TextBlock | FileBlock, Field(discriminator="type")]


class RawToolCall(_Strict):
    """A tool call on an assistant message. ``arguments`` may be a mapping or a JSON string."""

    id: Annotated[str, Field(min_length=1)]
    name: Annotated[str, Field(min_length=1)]
    arguments: dict[str, Any] | str = Field(default_factory=dict)


class RawMessage(_Strict):
    """One conversation turn."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str | list[ContentBlock] = ""
    tool_calls: list[RawToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None


class RawToolAnswer(_Strict):
    """One canned answer of a mock tool: given when a call's arguments equal ``arguments``."""

    arguments: dict[str, Any]
    result: Any


class RawTool(_Strict):
    """A tool the model may call during a case, with its mock: a fixed ``result``, canned
    ``results`` by arguments (``result``, when given too, answers any other call), or a
    ``script`` that reads the call's arguments as JSON on stdin and prints the result."""

    name: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")]
    description: str = ""
    parameters: dict[str, Any] | None = None  # a JSON Schema of the arguments (an object)
    result: Any = None
    results: list[RawToolAnswer] | None = None
    script: Annotated[str, Field(min_length=1)] | None = None
    cwd: str | None = None
    timeout_seconds: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = None
    #: what a ``script`` inherits of the run's environment, as a code evaluator's
    #: ``inherit_env`` (None: everything but the vendors' key variables)
    inherit_env: list[Annotated[str, Field(min_length=1)]] | None = None


class RawTurn(_Strict):
    """One user turn of a live conversation: what the user says (text and files, as a
    message's ``content``), and how the target's answer to it is graded."""

    content: str | list[ContentBlock]
    outcome: str | None = None
    expected_messages: list[RawMessage] | None = None
    evaluators: list[AnyEvaluatorSpec] | None = None


class RawUser(_Strict):
    """A simulated user (docs/eval-files.md, "Simulated users"): who plays the user, toward
    what goal, and when the conversation ends."""

    target: Annotated[str, Field(min_length=1)] | None = None
    persona: Annotated[str, Field(min_length=1)]
    goal: Annotated[str, Field(min_length=1)]
    instructions: str | None = None
    facts: str | list[str] | dict[str, Any] | None = None
    first_message: Annotated[str, Field(min_length=1)] | None = None
    max_turns: Annotated[int, Field(ge=1, le=100)] | None = None
    stop_when: Annotated[str, Field(min_length=1)] | AnyEvaluatorSpec | None = None
    seed: int | None = None
    temperature: Annotated[float, Field(ge=0, le=2)] | None = None
    role_judge: bool = False


class RawRepo(_Strict):
    """A git repository checked out into a workspace: ``repo`` (a local path or a URL) at
    ``commit`` (``base_commit``, as SWE-bench-style data names it), at ``path``."""

    path: Annotated[str, Field(min_length=1)] = "."
    repo: Annotated[str, Field(min_length=1)]
    commit: Annotated[str, Field(min_length=1)] | None = None
    base_commit: Annotated[str, Field(min_length=1)] | None = None
    sparse: list[Annotated[str, Field(min_length=1)]] | None = None


class RawHook(_Strict):
    """A hook with a time limit of its own."""

    command: Annotated[str, Field(min_length=1)]
    timeout_seconds: Annotated[float, Field(gt=0)] | None = None


HookValue = Annotated[str, Field(min_length=1)] | RawHook


class RawHooks(_Strict):
    """The commands run around a workspace: once before and after the run's cases
    (``before_all``, ``after_all``), and around each run of a case."""

    before_all: HookValue | None = None
    before_each: HookValue | None = None
    after_each: HookValue | None = None
    after_all: HookValue | None = None


class RawWorkspace(_Strict):
    """A case's workspace (docs/eval-files.md, "Workspaces"); at file level, the defaults a
    case's own block is merged over, key by key."""

    mode: Literal["temp", "pooled", "static"] | None = None
    template: Annotated[str, Field(min_length=1)] | None = None
    repos: list[RawRepo] | None = None
    path: Annotated[str, Field(min_length=1)] | None = None
    keep: Literal["never", "on_failure", "always"] | None = None
    hooks: RawHooks | None = None
    isolation: Literal["none", "bwrap", "docker"] | None = None
    network: bool | None = None
    image: Annotated[str, Field(min_length=1)] | None = None
    writable: list[Annotated[str, Field(min_length=1)]] | None = None
    max_diff_bytes: Annotated[int, Field(ge=0)] | None = None
    disk_limit_mb: Annotated[float, Field(gt=0)] | None = None


class RawFileWorkspace(_Strict):
    """The file-level ``workspace:`` block alone, so that its errors are located under it."""

    workspace: RawWorkspace


class RawExecution(_Strict):
    """Execution settings of a case, or of the whole file (the defaults of its cases)."""

    target: str | None = None
    evaluators: list[AnyEvaluatorSpec] | None = None


class RawEvalCase(_Strict):
    """One eval case."""

    id: Annotated[str, Field(min_length=1)]
    outcome: Annotated[str, Field(min_length=1)]
    # required unless the user turns come from `turns` or a simulated `user` (then the
    # opening context only): ``build`` says when it is missing
    input_messages: list[RawMessage] | None = None
    expected_messages: list[RawMessage] | None = None
    conversation_id: str | None = None
    evaluator: Literal["llm_judge", "code"] | None = None
    execution: RawExecution | None = None
    evaluators: list[AnyEvaluatorSpec] | None = None
    repeat: Annotated[int, Field(ge=1, le=1000)] | None = None  # runs of this case
    note: str | None = None
    description: str | None = None
    # live conversations (docs/eval-files.md, "Live conversations")
    turns: Annotated[list[RawTurn], Field(min_length=1)] | None = None
    aggregation: Literal["mean", "min", "max"] | None = None
    on_turn_failure: Literal["continue", "stop"] | None = None
    tools: list[RawTool] | None = None
    max_tool_rounds: Annotated[int, Field(ge=1, le=100)] | None = None
    turn_evaluators: list[AnyEvaluatorSpec] | None = None
    # simulated users (docs/eval-files.md, "Simulated users")
    user: RawUser | None = None
    # the folder an agent works in (docs/eval-files.md, "Workspaces")
    workspace: RawWorkspace | None = None

    @field_validator("id", "outcome")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        return value


class RawEvalFileHeader(_Strict):
    """Top-level keys other than the cases (checked separately, case by case)."""

    schema_: Literal["agentv-eval-v2"] = Field(alias="$schema")
    description: str | None = None
    target: str | None = None
    dataset: str | None = None
    evaluator: Literal["llm_judge", "code"] | None = None
    repeat: Annotated[int, Field(ge=1, le=1000)] | None = None  # runs of each case
    user_target: Annotated[str, Field(min_length=1)] | None = None  # simulated users' target
    # Tools every case of the file may call (a case's own `tools` come first), checked on
    # their own (`RawFileTools`), as the cases are.
    tools: Any = None
    # The original AgentV's file-level defaults: `target` and `evaluators` of every case
    # that has none of its own. Checked on its own (`RawFileExecution`), as the cases are.
    execution: Any = None
    # The workspace of every case (a case's own block is merged over it, key by key),
    # checked on its own (`RawFileWorkspace`), as the cases are.
    workspace: Any = None
    # Variables every case runs over (`evalfile.variables`), and cases from data: a source
    # of rows (`RawRows`) and the case each row fills (`evalfile.rowcases`).
    vars: Any = None
    rows: Any = None
    template: Any = None
    evalcases: list[Any] | None = None


class RawSample(_Strict):
    """``rows.sample``: ``n`` rows chosen at random, the same ones for the same ``seed``."""

    n: Annotated[int, Field(ge=1)]
    seed: int = 0


class RawRows(_Strict):
    """``rows:``: where a file's cases come from (docs/eval-files.md, "Cases from data")."""

    path: Annotated[str, Field(min_length=1)] | None = None
    format: Literal["csv", "tsv", "jsonl", "json", "parquet"] | None = None
    hf: Annotated[str, Field(min_length=1)] | None = None
    config: str | None = None
    split: str | None = None
    revision: str | None = None
    id: Annotated[str, Field(min_length=1)] | None = None
    limit: Annotated[int, Field(ge=1)] | None = None
    sample: RawSample | None = None
    filter: Annotated[str, Field(min_length=1)] | None = None


class RawFileRows(_Strict):
    """The ``rows:`` mapping alone, so that its errors are located under it."""

    rows: RawRows


class RawFileTools(_Strict):
    """The file-level ``tools:`` list alone, so that its errors are located under it."""

    tools: list[RawTool]


class RawFileExecution(_Strict):
    """The file-level ``execution:`` block alone, so that its errors are located under it."""

    execution: RawExecution


CASE_KEYS = tuple((f.alias or name) for name, f in RawEvalCase.model_fields.items())
HEADER_KEYS = tuple((f.alias or name) for name, f in RawEvalFileHeader.model_fields.items())
