"""JSON Schemas as an eval file writes them, for the evaluators that take one (``is_json``'s
``schema``, the trajectory evaluators' ``args_schema``).

A schema is a mapping written in the file, a JSON object written as a string, or the path
of a JSON or YAML file relative to the eval file's folder. Before a run, ``SchemaChecker``
says why one cannot be used (as ``agentv validate`` says it, at its key); while grading,
``resolve_schema`` compiles each distinct one once, or gives the reason it cannot be used.
Both read a schema the same way, so that what the check accepts is what grading uses.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import yaml

from agentv.errors import Problem
from agentv.evaluators.schema_cycles import endless_ref
from agentv.system.readfile import read_input, special
from agentv.yaml.stream import stream_yaml

#: the type of a schema as written: a mapping, JSON text, or a file's path
JsonSchema = dict[str, Any] | str

# --- before the run: checked, each distinct schema once per eval file ----------------------


class SchemaChecker:
    """Checks ``is_json`` schemas, each distinct one once (a suite repeats them).

    ``root``: a schema file must lie inside this folder (the repository root), as every
    other file an eval file refers to; None: anywhere (``--allow-outside-root``).
    """

    def __init__(self, root: Path | None = None) -> None:
        self.root = root
        self._inline: dict[str, Problem | None] = {}
        self._files: dict[Path, Problem | None] = {}

    def problem(self, schema: dict[str, Any] | str | None, eval_dir: Path) -> Problem | None:
        """Why ``schema`` (as written in an ``is_json`` evaluator) cannot be used, or None.

        As at run time: a mapping is the schema itself; a string starting with ``{`` is the
        schema as JSON; any other string is a file (JSON, or YAML for ``.yaml``/``.yml``)
        relative to the eval file's folder.
        """
        if schema is None:
            return None
        if isinstance(schema, dict):
            return self._inline_problem(schema, "(inline)")
        stripped = schema.strip()
        if stripped.startswith("{"):
            try:
                data = json.loads(stripped)
            except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
                detail = (
                    f"{exc.msg} at character {exc.pos + 1}"
                    if isinstance(exc, json.JSONDecodeError)
                    else str(exc)
                )
                return Problem(
                    "schema",
                    f"invalid JSON Schema (inline string): not valid JSON: {detail}",
                    "write the schema as a YAML mapping under `schema:`, or give the path of "
                    "a schema file",
                )
            return self._inline_problem(data, "(inline string)")
        return self._file_problem(stripped, eval_dir)

    def _inline_problem(self, schema: Any, label: str) -> Problem | None:
        try:
            key = json.dumps(schema, sort_keys=True, default=str)
        except (TypeError, ValueError):  # keys that are not strings: check it every time
            return check_schema(schema, label)
        if key not in self._inline:
            self._inline[key] = check_schema(schema, label)
        return self._inline[key]

    def _file_problem(self, ref: str, eval_dir: Path) -> Problem | None:
        path = Path(ref).expanduser()
        if not path.is_absolute():
            path = eval_dir / path
        if path in self._files:
            return self._files[path]
        problem: Problem | None
        where = path.resolve()
        outside = self.root is not None and not (where == self.root or self.root in where.parents)
        if outside and not special(path):  # a FIFO or a device is named as one, never read
            # checked before anything is read: an untrusted eval file must not learn, or
            # show, what lies outside the repository
            problem = Problem(
                "schema",
                f"JSON Schema file {ref} resolves outside the repository root ({where})",
                f"keep schema files inside {self.root}, or pass --allow-outside-root if you "
                "trust this eval file",
            )
        elif not path.is_file() and not special(path):  # a FIFO is refused when read
            what = "is a folder, not a file" if path.is_dir() else "not found"
            problem = Problem(
                "schema",
                f"JSON Schema file {what}: {ref}",
                f"`schema` is a file path relative to the eval file's folder ({eval_dir}), "
                "or the schema itself as a mapping; looked at "
                f"{path}",
            )
        else:
            problem = _schema_file_problem(ref, path)
        self._files[path] = problem
        return problem


#: what reading a schema file may raise: unreadable, not UTF-8, not JSON or YAML, too deep
SCHEMA_READ_ERRORS = (OSError, UnicodeDecodeError, ValueError, RecursionError, yaml.YAMLError)


def read_schema_file(path: Path) -> Any:
    """The JSON Schema ``path`` holds: YAML for ``.yaml`` / ``.yml`` (nesting and cycles
    bounded as in eval files), else JSON. Raises one of ``SCHEMA_READ_ERRORS``."""
    text = read_input(path).decode("utf-8")  # a regular file only
    if path.suffix.lower() in (".yaml", ".yml"):
        return stream_yaml(text).data
    return json.loads(text)


def describe_read_error(exc: BaseException) -> str:
    """What went wrong reading a schema file, in words (an ``OSError`` by its reason)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)


