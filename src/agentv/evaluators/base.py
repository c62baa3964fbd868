"""What every evaluator shares: what an evaluator is (``EvaluatorSpec``), its input
(``EvaluationContext``), its verdict (``EvaluatorScore``) and the aggregate of a case
(``CaseGrade``).

An evaluator is one class: its settings as an eval file writes them (a pydantic model that
refuses unknown keys), the checks those settings get before anything is sent (``check``),
and its grading of one answer (``evaluate``). Each kind lives in one module of this package
and is listed once in ``registry.KINDS``; the eval file format, its error messages and the
loader's checks all follow from there (docs/architecture.md, "Grading").

Failures are data: an evaluator that cannot grade returns an ``EvaluatorScore`` with
``error`` set and score 0, so one broken evaluator never stops a run and a broken judge is
never mistaken for a bad answer.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from agentv.cases import EvaluatorConfig
from agentv.errors import Problem
from agentv.system.masking import shorten

if TYPE_CHECKING:
    from agentv.cases import EvalCase
    from agentv.evaluators.samples import SampleRule, Spread
    from agentv.prompts.builder import Prompt
    from agentv.providers.base import Provider, Usage
    from agentv.system.git import Changes
    from agentv.system.process import ProcessResult
    from agentv.trajectory import Trajectory

T = TypeVar("T")


@dataclass(slots=True)
class EvaluatorScore:
    """One evaluator's verdict on one answer."""

    name: str
    type: str
    score: float
    hits: list[str]
    misses: list[str]
    reasoning: str | None = None
    raw_request: dict[str, Any] | None = None  # what the evaluator sent (judge prompt, script)
    error: str | None = None  # set when the evaluator could not grade
    expected_aspect_count: int = 1
    usage: Usage | None = None  # llm_judge: the judge call's token counts
    latency_ms: float | None = None  # llm_judge: the judge call's duration
    cached: bool = False  # llm_judge: the verdict was reused from --cache (usage not spent)
    cost_usd: float | None = None  # llm_judge: the judge call's price (None: unknown)
    weight: float = 1.0  # how much it counts in the case's weighted mean
    required: bool = False  # a miss fails the case, whatever the mean
    threshold: float | None = None  # its own pass mark (None: the run's)
    #: a judge asked several times: each sample's verdict as recorded (score, hits,
    #: misses, reasoning, usage...), and where they fell (docs/trusting-verdicts.md)
    samples: list[dict[str, Any]] | None = None
    spread: Spread | None = None
    #: what an uncertain verdict makes of the case (None: the default, ``uncertain``)
    on_uncertain: str | None = None

    def passes(self, pass_threshold: float, score: float | None = None) -> bool:
        """Whether the score (or ``score``, one of its samples') reaches this evaluator's
        threshold (else the run's)."""
        threshold = self.threshold if self.threshold is not None else pass_threshold
        return self.error is None and (self.score if score is None else score) >= threshold

    @property
    def uncertain(self) -> bool:
        """Its samples disagreed about pass or fail (docs/trusting-verdicts.md)."""
        return self.error is None and self.spread is not None and self.spread.uncertain

    def _sampled(self, out: dict[str, Any]) -> None:
        """A sampled judge's samples, spread, votes and uncertainty, into ``out``."""
        if self.samples is not None:
            out["samples"] = self.samples
        if self.spread is None:
            return
        out.update(self.spread.to_dict())
        if self.uncertain:
            out["uncertain"] = True
            if self.on_uncertain is not None:
                out["on_uncertain"] = self.on_uncertain

    def to_dict(self, pass_threshold: float | None = None) -> dict[str, Any]:
        """The result-file form (``evaluator_results`` entries); absent values are omitted.
        An evaluator with a weight, ``required`` or a threshold of its own says so, with its
        threshold (the run's ``pass_threshold`` unless it has one) and whether it
        ``passed``."""
        out: dict[str, Any] = {
            "name": self.name,
            "type": self.type,
            "score": self.score,
            "hits": self.hits,
            "misses": self.misses,
        }
        if self.weight != 1.0:
            out["weight"] = self.weight
        if self.required:
            out["required"] = True
        if self.required or self.threshold is not None:
            threshold = self.threshold if self.threshold is not None else pass_threshold
            if threshold is not None:
                out["threshold"] = threshold
                out["passed"] = self.passes(threshold)
        if self.reasoning:
            out["reasoning"] = self.reasoning
        if self.raw_request is not None:
            out["evaluator_raw_request"] = self.raw_request
        if self.usage is not None:
            out["usage"] = self.usage.to_dict()
        if self.cost_usd is not None:
            out["cost_usd"] = round(self.cost_usd, 10)
        if self.latency_ms is not None:
            out["latency_ms"] = round(self.latency_ms, 3)
        if self.error is not None:
            out["error"] = self.error
        if self.cached:
            out["cached"] = True
        self._sampled(out)
        return out

    def call_record(self) -> dict[str, Any] | None:
        """What the record keeps of the default evaluator (a case without an evaluator
        list): its request record, with its tokens, failure and reuse beside it."""
        if self.raw_request is None and self.usage is None and self.error is None:
            return None
        out = dict(self.raw_request or {})
        if self.usage is not None:
            out["usage"] = self.usage.to_dict()
        if self.cost_usd is not None:
            out["cost_usd"] = round(self.cost_usd, 10)
        if self.error is not None:
            out["error"] = self.error
        if self.cached:
            out["cached"] = True
        self._sampled(out)
        return out


