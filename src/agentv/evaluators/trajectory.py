"""Trajectory evaluators: they grade the tools the candidate called (``ctx.trajectory``,
``agentv.trajectory``), not its answer (docs/eval-files.md, "Trajectory evaluators").

- ``tool_used`` / ``tool_not_used``: a tool called (between ``min`` and ``max`` times), or
  never, with arguments that match when given;
- ``tool_trajectory``: the calls against an expected list by ``mode`` (``exact``,
  ``in_order``, ``unordered``, ``subset``, ``superset``; ``any_order`` with ``minimums``);
- ``tool_call_f1``: precision, recall or F1 of the calls against an expected list;
- ``step_count`` and ``repeated_calls``: how many calls, and how often the same one.

Each kind's settings are checked before a run (keys that go together, limits that can both
hold, argument schemas that are valid JSON Schemas).

A call matches an expected one when the tool's name is the same and its arguments fit: the
keys given in ``args`` (nested mappings alike; lists item by item) with ``args_match:
subset``, exactly ``args`` with ``exact``, and the JSON Schema ``args_schema``. Each
evaluator says in its hits and misses which calls it looked at (by step number, from 1)
and why they did or did not match. A target that cannot say which tools it called gets no
grade: the evaluator fails with the reason, as any evaluator that cannot grade.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from agentv.cases import EvaluatorConfig
from agentv.errors import Problem
from agentv.evaluators.base import EvaluationContext, EvaluatorScore, EvaluatorSpec, Loading, failed
from agentv.evaluators.schemas import JsonSchema, SchemaChecker, resolve_schema
from agentv.trajectory import NOT_REPORTED, ToolStep, Trajectory

#: calls shown by name in one hit or miss line before "and N more"
SHOWN = 5


def _json(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _steps_text(numbers: list[int]) -> str:
    shown = ", ".join(str(n) for n in numbers[:SHOWN])
    more = f" and {len(numbers) - SHOWN} more" if len(numbers) > SHOWN else ""
    return f"step{'s' if len(numbers) > 1 else ''} {shown}{more}"


# --- matching one call --------------------------------------------------------------------


def _same(a: Any, b: Any) -> bool:
    """JSON equality: ``true`` is not ``1``, ``1`` is ``1.0``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _difference(expected: Any, actual: Any, subset: bool, at: str = "") -> str | None:
    """Why ``actual`` does not match ``expected`` (None: it does), naming the first key
    that differs. With ``subset``, keys of ``actual`` that ``expected`` leaves out are
    free, at every depth."""
    where = f"`{at}`" if at else "the arguments"
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return f"{where} is {_json(actual, 60)}, not a mapping"
        for key, value in expected.items():
            path = f"{at}.{key}" if at else str(key)
            if key not in actual:
                return f"`{path}` is missing"
            problem = _difference(value, actual[key], subset, path)
            if problem is not None:
                return problem
        if not subset:
            extra = [k for k in actual if k not in expected]
            if extra:
                keys = ", ".join(f"`{at + '.' if at else ''}{k}`" for k in extra[:3])
                return f"it has other arguments too: {keys}"
        return None
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        for i, (want, got) in enumerate(zip(expected, actual, strict=True)):
            problem = _difference(want, got, subset, f"{at}[{i}]")
            if problem is not None:
                return problem
        return None
    if _same(expected, actual):
        return None
    return f"{where} is {_json(actual, 60)}, not {_json(expected, 60)}"


# --- expected calls ----------------------------------------------------------------------------

ToolName = Annotated[str, Field(min_length=1)]
ArgsMatch = Literal["subset", "exact"]


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


def _call_problems(call: ExpectedCall, key: tuple[str | int, ...], at: Loading) -> list[Problem]:
    """What makes an expected call's settings unusable (``key``: where it is written)."""
    out = []
    if call.args_match == "exact" and call.args is None:
        out.append(
            Problem(
                (*key, "args_match"),
                "`args_match: exact` needs `args`: the arguments the call must have",
                "give `args`, or leave `args_match` out",
            )
        )
    problem = at.memo(SchemaChecker, lambda: SchemaChecker(at.root)).problem(
        call.args_schema, at.eval_dir
    )
    if problem is not None:
        out.append(
            Problem(
                (*key, "args_schema"),
                problem.message,
                problem.hint.replace("`schema`", "`args_schema`").replace(
                    "under `schema:`", "under `args_schema:`"
                ),
            )
        )
    return out


