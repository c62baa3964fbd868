"""Each evaluator's settings as users write them in an eval file (``evaluators:``).

They belong to the evaluators, as each provider's ``Settings`` belongs to its provider;
the eval file format (``evalfile.schema``) takes them from here. Unknown keys are refused,
so a typo is reported with a "did you mean" instead of being ignored.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class _EvaluatorBase(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = None


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
    timeout_seconds: float | None = None
    #: what the script inherits of the run's environment: variable names or ``*`` patterns
    #: (None: everything but the vendors' key variables; ``agentv.env.child_environment``)
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


EvaluatorSpec = Annotated[
    LlmJudgeSpec | CodeSpec | ContainsSpec | EqualsSpec | RegexSpec | IsJsonSpec,
    Field(discriminator="type"),
]
EVALUATOR_TYPES = ("llm_judge", "code", "contains", "icontains", "equals", "regex", "is_json")
