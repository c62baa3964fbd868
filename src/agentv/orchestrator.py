"""Step 6 of the data flow: run every case on its target, grade it, write its result.

Each target has its own lane of work and its own pool of workers (as many as the target
may have requests in flight), pulling its cases from one iterator: memory stays flat
however many cases there are, no case waits behind a slow one, and a slow or rate-limited
target never holds up the others. Every request to a target, a judge's included, passes
through that target's gate (``scheduling``). Every case ends
with exactly one result and a status (``ok``, ``failed``, ``error``, ``invalid``): a case
that fails in any way is an ``error`` result and never stops the others; a case that could
not be loaded or whose target cannot be used is an ``invalid`` result. Each result is
written (and flushed) the moment its case ends, then forgotten.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentv.cache import CachedProvider, ResponseCache, cache_key
from agentv.dumps import PromptDumper
from agentv.errors import AgentVError, ProviderError, ProviderTimeout
from agentv.evaluators import grade_case, needs_judge
from agentv.evaluators.base import CaseGrade, EvaluationContext
from agentv.masking import Masker
from agentv.planning import CaseJob, InvalidJob, Lane
from agentv.prompts import Prompt, PromptSettings, build_prompt
from agentv.providers.base import Provider, ProviderRequest, ProviderResponse, request_for_case
from agentv.records import DEFAULT_PASS_THRESHOLD, error_record, invalid_record, result_record
from agentv.scheduling import DEFAULT_WORKERS, GatedProvider, Gates, TargetGate, through_gate
from agentv.targets import RunTarget, TargetRegistry

#: agent targets enforce the timeout themselves (and clean up); the outer limit is a backstop
_AGENT_GRACE_S = 10.0
#: at most one line about a target's retries this often (seconds)
RETRY_NOTE_INTERVAL = 5.0


class Writer(Protocol):
    def write(self, record: dict[str, Any]) -> None: ...


class Collector(Protocol):
    def add(self, record: dict[str, Any], grade: CaseGrade | None = None) -> None: ...


class ProgressSink(Protocol):
    def case_started(self, key: str, label: str) -> None: ...

    def case_finished(
        self, key: str, label: str, *, status: str, score: float | None, error: str | None
    ) -> None: ...

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


class _RetryNotes:
    """Counts every target's retries and says so at most once every few seconds."""

    def __init__(self, stats: RunStats, progress: ProgressSink, gates: Gates) -> None:
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