def _bounds_problems(low: int | None, high: int | None) -> list[Problem]:
    if low is not None and high is not None and high < low:
        return [Problem("max", f"`max` ({high}) is less than `min` ({low})", "no count could pass")]
    return []


def _expected_problems(expected: list[str | ExpectedCall] | None, at: Loading) -> list[Problem]:
    out: list[Problem] = []
    for i, entry in enumerate(expected or ()):
        if not isinstance(entry, str):
            out += _call_problems(entry, ("expected", i), at)
    return out


#: an ``expected`` entry that is neither a tool's name nor a call (the eval file's errors)
_EXPECTED_ITEM = (
    "an `expected` call is a tool's name or a mapping with `tool`",
    "write `- search` or `- {tool: search, args: {query: ...}}`",
)


@dataclass(frozen=True, slots=True)
class CallPattern:
    """An expected call, ready to match steps against."""

    tool: str
    args: dict[str, Any] | None = None
    exact: bool = False
    schema: Any = None  # a compiled JSON Schema (``schemas.CompiledSchema``)
    schema_error: str | None = None  # why the schema cannot be used

    @classmethod
    def of(cls, entry: str | ExpectedCall, ctx: EvaluationContext) -> CallPattern:
        """The pattern of an expected entry (a tool's name, or a call with arguments)."""
        if isinstance(entry, str):
            return cls(entry)
        schema = resolve_schema(entry.args_schema, ctx.case.eval_file)
        return cls(
            entry.tool,
            entry.args,
            entry.args_match == "exact",
            schema if not isinstance(schema, str) else None,
            schema if isinstance(schema, str) else None,
        )

    def mismatch(self, step: ToolStep) -> str | None:
        """Why ``step`` is not this call (None: it is)."""
        if step.name != self.tool:
            return f"it is {step.name!r}, not {self.tool!r}"
        if self.args is not None:
            problem = _difference(self.args, step.arguments, not self.exact)
            if problem is not None:
                return problem
        if self.schema is not None:
            from jsonschema.exceptions import best_match

            error = best_match(self.schema.validator.iter_errors(step.arguments))
            if error is not None:
                where = "/".join(str(p) for p in error.absolute_path)
                return f"the arguments do not fit the schema: {error.message} (at `{where or '/'}`)"
        return None

    def matches(self, step: ToolStep) -> bool:
        return self.mismatch(step) is None

    def __str__(self) -> str:
        text = self.tool
        if self.args is not None:
            text += f" {_json(self.args, 80)}" + (" (exactly)" if self.exact else "")
        if self.schema is not None:
            text += " (arguments per schema)"
        return text


def _patterns(entries: list[str | ExpectedCall], ctx: EvaluationContext) -> list[CallPattern] | str:
    """The patterns of an expected list, or why one of them cannot be used."""
    out = []
    for entry in entries:
        pattern = CallPattern.of(entry, ctx)
        if pattern.schema_error is not None:
            return pattern.schema_error
        out.append(pattern)
    return out


def _near_misses(pattern: CallPattern, steps: Trajectory, numbers: list[int] | None = None) -> str:
    """Why the calls of the same tool did not match (the first few), for a miss line."""
    same = [
        (i, s) for i, s in enumerate(steps, 1) if s.name == pattern.tool and not pattern.matches(s)
    ]
    if numbers is not None:
        same = [(i, s) for i, s in same if i in numbers]
    if not same:
        return ""
    shown = "; ".join(f"step {i}: {pattern.mismatch(s)}" for i, s in same[:3])
    more = f"; and {len(same) - 3} more" if len(same) > 3 else ""
    return f" ({pattern.tool!r} was called, but {shown}{more})"