def _schema_file_problem(ref: str, path: Path) -> Problem | None:
    try:
        data = read_schema_file(path)
    except SCHEMA_READ_ERRORS as exc:
        kind = "YAML" if path.suffix.lower() in (".yaml", ".yml") else "JSON"
        return Problem(
            "schema",
            f"cannot read JSON Schema file {ref}: {describe_read_error(exc)}",
            f"the file must hold one JSON Schema written as {kind} (UTF-8)",
        )
    return check_schema(data, f"in {ref}")


def check_schema(schema: Any, label: str) -> Problem | None:
    """Why ``schema`` is not a valid JSON Schema (for its ``$schema`` draft), or None; the
    ``is_json`` evaluator says the same at run time."""
    # Booleans are valid schemas (true: anything, false: nothing), as at run time.
    if not isinstance(schema, dict | bool):
        kind = {list: "a list", str: "text", int: "a number", float: "a number"}.get(
            type(schema), "nothing" if schema is None else type(schema).__name__
        )
        return Problem(
            "schema",
            f"invalid JSON Schema {label}: a schema must be a mapping, not {kind}",
            "write the schema as a mapping, such as `{type: object, required: [answer]}`",
        )
    if isinstance(schema, dict) and not isinstance(schema.get("$schema", ""), str):
        # jsonschema would crash on it (it looks the draft up by this string); worded as the
        # is_json evaluator says it at run time
        return Problem(
            "schema",
            f"invalid JSON Schema {label} at `$schema`: {schema['$schema']!r} is not a string",
            "`$schema` names the draft by its URI, such as "
            "`https://json-schema.org/draft/2020-12/schema`, or leave it out",
        )
    # jsonschema is imported only when a schema is used: it is slow to import.
    from jsonschema import exceptions, validators

    try:
        validators.validator_for(schema).check_schema(schema)
    except exceptions.SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)
        at = f" at `{where}`" if where else ""
        return Problem(
            "schema",
            f"invalid JSON Schema {label}{at}: {exc.message}",
            "fix the schema (https://json-schema.org/understanding-json-schema/)",
        )
    loop = endless_ref(schema)
    if loop is not None:
        return Problem(
            "schema",
            f"invalid JSON Schema {label}: it refers to itself without end (the `$ref` at "
            f"`{loop[0]}` leads back to `{loop[1]}` without looking any deeper into the value)",
            "a schema may refer to itself only below a keyword that looks into a part of "
            "the value (`properties`, `items`...), as a tree's children are trees",
        )
    return None


# --- while grading: compiled once per distinct schema -------------------------------------------


class CompiledSchema:
    """A checked JSON Schema, ready to validate."""

    __slots__ = ("label", "validator")

    def __init__(self, validator: Any, label: str) -> None:
        self.validator = validator
        self.label = label


# Compiled schemas by value (inline: canonical JSON; file: resolved path). A broken schema
# is cached as its error message so that it is diagnosed once, not once per case.
_SCHEMAS: dict[str, CompiledSchema | str] = {}


def _compile_schema(schema: Any, label: str) -> CompiledSchema | str:
    problem = check_schema(schema, label)  # worded as `agentv validate` says it
    if problem is not None:
        return problem.message
    # jsonschema is imported only when a schema is used: it is slow to import.
    from jsonschema import validators

    return CompiledSchema(validators.validator_for(schema)(schema), label)


def _inline_schema(schema: dict[str, Any]) -> CompiledSchema | str:
    try:
        key = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS).decode()
    except TypeError:
        key = json.dumps(schema, sort_keys=True, default=str)
    cached = _SCHEMAS.get(key)
    if cached is None:
        cached = _SCHEMAS[key] = _compile_schema(schema, "(inline)")
    return cached


def _file_schema(ref: str, base: Path) -> CompiledSchema | str:
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


def resolve_schema(
    schema: dict[str, Any] | str | None, eval_file: Path
) -> CompiledSchema | str | None:
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
