"""Deterministic evaluators, graded in-process: ``contains``, ``icontains``, ``equals``,
``regex`` and ``is_json``; their settings, their checks before a run, their grading.

They run for every case of large suites (thousands per second), so everything that depends
only on the evaluator's settings (compiled patterns, JSON Schema validators, messages) is
computed once per distinct value and cached. Each gives score 1 or 0 with one hit or miss
line saying what was checked; bad settings (a broken pattern, an invalid schema) give a
clear error on the entry, never a crash.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any, Literal

import orjson
from pydantic import Field

from agentv.cases import EvaluatorConfig
from agentv.errors import Problem
from agentv.evaluators.base import (
    EvaluationContext,
    EvaluatorScore,
    EvaluatorSpec,
    Loading,
    excerpt,
    failed,
)
from agentv.evaluators.schemas import JsonSchema, SchemaChecker, resolve_schema


@lru_cache(maxsize=4096)
def _show(value: str) -> str:
    """``value`` quoted for a hit/miss line (JSON escapes, long values shortened)."""
    shown = json.dumps(value, ensure_ascii=False)
    return shown if len(shown) <= 82 else shown[:80] + '…"'


def _verdict(config: EvaluatorConfig, passed: bool, hit: str, miss: str) -> EvaluatorScore:
    if passed:
        return EvaluatorScore(config.name, config.type, 1.0, [hit], [])
    return EvaluatorScore(config.name, config.type, 0.0, [], [miss])


# --- contains / icontains / equals ------------------------------------------------------


@lru_cache(maxsize=4096)
def _contains_lines(value: str, ignore_case: bool) -> tuple[str, str, str]:
    """(needle, hit line, miss line) for one ``contains``/``icontains`` value."""
    suffix = " (ignoring case)" if ignore_case else ""
    needle = value.casefold() if ignore_case else value
    return (
        needle,
        f"answer contains {_show(value)}{suffix}",
        f"answer does not contain {_show(value)}{suffix}",
    )


class ContainsSpec(EvaluatorSpec):
    """Passes when the answer contains ``value`` (``icontains``: ignoring case)."""

    type: Literal["contains", "icontains"]
    value: str

    async def evaluate(self, ctx: EvaluationContext, config: EvaluatorConfig) -> EvaluatorScore:
        ignore_case = self.type == "icontains"
        needle, hit, miss = _contains_lines(self.value, ignore_case)
        haystack = ctx.candidate.casefold() if ignore_case else ctx.candidate
        return _verdict(config, needle in haystack, hit, miss)


@lru_cache(maxsize=4096)
def _equals_lines(value: str) -> tuple[str, str, str]:
    expected = value.strip()
    return expected, f"answer equals {_show(expected)}", f"answer does not equal {_show(expected)}"


class EqualsSpec(EvaluatorSpec):
    """Passes when the answer (trimmed) equals ``value`` (trimmed)."""

    type: Literal["equals"]
    value: str

    async def evaluate(self, ctx: EvaluationContext, config: EvaluatorConfig) -> EvaluatorScore:
        expected, hit, miss = _equals_lines(self.value)
        return _verdict(config, ctx.candidate.strip() == expected, hit, miss)


# --- regex --------------------------------------------------------------------------------

_REGEX_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE}


@lru_cache(maxsize=1024)  # large suites repeat the same pattern in every case
def regex_problem(pattern: str, flags: str | None) -> Problem | None:
    """Why a ``regex`` evaluator's ``value`` (with its ``flags``) cannot be used, or None."""
    bits = 0
    for letter in flags or "":
        if letter not in _REGEX_FLAGS:
            return Problem(
                "flags",
                f"unknown regex flag {letter!r} in {flags!r}",
                "valid flags: i (ignore case), m (multi-line), s (dot matches newlines), "
                "x (verbose)",
            )
        bits |= _REGEX_FLAGS[letter]
    try:
        re.compile(pattern, bits)
    except re.error as exc:
        where = f" at position {exc.pos}" if exc.pos is not None else ""
        return Problem(
            "value",
            f"invalid regular expression {_show(pattern)}: {exc.msg}{where}",
            "fix `value` (Python `re` syntax); in YAML, write the pattern in single quotes "
            "so that backslashes stay as written: '\\d+'",
        )
    return None