def _matching(patterns: list[CallPattern], steps: Trajectory) -> dict[int, int]:
    """The most expected calls matched each to a different step (pattern index -> step
    index): a maximum bipartite matching, so that a loose pattern never takes the only
    step a strict one could have had."""
    fits = [[j for j, s in enumerate(steps) if p.matches(s)] for p in patterns]
    owner: dict[int, int] = {}  # step -> pattern

    def assign(i: int, seen: set[int]) -> bool:
        for j in fits[i]:
            if j in seen:
                continue
            seen.add(j)
            if j not in owner or assign(owner[j], seen):
                owner[j] = i
                return True
        return False

    for i in range(len(patterns)):
        assign(i, set())
    return {i: j for j, i in owner.items()}


def _in_order(patterns: list[CallPattern], steps: Trajectory) -> dict[int, int]:
    """The most expected calls found in their order among the steps, gaps allowed (pattern
    index -> step index): the longest common subsequence, not a greedy scan, so that one
    early call out of place does not cost the calls after it."""
    n, m = len(patterns), len(steps)
    fit = [[patterns[i].matches(steps[j]) for j in range(m)] for i in range(n)]
    best = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n - 1, -1, -1):
        for j in range(m - 1, -1, -1):
            best[i][j] = max(
                best[i + 1][j], best[i][j + 1], best[i + 1][j + 1] + 1 if fit[i][j] else 0
            )
    found: dict[int, int] = {}
    i = j = 0
    while i < n and j < m:
        if fit[i][j] and best[i][j] == best[i + 1][j + 1] + 1:
            found[i] = j
            i, j = i + 1, j + 1
        elif best[i + 1][j] >= best[i][j + 1]:
            i += 1
        else:
            j += 1
    return found


# --- the evaluators ---------------------------------------------------------------------------


def _trajectory(ctx: EvaluationContext, config: EvaluatorConfig) -> Trajectory | EvaluatorScore:
    if ctx.trajectory is None:
        return failed(config, ctx.trajectory_error or NOT_REPORTED)
    return ctx.trajectory


def _score(
    config: EvaluatorConfig, score: float, hits: list[str], misses: list[str]
) -> EvaluatorScore:
    return EvaluatorScore(config.name, config.type, score, hits, misses)


class ToolUsedSpec(EvaluatorSpec, ExpectedCall):
    """Passes when ``tool`` was called (with matching arguments) at least ``min`` and at
    most ``max`` times."""

    type: Literal["tool_used"]
    min: Annotated[int, Field(ge=0)] = 1
    max: Annotated[int, Field(ge=0)] | None = None

    def check(self, config: EvaluatorConfig, at: Loading) -> list[Problem]:
        return _call_problems(self, (), at) + _bounds_problems(self.min, self.max)

    async def evaluate(self, ctx: EvaluationContext, config: EvaluatorConfig) -> EvaluatorScore:
        return await _count_calls(self, ctx, config)


class ToolNotUsedSpec(EvaluatorSpec, ExpectedCall):
    """Passes when ``tool`` was never called (with matching arguments, when given)."""

    type: Literal["tool_not_used"]

    def check(self, config: EvaluatorConfig, at: Loading) -> list[Problem]:
        return _call_problems(self, (), at)

    async def evaluate(self, ctx: EvaluationContext, config: EvaluatorConfig) -> EvaluatorScore:
        return await _count_calls(self, ctx, config)


async def _count_calls(
    spec: ToolUsedSpec | ToolNotUsedSpec, ctx: EvaluationContext, config: EvaluatorConfig
) -> EvaluatorScore:
    """``tool_used`` / ``tool_not_used``: how many calls of the tool matched."""
    steps = _trajectory(ctx, config)
    if isinstance(steps, EvaluatorScore):
        return steps
    pattern = CallPattern.of(spec, ctx)
    if pattern.schema_error is not None:
        return failed(config, pattern.schema_error)
    found = [i for i, s in enumerate(steps, 1) if pattern.matches(s)]
    if isinstance(spec, ToolNotUsedSpec):
        if not found:
            return _score(config, 1.0, [f"{pattern} was not called"], [])
        shown = "; ".join(_json(steps[i - 1].arguments, 80) for i in found[:3])
        return _score(
            config,
            0.0,
            [],
            [f"{pattern} was called {_plural(len(found), 'time')} ({_steps_text(found)}): {shown}"],
        )
    low, high = spec.min, spec.max
    count = len(found)
    bounds = f"at least {low}" + (f" and at most {high}" if high is not None else "")
    if count and low <= count and (high is None or count <= high):
        return _score(
            config,
            1.0,
            [f"{pattern} was called {_plural(count, 'time')} ({_steps_text(found)}; {bounds})"],
            [],
        )
    if count == 0 and low <= 0 and (high is None or high >= 0):
        return _score(config, 1.0, [f"{pattern} was not called ({bounds})"], [])
    if count == 0:
        miss = f"{pattern} was never called{_near_misses(pattern, steps)}"
    else:
        miss = (
            f"{pattern} was called {_plural(count, 'time')} ({_steps_text(found)}), "
            f"expected {bounds}"
        )
    return _score(config, 0.0, [], [miss])


