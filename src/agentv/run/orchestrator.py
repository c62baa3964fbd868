"""Step 6 of the data flow: hand every case to a worker (here, or on an executor) and
write each result the moment it comes back.

Each target has its own lane of work and its own pool of workers (a quarter more than the
target may have requests in flight, so that its turns stay busy while some cases wait to
retry; the target's gate keeps the requests within its limit), pulling its cases from one
iterator: memory stays flat
however many cases there are, no case waits behind a slow one, and a slow or rate-limited
target never holds up the others. Every request to a target, a judge's included, passes
through that target's gate (``scheduling``). What happens to one case is the
``pipeline``'s; here cases are handed out and their results written. Every case ends
with exactly one result and a status (``ok``, ``failed``, ``error``, ``invalid``): a case
that fails in any way is an ``error`` result and never stops the others; a case that could
not be loaded or whose target cannot be used is an ``invalid`` result. Each result is
written (and flushed) the moment its case ends, then forgotten. With an ``executor``
(``agentv.run.executors``: Ray) the cases run elsewhere and their results come back here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any, Protocol

from agentv.errors import ProviderError
from agentv.evaluators.base import CaseGrade
from agentv.providers.base import Provider, ProviderResponse, request_for_case
from agentv.results.outcome import error_record, invalid_record
from agentv.results.record import repeat_label
from agentv.run.pipeline import CasePipeline
from agentv.run.plan import CaseJob, InvalidJob, Lane
from agentv.run.scheduling import DEFAULT_WORKERS, Gates, lane_size
from agentv.run.sending import RunSettings, RunStats, Sender, target_workers
from agentv.run.workspaces import WorkspaceManager
from agentv.system.masking import Masker
from agentv.targets import RunTarget, TargetPool


class Writer(Protocol):
    def write(self, record: dict[str, Any]) -> None: ...


class Collector(Protocol):
    def add_record(self, record: dict[str, Any]) -> None: ...


class ProgressSink(Protocol):
    def case_started(self, key: str, label: str) -> None: ...

    def case_finished(
        self,
        key: str,
        label: str,
        *,
        status: str,
        score: float | None,
        error: str | None,
        miss: str | None = None,
    ) -> None: ...

    def note(self, text: str) -> None: ...


class Executor(Protocol):
    """Runs cases somewhere else (a cluster) through the same ``CasePipeline``."""

    async def start(self, orchestrator: Orchestrator, lanes: list[Lane]) -> int:
        """Get ready for ``lanes``; returns how many cases may be running at once."""
        ...

    async def run_case(self, job: CaseJob) -> tuple[dict[str, Any], CaseGrade | None]:
        """The case's result record and grade, as ``CasePipeline.run`` gives them."""
        ...

    async def stop(self) -> None:
        """Release what ``start`` took (on success, failure and cancellation alike)."""
        ...


