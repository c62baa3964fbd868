"""Checks of evaluator settings that can be made before the first request.

A broken ``regex`` pattern, an invalid JSON Schema or a code evaluator's missing script
would otherwise be found only when the case is graded, after its answer was paid for. The
loader runs these checks on every evaluator, so that ``agentv eval`` and ``agentv validate``
report them alike, at their place in the file.

Each check follows what the evaluator does at run time (``evaluators/deterministic.py``,
``evaluators/code.py``) exactly: the same flags, the same way a ``schema`` string is told
apart from a file name, the same folder a script runs in. Each returns a ``Problem`` (what
is wrong, the key it is about, how to fix it) or None.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from agentv.system.readfile import read_input, special
from agentv.yaml.stream import stream_yaml

# As `evaluators/deterministic.py` reads `flags`.
REGEX_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE}


@dataclass(frozen=True, slots=True)
class Problem:
    """One problem with an evaluator's settings: ``key`` is the evaluator's key it is about
    (a path of keys for a nested one: ``("expected", 2, "args_schema")``)."""

    key: str | tuple[str | int, ...]
    message: str
    hint: str

    @property
    def path(self) -> tuple[str | int, ...]:
        """``key`` as a path of keys."""
        return self.key if isinstance(self.key, tuple) else (self.key,)


def _show(value: str) -> str:
    shown = json.dumps(value, ensure_ascii=False)
    return shown if len(shown) <= 82 else shown[:80] + '…"'


@lru_cache(maxsize=1024)  # large suites repeat the same pattern in every case
def regex_problem(pattern: str, flags: str | None) -> Problem | None:
    """Why a ``regex`` evaluator's ``value`` (with its ``flags``) cannot be used, or None."""
    bits = 0
    for letter in flags or "":
        if letter not in REGEX_FLAGS:
            return Problem(
                "flags",
                f"unknown regex flag {letter!r} in {flags!r}",
                "valid flags: i (ignore case), m (multi-line), s (dot matches newlines), "
                "x (verbose)",
            )
        bits |= REGEX_FLAGS[letter]
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
    return None


def parameters_problem(parameters: Any) -> str | None:
    """Why a tool's ``parameters`` cannot be sent to an API (the APIs take a JSON Schema of
    type ``object``), or None."""
    if not isinstance(parameters, dict):
        return "must be a JSON Schema (a mapping)"
    if parameters.get("type", "object") != "object":
        return f"must be of type `object` (the arguments of a call), not {parameters['type']!r}"
    problem = check_schema(parameters, "")
    return None if problem is None else problem.message.removeprefix("invalid JSON Schema ")


# Words after which the rest of a command is code or a module name, not a script file.
_INLINE_CODE_OPTIONS = {"-c", "-e", "-m", "-p", "--eval", "--print", "--command"}
# Programs that run the script file named after them (`python3 check.py`, `uv run x.py`).
_RUNNERS = re.compile(
    r"(python|py|pypy|node|nodejs|bun|deno|ruby|perl|php|bash|sh|zsh|dash|ksh|fish|pwsh|"
    r"powershell|rscript|lua|tsx|ts-node|uv|uvx|poetry|pipenv|hatch|npx|pnpm|yarn|"
    r"dotnet|java|julia|elixir|groovy|swift|kotlin)"
    r"(\d+(\.\d+)*)?(\.exe)?",
    re.IGNORECASE,
)
# Words that may stand between a runner and its script (`uv run`, `npx tsx`, `deno run`).
_PASS_THROUGH = {"run", "exec", "x", "tsx", "ts-node", "python", "python3", "node"}
SCRIPT_SUFFIXES = (
    ".py", ".sh", ".bash", ".zsh", ".js", ".mjs", ".cjs", ".ts", ".mts", ".cts",
    ".rb", ".pl", ".php", ".r", ".ps1", ".lua", ".jl",
)  # fmt: skip
_SHELL_OPERATORS = {"|", "||", "&", "&&", ";", ">", ">>", "<", "2>", "2>&1", "(", ")"}


def _looks_like_path(word: str) -> bool:
    """A word that names a file: it has a folder part or a script's extension."""
    if not word or word.startswith("-") or any(c in word for c in " \t$*?`{}[]<>|;&="):
        return False
    if "://" in word:
        return False  # a URL
    return "/" in word or word.lower().endswith(SCRIPT_SUFFIXES)


def script_words(script: str) -> list[str]:
    """The words of a command as the shell splits them, without leading ``VAR=value``."""
    try:
        words = shlex.split(script, comments=False, posix=True)
    except ValueError:
        return []  # unbalanced quotes: left to the shell, which says it better
    # `VAR=value cmd ...`: the assignments are not the command
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
        words.pop(0)
    return words


