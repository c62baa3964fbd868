"""Each evaluator's settings as users write them in an eval file (``evaluators:``).

They belong to the evaluators, as each provider's ``Settings`` belongs to its provider;
the eval file format (``evalfile.schema``) takes them from here. Unknown keys are refused,
so a typo is reported with a "did you mean" instead of being ignored.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


#: the largest ``weight``: far beyond any use, and small enough that a case's weighted mean
#: is always a number (a sum of huge weights would overflow to infinity, the mean to NaN)
MAX_WEIGHT = 1_000_000.0


class _EvaluatorBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = None
    #: how much this evaluator counts in the case's weighted mean (0: shown, not counted);
    #: a number as written (``"2"`` or ``true`` is refused, not read as 2 or 1)
    weight: Annotated[float, Field(ge=0, le=MAX_WEIGHT, allow_inf_nan=False, strict=True)] = 1.0
    #: a miss (a score below ``threshold``) fails the case, whatever the mean
    required: Annotated[bool, Field(strict=True)] = False
    #: the lowest score that counts as a pass of this evaluator (default: the run's)
    threshold: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False, strict=True)] | None = None


class LlmJudgeSpec(_EvaluatorBase):
    """Grades with a language model; ``prompt`` is a file path or inline text."""

    type: Literal["llm_judge"]
    prompt: str | None = None
    model: str | None = None


class CodeSpec(_EvaluatorBase):
    """Runs ``script`` as a shell command; the payload arrives on stdin as JSON."""

    type: Literal["code"]
    script: Annotated[str, Field(min_length=1)]
    cwd: str | None = None
    timeout_seconds: Annotated[float, Field(allow_inf_nan=False)] | None = None
    #: what the script inherits of the run's environment: variable names or ``*`` patterns
    #: (None: everything but the vendors' key variables; ``agentv.system.env.child_environment``)
    inherit_env: list[Annotated[str, Field(min_length=1)]] | None = None


class ContainsSpec(_EvaluatorBase):
    """Passes when the answer contains ``value`` (``icontains``: ignoring case)."""

    type: Literal["contains", "icontains"]
    value: str


class EqualsSpec(_EvaluatorBase):
    """Passes when the answer (trimmed) equals ``value`` (trimmed)."""

    type: Literal["equals"]
    value: str


class RegexSpec(_EvaluatorBase):
    """Passes when the regular expression ``value`` matches somewhere in the answer."""

    type: Literal["regex"]
    value: str
    flags: str | None = None


class IsJsonSpec(_EvaluatorBase):
    """Passes when the answer is JSON (and, with ``schema``, valid against that JSON Schema)."""

    type: Literal["is_json"]
    schema_: dict[str, Any] | str | None = Field(default=None, alias="schema")


class LatencySpec(_EvaluatorBase):
    """Passes when the target took at most ``max_ms`` milliseconds to answer (its
    ``latency_ms``; a live conversation's requests summed)."""

    type: Literal["latency"]
    max_ms: Annotated[float, Field(gt=0, allow_inf_nan=False)]


class CostSpec(_EvaluatorBase):
    """Passes when the target's answer cost at most ``max_usd`` US dollars (a live
    conversation's requests summed; reused from ``--cache`` or not: the answer's price)."""

    type: Literal["cost"]
    max_usd: Annotated[float, Field(ge=0, allow_inf_nan=False)]


# --- trajectory evaluators (docs/eval-files.md, "Trajectory evaluators") ---------------------

ToolName = Annotated[str, Field(min_length=1)]
ArgsMatch = Literal["subset", "exact"]
JsonSchema = dict[str, Any] | str


class ExpectedCall(BaseModel):
    """A call the candidate should make: its ``tool`` and, optionally, its arguments:
    ``args`` (only the keys given, nested mappings alike, with ``args_match: subset``, the
    default; all of them with ``exact``) and a JSON Schema they must satisfy
    (``args_schema``: a mapping, a JSON object as text, or a schema file)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    tool: ToolName
    args: dict[str, Any] | None = None
    args_match: ArgsMatch = "subset"
    args_schema: JsonSchema | None = None


class ToolUsedSpec(_EvaluatorBase, ExpectedCall):
    """Passes when ``tool`` was called (with matching arguments) at least ``min`` and at
    most ``max`` times."""

    type: Literal["tool_used"]
    min: Annotated[int, Field(ge=0)] = 1
    max: Annotated[int, Field(ge=0)] | None = None


class ToolNotUsedSpec(_EvaluatorBase, ExpectedCall):
    """Passes when ``tool`` was never called (with matching arguments, when given)."""

    type: Literal["tool_not_used"]


TRAJECTORY_MODES = ("exact", "in_order", "unordered", "subset", "superset", "any_order")


class ToolTrajectorySpec(_EvaluatorBase):
    """The calls made against the ``expected`` ones, by ``mode``: ``exact`` (these calls,
    in this order, nothing else), ``in_order`` (in this order, others between them allowed),
    ``unordered`` (these calls, any order, nothing else), ``superset`` (at least these, any
    order), ``subset`` (nothing but these); or, as the original AgentV, ``any_order`` with
    ``minimums`` (each tool called at least that many times)."""

    type: Literal["tool_trajectory"]
    mode: Literal["exact", "in_order", "unordered", "subset", "superset", "any_order"]
    expected: list[ToolName | ExpectedCall] | None = None
    minimums: dict[str, Annotated[int, Field(ge=1)]] | None = None


class ToolCallF1Spec(_EvaluatorBase):
    """Precision, recall or F1 (``metric``, default F1) of the calls made against the
    ``expected`` ones, each expected call matching at most one call made."""

    type: Literal["tool_call_f1"]
    expected: list[ToolName | ExpectedCall]
    metric: Literal["f1", "precision", "recall"] = "f1"


class StepCountSpec(_EvaluatorBase):
    """Passes when the number of tool calls (of ``tool`` only, when given) is between
    ``min`` and ``max``."""

    type: Literal["step_count"]
    min: Annotated[int, Field(ge=0)] | None = None
    max: Annotated[int, Field(ge=0)] | None = None
    tool: ToolName | None = None


class RepeatedCallsSpec(_EvaluatorBase):
    """Passes when no call (the same tool with the same arguments; of ``tool`` only, when
    given) was made more than ``max`` times."""

    type: Literal["repeated_calls"]
    max: Annotated[int, Field(ge=1)] = 1
    tool: ToolName | None = None


TrajectorySpec = (
    ToolUsedSpec
    | ToolNotUsedSpec
    | ToolTrajectorySpec
    | ToolCallF1Spec
    | StepCountSpec
    | RepeatedCallsSpec
)
TRAJECTORY_TYPES = (
    "tool_used",
    "tool_not_used",
    "tool_trajectory",
    "tool_call_f1",
    "step_count",
    "repeated_calls",
)

EvaluatorSpec = Annotated[
    LlmJudgeSpec
    | CodeSpec
    | ContainsSpec
    | EqualsSpec
    | RegexSpec
    | IsJsonSpec
    | LatencySpec
    | CostSpec
    | ToolUsedSpec
    | ToolNotUsedSpec
    | ToolTrajectorySpec
    | ToolCallF1Spec
    | StepCountSpec
    | RepeatedCallsSpec,
    Field(discriminator="type"),
]
EVALUATOR_TYPES = (
    "llm_judge",
    "code",
    "contains",
    "icontains",
    "equals",
    "regex",
    "is_json",
    "latency",
    "cost",
    *TRAJECTORY_TYPES,
)
