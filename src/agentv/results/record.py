"""One run of a case as one line of the results file: ``EvalResult``, and its statuses.

Key order follows the original AgentV's result record; absent values are left out rather
than written as null. How a record is made from a case's outcome is ``results.outcome``;
reading a results file back is ``results.reader``. A record never holds a secret
(``agentv.system.masking``).
"""

from __future__ import annotations

import time
from typing import Any

from pydantic import BaseModel, ConfigDict, PrivateAttr, model_serializer, model_validator

#: how a case ended (``status`` in every record)
OK = "ok"  # graded, score at or above the pass threshold
FAILED = "failed"  # graded, below the pass threshold
#: graded, but the verdict hangs on a judge whose samples disagreed about pass or fail
#: (docs/trusting-verdicts.md): neither a pass nor a failure
UNCERTAIN = "uncertain"
ERROR = "error"  # the target or an evaluator could not do its job
INVALID = "invalid"  # the case could not be loaded, or its target or judge cannot be used
#: a simulated user could not go on (its call failed, it broke role): not the model's doing
USER_ERROR = "user_error"
SKIPPED = "skipped"  # not run: the run's --budget-usd was reached before it (``skip_reason``)
STATUSES = (OK, FAILED, UNCERTAIN, ERROR, INVALID, USER_ERROR, SKIPPED)
#: the default lowest score that passes (``--pass-threshold``, ``pass_threshold`` in config)
DEFAULT_PASS_THRESHOLD = 0.8
#: statuses of a run that was graded: its score says how good the answer was
GRADED = frozenset({OK, FAILED, UNCERTAIN})

CaseKey = tuple[str, str, str]  # (dataset, eval id, target)
RunKey = tuple[str, str, str, int]  # ... and the repeat