@dataclass(slots=True)
class CaseGrade:
    """The grade of one case: one evaluator's verdict, or the aggregate of a list."""

    score: float
    hits: list[str]
    misses: list[str]
    reasoning: str | None
    expected_aspect_count: int
    #: every entry, in list order, when the case has an evaluator list
    evaluator_results: list[EvaluatorScore] | None
    #: the default evaluator's request record, when the case has no evaluator list
    evaluator_raw_request: dict[str, Any] | None
    #: an ``llm_judge`` could not produce a verdict (the summary counts these)
    judge_failed: bool
    #: the default evaluator (no list) failed; with a list, failures stay on their entries
    error: str | None = None
    #: token counts of the judge calls made for this case, summed (None without any)
    usage: Usage | None = None
    #: the default evaluator's name, when the case has no evaluator list
    default_name: str = "llm_judge"
    #: the default evaluator's verdict, when the case has no evaluator list
    default: EvaluatorScore | None = None

    @property
    def scores(self) -> list[EvaluatorScore]:
        """Every evaluator's verdict: the list's, or the default evaluator's."""
        if self.evaluator_results is not None:
            return self.evaluator_results
        return [self.default] if self.default is not None else []

    def evaluator_errors(self) -> list[tuple[str, str]]:
        """``(evaluator name, reason)`` of every evaluator that could not grade."""
        if self.evaluator_results is not None:
            return [(s.name, s.error) for s in self.evaluator_results if s.error is not None]
        return [(self.default_name, self.error)] if self.error is not None else []

    def required_misses(self, pass_threshold: float) -> list[EvaluatorScore]:
        """The ``required`` evaluators that graded below their threshold (those that could
        not grade make the case an error instead)."""
        return [
            s
            for s in self.evaluator_results or ()
            if s.required and s.error is None and not s.passes(pass_threshold)
        ]


class WorkspaceView(Protocol):
    """What an evaluator sees of the workspace the agent worked in (``agentv.run.workspaces``
    makes it): the folder, what changed in it, and a way to run a command there, in its
    sandbox."""

    @property
    def path(self) -> Path: ...

    @property
    def changes(self) -> Changes | None:
        """What the agent changed since the start (None: unknown, ``diff_error`` says why)."""
        ...

    @property
    def diff_error(self) -> str | None: ...

    async def run(
        self, command: str, *, cwd: Path | None, timeout: float | None, env: Mapping[str, str]
    ) -> ProcessResult:
        """Run a shell command in the workspace, as the agent ran (its sandbox)."""
        ...


