"""Every evaluator kind, in one table (``KINDS``), and what follows from it: the ``type:``
values an eval file may use, the model of each, and the discriminated union the eval file
format validates an ``evaluators:`` entry with (``agentv.evalfile.schema``).

Adding an evaluator is one module of this package: a subclass of ``EvaluatorSpec`` (its
``type``, its settings, its ``check`` and its ``evaluate``), listed here once
(docs/maintainers/evaluators.md). The order of ``KINDS`` is the order error messages list
the types in.
"""

from __future__ import annotations

import functools
import operator
import typing
from typing import Annotated

from pydantic import Field

from agentv.evaluators.base import EvaluatorSpec
from agentv.evaluators.code import CodeSpec
from agentv.evaluators.deterministic import ContainsSpec, EqualsSpec, IsJsonSpec, RegexSpec
from agentv.evaluators.limits import CostSpec, LatencySpec
from agentv.evaluators.llm_judge import LlmJudgeSpec
from agentv.evaluators.trajectory import (
    RepeatedCallsSpec,
    StepCountSpec,
    ToolCallF1Spec,
    ToolNotUsedSpec,
    ToolTrajectorySpec,
    ToolUsedSpec,
)
from agentv.evaluators.workspace import CommandSpec, DiffSpec, FileContainsSpec, FileExistsSpec

KINDS: tuple[type[EvaluatorSpec], ...] = (
    LlmJudgeSpec,
    CodeSpec,
    ContainsSpec,  # and icontains
    EqualsSpec,
    RegexSpec,
    IsJsonSpec,
    LatencySpec,
    CostSpec,
    ToolUsedSpec,
    ToolNotUsedSpec,
    ToolTrajectorySpec,
    ToolCallF1Spec,
    StepCountSpec,
    RepeatedCallsSpec,
    FileExistsSpec,
    FileContainsSpec,
    CommandSpec,
    DiffSpec,
)


def type_names(kind: type[EvaluatorSpec]) -> tuple[str, ...]:
    """The ``type:`` values of a kind: the ``Literal`` of its ``type`` field."""
    annotation = kind.model_fields["type"].annotation
    names = typing.get_args(annotation)
    if typing.get_origin(annotation) is not typing.Literal or not names:
        raise TypeError(f"{kind.__name__}.type must be a Literal of the evaluator's names")
    return names


#: ``type:`` value -> its evaluator's model
BY_TYPE: dict[str, type[EvaluatorSpec]] = {
    name: kind for kind in KINDS for name in type_names(kind)
}
#: every ``type:`` value, in the order of ``KINDS``
EVALUATOR_TYPES: tuple[str, ...] = tuple(BY_TYPE)

#: one entry of an ``evaluators:`` list: the kind its ``type`` names
AnyEvaluatorSpec = Annotated[
    functools.reduce(operator.or_, KINDS),  # type: ignore[valid-type]
    Field(discriminator="type"),
]
