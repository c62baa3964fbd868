"""Step 6 of the data flow, for one case: prompt -> target -> evaluators -> result record.

``CasePipeline.run`` is everything a case goes through once it is picked to run: its
prompt built (``agentv.prompts``), the target asked through that target's gate
(``agentv.scheduling``, timeouts retried per case), the answer's known secrets masked, the
evaluators run (``agentv.evaluators``) and the result record made (``agentv.records``).
It never raises for a case that fails: the record says ``error``. Who picks the cases and
where the records go is the executor's business: the local ``Orchestrator``, or a Ray
worker (``agentv.executors``), which run this same pipeline.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentv.cache import CachedProvider, ResponseCache, cache_key
from agentv.dumps import PromptDumper
from agentv.errors import AgentVError, ProviderError, ProviderTimeout
from agentv.evaluators import grade_case, needs_judge
from agentv.evaluators.base import CaseGrade, EvaluationContext
from agentv.masking import Masker, masking_scope
from agentv.planning import CaseJob
from agentv.prompts import Prompt, PromptSettings, build_prompt
from agentv.providers.base import Provider, ProviderRequest, ProviderResponse, request_for_case
from agentv.records import DEFAULT_PASS_THRESHOLD, error_record, result_record
from agentv.scheduling import DEFAULT_WORKERS, GatedProvider, Gates, TargetGate, through_gate
from agentv.targets import RunTarget

#: agent targets enforce the timeout themselves (and clean up); the outer limit is a backstop
_AGENT_GRACE_S = 10.0
#: at most one line about a target's retries this often (seconds)
RETRY_NOTE_INTERVAL = 5.0


class Notes(Protocol):
    def note(self, text: str) -> None: ...


@dataclass
class RunSettings:
    """How a run behaves (CLI flags, already validated)."""

    workers: int | None = None  # per target; None: each target's `workers`, else 3
    agent_timeout: float | None = 120.0  # seconds per target call; None or 0: no limit
    max_retries: int = 2  # extra attempts after a timeout
    cache: ResponseCache | None = None
    dumper: PromptDumper | None = None
    pass_threshold: float = DEFAULT_PASS_THRESHOLD  # unless the case's config says otherwise


@dataclass
class RunStats:
    """What the run did, for the end of the run."""

    finished: int = 0
    requests: int = 0  # target requests sent (retries counted once per case attempt)
    cache_hits: int = 0  # target answers reused
    judge_cache_hits: int = 0  # judge answers reused
    statuses: Counter[str] = field(default_factory=Counter)
    #: target name -> HTTP status (None: no answer) -> retries made
    retries: dict[str, Counter[int | None]] = field(default_factory=dict)

    @property
    def errors(self) -> int:
        """Cases that ended ``error`` or ``invalid``."""
        return self.statuses["error"] + self.statuses["invalid"]


def target_workers(settings: RunSettings, target: RunTarget) -> int:
    """How many requests ``target`` may have in flight: what the target itself can take
    (VS Code: one), else the flag, else its ``workers``, else 3."""
    own = target.provider.concurrency_limit(target.batching)
    if own is not None:
        return own
    if settings.workers is not None:
        return settings.workers
    return target.workers or DEFAULT_WORKERS


class RetryNotes:
    """Counts every target's retries and says so at most once every few seconds."""

    def __init__(self, stats: RunStats, progress: Notes, gates: Gates) -> None:
        self.stats = stats
        self.progress = progress
        self.gates = gates
        self._since: dict[str, Counter[int | None]] = {}  # not yet told
        self._told_at: dict[str, float] = {}

    def __call__(self, target: str, status: int | None, delay: float) -> None:
        self.stats.retries.setdefault(target, Counter())[status] += 1
        pending = self._since.setdefault(target, Counter())
        pending[status] += 1
        now = time.monotonic()
        if now - self._told_at.get(target, -RETRY_NOTE_INTERVAL) < RETRY_NOTE_INTERVAL:
            return
        self._told_at[target] = now
        gate = self.gates.by_target().get(target)
        slowed = ""
        if gate is not None and gate.limit < gate.max_limit:
            slowed = f"; {gate.limit} of {gate.max_limit} at once until it recovers"
        for code, count in sorted(pending.items(), key=lambda kv: -kv[1]):
            self.progress.note(
                f"{target}: {retry_phrase(code, count)}, retrying after {delay:.1f} s{slowed}"
            )
        pending.clear()


def retry_phrase(status: int | None, count: int) -> str:
    """``12 requests rate-limited (429)`` and the like."""
    requests = f"{count} request{'' if count == 1 else 's'}"
    if status == 200:  # answered, but with nothing in it
        return f"{requests} returned an empty answer"
    if status == 429:
        return f"{requests} rate-limited (429)"
    if status is None:
        return f"{requests} got no answer (connection failed)"
    return f"{requests} failed (HTTP {status})"