class EvaluationContext:
    """Everything an evaluator may look at for one case.

    ``case`` may be given as a function that makes it: a live turn grades against its
    own view of the case (the turn's outcome, evaluators and the history it was asked
    in), which most evaluators never read; it is then made on first use only
    (docs/architecture.md, "Running")."""

    __slots__ = (
        "_case",
        "attempt",
        "candidate",
        "cost_usd",
        "judge",
        "judge_samples",
        "latency_ms",
        "on_uncertain",
        "pass_threshold",
        "prompt",
        "repeat",
        "target_name",
        "timeout",
        "trajectory",
        "trajectory_error",
        "workspace",
    )

    def __init__(
        self,
        case: EvalCase | Callable[[], EvalCase],
        prompt: Prompt,
        candidate: str,
        target_name: str,
        judge: Provider | None,
        timeout: float | None = None,
        attempt: int = 0,
        repeat: int = 0,
        latency_ms: float | None = None,
        cost_usd: float | None = None,
        trajectory: Trajectory | None = None,
        trajectory_error: str | None = None,
        pass_threshold: float = 0.8,  # the default pass threshold (docs/results.md)
        judge_samples: SampleRule | None = None,
        on_uncertain: str | None = None,
        workspace: WorkspaceView | None = None,
    ) -> None:
        self._case = case
        #: built for the candidate's target: ``prompt.question`` is exactly what it got
        self.prompt = prompt
        self.candidate = candidate  # the candidate's answer text
        self.target_name = target_name
        #: used by llm_judge: the target's judge_target, or the target
        self.judge = judge
        self.timeout = timeout  # seconds; limit for code evaluators (``--agent-timeout``)
        self.attempt = attempt
        self.repeat = repeat  # which run of the case (a judge grades each run on its own)
        #: the target's answer: how long it took, and its price (reused or not; None: unknown)
        self.latency_ms = latency_ms
        self.cost_usd = cost_usd
        #: the tools the candidate called, in order (a turn's own, for a turn's
        #: evaluators); None when its target cannot say, ``trajectory_error`` then saying
        #: why if known
        self.trajectory = trajectory
        self.trajectory_error = trajectory_error
        #: the case's pass threshold (what a judge's samples are voted at, unless the
        #: evaluator has its own)
        self.pass_threshold = pass_threshold
        #: the run's judge samples and ``on_uncertain``, for judges that set none
        self.judge_samples = judge_samples
        self.on_uncertain = on_uncertain
        #: the workspace the agent worked in, as it left it (None: the case has none, or
        #: the answer is a recorded one: a regrade)
        self.workspace = workspace

    @property
    def case(self) -> EvalCase:
        """The case as graded (made now, the first time, when given as a function)."""
        case = self._case
        if callable(case):
            case = self._case = case()
        return case


class Loading(Protocol):
    """What the loader offers an evaluator while it reads the evaluator's settings from an
    eval file (``agentv.evalfile.build`` provides it). Keys are the evaluator's own (``cwd``,
    ``("expected", 2, "args_schema")``): the loader places what it reports at them."""

    @property
    def eval_dir(self) -> Path:
        """The eval file's folder, which relative paths in settings start from."""
        ...

    @property
    def root(self) -> Path | None:
        """The folder every file the settings name must lie in (the repository root), as
        every file an eval file refers to; None: anywhere (``--allow-outside-root``)."""
        ...

    def memo(self, key: Hashable, make: Callable[[], T]) -> T:
        """``make()``, once per eval file for each ``key``: a suite repeats its settings in
        many cases, and a check that reads the disk need not run for each."""
        ...

    def folder(self, raw: str | None, key: str, what: str) -> Path | None:
        """The folder a script runs in: ``raw`` relative to the eval file's folder (none:
        that folder). None when it cannot be used; the loader says why at ``key``, calling
        it ``what``."""
        ...

    def reference(
        self, raw: str, key: str, what: str, *, must_exist: bool
    ) -> tuple[Path, str] | None:
        """A file the settings name, looked up as an attached file is, and its text. None
        when no usable file is found; the loader says why at ``key`` (a file that is not
        found, only when ``must_exist``)."""
        ...


#: the largest ``weight``: far beyond any use, and small enough that a case's weighted mean
#: is always a number (a sum of huge weights would overflow to infinity, the mean to NaN)
MAX_WEIGHT = 1_000_000.0


