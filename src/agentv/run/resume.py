"""Picking up where a results file left off. A results file is the unit of a run: each
record is one run of a case (dataset, eval id, target, repeat: ``EvalResult.run_key``), and
the latest record of a run supersedes the earlier ones (docs/after-the-run.md).

``--resume`` runs every planned run the file has no record of, and every run whose prompt
changed since its record was written (the run says how many); with ``--retry-errors`` also
the runs whose latest record is ``error`` or ``invalid``. ``--rerun-failed`` /
``--rerun-errors`` run again exactly the runs whose latest record went wrong. Both append
to the file, so it keeps holding the whole truth.

A killed run may have left a partial last line (a partial last document in YAML): it is
moved to ``RESULTS.partial`` (never silently lost) and the file is cut back to its last
whole record.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from agentv.errors import Diagnostic, InputError
from agentv.messages import chat_to_dicts
from agentv.prompts import Prompt
from agentv.results.reader import read_results, results_format
from agentv.results.record import CaseKey, RunKey, put_back_large_content

#: what --rerun-failed and --rerun-errors pick
RERUN_FAILED = frozenset({"failed", "error", "invalid", "user_error"})
RERUN_ERRORS = frozenset({"error", "invalid", "user_error"})
#: what --resume --retry-errors runs again
RETRIED = RERUN_ERRORS


@dataclass(frozen=True, slots=True)
class Previous:
    """What a results file says of one run of a case."""

    status: str
    question: str | None
    messages: Any  # raw_request.chat_prompt, as written
    plan_digest: str | None = None  # a live conversation's (``run.conversation.plan_digest``)


@dataclass
class ResultsState:
    """A results file's complete records, and where they came from."""

    path: Path
    runs: dict[RunKey, Previous] = field(default_factory=dict)  # the latest record of each
    set_aside: int = 0  # bytes of a partial last line moved to ``.partial``
    #: lines of the file that are not results (left out: their runs count as not run)
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def runs_with(self, statuses: Iterable[str]) -> dict[CaseKey, set[int]]:
        """The runs whose latest record has one of ``statuses``: their repeats, by case."""
        wanted = set(statuses)
        found: dict[CaseKey, set[int]] = {}
        for key, prev in self.runs.items():
            if prev.status in wanted:
                found.setdefault(key[:3], set()).add(key[3])
        return found


def _repair_tail(path: Path) -> int:
    """Cut a partial last line off ``path`` into ``path.partial``; the bytes moved."""
    size = path.stat().st_size
    if size == 0:
        return 0
    with path.open("rb+") as fh:
        fh.seek(max(0, size - 1))
        if fh.read(1) == b"\n":
            return 0
        # find the start of the last line
        block = 64 * 1024
        end = size
        start = 0
        while end > 0:
            begin = max(0, end - block)
            fh.seek(begin)
            chunk = fh.read(end - begin)
            at = chunk.rfind(b"\n")
            if at >= 0:
                start = begin + at + 1
                break
            end = begin
        fh.seek(start)
        partial = fh.read()
        with path.with_name(path.name + ".partial").open("ab") as aside:
            aside.write(partial + b"\n")
            aside.flush()
            os.fsync(aside.fileno())
        fh.truncate(start)
    return len(partial)


def read_state(path: Path, *, repair: bool) -> ResultsState:
    """The latest record of every run of a results file (JSON Lines or YAML). With
    ``repair``, a partial last record is set aside first (``--resume`` appends to the
    file); without, it is ignored. A file that holds no result at all but lines that are
    not results is refused: it is not a results file."""
    if not path.is_file():
        raise InputError(f"results file not found: {path}; give a file that agentv eval wrote")
    state = ResultsState(path)
    if repair:
        yaml = results_format(path) == "yaml"
        state.set_aside = _repair_yaml_tail(path) if yaml else _repair_tail(path)
    reader = read_results(path)
    for _, result in reader:  # in file order: a later record of a run replaces the earlier
        raw = put_back_large_content(result.raw_request or {}, result.large_content or {})
        digest = raw.get("plan_digest")
        state.runs[result.run_key] = Previous(
            status=result.status,
            question=raw.get("question"),
            messages=raw.get("chat_prompt"),
            plan_digest=digest if isinstance(digest, str) else None,
        )
    state.diagnostics = reader.diagnostics
    if not state.runs and any(d.hint for d in reader.diagnostics):
        first = reader.diagnostics[0]
        raise InputError(
            f"{path} is not a results file (line {first.line}: {first.message}); give a "
            "results file that agentv eval wrote"
        )
    return state


def _repair_yaml_tail(path: Path) -> int:
    """Cut a partial last document off a YAML results file into ``path.partial``; the bytes
    moved. The writer writes each document (``---`` line and body) in one call, so only the
    last one can be partial: it is cut when it does not load. Only the last document is
    read (from the end, a block at a time)."""
    import yaml

    size = path.stat().st_size
    if size == 0:
        return 0
    with path.open("rb+") as fh:
        start = _last_document(fh, size)
        fh.seek(start)
        tail = fh.read()
        try:
            loaded = yaml.load(tail, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        except yaml.YAMLError:
            loaded = None
        if isinstance(loaded, dict) and tail.endswith(b"\n"):
            return 0
        with path.with_name(path.name + ".partial").open("ab") as aside:
            aside.write(tail if tail.endswith(b"\n") else tail + b"\n")
            aside.flush()
            os.fsync(aside.fileno())
        fh.truncate(start)
    return len(tail)


def _last_document(fh: BinaryIO, size: int) -> int:
    """Where the last ``---`` line of a YAML stream starts (0: there is one document)."""
    block = 64 * 1024
    end = size
    while end > 0:
        begin = max(0, end - block)
        fh.seek(begin)
        chunk = fh.read(min(size, end + 4) - begin)  # a separator may straddle blocks
        at = chunk.rfind(b"\n---\n")
        if at >= 0:
            return begin + at + 1
        end = begin
    return 0


def prompt_changed(previous: Previous, prompt: Prompt, *, is_agent: bool) -> bool:
    """Whether a case's prompt differs from what its record says was sent."""
    if previous.question is not None and previous.question != prompt.question:
        return True
    if is_agent or previous.messages is None:
        return False
    return previous.messages != chat_to_dicts(prompt.messages)
