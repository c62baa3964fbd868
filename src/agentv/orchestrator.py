"""Step 6 of the data flow: run every case on its target, grade it, write its result.

A fixed pool of worker coroutines pulls cases from one shared iterator, so memory stays
flat however many cases there are and no case waits behind a slow one. A case that fails in
any way becomes a result row with ``error`` set; it never stops the others. Each result is
written (and flushed) the moment its case ends, then forgotten.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from agentv.cache import ResponseCache, cache_key
from agentv.dumps import PromptDumper
from agentv.errors import AgentVError, ProviderError, ProviderTimeout
from agentv.evaluators import grade_case, needs_judge
from agentv.evaluators.base import EvaluationContext
from agentv.planning import CaseJob
from agentv.prompts import Prompt, PromptSettings, build_prompt
from agentv.providers.base import Provider, ProviderRequest, ProviderResponse, request_for_case
from agentv.records import error_record, result_record
from agentv.targets import RunTarget, TargetRegistry

DEFAULT_WORKERS = 3
#: agent targets enforce the timeout themselves (and clean up); the outer limit is a backstop
_AGENT_GRACE_S = 10.0


class Writer(Protocol):
    def write(self, record: dict[str, Any]) -> None: ...


class Collector(Protocol):
    def add(
        self,
        eval_id: str,
        score: float,
        *,
        error: str | None = None,
        judge_failed: bool = False,
        duration_s: float | None = None,
    ) -> None: ...


class ProgressSink(Protocol):
    def case_started(self, key: str, label: str) -> None: ...

    def case_finished(
        self, key: str, label: str, *, ok: bool, score: float | None, error: str | None
    ) -> None: ...


@dataclass
class RunSettings:
    """How a run behaves (CLI flags, already validated)."""

    workers: int | None = None  # None: the largest target `workers`, else 3
    agent_timeout: float | None = 120.0  # seconds per target call; None or 0: no limit
    max_retries: int = 2  # extra attempts after a timeout
    cache: ResponseCache | None = None
    dumper: PromptDumper | None = None


@dataclass
class RunStats:
    """Counts for the end of the run."""

    finished: int = 0
    errors: int = 0
    requests: int = 0
    cache_hits: int = 0


def effective_workers(settings: RunSettings, targets: list[RunTarget]) -> int:
    """The size of the worker pool: the flag, else the largest target setting, else 3."""
    if settings.workers is not None:
        return settings.workers
    configured = [t.workers for t in targets if t.workers]
    return max(configured) if configured else DEFAULT_WORKERS


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
        self._limits: dict[int, asyncio.Semaphore] = {}

    async def run(self, jobs: Iterable[CaseJob], targets: list[RunTarget]) -> RunStats:
        """Run every job (pulled one at a time from ``jobs``); ``targets`` are all the
        targets they use. Returns when every job has a result (or raises CancelledError)."""
        await self._healthchecks(targets)
        pool = effective_workers(self.settings, targets)
        for t in targets:
            limit = _target_limit(t, flag_given=self.settings.workers is not None)
            if limit is not None and limit < pool:
                self._limits[id(t)] = asyncio.Semaphore(limit)
        batches: dict[int, list[CaseJob]] = {}
        queue = iter(jobs)
        workers = [asyncio.ensure_future(self._worker(queue, batches)) for _ in range(pool)]
        try:
            await asyncio.gather(*workers)
            # Batched targets get all their cases in one dispatch, once they are all known.
            await asyncio.gather(*(self._run_batch(b[0].target, b) for b in batches.values()))
        finally:
            for w in workers:
                w.cancel()
        return self.stats

    async def _healthchecks(self, targets: list[RunTarget]) -> None:
        for t in targets:
            await t.provider.healthcheck()  # a ProviderError here stops the run, by design

    async def _worker(self, queue: Iterator[CaseJob], batches: dict[int, list[CaseJob]]) -> None:
        for job in queue:
            if job.target.batching and job.target.provider.supports_batch:
                batches.setdefault(id(job.target), []).append(job)
                continue
            limit = self._limits.get(id(job.target))
            if limit is None:
                await self._run_case(job)
            else:
                async with limit:
                    await self._run_case(job)

    # --- one case ----------------------------------------------------------------------

    async def _run_case(self, job: CaseJob, response: ProviderResponse | None = None) -> None:
        case, target = job.case, job.target
        key = f"{case.eval_file}::{case.id}"
        label = f"{case.id} | {target.label}"
        self.progress.case_started(key, label)
        started = time.perf_counter()
        prompt: Prompt | None = None
        try:
            prompt = self._prompt(job)
            if response is None:
                response = await self._answer(job, prompt)
            grade = await grade_case(
                EvaluationContext(
                    case=case,
                    prompt=prompt,
                    candidate=response.text,
                    target_name=target.name,
                    judge=self._judge(job),
                    timeout=self.settings.agent_timeout or None,
                )
            )
            duration = (time.perf_counter() - started) * 1000
            record = result_record(
                case,
                target=target.name,
                provider=target.provider,
                prompt=prompt,
                response=response,
                grade=grade,
                duration_ms=duration,
            )
            self._finish(job, key, label, record, grade.score, None, grade.judge_failed, duration)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a case must never take the run down
            message = _describe(exc)
            duration = (time.perf_counter() - started) * 1000
            record = error_record(
                case,
                target=target.name,
                provider=target.provider,
                prompt=prompt,
                error=message,
                duration_ms=duration,
            )
            self._finish(job, key, label, record, 0.0, message, False, duration)

    def _prompt(self, job: CaseJob) -> Prompt:
        prompt = build_prompt(job.case, PromptSettings.of(job.target.provider))
        if self.settings.dumper is not None:
            self.settings.dumper.dump(job.case, prompt, job.target.name)
        return prompt

    def _judge(self, job: CaseJob) -> Provider | None:
        # Resolved only for cases that have a judge, so a judge target that cannot be built
        # fails those cases (as errors) and no others.
        return self.registry.judge(job.target) if needs_judge(job.case) else None

    async def _answer(self, job: CaseJob, prompt: Prompt) -> ProviderResponse:
        provider = job.target.provider
        timeout = self.settings.agent_timeout or None
        attempts = self.settings.max_retries + 1
        last: Exception | None = None
        for attempt in range(attempts):
            request = request_for_case(job.case, prompt, attempt=attempt, timeout=timeout)
            key = None
            if self.settings.cache is not None:
                key = cache_key(provider, request)
                hit = self.settings.cache.get(key)
                if hit is not None:
                    self.stats.cache_hits += 1
                    return hit
            try:
                response = await self._invoke(job.target, request, timeout)
            except ProviderTimeout as exc:
                last = exc
                continue
            self.stats.requests += 1
            if key is not None and self.settings.cache is not None:
                self.settings.cache.put(key, response)
            return response
        assert last is not None
        if attempts > 1:
            raise ProviderTimeout(job.target.name, f"{last} (after {attempts} attempts)")
        raise last

    async def _invoke(
        self, target: RunTarget, request: ProviderRequest, timeout: float | None
    ) -> ProviderResponse:
        if timeout is None:
            return await target.provider.invoke(request)
        limit = timeout + (_AGENT_GRACE_S if target.provider.is_agent else 0.0)
        try:
            async with asyncio.timeout(limit):
                return await target.provider.invoke(request)
        except TimeoutError:
            raise ProviderTimeout(
                target.name, f"target {target.name!r} did not answer within {timeout:g}s"
            ) from None

    def _finish(
        self,
        job: CaseJob,
        key: str,
        label: str,
        record: dict[str, Any],
        score: float,
        error: str | None,
        judge_failed: bool,
        duration_ms: float,
    ) -> None:
        self.writer.write(record)
        self.collector.add(
            job.case.id,
            score,
            error=error,
            judge_failed=judge_failed,
            duration_s=duration_ms / 1000,
        )
        self.stats.finished += 1
        if error is not None:
            self.stats.errors += 1
        self.progress.case_finished(key, label, ok=error is None, score=score, error=error)

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


def _target_limit(target: RunTarget, *, flag_given: bool) -> int | None:
    own = target.provider.concurrency_limit(target.batching)
    if own is not None:
        return own
    return None if flag_given else target.workers


def _describe(exc: BaseException) -> str:
    if isinstance(exc, AgentVError):
        return str(exc)
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