class EvaluatorSpec(BaseModel):
    """An evaluator: its settings as written in an eval file's ``evaluators:``, the checks
    they get before anything is sent, and its grading of one answer.

    Each kind subclasses it with a ``type`` (a ``Literal`` of its name, or of its names when
    one class grades several: ``contains`` and ``icontains``) and its own keys, and is
    listed in ``registry.KINDS``. Unknown keys are refused, so a typo is reported with a
    "did you mean" instead of being ignored. Grading never raises for a grading problem: it
    returns ``failed(...)``.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = None
    #: how much this evaluator counts in the case's weighted mean (0: shown, not counted);
    #: a number as written (``"2"`` or ``true`` is refused, not read as 2 or 1)
    weight: Annotated[float, Field(ge=0, le=MAX_WEIGHT, allow_inf_nan=False, strict=True)] = 1.0
    #: a miss (a score below ``threshold``) fails the case, whatever the mean
    required: Annotated[bool, Field(strict=True)] = False
    #: the lowest score that counts as a pass of this evaluator (default: the run's)
    threshold: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False, strict=True)] | None = None

    #: what the eval file's errors hint for a key of this kind that is missing or out of
    #: bounds (``agentv.evalfile.schema_errors``); the keys every kind has come first
    key_hints: ClassVar[Mapping[str, str]] = {
        "weight": "a weight is a number from 0 to 1,000,000: how much the evaluator counts "
        "in the case's mean",
        "threshold": "a threshold is a score from 0 to 1",
    }
    #: what the eval file's errors say of an item of a list key that is neither of the
    #: forms the key takes: ``(message, hint)``
    item_errors: ClassVar[Mapping[str, tuple[str, str]]] = {}
    #: grading asks the case's judge target (the run builds one for its cases)
    uses_judge: ClassVar[bool] = False
    #: grading reads the case's workspace (a case without one is refused when loaded)
    needs_workspace: ClassVar[bool] = False

    def resolve(self, name: str, at: Loading) -> EvaluatorConfig:
        """This evaluator as a case holds it, named ``name``: the files and folders its
        settings name resolved through ``at`` (most name none)."""
        return EvaluatorConfig(name, self)

    def check(self, config: EvaluatorConfig, at: Loading) -> list[Problem]:
        """What would make this evaluator fail on every answer, found before anything is
        sent (as ``evaluate`` reads the settings): the loader reports each problem at its
        key, for ``agentv eval`` and ``agentv validate`` alike."""
        return []

    async def evaluate(self, ctx: EvaluationContext, config: EvaluatorConfig) -> EvaluatorScore:
        """The verdict of this evaluator (``config``: as the case holds it) on
        ``ctx.candidate``."""
        raise NotImplementedError


def required_miss_line(score: EvaluatorScore, pass_threshold: float) -> str:
    """The miss that says a required evaluator failed the case."""
    threshold = score.threshold if score.threshold is not None else pass_threshold
    return (
        f"required evaluator {score.name!r} scored {score.score:.2f}, below its threshold "
        f"{threshold:.2f}: the case fails whatever its mean"
    )


def failed(
    config: EvaluatorConfig,
    reason: str,
    *,
    raw_request: dict[str, Any] | None = None,
    usage: Usage | None = None,
    latency_ms: float | None = None,
) -> EvaluatorScore:
    """The entry of an evaluator that could not grade: score 0 and the reason in misses."""
    return EvaluatorScore(
        name=config.name,
        type=config.type,
        score=0.0,
        hits=[],
        misses=[f"Evaluator '{config.name}' failed: {reason}"],
        raw_request=raw_request,
        error=reason,
        usage=usage,
        latency_ms=latency_ms,
    )


#: a number as JSON writes it (ASCII digits only)
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


def number_text(text: str) -> float | None:
    """The number a string holds when it is written as JSON writes numbers (``0.5``,
    ``1e-3``, ``-0``), else None. Python's ``float`` also takes ``0_1`` (as 1.0), ``inf``,
    ``nan``, ``+.5`` and non-ASCII digits: none of them is a score a program meant."""
    text = text.strip()
    if not _JSON_NUMBER.fullmatch(text):
        return None
    return float(text)


def as_score(value: object) -> float | None:
    """A finite number (or a string holding one, ``number_text``) clamped into [0, 1]; None
    when it is not one."""
    if isinstance(value, bool):  # JSON true/false is not a score
        return None
    if isinstance(value, int | float):
        number = float(value)
    elif isinstance(value, str):
        found = number_text(value)
        if found is None:
            return None
        number = found
    else:
        return None
    if not math.isfinite(number):
        return None
    return min(1.0, max(0.0, number))


def text_list(value: object, limit: int | None = None) -> list[str]:
    """The non-blank strings of a JSON list (a lone string counts as a list of one)."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list):
        return []
    out = [item.strip() for item in value if isinstance(item, str) and item.strip()]
    return out if limit is None else out[:limit]


def excerpt(text: str, limit: int = 200) -> str:
    """The start of ``text`` for an error message, marked when cut; the case's known
    secrets are masked before the cut (``agentv.system.masking.shorten``)."""
    return shorten(text.strip(), limit, keep="head")