class Orchestrator:
    """Runs cases with bounded concurrency and streams their results out."""

    def __init__(
        self,
        pool: TargetPool,
        settings: RunSettings,
        *,
        writer: Writer,
        collector: Collector,
        progress: ProgressSink,
        executor: Executor | None = None,
        stats: RunStats | None = None,
    ) -> None:
        self.pool = pool
        self.settings = settings
        self.writer = writer
        self.collector = collector
        self.progress = progress
        self.executor = executor
        self.stats = stats if stats is not None else RunStats()
        self.gates = Gates()
        self._labels: dict[int, str] = {}
        self.masker = Masker()  # the run's known secrets (set when it starts)
        #: the run's workspaces here: the files' before_all / after_all, and the cases'
        #: own when they run in this process
        self.workspaces = WorkspaceManager()
        self.sender = self._sender()
        self.pipeline = CasePipeline(self.sender, self.workspaces)

    def _sender(self) -> Sender:
        return Sender(
            self.settings,
            judge_of=self.judge_of,
            stats=self.stats,
            progress=self.progress,
            masker=self.masker,
            gates=self.gates,
        )

    def judge_of(self, target: RunTarget) -> tuple[Provider, int]:
        """``target``'s judge (built while planning) and its own target's request limit."""
        judge = self.pool.judge(target)
        own = self.pool.owner(judge)
        limit = target_workers(self.settings, own) if own is not None else DEFAULT_WORKERS
        return judge, limit

    async def run(
        self, lanes: list[Lane], more: Callable[[], list[Lane] | None] | None = None
    ) -> RunStats:
        """Run every lane's jobs (each pulled one at a time from its lane); then, while
        ``more`` gives lanes (``--repeat auto``'s rounds), theirs. Returns when every job
        has a result (or raises CancelledError)."""
        targets = [lane.target for lane in lanes if lane.target is not None]
        # every target and judge is built by now: their secrets are known
        self.masker = Masker(self.pool.run_secrets())
        self.sender = self._sender()  # with the stats and secrets of this run
        self.pipeline = CasePipeline(self.sender, self.workspaces)
        # the targets playing simulated users: their retries are seen as any target's
        users = lanes[0].plan.user_targets() if lanes else []
        for t in [*targets, *users]:
            self.sender.watch(t)
        for t in targets:
            await t.provider.healthcheck()  # a ProviderError here stops the run, by design
        try:
            await self._run_lanes(lanes)
            while more is not None and (lanes := more() or []):
                await self._run_lanes(lanes)
        finally:
            await self._after_all()
        return self.stats

    async def _run_lanes(self, lanes: list[Lane]) -> None:
        """Every job of ``lanes``, each target's with its own workers."""
        for lane in lanes:
            if lane.target is None:  # cases that cannot run: their results, at once
                for job in lane.jobs():
                    assert isinstance(job, InvalidJob)
                    self._invalid(job)
        workers = []
        remote: list[Lane] = []
        for lane in lanes:
            if lane.target is None:
                continue
            if lane.target.batching and lane.target.provider.supports_batch:
                workers.append(asyncio.ensure_future(self._batch_lane(lane)))
            elif self.executor is not None:
                remote.append(lane)
            else:
                queue = lane.jobs()
                count = lane_size(target_workers(self.settings, lane.target))
                workers += [asyncio.ensure_future(self._worker(queue)) for _ in range(count)]
        executor = self.executor if remote else None
        try:
            if executor is not None:
                count = await executor.start(self, remote)
                queue = _round_robin([lane.jobs() for lane in remote])
                workers += [asyncio.ensure_future(self._worker(queue)) for _ in range(count)]
            await asyncio.gather(*workers)
        finally:
            for w in workers:
                w.cancel()
            if executor is not None:
                await executor.stop()

    async def _after_all(self) -> None:
        """The files' ``after_all`` hooks, once every case has ended (also when the run was
        stopped): each is noted, a failed one with its reason."""
        try:
            for run in await self.workspaces.after_all():
                self.stats.hooks.append(run.to_dict())
                if not run.ok:
                    self.progress.note(run.failure())
        finally:
            self.workspaces.close()

    async def _setup(self, job: CaseJob) -> CaseJob | dict[str, Any]:
        """``job`` with its file's ``before_all`` run (once per run, the first time a case
        of the file is handed out, wherever it then runs), or the record of a case that
        cannot run because that hook failed."""
        spec = job.case.workspace
        if spec is None:
            return job
        run = await self.workspaces.before_all(spec)
        if run is None:
            return job
        if run.ok:
            return replace(job, setup=(run.to_dict(),))
        if not any(h.get("hook") == "before_all" for h in self.stats.hooks):
            self.stats.hooks.append(run.to_dict())
            self.progress.note(run.failure())
        return error_record(
            job.case,
            target=job.target.name,
            provider=job.target.provider,
            prompt=None,
            error=run.failure(),
            duration_ms=0.0,
            repeat=job.repeat,
            workspace={"mode": spec.mode, "hooks": [run.to_dict()], "digest": spec.digest()},
        )

    async def _worker(self, queue: Iterator[CaseJob | InvalidJob]) -> None:
        for job in queue:
            if isinstance(job, InvalidJob):
                self._invalid(job)
            else:
                await self._run_case(job)
            # Back to the event loop between cases, even when the answer was instant (the
            # mock, --cache): the loop only drops the cancelled timers of finished
            # requests between its steps, and a worker that never yields would keep
            # every case's until the run ends (memory growing with the cases).
            await asyncio.sleep(0)

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
        self.collector.add_record(record)
        self.stats.finished += 1
        self.stats.statuses["invalid"] += 1
        self.progress.case_finished(
            f"{invalid.eval_file}::#{invalid.index}",
            label,
            status="invalid",
            score=None,
            error=invalid.reason,
        )

    async def _run_case(self, job: CaseJob, response: ProviderResponse | None = None) -> None:
        case, target = job.case, job.target
        key = f"{case.eval_file}::{case.id}::{target.name}::{job.repeat}"
        target_label = self._labels.get(id(target))
        if target_label is None:
            target_label = self._labels[id(target)] = target.label
        several = job.repeat or job.repeats > 1
        label = f"{case.id} | {target_label}" + (f" {repeat_label(job.repeat)}" if several else "")
        if response is None:
            ready = await self._setup(job)
            if isinstance(ready, dict):  # its file's before_all failed
                self._finish(key, label, ready)
                return
            job = ready
        if self.executor is not None and response is None and not target.batching:
            self.progress.case_started(key, label)  # its turns are taken in another process
            record, _ = await self.executor.run_case(job)
        else:
            # shown as running from its first turn at the target: only what holds a turn
            record, _ = await self.pipeline.run(
                job, response, on_start=lambda: self.progress.case_started(key, label)
            )
        if job.auto is not None:  # a run of --repeat auto says why it was made
            record["auto_repeat"] = job.auto
        self._finish(key, label, record)

    def _finish(self, key: str, label: str, record: dict[str, Any]) -> None:
        record = self.masker.record(record)  # what is written and shown holds no known secret
        self.writer.write(record)
        self.collector.add_record(record)
        self.stats.finished += 1
        self.stats.statuses[record["status"]] += 1
        status = record["status"]
        misses = record.get("misses") if status in ("failed", "uncertain") else None
        if isinstance(misses, list) and status == "uncertain":
            misses = misses[::-1]  # the line that says which judge disagreed comes last
        self.progress.case_finished(
            key,
            label,
            status=status,
            score=record["score"],
            error=record.get("error"),
            miss=next((m for m in misses if isinstance(m, str) and m.strip()), None)
            if isinstance(misses, list)
            else None,
        )

    # --- provider batching ----------------------------------------------------------------

    async def _run_batch(self, target: RunTarget, jobs: list[CaseJob]) -> None:
        """All of a target's cases in one dispatch; on failure, case by case."""
        try:
            prompts = [self.pipeline.prompt(j) for j in jobs]
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


def _round_robin(
    queues: list[Iterator[CaseJob | InvalidJob]],
) -> Iterator[CaseJob | InvalidJob]:
    """One job from each queue in turn (so every target's cases start early)."""
    live = list(queues)
    while live:
        for queue in list(live):
            job = next(queue, None)
            if job is None:
                live.remove(queue)
            else:
                yield job
