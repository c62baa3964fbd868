"""Graders of what the agent left in its workspace (docs/eval-files.md, "Workspace
graders"): ``file_exists``, ``file_contains``, ``command`` and ``diff``.

They read the case's workspace as the agent left it (``EvaluationContext.workspace``): its
files, and what changed since the run started (taken right after the agent's answer,
before any grader ran). ``command`` runs a shell command there (``pytest -q``), in the
workspace's sandbox, after the agent; its exit code is the grade, or a score read from its
output (``score_pattern``). A case that has no workspace cannot have these graders: the
loader says so. Paths are relative to the workspace and never leave it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field

from agentv.cases import EvaluatorConfig
from agentv.errors import Problem
from agentv.evaluators.base import (
    EvaluationContext,
    EvaluatorScore,
    EvaluatorSpec,
    Loading,
    failed,
    number_text,
)
from agentv.evaluators.deterministic import regex_problem
from agentv.system.env import child_environment
from agentv.system.masking import shorten
from agentv.system.process import decode_head, read_head

#: the most of a file ``file_contains`` reads
MAX_FILE_BYTES = 32 * 1024 * 1024
#: characters of a command's output the record keeps (its end)
OUTPUT_CHARS = 4000
#: a command's time limit when neither it nor the run sets one (seconds)
DEFAULT_COMMAND_TIMEOUT_S = 600.0
#: exit codes of a shell that could not run the command (not found, not executable)
_CANNOT_RUN = (126, 127)
_GLOB_CHARS = re.compile(r"[*?\[]")
_REGEX_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "x": re.VERBOSE}

Paths = Annotated[str, Field(min_length=1)] | list[Annotated[str, Field(min_length=1)]]


def _as_list(value: str | list[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def _inside(raw: str) -> str | None:
    """``raw`` as a path from the workspace's top, or None when it would leave it."""
    pure = PurePosixPath(raw.replace("\\", "/"))
    if pure.is_absolute() or ".." in pure.parts:
        return None
    return pure.as_posix()


def _path_problems(key: str, values: list[str]) -> list[Problem]:
    return [
        Problem(
            key,
            f"{value!r} is not a path inside the workspace",
            "give a path relative to the workspace's top, without `..`",
        )
        for value in values
        if _inside(value) is None
    ]