@lru_cache(maxsize=1024)
def _compile(pattern: str, flags: str) -> tuple[re.Pattern[str], str, str] | str:
    """(compiled pattern, hit line, miss line), or the reason it cannot be used."""
    bits = 0
    for letter in flags:
        if letter not in _REGEX_FLAGS:
            return f"unknown regex flag {letter!r} in {flags!r}; valid flags: i, m, s, x"
        bits |= _REGEX_FLAGS[letter]
    try:
        compiled = re.compile(pattern, bits)
    except re.error as exc:
        where = f" at position {exc.pos}" if exc.pos is not None else ""
        return (
            f"invalid regular expression {_show(pattern)}: {exc.msg}{where}; "
            "fix `value` (Python `re` syntax)"
        )
    shown = f"/{pattern}/{flags}"
    if len(shown) > 82:
        shown = shown[:80] + "…"
    return compiled, f"answer matches {shown}", f"answer does not match {shown}"


class RegexSpec(EvaluatorSpec):
    """Passes when the regular expression ``value`` matches somewhere in the answer
    (``flags``: i, m, s, x)."""

    type: Literal["regex"]
    value: str
    flags: str | None = None

    def check(self, config: EvaluatorConfig, at: Loading) -> list[Problem]:
        problem = regex_problem(self.value, self.flags)
        return [problem] if problem is not None else []

    async def evaluate(self, ctx: EvaluationContext, config: EvaluatorConfig) -> EvaluatorScore:
        compiled = _compile(self.value, self.flags or "")
        if isinstance(compiled, str):
            return failed(config, compiled)
        pattern, hit, miss = compiled
        return _verdict(config, pattern.search(ctx.candidate) is not None, hit, miss)


# --- is_json --------------------------------------------------------------------------------

_FENCE = re.compile(r"\A```[A-Za-z0-9_+-]*[ \t]*\n(.*?)\n?[ \t]*```\Z", re.DOTALL)
# orjson reads an integer beyond 64 bits as a float, losing digits a schema may compare
# (`maximum`, `const`): such answers go to the standard parser, which keeps them exact.
_LONG_DIGITS = re.compile(r"\d{19}")


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def parse_json_answer(text: str) -> Any:
    """The JSON value of an answer, after removing a surrounding code fence.

    Strict JSON: ``NaN`` and ``Infinity`` are rejected. Raises ``ValueError`` with the
    parser's message when the text is not JSON.
    """
    text = text.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1).strip()
    if _LONG_DIGITS.search(text) is None:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass  # the standard parser decides, and words the error
    return json.loads(text, parse_constant=_reject_constant)


class IsJsonSpec(EvaluatorSpec):
    """Passes when the answer is JSON (and, with ``schema``, valid against that JSON Schema:
    a mapping, a JSON object as text, or a file, ``evaluators.schemas``)."""

    type: Literal["is_json"]
    schema_: JsonSchema | None = Field(default=None, alias="schema")

    def check(self, config: EvaluatorConfig, at: Loading) -> list[Problem]:
        problem = at.memo(SchemaChecker, lambda: SchemaChecker(at.root)).problem(
            self.schema_, at.eval_dir
        )
        return [problem] if problem is not None else []

    async def evaluate(self, ctx: EvaluationContext, config: EvaluatorConfig) -> EvaluatorScore:
        schema = resolve_schema(self.schema_, ctx.case.eval_file)
        if isinstance(schema, str):
            return failed(config, schema)
        try:
            data = parse_json_answer(ctx.candidate)
        except ValueError as exc:
            detail = str(exc) if ctx.candidate.strip() else "the answer is empty"
            return _verdict(config, False, "", f"answer is not valid JSON: {detail}")
        if schema is None:
            return _verdict(config, True, "answer is valid JSON", "")
        error = _first_error(schema.validator, data)
        if error is None:
            return _verdict(config, True, "answer is valid JSON matching the schema", "")
        return _verdict(config, False, "", f"answer does not match the JSON Schema: {error}")


def _first_error(validator: Any, data: Any) -> str | None:
    from jsonschema.exceptions import best_match

    error = best_match(validator.iter_errors(data))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path)
    return f"{excerpt(error.message, 300)} (at `{where or '/'}`)"