class EvalResult(BaseModel):
    """One run of a case: exactly one line of the results file.

    ``model_dump(mode="json")`` is that line (absent values are left out, as in the file);
    ``EvalResult.model_validate(record)`` reads one back, checking every field's type (the
    one reader of results files, ``agentv.results.reader``, does). Fields are in the file's
    key order. A record of the original AgentV's (no ``status``) reads as ``error`` when it
    has an ``error``, else ``ok``; a number where text belongs (an id written as ``7``)
    reads as its text.
    """

    # built on first use (the Python API, ``compare``, ``report``), not by every import:
    # the command line writes records as dicts and never needs it
    model_config = ConfigDict(
        extra="allow", frozen=True, defer_build=True, coerce_numbers_to_str=True
    )

    eval_id: str | None = None
    """The case's id (absent only for an invalid case without a usable id)."""
    dataset: str = ""
    """The case's dataset: the eval file's ``dataset``, else its name without extension."""
    conversation_id: str | None = None
    """The case's ``conversation_id``, when it has one."""
    status: str
    """``ok``, ``failed`` (graded below the pass threshold), ``uncertain`` (graded, but the
    verdict hangs on a judge whose samples disagreed), ``error``, ``invalid``,
    ``user_error`` or ``skipped`` (not run: the run's budget was reached first)."""
    passed: bool = False
    """``status == "ok"``."""
    score: float = 0.0
    """The grade: the weighted mean of the evaluators' scores, 0 to 1 (0 without one)."""
    hits: list[str] = []
    """What the answer got right, as the evaluators say."""
    misses: list[str] = []
    """What the answer missed (a required evaluator that missed adds a miss saying so)."""
    candidate_answer: str = ""
    """The target's answer, as it came (a live conversation's last)."""
    expected_aspect_count: int = 0
    """How many aspects of the answer the evaluators checked."""
    target: str | None = None
    """The target the case ran on."""
    timestamp: str = ""
    """When the record was made (ISO 8601, UTC)."""
    repeat: int | None = None
    """Which run of the case on its target (0 .. N-1 with ``--repeat N``)."""
    raw_aspects: list[Any] | None = None
    """Kept as the original AgentV wrote it."""
    reasoning: str | None = None
    """A judge's reasons, when one graded."""
    lm_provider_request: dict[str, Any] | None = None
    """A model target's request in the original AgentV's shape."""
    agent_provider_request: dict[str, Any] | None = None
    """An agent target's request in the original AgentV's shape."""
    raw_request: dict[str, Any] | None = None
    """What was sent: ``question``, ``guidelines``, for model targets ``chat_prompt`` (the
    messages the API got) and ``settings``, and ``token_limit`` (docs/results.md)."""
    evaluator_results: list[dict[str, Any]] | None = None
    """One entry per evaluator: ``name``, ``type``, ``score``, ``hits``, ``misses`` and
    more (docs/results.md)."""
    evaluator_raw_request: dict[str, Any] | None = None
    """The judge's request, when the case has no evaluator list."""
    failed_required: list[str] | None = None
    """The required evaluators that missed (``turn N: name`` for a turn's): the run failed
    whatever its score."""
    uncertain: list[str] | None = None
    """The judges whose samples disagreed about pass or fail when the run's verdict hangs
    on them (``turn N: name`` for a turn's): its status is ``uncertain``, or what their
    ``on_uncertain`` made of it."""
    regraded_from: str | None = None
    """A record of ``agentv regrade``: the results file whose recorded answer it grades
    again (relative to this record's file)."""
    auto_repeat: dict[str, Any] | None = None
    """A run of ``--repeat auto``: the rule (``max``, ``confidence``, ``margin``,
    ``threshold``) and why this run was made (``reason``)."""
    usage: dict[str, Any] | None = None
    """The target's tokens: ``input_tokens``, ``output_tokens``, ``total_tokens`` (and
    ``cached_input_tokens`` when the API read some from its prompt cache)."""
    cost: dict[str, Any] | None = None
    """US dollars by who spent them: ``target`` (the case's target), ``judge`` (its judges)
    and any other party, each ``{"usd": spent, "reused_usd": ..., "unpriced": true}``:
    ``usd`` was sent this run, ``reused_usd`` is the price of answers reused from
    ``--cache`` or from the results file a regrade read (not spent again), ``unpriced``
    says some tokens had no price (docs/results.md, "Cost")."""
    finish_reason: str | None = None
    """How the target's answer ended: ``stop``, ``length`` (cut at the output token limit),
    ``tool_calls``, ``content_filter`` or ``other`` (LM API targets)."""
    finish_reason_raw: str | None = None
    """The API's own word for how the answer ended (``end_turn``, ``MAX_TOKENS``...)."""
    token_limit_ignored: bool | None = None
    """True when the answer has more output tokens than the limit sent: the server did not
    honour it (``max_tokens_param`` names the limit as the server knows it)."""
    turns: list[dict[str, Any]] | None = None
    """A live conversation's turns, in order: what the user said (``content``), the
    ``answer``, the ``tool_calls`` with their results (and ``arguments_text`` where the
    model wrote its arguments otherwise than they read), each request (``requests``: how
    many messages of ``raw_request.chat_prompt`` it sent, its ``usage``, ``latency_ms`` and
    ``finish_reason``, and the ``text`` said with tool calls) and the turn's grade
    (``status``, ``score``, ``hits``, ``misses``, ``evaluator_results``)."""
    aggregation: str | None = None
    """How a live conversation's score was made of its turns' and its own: mean, min, max."""
    stopped: dict[str, Any] | None = None
    """Where a live conversation stopped before its last turn, and why (``turn``,
    ``reason``); a ``skipped`` one, where the run's budget stopped it."""
    resumed: dict[str, Any] | None = None
    """A live conversation that went on from a ``skipped`` record of the budget's
    (``--resume``): where that record is (``from``: results file and line) and how many of
    its ``turns`` were taken up again, nothing sent for them."""
    user: dict[str, Any] | None = None
    """A simulated user's part of the conversation: its ``target``, how the conversation
    ``ended`` (goal, stop_when, max_turns, user_error, turn_failed, error, budget), its ``usage``
    (apart from the candidate's), and ``replay`` when its turns were replayed."""
    trajectory: list[dict[str, Any]] | None = None
    """The tools the candidate called, in order (docs/results.md, "Trajectories"): each
    with its ``name``, ``arguments``, ``result`` or ``error``, ``duration_ms``, ``id`` and,
    in a live conversation, its ``turn``. Absent when the target cannot say, or called none
    where it could not have."""
    trajectory_error: str | None = None
    """Why a target that reports its tools (a cli target with ``{TRAJECTORY_FILE}``) gave
    no trajectory for this run."""
    latency_ms: float | None = None
    """How long the target took to answer."""
    workspace: dict[str, Any] | None = None
    """The folder the agent worked in (docs/results.md, "Workspaces"): its ``mode``, the
    ``repos`` at the commits checked out, the sandbox (``isolation``, ``network``, what it
    refused: ``writes_refused``, ``network_refused``), each hook's run (``hooks``), what
    the agent changed (``changes``: ``added``, ``modified``, ``deleted``, ``binary``, the
    ``diff``), the ``path`` of one kept or reused, and the ``digest`` of its settings."""
    duration_ms: float | None = None
    """From the moment the run got its first turn at its target to its record."""
    queued_ms: float | None = None
    """How long the run waited for its first turn (the target busy with other runs)."""
    attempts: int | None = None
    """Requests sent to the target for this case (retries included; 0: none was sent)."""
    cached: bool | None = None
    """True when the target's answer was reused from ``--cache`` (its ``usage`` was not
    spent again); absent otherwise."""
    eval_file: str | None = None
    """The eval file the case is written in."""
    line: int | None = None
    """Where the case is written (1-based)."""
    row: dict[str, Any] | None = None
    """The data row the case was made from (docs/eval-files.md, "Cases from data"): its
    ``source`` (the data file, or ``hf:owner/name``), its ``number`` among the data rows
    (from 1) and, for text formats, the ``line`` it starts on."""
    vars: dict[str, Any] | None = None
    """The case's combination of variables (``vars:``), by name."""
    large_content: dict[str, str] | None = None
    """Attachments larger than 64 KiB, once each, by SHA-256: the request fields hold
    ``<<agentv:large_content SHA256>>`` in their place (so a record stays near the size of
    what was sent; put each text back to get the request exactly as sent)."""
    masked_secrets: bool | None = None
    """True when a known secret value was masked (``***``) in this record or in the answer
    its evaluators saw (``agentv.system.masking``); absent otherwise."""
    shortened: dict[str, Any] | None = None
    """Set when the record as made was larger than a results file's record may be
    (``MAX_RECORD_BYTES``): its longest texts were cut to fit, each saying how much it
    lost. ``bytes``: the size it would have had; ``texts``: where the cut texts are."""
    error: str | None = None
    """Why the case's status is ``error`` or ``invalid``."""
    skip_reason: str | None = None
    """Why a ``skipped`` run was not run (or, when it has an answer, not graded)."""

    @model_validator(mode="before")
    @classmethod
    def _older_records(cls, data: Any) -> Any:
        # the original AgentV's records carry no status: an error, else a graded run
        if isinstance(data, dict) and not data.get("status"):
            status = ERROR if data.get("error") else OK
            data = {**data, "status": status, "passed": data.get("passed", status == OK)}
        if isinstance(data, dict) and data.get("large_content"):
            data = answers_put_back(data)
        return data

    @model_serializer(mode="wrap")
    def _without_absent(self, handler: Any) -> dict[str, Any]:
        return {k: v for k, v in handler(self).items() if v is not None}

    #: where the record was read from its results file (set by the reader): names a record
    #: with neither an id nor a ``line`` of its own
    _read_at: int | None = PrivateAttr(default=None)

    @property
    def case_key(self) -> CaseKey:
        """(dataset, eval id, target): which case on which target this record is about (a
        case without a usable id is named by its line, ``#12``)."""
        case = self.eval_id
        if not case:
            line = self.line if self.line is not None else self._read_at
            case = f"#{line or 0}"
        return (self.dataset, case, self.target or "")

    @property
    def run_key(self) -> RunKey:
        """(dataset, eval id, target, repeat): which run of which case on which target this
        record is. A results file holds the truth of each run in its latest record; reports,
        ``agentv compare``, ``--resume`` and reruns match records by this key."""
        return (*self.case_key, self.repeat or 0)

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> EvalResult:
        """The model of a record built by this module, not checked again (it is valid).

        Args:
            record: A result record as the run makes it.

        Returns:
            The record as an ``EvalResult`` (its answers put back from ``large_content``).
        """
        if record.get("large_content"):
            record = answers_put_back(record)
        return cls.model_construct(**record)


