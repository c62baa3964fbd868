"""Picking up where a results file left off. A results file is the unit of a run: each
record is one run of a case (dataset, eval id, target, repeat: ``EvalResult.run_key``), and
the latest record of a run supersedes the earlier ones (docs/after-the-run.md).

``--resume`` runs every planned run the file has no record of, and every run whose prompt
changed since its record was written (the run says how many); with ``--rerun-errors`` of
the same file also the runs whose latest record is ``error`` or ``invalid``. ``--rerun-failed`` /
``--rerun-errors`` run again exactly the runs whose latest record went wrong. Both append
to the file, so it keeps holding the whole truth.

A killed run may have left a partial last line (a partial last document in YAML): it is
moved to ``RESULTS.partial`` (never silently lost) and the file is cut back to its last
whole record.

Whether a recorded run is still the run the case makes is the prompt sent
(``prompt_changed``) or, for a live conversation, ``plan_digest``. A results file's
simulated users' turns are read back here too, for ``--replay-user`` (``read_replays``).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import orjson

from agentv.errors import Diagnostic, InputError
from agentv.messages import chat_to_dicts
from agentv.prompts.builder import Prompt, build_prompt, build_question
from agentv.results.reader import MAX_RECORD_BYTES, read_results, results_format, yaml_record
from agentv.results.record import CaseKey, EvalResult, RunKey, put_back_large_content
from agentv.system.readfile import special
from agentv.trajectory import ToolStep, read_transcript

if TYPE_CHECKING:
    from agentv.cases import EvalCase, Turn

#: what --rerun-failed and --rerun-errors pick (an uncertain run did not pass: run again,
#: its judge gets another say)
RERUN_FAILED = frozenset({"failed", "uncertain", "error", "invalid", "user_error"})
RERUN_ERRORS = frozenset({"error", "invalid", "user_error"})
#: what --resume with --rerun-errors of the same file runs again
RETRIED = RERUN_ERRORS


@dataclass(frozen=True, slots=True)
class Unfinished:
    """A live conversation the run's budget stopped, as its ``skipped`` record holds it:
    ``--resume`` goes on from where it stopped, taking each recorded request's answer and
    each tool call's result from here instead of sending them again (docs/after-the-run.md,
    "Resume and rerun")."""

    turns: tuple[dict[str, Any], ...]  # the turns taken, as recorded (answers, grades)
    #: the tools called, by turn (None: the target could not say, ``trajectory_error``)
    steps: dict[int, tuple[ToolStep, ...]] | None
    trajectory_error: str | None
    cost: dict[str, Any] | None  # what the record says it cost (spent and reused)
    aspects: int  # the expected aspects of its graded turns
    ended: str | None  # how a simulated user's turns ended (``user.ended``), when they did
    origin: str  # where it is recorded (results file and line), for the record


@dataclass(frozen=True, slots=True)
class Previous:
    """What a results file says of one run of a case."""

    status: str
    question: str | None
    messages: Any  # raw_request.chat_prompt, as written
    plan_digest: str | None = None  # a live conversation's (``plan_digest``)
    score: float | None = None
    #: a run of ``--repeat auto``: its rule, threshold and reason (``agentv.run.repeats``)
    auto: dict[str, Any] | None = None
    unfinished: Unfinished | None = None  # a conversation the budget stopped part-way
    workspace_digest: str | None = None  # its workspace's settings (``Workspace.digest``)


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


def _partial_tail(fh: BinaryIO, size: int, yaml: bool) -> int | None:
    """Where a partial last record starts; None when the file ends with a whole record.
    JSON Lines: a last line without its newline (the writer writes a record and its newline
    in one call). YAML: a last document that lacks its final newline or does not load as
    a mapping (one larger than a record may be is left to the reader, which reports it).
    Nothing larger than a record is ever held in memory."""
    if size == 0:
        return None
    fh.seek(size - 1)
    ends_whole = fh.read(1) == b"\n"
    if not yaml:
        return None if ends_whole else _last_line(fh, size)
    start = _last_document(fh, size)
    if ends_whole:
        if size - start > MAX_RECORD_BYTES:
            return None
        fh.seek(start)
        if isinstance(yaml_record(fh.read()), dict):
            return None
    return start


def _last_line(fh: BinaryIO, size: int) -> int:
    """Where the last line starts."""
    block = 64 * 1024
    end = size
    while end > 0:
        begin = max(0, end - block)
        fh.seek(begin)
        at = fh.read(end - begin).rfind(b"\n")
        if at >= 0:
            return begin + at + 1
        end = begin
    return 0


def _line_at(fh: BinaryIO, offset: int) -> int:
    """The 1-based line that starts at ``offset`` (read in blocks)."""
    fh.seek(0)
    lines = 1
    while offset > 0:
        block = fh.read(min(offset, 1 << 20))
        if not block:
            break
        lines += block.count(b"\n")
        offset -= len(block)
    return lines


def _starts_a_record(fh: BinaryIO, start: int, yaml: bool) -> bool:
    """Whether the partial last record at ``start`` is the start of one agentv wrote (a
    JSON object, a ``---`` document, text without NUL bytes): a file whose last line is
    anything else is not a results file, and is left as it is."""
    fh.seek(start)
    head = fh.read(64)
    if not (head.startswith(b"---") if yaml else head.lstrip()[:1] == b"{"):
        return False
    fh.seek(start)
    while block := fh.read(1 << 20):
        if b"\0" in block:
            return False
    return True


def _set_aside(path: Path, fh: BinaryIO, start: int) -> int:
    """Move the bytes from ``start`` to the end to ``path.partial`` (a block at a time);
    the bytes moved."""
    moved = 0
    last = b"\n"
    with path.with_name(path.name + ".partial").open("ab") as aside:
        fh.seek(start)
        while block := fh.read(1 << 20):
            aside.write(block)
            moved += len(block)
            last = block[-1:]
        if last != b"\n":
            aside.write(b"\n")
        aside.flush()
        os.fsync(aside.fileno())
    fh.truncate(start)
    return moved


def check_results_file(path: Path) -> None:
    """``InputError`` unless ``path`` is a file (not missing, a folder, a FIFO, a device)."""
    what = special(path)
    if what is not None:
        raise InputError(
            f"{path} is {what}, not a results file; give a file that agentv eval wrote"
        )
    if not path.is_file():
        raise InputError(f"results file not found: {path}; give a file that agentv eval wrote")


def read_state(path: Path, *, repair: bool) -> ResultsState:
    """The latest record of every run of a results file (JSON Lines or YAML). With
    ``repair``, a partial last record is set aside first (``--resume`` appends to the
    file; the caller holds the file's lock: another run may be writing that record);
    without, it is ignored. A file that is not a results file is refused before anything in
    it is changed: one whose partial last line is not the start of a record (binary data,
    text of another kind), or that holds no result at all but lines that are not results."""
    check_results_file(path)
    state = ResultsState(path)
    if repair:
        yaml = results_format(path) == "yaml"
        with path.open("rb+") as fh:
            start = _partial_tail(fh, os.fstat(fh.fileno()).st_size, yaml)
            if start is not None:
                if not _starts_a_record(fh, start, yaml):
                    line = _line_at(fh, start)
                    raise InputError(
                        f"{path} is not a results file (line {line} is not a record agentv "
                        "wrote); --resume appends only to a results file that agentv eval "
                        "wrote, and left this one as it is"
                    )
                state.set_aside = _set_aside(path, fh, start)
    reader = read_results(path)
    named = False  # a record names its case, or why it has none: one agentv wrote
    for line, result in reader:  # in file order: a later record of a run replaces the earlier
        named = named or result.eval_id is not None or result.error is not None
        raw = put_back_large_content(result.raw_request or {}, result.large_content or {})
        digest = raw.get("plan_digest")
        workspace = result.workspace.get("digest") if isinstance(result.workspace, dict) else None
        state.runs[result.run_key] = Previous(
            status=result.status,
            question=raw.get("question"),
            messages=raw.get("chat_prompt"),
            plan_digest=digest if isinstance(digest, str) else None,
            score=result.score,
            auto=result.auto_repeat,
            unfinished=unfinished_of(result, f"{path}:{line}"),
            workspace_digest=workspace if isinstance(workspace, str) else None,
        )
    state.diagnostics = [*reader.diagnostics, *reader.notes]
    if not state.runs and any(d.hint for d in reader.diagnostics):
        first = reader.diagnostics[0]
        raise InputError(
            f"{path} is not a results file (line {first.line}: {first.message}); give a "
            "results file that agentv eval wrote"
        )
    if state.runs and not named:  # mappings, but none a case's record (say, a config file)
        raise InputError(
            f"{path} is not a results file (no record names an eval case); give a results "
            "file that agentv eval wrote"
        )
    return state


def eval_files_named(path: Path) -> list[str]:
    """The eval files a results file's records name (``eval_file``, a full path), each once,
    in the order they first come."""
    check_results_file(path)
    named: dict[str, None] = {}
    for _, result in read_results(path):
        if result.eval_file:
            named.setdefault(result.eval_file)
    return list(named)


#: how a simulated user's turns ended when only the conversation's grade was left
_TURNS_OVER = frozenset({"goal", "stop_when", "max_turns"})


def unfinished_of(result: EvalResult, origin: str) -> Unfinished | None:
    """What ``--resume`` goes on from in a conversation the budget stopped part-way: its
    ``skipped`` record with the turns it took. None for any other record, and for one
    whose turns do not hold what a conversation takes up again (a record written by hand,
    or damaged, or whose texts were cut to fit a results file): that conversation is run
    again from its start."""
    turns = result.turns
    if result.status != "skipped" or not result.skip_reason or not turns:
        return None
    if result.shortened:  # texts were cut to fit the file: not what was said
        return None
    if not isinstance(result.stopped, dict):
        return None
    store = result.large_content or {}
    kept = put_back_large_content(turns, store) if store else turns
    if not all(_takes_up(turn, number) for number, turn in enumerate(kept, 1)):
        return None
    simulated = isinstance(result.user, dict)  # its user turns are taken up too
    if simulated and not all(isinstance(turn.get("content"), str) for turn in kept):
        return None
    steps: dict[int, tuple[ToolStep, ...]] | None = {}
    if result.trajectory is not None:
        try:
            found = read_transcript(put_back_large_content(result.trajectory, store))
        except ValueError:
            return None
        by_turn: dict[int, list[ToolStep]] = {}
        for entry, step in zip(result.trajectory, found, strict=True):
            turn = entry.get("turn")
            if not isinstance(turn, int) or isinstance(turn, bool):
                return None
            by_turn.setdefault(turn, []).append(step.in_turn(turn))
        steps = {turn: tuple(taken) for turn, taken in by_turn.items()}
    elif result.trajectory_error is not None:
        steps = None
    ended = result.user.get("ended") if simulated else None
    return Unfinished(
        turns=tuple(kept),
        steps=steps,
        trajectory_error=result.trajectory_error,
        cost=result.cost if isinstance(result.cost, dict) else None,
        aspects=result.expected_aspect_count,
        ended=ended if ended in _TURNS_OVER else None,
        origin=origin,
    )


def _takes_up(turn: Any, number: int) -> bool:
    """Whether a recorded turn holds what taking it up again needs: its number, its answer,
    its requests, and its tool calls each with its round, arguments and result."""
    if not isinstance(turn, dict) or turn.get("turn") != number:
        return False
    if not isinstance(turn.get("answer"), str):
        return False
    requests = turn.get("requests")
    if not isinstance(requests, list) or not all(isinstance(r, dict) for r in requests):
        return False
    if any(not isinstance(r.get("text", ""), str) for r in requests):
        return False
    calls = turn.get("tool_calls", [])
    if not isinstance(calls, list):
        return False
    for call in calls:
        if not isinstance(call, dict):
            return False
        if not isinstance(call.get("id"), str) or not isinstance(call.get("name"), str):
            return False
        if not isinstance(call.get("arguments"), dict) or not isinstance(call.get("result"), str):
            return False
        place = call.get("round")
        if not isinstance(place, int) or isinstance(place, bool) or not 0 <= place < len(requests):
            return False
        if not isinstance(call.get("arguments_text", ""), str):
            return False
    return True


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


def workspace_changed(previous: Previous, case: EvalCase) -> bool:
    """Whether a case's workspace (its repositories, commits, template, hooks, sandbox)
    differs from the one its record was made in."""
    now = case.workspace.digest() if case.workspace is not None else None
    return previous.workspace_digest != now


def prompt_changed(previous: Previous, prompt: Prompt, *, is_agent: bool) -> bool:
    """Whether a case's prompt differs from what its record says was sent."""
    if previous.question is not None and previous.question != prompt.question:
        return True
    if is_agent or previous.messages is None:
        return False
    return previous.messages != chat_to_dicts(prompt.messages)


def plan_digest(case: EvalCase) -> str:
    """A fingerprint of what a live case will send, whatever the target answers: its opening
    messages, its turns' messages and its tools. ``--resume`` runs a recorded conversation
    again when this changed (docs/after-the-run.md)."""
    opening = build_prompt(case)
    plan = {
        "opening": chat_to_dicts(opening.messages),
        "turns": [turn_text(t) for t in case.turns],
        "tools": [t.spec() for t in case.tools],
    }
    if case.user is not None:  # what the simulated user is asked, and when it stops
        plan["user"] = case.user.spec()
    if case.turn_evaluators:
        plan["turn_evaluators"] = [c.spec.model_dump(mode="json") for c in case.turn_evaluators]
    return hashlib.sha256(orjson.dumps(plan, option=orjson.OPT_SORT_KEYS)).hexdigest()


def turn_text(turn: Turn) -> str:
    """What the user says in ``turn``, as the record and the plan write it (the question
    text of its one message)."""
    return build_question((turn.message,))


@dataclass(frozen=True, slots=True)
class Replay:
    """A recorded simulated conversation's user turns, to be sent again verbatim."""

    turns: tuple[str, ...]
    ended: str | None  # how the recording ended (``goal``: the simulator said it was done)
    origin: str  # where it was recorded (results file, line, target), for the record


def read_replays(path: Path) -> dict[tuple[str, str, int], Replay]:
    """The user turns of each simulated conversation recorded in the results file at
    ``path`` (the latest record of each run), by ``(dataset, eval_id, repeat)``. Where the
    file holds a run on several targets, the first target's recording in file order is
    used, so that every target is sent the same user turns (``--replay-user``).

    Raises:
        InputError: the file is not a whole results file (a line that is not a record,
            a cut last line, a ``user`` that is not a mapping), a simulated conversation's
            record has turns that cannot be replayed, or no record is a simulated
            conversation's: each said with its file and line.
    """
    reader = read_results(path)
    found: dict[tuple[str, str, int], Replay] = {}
    records = 0
    for line, result in reader.latest():
        records += 1
        user, turns = result.user, result.turns
        if user is None or not result.eval_id:
            continue
        key = (result.dataset or "", result.eval_id, result.repeat or 0)
        said = _replayable(turns)
        if isinstance(said, str):
            raise InputError(
                f"{path}:{line}: the record of case {result.eval_id!r} cannot be replayed: "
                f"{said}; {REPLAY_HINT}"
            )
        if key in found:
            continue
        origin = f"{path}:{line} (target {result.target!r})"
        ended = user.get("ended")
        found[key] = Replay(said, ended if isinstance(ended, str) else None, origin)
    if reader.diagnostics:
        first = reader.diagnostics[0]
        raise InputError(f"{path}:{first.line}: {first.message}; {REPLAY_HINT}")
    if not records:
        raise InputError(f"{path} is empty: it holds no recorded conversation; {REPLAY_HINT}")
    if not found:
        raise InputError(
            f"{path} holds no simulated user's conversation (none of its {records} "
            f"record(s) has a `user`); {REPLAY_HINT}"
        )
    return found


def match_replays(
    path: Path,
    replays: dict[tuple[str, str, int], Replay],
    simulated: Iterable[tuple[str, str]],
) -> Diagnostic | None:
    """Whether the recording at ``path`` is of this run's ``simulated`` conversations
    (their datasets and ids): an ``InputError`` when it records none of them, a warning
    naming those it does not record (the simulator plays them), else None."""
    cases = dict.fromkeys(simulated)
    if not cases:
        return Diagnostic(
            path,
            "no case of this run has a simulated `user`: --replay-user has nothing to replay",
            severity="warning",
        )
    recorded = dict.fromkeys((dataset, case) for dataset, case, _ in replays)
    missing = [key for key in cases if key not in recorded]
    if len(missing) == len(cases):
        raise InputError(
            f"{path} records none of this run's simulated conversations (it records "
            f"{_names(recorded)}; the run has {_names(cases)}); {REPLAY_HINT}"
        )
    if missing:
        return Diagnostic(
            path,
            f"{len(missing)} of this run's {len(cases)} simulated conversations are not "
            f"recorded here, and the simulator plays them: {_names(dict.fromkeys(missing))}",
            severity="warning",
        )
    return None


def _names(keys: dict[tuple[str, str], None], shown: int = 5) -> str:
    names = [f"{dataset}/{case}" for dataset, case in keys]
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


#: what ``--replay-user`` takes, said with each refusal
REPLAY_HINT = (
    "--replay-user takes a results file that agentv eval wrote for cases with a simulated "
    "`user`, whole"
)


def _replayable(turns: Any) -> tuple[str, ...] | str:
    """The user turns a record's ``turns`` hold, or why they cannot be replayed."""
    if turns is None:
        return "it has no `turns`"
    said = []
    for number, turn in enumerate(turns, 1):
        content = turn.get("content") if isinstance(turn, dict) else None
        if not isinstance(content, str):
            return f"its turn {number} has no `content` text"
        said.append(content)
    return tuple(said)