class ToolTrajectorySpec(EvaluatorSpec):
    """The calls made against the ``expected`` ones, by ``mode``: ``exact`` (these calls,
    in this order, nothing else), ``in_order`` (in this order, others between them allowed),
    ``unordered`` (these calls, any order, nothing else), ``superset`` (at least these, any
    order), ``subset`` (nothing but these); or, as the original AgentV, ``any_order`` with
    ``minimums`` (each tool called at least that many times)."""

    type: Literal["tool_trajectory"]
    mode: Literal["exact", "in_order", "unordered", "subset", "superset", "any_order"]
    expected: list[ToolName | ExpectedCall] | None = None
    minimums: dict[str, Annotated[int, Field(ge=1)]] | None = None

    item_errors: ClassVar[Mapping[str, tuple[str, str]]] = {"expected": _EXPECTED_ITEM}

    def check(self, config: EvaluatorConfig, at: Loading) -> list[Problem]:
        out: list[Problem] = []
        if self.mode == "any_order":
            if not self.minimums:
                out.append(
                    Problem(
                        "minimums",
                        "`mode: any_order` needs `minimums`: each tool and its fewest calls",
                        "write `minimums: {search: 2, fetch: 1}`, or use `mode: superset` "
                        "with `expected` calls",
                    )
                )
            if self.expected is not None:
                out.append(
                    Problem(
                        "expected",
                        "`mode: any_order` counts `minimums`; it takes no `expected` list",
                        "use `mode: superset` (these calls, in any order, others allowed) "
                        "or `unordered` (these calls and no other)",
                    )
                )
        else:
            if not self.expected:
                out.append(
                    Problem(
                        "expected",
                        f"`mode: {self.mode}` needs `expected`: the calls, in order",
                        "list them: `- search` or `- {tool: search, args: {query: ...}}`",
                    )
                )
            if self.minimums is not None:
                out.append(
                    Problem(
                        "minimums",
                        f"`minimums` is for `mode: any_order`, not `{self.mode}`",
                        "remove `minimums`, or use `mode: any_order`",
                    )
                )
        return out + _expected_problems(self.expected, at)

    async def evaluate(self, ctx: EvaluationContext, config: EvaluatorConfig) -> EvaluatorScore:
        steps = _trajectory(ctx, config)
        if isinstance(steps, EvaluatorScore):
            return steps
        if self.mode == "any_order":
            return _minimums(config, self.minimums or {}, steps)
        patterns = _patterns(self.expected or [], ctx)
        if isinstance(patterns, str):
            return failed(config, patterns)
        if self.mode == "exact":
            return _exact(config, patterns, steps)
        if self.mode == "in_order":
            return _ordered(config, patterns, steps)
        return _unordered(config, self.mode, patterns, steps)


def _minimums(
    config: EvaluatorConfig, minimums: dict[str, int], steps: Trajectory
) -> EvaluatorScore:
    counts = Counter(s.name for s in steps)
    hits, misses = [], []
    for tool, least in minimums.items():
        made = counts.get(tool, 0)
        line = f"{tool!r} was called {_plural(made, 'time')} (at least {least} expected)"
        (hits if made >= least else misses).append(line)
    return _score(config, len(hits) / len(minimums) if minimums else 1.0, hits, misses)