#: a run target's judge and how many requests that judge's own target may have in flight
JudgeOf = Callable[[RunTarget], tuple[Provider, int]]


class CasePipeline:
    """One case at a time, from its job to its result record (and grade)."""

    def __init__(
        self,
        settings: RunSettings,
        *,
        judge_of: JudgeOf,
        stats: RunStats,
        progress: Notes,
        masker: Masker | None = None,
        gates: Gates | None = None,
    ) -> None:
        self.settings = settings
        self.judge_of = judge_of
        self.stats = stats
        self.masker = masker or Masker()
        self.gates = gates or Gates()
        self.notes = RetryNotes(stats, progress, self.gates)
        if settings.dumper is not None:
            settings.dumper.masker = self.masker
        self.progress = progress
        self._judges: dict[int, Provider] = {}
        # per run target (they live as long as the run): looked up once, not once per case
        self._target_gates: dict[int, TargetGate] = {}
        self._prompt_settings: dict[int, PromptSettings] = {}
        self._cut_notes: dict[str, int] = {}  # target -> answers noted as cut at the limit
        self._ignored_noted: set[str] = set()  # targets whose server ignored the limit

    def watch(self, target: RunTarget) -> None:
        """Make ``target``'s retries visible (counted, and noted now and then)."""
        target.provider.on_retry = self.notes

    async def run(
        self, job: CaseJob, response: ProviderResponse | None = None
    ) -> tuple[dict[str, Any], CaseGrade | None]:
        """The case's result record and its grade (None when it could not be graded).
        ``response``: the target's answer, when it came from a batch."""
        # text shortened during the case (an API's error, a program's stderr) is masked with
        # the run's secrets first; the record says so when that masked anything
        with masking_scope(self.masker) as scope:
            record, grade = await self._run(job, response)
        if scope.masked:
            record["masked_secrets"] = True
        return record, grade

    async def _run(
        self, job: CaseJob, response: ProviderResponse | None
    ) -> tuple[dict[str, Any], CaseGrade | None]:
        case, target = job.case, job.target
        started = time.perf_counter()
        prompt: Prompt | None = None
        attempts = 0 if response is None else response.attempts
        threshold = (
            job.pass_threshold if job.pass_threshold is not None else self.settings.pass_threshold
        )
        try:
            prompt = self.prompt(job)
            if response is None:
                response, attempts = await self._answer(job, prompt)
            self._note_ending(job, response)
            # before any evaluator (a judge, a script) or record sees it
            response, masked = self.masker.response(response)
            grade = await grade_case(
                EvaluationContext(
                    case=case,
                    prompt=prompt,
                    candidate=response.text,
                    target_name=target.name,
                    judge=self._judge(job),
                    timeout=self.settings.agent_timeout or None,
                    repeat=job.repeat,
                )
            )
            record = result_record(
                case,
                target=target.name,
                provider=target.provider,
                prompt=prompt,
                response=response,
                grade=grade,
                duration_ms=(time.perf_counter() - started) * 1000,
                pass_threshold=threshold,
                attempts=attempts,
                repeat=job.repeat,
            )
            if masked:
                record["masked_secrets"] = True
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a case must never take the run down
            grade = None
            record = error_record(
                case,
                target=target.name,
                provider=target.provider,
                prompt=prompt,
                error=describe(exc),
                duration_ms=(time.perf_counter() - started) * 1000,
                attempts=attempts + getattr(exc, "attempts", 0),
                repeat=job.repeat,
            )
        return record, grade

    def _note_ending(self, job: CaseJob, response: ProviderResponse) -> None:
        """Warn on screen about an answer cut at the output token limit (the first few of
        each target, then once that more follow) and, once per target, about a server that
        did not honour the limit: both would otherwise look like complete answers."""
        target = job.target.name
        if response.finish_reason == "length":
            count = self._cut_notes[target] = self._cut_notes.get(target, 0) + 1
            if count <= _CUT_NOTES:
                self.progress.note(
                    f"{target}: the answer to {job.case.id!r} was cut at the output token "
                    "limit (finish_reason: length); raise the target's max_output_tokens"
                )
            elif count == _CUT_NOTES + 1:
                self.progress.note(
                    f"{target}: more answers were cut at the output token limit; their "
                    "results say finish_reason: length"
                )
        if response.token_limit_ignored and target not in self._ignored_noted:
            self._ignored_noted.add(target)
            limit = response.sent.get("token_limit") or {}
            used = response.usage.output_tokens if response.usage is not None else None
            self.progress.note(
                f"{target}: the server ignored the output token limit: the answer to "
                f"{job.case.id!r} has {used} tokens, the limit sent was {limit.get('value')} "
                f"(as {limit.get('param')}); if the server knows the limit by another name, "
                "set max_tokens_param (max_tokens or max_completion_tokens) on the target"
            )

    def prompt(self, job: CaseJob) -> Prompt:
        """The case's prompt for its target (written out with ``--dump-prompts``)."""
        settings = self._prompt_settings.get(id(job.target))
        if settings is None:
            settings = self._prompt_settings[id(job.target)] = PromptSettings.of(
                job.target.provider
            )
        prompt = build_prompt(job.case, settings)
        if self.settings.dumper is not None:
            self.settings.dumper.dump(job.case, prompt, job.target.name)
        return prompt

    def gate(self, target: RunTarget) -> TargetGate:
        """``target``'s gate (made on first use)."""
        gate = self._target_gates.get(id(target))
        if gate is None:
            limit = target_workers(self.settings, target)
            gate = self._target_gates[id(target)] = self.gates.for_provider(target.provider, limit)
        return gate

    def _judge(self, job: CaseJob) -> Provider | None:
        # Built before the run (planning checks every judge a case needs); here it is only
        # looked up, wrapped once for --cache and for visible retries.
        if not needs_judge(job.case):
            return None
        found = self._judges.get(id(job.target))
        if found is None:
            judge, limit = self.judge_of(job.target)
            judge.on_retry = self.notes
            # its requests count against the judge target's own limit
            gated: Provider = GatedProvider(judge, self.gates.for_provider(judge, limit))  # type: ignore[assignment]
            cache = self.settings.cache
            if cache is not None:
                gated = CachedProvider(  # type: ignore[assignment]
                    gated, cache, self._judge_cache_hit, self._masked
                )
            found = self._judges[id(job.target)] = gated
        return found

    def _masked(self, response: ProviderResponse) -> ProviderResponse:
        return self.masker.response(response)[0]

    def _judge_cache_hit(self) -> None:
        self.stats.judge_cache_hits += 1

    async def _answer(self, job: CaseJob, prompt: Prompt) -> tuple[ProviderResponse, int]:
        """The target's answer and the requests it took (timeouts retried per case)."""
        provider = job.target.provider
        timeout = self.settings.agent_timeout or None
        tries = self.settings.max_retries + 1
        attempts = 0
        last: ProviderTimeout | None = None
        for attempt in range(tries):
            request = request_for_case(
                job.case, prompt, attempt=attempt, timeout=timeout, repeat=job.repeat
            )
            key = None
            if self.settings.cache is not None:
                key = cache_key(provider, request)
                hit = self.settings.cache.reuse(key, self._masked)
                if hit is not None:
                    self.stats.cache_hits += 1
                    return hit, attempts
            try:
                response = await self._invoke(job.target, request, timeout)
            except ProviderTimeout as exc:
                attempts += exc.attempts
                last = exc
                continue
            except ProviderError as exc:
                exc.attempts += attempts
                raise
            attempts += response.attempts
            self.stats.requests += 1
            if isinstance(response.raw, dict) and response.raw.get("truncated"):
                self.progress.note(
                    f"{job.target.name}: the answer to {job.case.id!r} was cut at the "
                    "target's max_output_bytes"
                )
            if key is not None and self.settings.cache is not None:
                self.settings.cache.put(key, self._masked(response))
            return response, attempts
        assert last is not None
        if tries > 1:
            error = ProviderTimeout(job.target.name, f"{last} (after {tries} attempts)")
        else:
            error = last
        error.attempts = attempts
        raise error

    async def _invoke(
        self, target: RunTarget, request: ProviderRequest, timeout: float | None
    ) -> ProviderResponse:
        gate = self.gate(target)
        if timeout is None:
            return await through_gate(gate, request, lambda: target.provider.invoke(request))
        limit = timeout + (_AGENT_GRACE_S if target.provider.is_agent else 0.0)

        async def timed() -> ProviderResponse:
            async with asyncio.timeout(limit):  # from when the gate lets it through
                return await target.provider.invoke(request)

        try:
            return await through_gate(gate, request, timed)
        except TimeoutError:
            raise ProviderTimeout(
                target.name, f"target {target.name!r} did not answer within {timeout:g}s"
            ) from None


#: answers cut at the token limit noted one by one per target, before a single "more"
_CUT_NOTES = 3


def describe(exc: BaseException) -> str:
    """An exception as a record's ``error``: our own errors as they are, others named."""
    if isinstance(exc, AgentVError):
        return str(exc)
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