def script_file(script: str) -> str | None:
    """The file a ``code`` evaluator's command runs, when it names one; else None.

    Only words that look like file paths are returned: the command itself
    (``./check.sh``, ``scripts/grade``) or the script given to a known runner
    (``python3 check.py``, ``uv run grade.py``, ``node dist/check.js``). A program found on
    PATH, inline code (``python -c ...``) and anything after a shell operator are never
    checked: the shell would find them, not agentv.
    """
    words = script_words(script)
    if not words or words[0] in _SHELL_OPERATORS:
        return None
    program = words[0]
    if _looks_like_path(program):
        return program
    if not _RUNNERS.fullmatch(program):
        return None
    for word in words[1:]:
        if word in _SHELL_OPERATORS or word in _INLINE_CODE_OPTIONS:
            return None
        if word.startswith("-"):
            continue  # an option of the runner
        if _looks_like_path(word):
            return word
        if word not in _PASS_THROUGH:
            return None  # an argument we cannot interpret: do not guess
    return None


def script_problem(script: str, cwd: Path, what: str = "code evaluator") -> Problem | None:
    """Why a script file (a ``code`` evaluator's, or ``what``'s) cannot be run from ``cwd``,
    or None."""
    word = script_file(script)
    if word is None:
        return None
    path = Path(word).expanduser()
    if not path.is_absolute():
        path = cwd / path
    if path.exists():
        return None
    if word == script_words(script)[0] and "/" not in word and shutil.which(word):
        return None  # a program on PATH that merely ends like a script (`tool.py`)
    return Problem(
        "script",
        f"{what} script not found: {word}",
        f"the command runs in {cwd}, where {word} does not exist; create it, fix the "
        f"path, or set `cwd` on the {what.split()[-1]} to the folder that holds it",
    )


# --- trajectory evaluators ---------------------------------------------------------------------


def trajectory_problems(spec: Any, schemas: SchemaChecker, eval_dir: Path) -> list[Problem]:
    """What makes a trajectory evaluator's settings unusable (``evaluators/specs.py``):
    keys that do not go together, limits that cannot both hold, argument schemas that are
    not valid JSON Schemas. As ``evaluators/trajectory.py`` reads them."""
    from agentv.evaluators import specs

    out: list[Problem] = []
    if isinstance(spec, specs.ToolUsedSpec | specs.ToolNotUsedSpec):
        out += _call_problems(spec, (), schemas, eval_dir)
    if isinstance(spec, specs.ToolUsedSpec | specs.StepCountSpec):
        low, high = spec.min, spec.max
        if isinstance(spec, specs.StepCountSpec) and low is None and high is None:
            out.append(
                Problem(
                    "max",
                    "`step_count` needs `min`, `max` or both",
                    "give the fewest (`min`) and/or the most (`max`) tool calls allowed",
                )
            )
        if low is not None and high is not None and high < low:
            out.append(
                Problem("max", f"`max` ({high}) is less than `min` ({low})", "no count could pass")
            )
    if isinstance(spec, specs.ToolTrajectorySpec):
        if spec.mode == "any_order":
            if not spec.minimums:
                out.append(
                    Problem(
                        "minimums",
                        "`mode: any_order` needs `minimums`: each tool and its fewest calls",
                        "write `minimums: {search: 2, fetch: 1}`, or use `mode: superset` "
                        "with `expected` calls",
                    )
                )
            if spec.expected is not None:
                out.append(
                    Problem(
                        "expected",
                        "`mode: any_order` counts `minimums`; it takes no `expected` list",
                        "use `mode: superset` (these calls, in any order, others allowed) "
                        "or `unordered` (these calls and no other)",
                    )
                )
        else:
            if not spec.expected:
                out.append(
                    Problem(
                        "expected",
                        f"`mode: {spec.mode}` needs `expected`: the calls, in order",
                        "list them: `- search` or `- {tool: search, args: {query: ...}}`",
                    )
                )
            if spec.minimums is not None:
                out.append(
                    Problem(
                        "minimums",
                        f"`minimums` is for `mode: any_order`, not `{spec.mode}`",
                        "remove `minimums`, or use `mode: any_order`",
                    )
                )
    if isinstance(spec, specs.ToolCallF1Spec) and not spec.expected:
        out.append(
            Problem(
                "expected",
                "`expected` must list at least one call",
                "list the calls the candidate should make",
            )
        )
    if isinstance(spec, specs.ToolTrajectorySpec | specs.ToolCallF1Spec):
        for i, entry in enumerate(spec.expected or ()):
            if not isinstance(entry, str):
                out += _call_problems(entry, ("expected", i), schemas, eval_dir)
    return out


def _call_problems(
    call: Any, at: tuple[str | int, ...], schemas: SchemaChecker, eval_dir: Path
) -> list[Problem]:
    out = []
    if call.args_match == "exact" and call.args is None:
        out.append(
            Problem(
                (*at, "args_match"),
                "`args_match: exact` needs `args`: the arguments the call must have",
                "give `args`, or leave `args_match` out",
            )
        )
    problem = schemas.problem(call.args_schema, eval_dir)
    if problem is not None:
        out.append(
            Problem(
                (*at, "args_schema"),
                problem.message,
                problem.hint.replace("`schema`", "`args_schema`").replace(
                    "under `schema:`", "under `args_schema:`"
                ),
            )
        )
    return out