def _exact(
    config: EvaluatorConfig, patterns: list[CallPattern], steps: Trajectory
) -> EvaluatorScore:
    hits, misses = [], []
    for i in range(max(len(patterns), len(steps))):
        n = i + 1
        if i >= len(steps):
            misses.append(
                f"expected call {n} ({patterns[i]}) was never made: only {_plural(len(steps), 'call')}"
            )
        elif i >= len(patterns):
            misses.append(
                f"step {n}: {steps[i].name!r} was not expected (exactly {_plural(len(patterns), 'call')} expected)"
            )
        else:
            problem = patterns[i].mismatch(steps[i])
            if problem is None:
                hits.append(f"step {n}: {patterns[i]}")
            else:
                misses.append(f"step {n}: expected {patterns[i]}, but {problem}")
    total = max(len(patterns), len(steps))
    return _score(config, len(hits) / total if total else 1.0, hits, misses)


def _ordered(
    config: EvaluatorConfig, patterns: list[CallPattern], steps: Trajectory
) -> EvaluatorScore:
    found = _in_order(patterns, steps)
    hits, misses = [], []
    for i, pattern in enumerate(patterns):
        if i in found:
            hits.append(f"expected call {i + 1} ({pattern}) at step {found[i] + 1}")
            continue
        before = max((found[k] for k in found if k < i), default=-1)
        after = min((found[k] for k in found if k > i), default=len(steps))
        window = (
            f"between step {before + 1} and step {after + 1}"
            if before >= 0 and after < len(steps)
            else f"after step {before + 1}"
            if before >= 0
            else f"before step {after + 1}"
            if after < len(steps)
            else "anywhere"
        )
        elsewhere = [j + 1 for j, s in enumerate(steps) if pattern.matches(s)]
        why = (
            f": it was made out of order ({_steps_text(elsewhere)})"
            if elsewhere
            else _near_misses(pattern, steps)
        )
        misses.append(f"expected call {i + 1} ({pattern}) not found {window}{why}")
    return _score(config, len(found) / len(patterns), hits, misses)


def _unordered(
    config: EvaluatorConfig, mode: str, patterns: list[CallPattern], steps: Trajectory
) -> EvaluatorScore:
    pairs = _matching(patterns, steps)
    used = set(pairs.values())
    hits = [
        f"expected call {i + 1} ({patterns[i]}) at step {j + 1}" for i, j in sorted(pairs.items())
    ]
    missing = [
        f"expected call {i + 1} ({p}) was not made{_near_misses(p, steps)}"
        for i, p in enumerate(patterns)
        if i not in pairs
    ]
    extra = [
        f"step {j + 1}: {s.name!r} {_json(s.arguments, 60)} is not among the expected calls"
        for j, s in enumerate(steps)
        if j not in used
    ]
    if mode == "superset":  # other calls are allowed
        if extra:
            hits.append(f"{_plural(len(extra), 'other call')} allowed")
        return _score(config, len(pairs) / len(patterns), hits, missing)
    if mode == "subset":  # expected calls may be left out
        if missing:
            hits.append(f"{_plural(len(missing), 'expected call')} not made (allowed)")
        return _score(config, len(pairs) / len(steps) if steps else 1.0, hits, extra)
    total = max(len(patterns), len(steps))  # unordered: these calls and no other
    return _score(config, len(pairs) / total if total else 1.0, hits, missing + extra)


