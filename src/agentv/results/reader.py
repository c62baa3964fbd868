"""Reading a results file back: the one reader that every view of results uses (summary,
``agentv report``, ``agentv compare``, JUnit, ``--resume`` and reruns, the Python API).

A results file is JSON Lines (one record a line, as ``agentv eval`` writes it) or, for
``.yaml`` / ``.yml``, a stream of YAML documents (one record each). Records come one at a
time (a file of any size reads in flat memory), each checked against ``EvalResult``: a line
that is not a result (not JSON, not a mapping, a field of the wrong type, nested too deep)
never stops the reading; it is reported as a ``Diagnostic`` with its line number and left
out. A strict reader (``compare``, JUnit) raises ``InputError`` for it instead, except for
an unfinished last line: a run stopped while writing it, which every reader leaves out.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import orjson
from pydantic import ValidationError

from agentv.errors import Diagnostic, DiagnosticsView, InputError
from agentv.results.record import EvalResult, RunKey

YAML_SUFFIXES = (".yaml", ".yml")
#: how a user is told to fix a file that is not results
_HINT = "give a results file written by agentv eval (JSON Lines, or YAML for .yaml/.yml)"


def results_format(path: Path) -> str:
    """``"yaml"`` for ``.yaml`` / ``.yml`` files, else ``"jsonl"``."""
    return "yaml" if path.suffix.lower() in YAML_SUFFIXES else "jsonl"


@dataclass
class ResultsReader(DiagnosticsView):
    """The records of one results file, one at a time: ``for line, result in reader``.

    ``diagnostics`` collects, as warnings, every line that is not a result (so far);
    ``strict`` makes such a line an ``InputError`` instead (an unfinished last line aside).
    """

    path: Path
    strict: bool = False
    diagnostics: list[Diagnostic] = field(default_factory=list)
    #: records left out by ``latest`` because a later one is about the same run
    superseded: int = 0

    @property
    def format(self) -> str:
        """``"jsonl"`` or ``"yaml"``."""
        return results_format(self.path)

    def __iter__(self) -> Iterator[tuple[int, EvalResult]]:
        try:
            handle = self.path.open("rb")
        except OSError as exc:
            raise InputError(
                f"cannot read results file {self.path}: {exc.strerror or exc}"
            ) from None
        with handle:
            items = _yaml_items(handle) if self.format == "yaml" else _json_items(handle)
            for number, data, problem in items:
                if problem is None:
                    try:
                        result = EvalResult.model_validate(data)
                    except ValidationError as exc:
                        problem = _field_problem(exc)
                    except RecursionError:
                        problem = "nested too deep"
                    else:
                        result._read_at = number
                        yield number, result
                        continue
                self._bad(number, problem)

    def latest(self) -> Iterator[tuple[int, EvalResult]]:
        """The latest record of every run (``EvalResult.run_key``) in file order: a record
        written again for a run (a resumed or rerun run) supersedes the earlier ones. The
        file is read twice, holding only each run's line number in between; ``superseded``
        counts the records left out."""
        last: dict[RunKey, int] = {}
        total = 0
        for line, result in self:
            last[result.run_key] = line
            total += 1
        self.superseded = total - len(last)
        keep = set(last.values())
        again = ResultsReader(self.path, strict=False)
        for line, result in again:
            if line in keep:
                yield line, result

    def _bad(self, line: int, problem: str) -> None:
        partial = problem == _UNFINISHED
        if self.strict and not partial:
            raise InputError(f"{self.path}:{line}: not a result ({problem}); {_HINT}")
        hint = None if partial else _HINT
        self.diagnostics.append(
            Diagnostic(
                self.path, f"not a result: {problem}", severity="warning", line=line, hint=hint
            )
        )


def read_results(path: Path, *, strict: bool = False) -> ResultsReader:
    """A reader of the results file at ``path`` (nothing is read before it is iterated);
    ``InputError`` when the file is missing or not a regular file."""
    if not path.exists():
        raise InputError(f"results file not found: {path}; {_HINT}")
    if path.is_dir():
        raise InputError(f"{path} is a folder, not a results file; {_HINT}")
    return ResultsReader(path, strict=strict)


_UNFINISHED = "an unfinished last line (a run stopped while writing it)"


def _json_items(handle: IO[bytes]) -> Iterator[tuple[int, Any, str | None]]:
    """(line, data, problem) for each non-blank line of a JSON Lines file."""
    for number, line in enumerate(handle, 1):
        if not line.strip():
            continue
        if not line.endswith(b"\n") and not _parses(line):
            yield number, None, _UNFINISHED
            continue
        try:
            data = orjson.loads(line)
        except orjson.JSONDecodeError:
            try:  # NaN, Infinity, lone surrogates: what Python's json accepts
                data = json.loads(line.decode("utf-8", errors="surrogateescape"))
            except (ValueError, RecursionError):
                yield number, None, "not JSON"
                continue
        if not isinstance(data, dict):
            yield number, None, "not a JSON object"
            continue
        yield number, data, None


def _parses(line: bytes) -> bool:
    try:
        orjson.loads(line)
    except orjson.JSONDecodeError:
        return False
    return True


def _yaml_items(handle: IO[bytes]) -> Iterator[tuple[int, Any, str | None]]:
    """(line, data, problem) for each document of a YAML stream; the line is where the
    document's value starts. A syntax error ends the reading (what follows it cannot be
    told apart)."""
    import yaml

    loader_class = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    loader = loader_class(handle)
    line = 1
    try:
        while True:
            try:
                if not loader.check_node():
                    return
                node = loader.get_node()
                line = node.start_mark.line + 1
                data = loader.construct_document(node)
            except yaml.MarkedYAMLError as exc:
                mark = exc.problem_mark or exc.context_mark
                at = mark.line + 1 if mark is not None else line
                yield at, None, f"not YAML ({exc.problem or exc})"
                return
            except (yaml.YAMLError, ValueError, RecursionError) as exc:
                yield line, None, f"not YAML ({exc})"
                return
            if data is None:  # an empty document
                continue
            if not isinstance(data, dict):
                yield line, None, "not a mapping"
                continue
            yield line, data, None
    finally:
        loader.dispose()


def _field_problem(exc: ValidationError) -> str:
    """The first wrong field of a record, said briefly (``score: must be a number``)."""
    first = exc.errors(include_url=False, include_input=False)[0]
    where = ".".join(str(part) for part in first["loc"]) or "the record"
    return f"{where}: {first['msg'].lower()}"