@lru_cache(maxsize=1024)
def glob_pattern(pattern: str) -> re.Pattern[str]:
    """A workspace path pattern as a regex: ``*`` (within a folder), ``**`` (any folders),
    ``?``, ``[...]``; a pattern without them names a file, or a folder and all it holds."""
    pattern = pattern.strip("/") or "."
    if not _GLOB_CHARS.search(pattern):
        return re.compile(re.escape(pattern) + r"(?:/.*)?")
    out, i = [], 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**/", i):
            out.append(r"(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(r".*")
            i += 2
        elif char == "*":
            out.append(r"[^/]*")
            i += 1
        elif char == "?":
            out.append(r"[^/]")
            i += 1
        elif char == "[":
            end = pattern.find("]", i + 1)
            if end < 0:
                out.append(re.escape(char))
                i += 1
            else:
                body = pattern[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append(f"[{body}]")
                i = end + 1
        else:
            out.append(re.escape(char))
            i += 1
    return re.compile("".join(out) + r"(?:/.*)?")


def matches(pattern: str, path: str) -> bool:
    """Whether the workspace ``path`` is (or is inside) what ``pattern`` names."""
    return glob_pattern(pattern).fullmatch(path) is not None


def _no_workspace(config: EvaluatorConfig) -> EvaluatorScore:
    return failed(
        config,
        "there is no workspace to grade (a regraded answer: its workspace is gone); "
        "run the case again to grade what its agent leaves",
    )


def _scored(config: EvaluatorConfig, hits: list[str], misses: list[str]) -> EvaluatorScore:
    total = len(hits) + len(misses)
    return EvaluatorScore(
        config.name,
        config.type,
        len(hits) / total if total else 1.0,
        hits,
        misses,
        expected_aspect_count=total or 1,
    )


# --- file_exists ------------------------------------------------------------------------------


class FileExistsSpec(EvaluatorSpec):
    """Passes when every ``path`` is in the workspace (a pattern: at least one file it
    names); the score is the share found."""

    type: Literal["file_exists"]
    path: Paths
    needs_workspace: ClassVar[bool] = True

    def check(self, config: EvaluatorConfig, at: Loading) -> list[Problem]:
        return _path_problems("path", _as_list(self.path))

    async def evaluate(self, ctx: EvaluationContext, config: EvaluatorConfig) -> EvaluatorScore:
        workspace = ctx.workspace
        if workspace is None:
            return _no_workspace(config)
        hits, misses = [], []
        for raw in _as_list(self.path):
            where = _inside(raw)
            if where is None:
                return failed(config, f"{raw!r} is not a path inside the workspace")
            found = _exists(workspace.path, where)
            (hits if found else misses).append(
                f"{where} {'exists' if found else 'does not exist'} in the workspace"
            )
        return _scored(config, hits, misses)


def _exists(root: Path, where: str) -> bool:
    if not _GLOB_CHARS.search(where):
        return (root / where).exists()
    return any(True for _ in root.glob(where))


def _renamed(problem: Problem, key: str) -> Problem:
    """A regex problem said of ``key`` (the pattern's own key here) instead of ``value``."""
    if problem.key != "value":
        return problem
    return Problem(key, problem.message, problem.hint.replace("`value`", f"`{key}`"))


# --- file_contains ----------------------------------------------------------------------------


@lru_cache(maxsize=256)
def _compiled(pattern: str, flags: str) -> re.Pattern[str]:
    bits = 0
    for letter in flags:
        bits |= _REGEX_FLAGS.get(letter, 0)
    return re.compile(pattern, bits)


class FileContainsSpec(EvaluatorSpec):
    """Passes when the workspace's file ``path`` contains ``value`` (text), or has a match
    of ``pattern`` (a regular expression, ``flags``: i, m, s, x)."""

    type: Literal["file_contains"]
    path: Annotated[str, Field(min_length=1)]
    value: str | None = None
    pattern: Annotated[str, Field(min_length=1)] | None = None
    flags: str | None = None
    needs_workspace: ClassVar[bool] = True

    def check(self, config: EvaluatorConfig, at: Loading) -> list[Problem]:
        problems = _path_problems("path", [self.path])
        if (self.value is None) == (self.pattern is None):
            problems.append(
                Problem(
                    "value",
                    "`file_contains` needs either `value` (text) or `pattern` (a regex)",
                    "give one of them",
                )
            )
        if self.pattern is not None:
            problem = regex_problem(self.pattern, self.flags)
            if problem is not None:
                problems.append(_renamed(problem, "pattern"))
        return problems

    async def evaluate(self, ctx: EvaluationContext, config: EvaluatorConfig) -> EvaluatorScore:
        workspace = ctx.workspace
        if workspace is None:
            return _no_workspace(config)
        where = _inside(self.path)
        if where is None:
            return failed(config, f"{self.path!r} is not a path inside the workspace")
        file = workspace.path / where
        if not file.is_file():
            return _scored(config, [], [f"{where} does not exist in the workspace"])
        try:
            data, more = read_head(file, MAX_FILE_BYTES)
        except OSError as exc:
            return failed(config, f"cannot read {where}: {exc.strerror or exc}")
        text = decode_head(data, more)
        if self.pattern is not None:
            found = _compiled(self.pattern, self.flags or "").search(text) is not None
            what = f"a match of /{self.pattern}/{self.flags or ''}"
        else:
            assert self.value is not None
            found = self.value in text
            what = repr(self.value if len(self.value) <= 80 else self.value[:77] + "...")
        line = f"{where} {'contains' if found else 'does not contain'} {what}"
        return _scored(config, [line] if found else [], [] if found else [line])


# --- command ----------------------------------------------------------------------------------


class CommandSpec(EvaluatorSpec):
    """Runs ``command`` through the shell in the workspace after the agent (in its
    sandbox): exit code 0 passes, or, with ``score_pattern``, the score is read from its
    output."""

    type: Literal["command"]
    command: Annotated[str, Field(min_length=1)]
    cwd: Annotated[str, Field(min_length=1)] | None = None
    timeout_seconds: Annotated[float, Field(gt=0)] | None = None
    #: a regex over the output (stdout, then stderr): a group ``score`` (0 to 1), or
    #: ``passed`` with ``failed`` or ``total`` (the last match counts)
    score_pattern: Annotated[str, Field(min_length=1)] | None = None
    inherit_env: list[Annotated[str, Field(min_length=1)]] | None = None
    needs_workspace: ClassVar[bool] = True

    key_hints: ClassVar[Mapping[str, str]] = {
        **EvaluatorSpec.key_hints,
        "command": "add `command:` with the shell command to run in the workspace",
    }

    def check(self, config: EvaluatorConfig, at: Loading) -> list[Problem]:
        problems = _path_problems("cwd", [self.cwd]) if self.cwd else []
        if self.score_pattern is not None:
            problem = regex_problem(self.score_pattern, None)
            if problem is not None:
                problems.append(_renamed(problem, "score_pattern"))
            else:
                groups = set(re.compile(self.score_pattern).groupindex)
                if "score" not in groups and not (
                    "passed" in groups and groups & {"failed", "total"}
                ):
                    problems.append(
                        Problem(
                            "score_pattern",
                            "`score_pattern` has no group to read a score from",
                            "name a group `score` (a number from 0 to 1), or `passed` with "
                            r"`failed` or `total`: (?P<passed>\d+) passed",
                        )
                    )
        return problems

    async def evaluate(self, ctx: EvaluationContext, config: EvaluatorConfig) -> EvaluatorScore:
        workspace = ctx.workspace
        if workspace is None:
            return _no_workspace(config)
        cwd = workspace.path
        if self.cwd:
            where = _inside(self.cwd)
            if where is None:
                return failed(config, f"`cwd` {self.cwd!r} is not a folder inside the workspace")
            cwd = workspace.path / where
        timeout = self.timeout_seconds or ctx.timeout or DEFAULT_COMMAND_TIMEOUT_S
        env = child_environment(
            inherit=self.inherit_env, extra={"AGENTV_WORKSPACE": str(workspace.path)}
        )
        raw: dict[str, Any] = {"command": self.command, "cwd": str(cwd)}
        try:
            result = await workspace.run(self.command, cwd=cwd, timeout=timeout, env=env)
        except NotADirectoryError:
            return failed(config, f"cannot run `{self.command}`: {cwd} is not a folder")
        except OSError as exc:
            return failed(config, f"cannot run `{self.command}`: {exc.strerror or exc}")
        output = "\n".join(p for p in (result.stdout.strip(), result.stderr.strip()) if p)
        raw.update(
            exit_code=result.exit_code,
            duration_ms=round(result.duration_s * 1000, 3),
            output=shorten(output, OUTPUT_CHARS, keep="tail"),
        )
        if result.timed_out:
            miss = f"`{self.command}` did not finish within {timeout:g} s and was stopped"
            return _with_raw(_scored(config, [], [miss]), raw)
        if result.exit_code in _CANNOT_RUN:
            tail = shorten(result.stderr.strip(), 300, keep="tail")
            return failed(
                config,
                f"`{self.command}` could not run (exit code {result.exit_code})"
                + (f": {tail}" if tail else ""),
                raw_request=raw,
            )
        if self.score_pattern is None:
            ok = result.exit_code == 0
            line = f"`{self.command}` {result.describe_exit()}"
            return _with_raw(_scored(config, [line] if ok else [], [] if ok else [line]), raw)
        score = _read_score(self.score_pattern, output)
        if isinstance(score, str):
            return _with_raw(_scored(config, [], [f"`{self.command}`: {score}"]), raw)
        line = f"`{self.command}` scored {score:.3g} ({result.describe_exit()})"
        verdict = EvaluatorScore(
            config.name,
            config.type,
            score,
            [line] if score >= 1 else [],
            [] if score >= 1 else [line],
        )
        return _with_raw(verdict, raw)


def _with_raw(score: EvaluatorScore, raw: dict[str, Any]) -> EvaluatorScore:
    score.raw_request = raw
    return score


def _read_score(pattern: str, output: str) -> float | str:
    """The score ``pattern`` reads from the last of its matches in ``output``, or why
    there is none."""
    found = list(re.compile(pattern).finditer(output))
    if not found:
        return "its output has no match of `score_pattern`"
    groups = {k: v for k, v in found[-1].groupdict().items() if v is not None}
    if "score" in groups:
        value = number_text(groups["score"])
        if value is None or not math.isfinite(value) or not 0 <= value <= 1:
            return f"the score {groups['score']!r} is not a number from 0 to 1"
        return value
    passed = int(groups.get("passed", "0") or 0) if groups.get("passed", "").isdigit() else None
    if passed is None:
        return "the match of `score_pattern` has no number of passed checks"
    if "total" in groups and groups["total"].isdigit():
        total = int(groups["total"])
    else:
        failed_ = groups.get("failed", "0")
        total = passed + (int(failed_) if failed_.isdigit() else 0)
    if total <= 0:
        return "the match of `score_pattern` counts no checks"
    return min(1.0, passed / total)


# --- diff -------------------------------------------------------------------------------------


class DiffSpec(EvaluatorSpec):
    """Passes when the agent changed what ``must_change`` names and nothing
    ``must_not_change`` names (paths or patterns); the score is the share of those rules
    kept."""

    type: Literal["diff"]
    must_change: list[Annotated[str, Field(min_length=1)]] | None = None
    must_not_change: list[Annotated[str, Field(min_length=1)]] | None = None
    needs_workspace: ClassVar[bool] = True

    def check(self, config: EvaluatorConfig, at: Loading) -> list[Problem]:
        if not self.must_change and not self.must_not_change:
            return [
                Problem(
                    "must_change",
                    "`diff` needs `must_change` or `must_not_change`: with neither, every "
                    "workspace would pass",
                    "list the paths (or patterns: src/**/*.py) that must or must not change",
                )
            ]
        return [
            *_path_problems("must_change", list(self.must_change or ())),
            *_path_problems("must_not_change", list(self.must_not_change or ())),
        ]

    async def evaluate(self, ctx: EvaluationContext, config: EvaluatorConfig) -> EvaluatorScore:
        workspace = ctx.workspace
        if workspace is None:
            return _no_workspace(config)
        changes = workspace.changes
        if changes is None:
            reason = workspace.diff_error or "they were not measured"
            return failed(config, f"what the agent changed is not known: {reason}")
        changed = changes.paths
        hits, misses = [], []
        for pattern in self.must_change or ():
            touched = [p for p in changed if matches(pattern, p)]
            if touched:
                hits.append(f"{pattern} changed ({_listed(touched)})")
            else:
                misses.append(f"{pattern} did not change")
        for pattern in self.must_not_change or ():
            touched = [p for p in changed if matches(pattern, p)]
            if touched:
                misses.append(f"{pattern} must not change, but {_listed(touched)} did")
            else:
                hits.append(f"{pattern} did not change")
        return _scored(config, hits, misses)


def _listed(paths: list[str], limit: int = 5) -> str:
    shown = ", ".join(paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")