class ToolCallF1Spec(EvaluatorSpec):
    """Precision, recall or F1 (``metric``, default F1) of the calls made against the
    ``expected`` ones, each expected call matching at most one call made."""

    type: Literal["tool_call_f1"]
    expected: list[ToolName | ExpectedCall]
    metric: Literal["f1", "precision", "recall"] = "f1"

    item_errors: ClassVar[Mapping[str, tuple[str, str]]] = {"expected": _EXPECTED_ITEM}

    def check(self, config: EvaluatorConfig, at: Loading) -> list[Problem]:
        out: list[Problem] = []
        if not self.expected:
            out.append(
                Problem(
                    "expected",
                    "`expected` must list at least one call",
                    "list the calls the candidate should make",
                )
            )
        return out + _expected_problems(self.expected, at)

    async def evaluate(self, ctx: EvaluationContext, config: EvaluatorConfig) -> EvaluatorScore:
        steps = _trajectory(ctx, config)
        if isinstance(steps, EvaluatorScore):
            return steps
        patterns = _patterns(self.expected, ctx)
        if isinstance(patterns, str):
            return failed(config, patterns)
        pairs = _matching(patterns, steps)
        matched = len(pairs)
        precision = matched / len(steps) if steps else (1.0 if not patterns else 0.0)
        recall = matched / len(patterns) if patterns else 1.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        score = {"f1": f1, "precision": precision, "recall": recall}[self.metric]
        used = set(pairs.values())
        figures = (
            f"precision {precision:.2f} ({matched} of {_plural(len(steps), 'call')} expected), "
            f"recall {recall:.2f} ({matched} of {_plural(len(patterns), 'expected call')} made), "
            f"F1 {f1:.2f}"
        )
        hits = [figures] + [
            f"expected call {i + 1} ({patterns[i]}) at step {j + 1}"
            for i, j in sorted(pairs.items())
        ]
        misses = [
            f"expected call {i + 1} ({p}) was not made{_near_misses(p, steps)}"
            for i, p in enumerate(patterns)
            if i not in pairs
        ] + [
            f"step {j + 1}: {s.name!r} {_json(s.arguments, 60)} was not expected"
            for j, s in enumerate(steps)
            if j not in used
        ]
        return _score(config, score, hits, misses)


class StepCountSpec(EvaluatorSpec):
    """Passes when the number of tool calls (of ``tool`` only, when given) is between
    ``min`` and ``max``."""

    type: Literal["step_count"]
    min: Annotated[int, Field(ge=0)] | None = None
    max: Annotated[int, Field(ge=0)] | None = None
    tool: ToolName | None = None

    def check(self, config: EvaluatorConfig, at: Loading) -> list[Problem]:
        if self.min is None and self.max is None:
            return [
                Problem(
                    "max",
                    "`step_count` needs `min`, `max` or both",
                    "give the fewest (`min`) and/or the most (`max`) tool calls allowed",
                )
            ]
        return _bounds_problems(self.min, self.max)

    async def evaluate(self, ctx: EvaluationContext, config: EvaluatorConfig) -> EvaluatorScore:
        steps = _trajectory(ctx, config)
        if isinstance(steps, EvaluatorScore):
            return steps
        counted = [s for s in steps if self.tool is None or s.name == self.tool]
        what = _plural(len(counted), "tool call")
        if self.tool:
            what = _plural(len(counted), "call") + f" of {self.tool!r}"
        bounds = " and ".join(
            part
            for part in (
                f"at least {self.min}" if self.min is not None else "",
                f"at most {self.max}" if self.max is not None else "",
            )
            if part
        )
        ok = (self.min is None or len(counted) >= self.min) and (
            self.max is None or len(counted) <= self.max
        )
        line = f"{what} ({bounds} allowed)"
        return _score(config, 1.0 if ok else 0.0, [line] if ok else [], [] if ok else [line])


class RepeatedCallsSpec(EvaluatorSpec):
    """Passes when no call (the same tool with the same arguments; of ``tool`` only, when
    given) was made more than ``max`` times."""

    type: Literal["repeated_calls"]
    max: Annotated[int, Field(ge=1)] = 1
    tool: ToolName | None = None

    async def evaluate(self, ctx: EvaluationContext, config: EvaluatorConfig) -> EvaluatorScore:
        steps = _trajectory(ctx, config)
        if isinstance(steps, EvaluatorScore):
            return steps
        seen: dict[str, list[int]] = {}
        for i, s in enumerate(steps, 1):
            if self.tool is None or s.name == self.tool:
                key = s.name + " " + _json(s.arguments, 10**9)
                seen.setdefault(key, []).append(i)
        too_often = [
            f"{key if len(key) <= 100 else key[:99] + '…'} was made {len(at)} times "
            f"({_steps_text(at)}), at most {self.max} allowed"
            for key, at in seen.items()
            if len(at) > self.max
        ]
        if too_often:
            return _score(config, 0.0, [], too_often)
        what = f"calls of {self.tool!r}" if self.tool else "calls"
        return _score(
            config, 1.0, [f"no identical {what} made more than {_plural(self.max, 'time')}"], []
        )