class Orchestrator:
    """Runs cases with bounded concurrency and streams their results out."""

    def __init__(
        self,
        registry: TargetRegistry,
        settings: RunSettings,
        *,
        writer: Writer,
        collector: Collector,
        progress: ProgressSink,
    ) -> None:
        self.registry = registry
        self.settings = settings
        self.writer = writer
        self.collector = collector
        self.progress = progress
        self.stats = RunStats()
        self.gates = Gates()
        self._judges: dict[int, Provider] = {}
        # per run target (they live as long as the run): looked up once, not once per case
        self._target_gates: dict[int, TargetGate] = {}
        self._prompt_settings: dict[int, PromptSettings] = {}
        self._labels: dict[int, str] = {}
        self.masker = Masker()  # the run's known secrets (set when it starts)

    async def run(self, lanes: list[Lane]) -> RunStats:
        """Run every lane's jobs (each pulled one at a time from its lane). Returns when
        every job has a result (or raises CancelledError)."""
        targets = [lane.target for lane in lanes if lane.target is not None]
        # every target and judge is built by now: their secrets are known
        self.masker = Masker(self.registry.run_secrets())
        if self.settings.dumper is not None:
            self.settings.dumper.masker = self.masker
        notes = _RetryNotes(self.stats, self.progress, self.gates)
        for t in targets:
            t.provider.on_retry = notes
        self._notes = notes
        for t in targets:
            await t.provider.healthcheck()  # a ProviderError here stops the run, by design
        for lane in lanes:
            if lane.target is None:  # cases that cannot run: their results, at once
                for job in lane.jobs():
                    assert isinstance(job, InvalidJob)
                    self._invalid(job)
        workers = []
        for lane in lanes:
            if lane.target is None:
                continue
            if lane.target.batching and lane.target.provider.supports_batch:
                workers.append(asyncio.ensure_future(self._batch_lane(lane)))
                continue
            queue = lane.jobs()
            count = target_workers(self.settings, lane.target)
            workers += [asyncio.ensure_future(self._worker(queue)) for _ in range(count)]
        try:
            await asyncio.gather(*workers)
        finally:
            for w in workers:
                w.cancel()
        return self.stats

    def _gate(self, target: RunTarget) -> TargetGate:
        gate = self._target_gates.get(id(target))
        if gate is None:
            limit = target_workers(self.settings, target)
            gate = self._target_gates[id(target)] = self.gates.for_provider(target.provider, limit)
        return gate

    async def _worker(self, queue: Iterator[CaseJob | InvalidJob]) -> None:
        for job in queue:
            if isinstance(job, InvalidJob):
                self._invalid(job)
            else:
                await self._run_case(job)

    async def _batch_lane(self, lane: Lane) -> None:
        """A batching target's cases, all in one dispatch once they are all known."""
        jobs: list[CaseJob] = []
        for job in lane.jobs():
            if isinstance(job, InvalidJob):
                self._invalid(job)
            else:
                jobs.append(job)
        if jobs:
            await self._run_batch(lane.target, jobs)  # type: ignore[arg-type]

    def _invalid(self, job: InvalidJob) -> None:
        invalid = job.invalid
        record = self.masker.record(invalid_record(invalid, job.target, job.repeat))
        label = f"{invalid.id or f'#{invalid.index + 1}'} | {invalid.eval_file.name}"
        self.writer.write(record)
        self.collector.add(record)
        self.stats.finished += 1
        self.stats.statuses["invalid"] += 1
        self.progress.case_finished(
            f"{invalid.eval_file}::#{invalid.index}",
            label,
            status="invalid",
            score=None,
            error=invalid.reason,
        )

    # --- one case ----------------------------------------------------------------------

    async def _run_case(self, job: CaseJob, response: ProviderResponse | None = None) -> None:
        case, target = job.case, job.target
        key = f"{case.eval_file}::{case.id}::{target.name}::{job.repeat}"
        target_label = self._labels.get(id(target))
        if target_label is None:
            target_label = self._labels[id(target)] = target.label
        label = f"{case.id} | {target_label}" + (f" #{job.repeat + 1}" if job.repeat else "")
        self.progress.case_started(key, label)
        started = time.perf_counter()
        prompt: Prompt | None = None
        attempts = 0 if response is None else response.attempts
        threshold = (
            job.pass_threshold if job.pass_threshold is not None else self.settings.pass_threshold
        )
        try:
            prompt = self._prompt(job)
            if response is None:
                response, attempts = await self._answer(job, prompt)
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
                error=_describe(exc),
                duration_ms=(time.perf_counter() - started) * 1000,
                attempts=attempts + getattr(exc, "attempts", 0),
                repeat=job.repeat,
            )
        self._finish(key, label, record, grade)

    def _prompt(self, job: CaseJob) -> Prompt:
        settings = self._prompt_settings.get(id(job.target))
        if settings is None:
            settings = self._prompt_settings[id(job.target)] = PromptSettings.of(
                job.target.provider
            )
        prompt = build_prompt(job.case, settings)
        if self.settings.dumper is not None:
            self.settings.dumper.dump(job.case, prompt, job.target.name)
        return prompt

    def _judge(self, job: CaseJob) -> Provider | None:
        # Built before the run (planning checks every judge a case needs); here it is only
        # looked up, wrapped once for --cache and for visible retries.
        if not needs_judge(job.case):
            return None
        found = self._judges.get(id(job.target))
        if found is None:
            judge = self.registry.judge(job.target)
            judge.on_retry = self._notes
            # its requests count against the judge target's own limit
            own = next((t for t in self.registry.all_targets() if t.provider is judge), None)
            limit = target_workers(self.settings, own) if own is not None else DEFAULT_WORKERS
            gated: Provider = GatedProvider(judge, self.gates.for_provider(judge, limit))  # type: ignore[assignment]
            cache = self.settings.cache
            if cache is not None:
                gated = CachedProvider(gated, cache, self._judge_cache_hit)  # type: ignore[assignment]
            found = self._judges[id(job.target)] = gated
        return found

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
                hit = self.settings.cache.get(key)
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
                self.settings.cache.put(key, self.masker.response(response)[0])
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
        gate = self._gate(target)
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

    def _finish(
        self, key: str, label: str, record: dict[str, Any], grade: CaseGrade | None
    ) -> None:
        record = self.masker.record(record)  # what is written and shown holds no known secret
        self.writer.write(record)
        self.collector.add(record, grade)
        self.stats.finished += 1
        self.stats.statuses[record["status"]] += 1
        self.progress.case_finished(
            key, label, status=record["status"], score=record["score"], error=record.get("error")
        )

    # --- provider batching ----------------------------------------------------------------

    async def _run_batch(self, target: RunTarget, jobs: list[CaseJob]) -> None:
        """All of a target's cases in one dispatch; on failure, case by case."""
        try:
            prompts = [self._prompt(j) for j in jobs]
            requests = [
                request_for_case(j.case, p, timeout=self.settings.agent_timeout or None)
                for j, p in zip(jobs, prompts, strict=True)
            ]
            responses = await target.provider.invoke_batch(requests)
            if len(responses) != len(jobs):
                raise ProviderError(
                    target.name, f"batch returned {len(responses)} answers for {len(jobs)} cases"
                )
        except asyncio.CancelledError:
            raise
        except Exception:  # fall back to one dispatch per case
            for job in jobs:
                await self._run_case(job)
            return
        self.stats.requests += 1
        for job, response in zip(jobs, responses, strict=True):
            await self._run_case(job, response)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, AgentVError):
        return str(exc)
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
