"""Deterministic evaluators, graded in-process: ``contains``, ``icontains``, ``equals``,
``regex`` and ``is_json``.

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
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

import orjson

from agentv.evalfile.checks import (
    SCHEMA_READ_ERRORS,
    check_schema,
    describe_read_error,
    read_schema_file,
)
from agentv.evaluators.base import EvaluationContext, EvaluatorScore, excerpt, failed
from agentv.evaluators.specs import ContainsSpec, EqualsSpec, IsJsonSpec, RegexSpec
from agentv.system.readfile import special

if TYPE_CHECKING:
    from agentv.cases import EvaluatorConfig


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


class ContainsEvaluator:
    """Passes when the answer contains ``value``; ``icontains`` ignores case."""

    type: ClassVar[str] = "contains"

    async def evaluate(self, ctx: EvaluationContext, config: EvaluatorConfig) -> EvaluatorScore:
        spec = config.spec
        assert isinstance(spec, ContainsSpec)
        ignore_case = spec.type == "icontains"
        needle, hit, miss = _contains_lines(spec.value, ignore_case)
        haystack = ctx.candidate.casefold() if ignore_case else ctx.candidate
        return _verdict(config, needle in haystack, hit, miss)


@lru_cache(maxsize=4096)
def _equals_lines(value: str) -> tuple[str, str, str]:
    expected = value.strip()
    return expected, f"answer equals {_show(expected)}", f"answer does not equal {_show(expected)}"


class EqualsEvaluator:
    """Passes when the answer, trimmed, equals ``value``, trimmed."""

    type: ClassVar[str] = "equals"

    async def evaluate(self, ctx: EvaluationContext, config: EvaluatorConfig) -> EvaluatorScore:
        spec = config.spec
        assert isinstance(spec, EqualsSpec)
        expected, hit, miss = _equals_lines(spec.value)
        return _verdict(config, ctx.candidate.strip() == expected, hit, miss)


# --- regex --------------------------------------------------------------------------------

_REGEX_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE}


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


class RegexEvaluator:
    """Passes when the pattern matches somewhere in the answer (``flags``: i, m, s, x)."""

    type: ClassVar[str] = "regex"

    async def evaluate(self, ctx: EvaluationContext, config: EvaluatorConfig) -> EvaluatorScore:
        spec = config.spec
        assert isinstance(spec, RegexSpec)
        compiled = _compile(spec.value, spec.flags or "")
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


class _Schema:
    """A checked JSON Schema, ready to validate."""

    __slots__ = ("label", "validator")

    def __init__(self, validator: Any, label: str) -> None:
        self.validator = validator
        self.label = label


# Compiled schemas by value (inline: canonical JSON; file: resolved path). A broken schema
# is cached as its error message so that it is diagnosed once, not once per case.
_SCHEMAS: dict[str, _Schema | str] = {}


def _compile_schema(schema: Any, label: str) -> _Schema | str:
    problem = check_schema(schema, label)  # worded as `agentv validate` says it
    if problem is not None:
        return problem.message
    # jsonschema is imported only when a schema is used: it is slow to import.
    from jsonschema import validators

    return _Schema(validators.validator_for(schema)(schema), label)


def _inline_schema(schema: dict[str, Any]) -> _Schema | str:
    try:
        key = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        key = json.dumps(schema, sort_keys=True, default=str)
    cached = _SCHEMAS.get(key)
    if cached is None:
        cached = _SCHEMAS[key] = _compile_schema(schema, "(inline)")
    return cached


def _file_schema(ref: str, base: Path) -> _Schema | str:
    path = Path(ref).expanduser()
    if not path.is_absolute():
        path = base / path
    key = "file:" + str(path)
    cached = _SCHEMAS.get(key)
    if cached is not None:
        return cached
    if not path.is_file() and not special(path):  # a FIFO is refused when read
        what = "is a folder, not a file" if path.is_dir() else "not found"
        cached = (
            f"JSON Schema file {what}: {ref} (looked at {path}); "
            "`schema` is relative to the eval file's folder"
        )
    else:
        try:
            data = read_schema_file(path)
        except SCHEMA_READ_ERRORS as exc:
            cached = f"cannot read JSON Schema file {path}: {describe_read_error(exc)}"
        else:
            cached = _compile_schema(data, f"in {path}")
    _SCHEMAS[key] = cached
    return cached


def _schema_for(spec: IsJsonSpec, eval_file: Path) -> _Schema | str | None:
    return resolve_schema(spec.schema_, eval_file)


def resolve_schema(schema: dict[str, Any] | str | None, eval_file: Path) -> _Schema | str | None:
    """A schema as an eval file writes it (a mapping, a JSON object as text, or a file
    relative to the eval file's folder), compiled once per distinct value; the reason it
    cannot be used as text; None without a schema."""
    if schema is None:
        return None
    if isinstance(schema, dict):
        return _inline_schema(schema)
    stripped = schema.strip()
    if stripped.startswith("{"):  # a JSON object written as a string
        try:
            data = json.loads(stripped)
        except json.JSONDecodeError as exc:
            return (
                "invalid JSON Schema (inline string): not valid JSON: "
                f"{exc.msg} at character {exc.pos + 1}"
            )
        except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
            return f"invalid JSON Schema (inline string): {exc}"
        return _inline_schema(data)  # JSON text starting with "{" is an object
    return _file_schema(stripped, eval_file.parent)


class IsJsonEvaluator:
    """Passes when the answer is JSON and, with ``schema``, valid against that JSON Schema."""

    type: ClassVar[str] = "is_json"

    async def evaluate(self, ctx: EvaluationContext, config: EvaluatorConfig) -> EvaluatorScore:
        spec = config.spec
        assert isinstance(spec, IsJsonSpec)
        schema = _schema_for(spec, ctx.case.eval_file)
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
