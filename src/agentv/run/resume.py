"""Picking up where a results file left off: ``--resume`` runs the cases it has no complete
record of (appending to it), ``--rerun-failed`` / ``--rerun-errors`` run again the cases it
says went wrong.

Cases are matched by (dataset, eval id, target) as ``agentv compare`` matches them, and by
run (``repeat``) for a resume. A resumed case whose prompt changed since its record was
written (its question or its messages differ) runs again, and the run says how many.
A killed run may have left a partial last line: it is moved to ``RESULTS.partial`` (never
silently lost) and the file is cut back to its last whole record, so it stays valid JSONL.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentv.errors import Diagnostic, InputError
from agentv.messages import chat_to_dicts
from agentv.prompts import Prompt
from agentv.results.reader import read_results
from agentv.results.record import put_back_large_content

CaseKey = tuple[str, str, str]  # (dataset, eval id, target)
RunKey = tuple[str, str, str, int]  # ... and the repeat
#: what --rerun-failed and --rerun-errors pick
RERUN_FAILED = frozenset({"failed", "error", "invalid"})
RERUN_ERRORS = frozenset({"error", "invalid"})


@dataclass(frozen=True, slots=True)
class Previous:
    """What a results file says of one run of a case."""

    status: str
    question: str | None
    messages: Any  # raw_request.chat_prompt, as written


@dataclass
class ResultsState:
    """A results file's complete records, and where they came from."""

    path: Path
    runs: dict[RunKey, Previous] = field(default_factory=dict)
    invalid_lines: set[tuple[str, int]] = field(default_factory=set)  # (eval file, line)
    set_aside: int = 0  # bytes of a partial last line moved to ``.partial``
    #: lines of the file that are not results (left out: their runs count as not run)
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def cases_with(self, statuses: Iterable[str]) -> set[CaseKey]:
        """The cases that have a run with one of ``statuses``."""
        wanted = set(statuses)
        return {key[:3] for key, prev in self.runs.items() if prev.status in wanted}


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
    """The complete records of a JSON Lines results file. With ``repair``, a partial last
    line is set aside first (``--resume`` appends to the file); without, it is ignored."""
    if not path.is_file():
        raise InputError(f"results file not found: {path}; give a file that agentv eval wrote")
    state = ResultsState(path)
    if repair:
        state.set_aside = _repair_tail(path)
    reader = read_results(path)
    for _, result in reader:
        if result.eval_id is None:  # an invalid case without an id
            state.invalid_lines.add((str(result.eval_file), result.line or 0))
            continue
        raw = put_back_large_content(result.raw_request or {}, result.large_content or {})
        state.runs[result.run_key] = Previous(
            status=result.status,
            question=raw.get("question"),
            messages=raw.get("chat_prompt"),
        )
    state.diagnostics = reader.diagnostics
    return state


def prompt_changed(previous: Previous, prompt: Prompt, *, is_agent: bool) -> bool:
    """Whether a case's prompt differs from what its record says was sent."""
    if previous.question is not None and previous.question != prompt.question:
        return True
    if is_agent or previous.messages is None:
        return False
    return previous.messages != chat_to_dicts(prompt.messages)