#: decimal places of US dollars in JSON (records, --summary-json, estimate and runs
#: --format json): a ten-billionth of a dollar, far below any price, never a float's noise
#: such as 0.010069999999999999 (docs/results.md)
USD_DIGITS = 10


def usd(value: float | None) -> float | None:
    """US dollars as JSON holds them: rounded to ``USD_DIGITS`` places (None stays None)."""
    return None if value is None else round(value, USD_DIGITS)


def repeat_label(repeat: int) -> str:
    """A run's repeat as people count it: ``#1`` for the record's ``repeat`` 0 (records
    count from 0; the console, the summary, the report and JUnit all say ``#N``)."""
    return f"#{repeat + 1}"


def utc_timestamp() -> str:
    """ISO-8601 UTC with milliseconds, e.g. ``2025-11-30T01:02:03.456Z``."""
    global _last_second
    seconds, millis = divmod(time.time_ns() // 1_000_000, 1000)
    last = _last_second
    if last[0] != seconds:  # records come many a second: each second is formatted once
        last = _last_second = (seconds, time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)))
    return f"{last[1]}.{millis:03d}Z"


_last_second: tuple[int, str] = (-1, "")  # a second since the epoch, and its text


#: an attachment larger than this is stored once per record (``large_content``)
LARGE_CONTENT = 64 * 1024


def large_content_ref(digest: str) -> str:
    """What stands for a large attachment's text in a record's request fields."""
    return f"<<agentv:large_content {digest}>>"


def put_back_large_content(value: Any, store: dict[str, str]) -> Any:
    """``value`` (a record's field) with its large attachments put back in their place."""
    if not store:
        return value
    if isinstance(value, str):
        for digest, text in store.items():
            value = value.replace(large_content_ref(digest), text)
        return value
    if isinstance(value, dict):
        return {k: put_back_large_content(v, store) for k, v in value.items()}
    if isinstance(value, list):
        return [put_back_large_content(v, store) for v in value]
    return value


def answers_put_back(record: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``record`` whose answers (``candidate_answer``, each turn's ``answer``)
    hold their text, not a reference to ``large_content``: what a record's reader sees."""
    store = record.get("large_content")
    if not isinstance(store, dict) or not all(isinstance(v, str) for v in store.values()):
        return record  # not agentv's: the reader says what is wrong with it
    out = dict(record)
    answer = out.get("candidate_answer")
    if isinstance(answer, str):
        out["candidate_answer"] = put_back_large_content(answer, store)
    turns = out.get("turns")
    if isinstance(turns, list):
        out["turns"] = [
            {**t, "answer": put_back_large_content(t["answer"], store)}
            if isinstance(t, dict) and isinstance(t.get("answer"), str)
            else t
            for t in turns
        ]
    return out
