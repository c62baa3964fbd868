"""What one case goes through once a worker picks it: build -> send -> grade -> record.

``CasePipeline.run`` is everything a case goes through once it is picked to run: its
prompt built (``agentv.prompts.builder``), the target asked through the run's ``Sender``
(``agentv.run.sending``: the target's gate, the cache, the meter; timeouts retried per
case), the answer's known secrets masked, the evaluators run (``Sender.grade``) and the
result record made (``agentv.results.outcome``). A live case is the same line in a loop
(``agentv.run.conversation``). It never raises for a case that fails: the record says
``error``. Who picks the cases and where the records go is the executor's business: the
local ``Orchestrator``, or a Ray worker (``agentv.run.executors``), which run this same
pipeline.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from agentv.errors import BudgetReached, WorkspaceError
from agentv.evaluators.base import CaseGrade
from agentv.prompts.builder import Prompt, PromptSettings, build_prompt
from agentv.providers.base import ProviderResponse
from agentv.results.outcome import error_record, result_record, skipped_record
from agentv.run.conversation import converse, live_result
from agentv.run.costs import CASE_COST, CaseCost, case_cost
from agentv.run.plan import CaseJob
from agentv.run.scheduling import TURN_TAKEN
from agentv.run.sending import Sender, describe
from agentv.run.workspaces import Lease, WorkspaceManager
from agentv.system.masking import masking_scope


class _StartClock:
    """When a case started: its first turn at a gate (or at once when it needs none)."""

    __slots__ = ("_on_start", "picked", "queued_ms", "started")

    def __init__(self, on_start: Callable[[], None] | None) -> None:
        self.picked = time.perf_counter()
        self.started: float | None = None
        self.queued_ms: float | None = None
        self._on_start = on_start

    def start(self) -> None:
        if self.started is not None:
            return  # a later turn (a retry, a judge): the case started already
        self.started = time.perf_counter()
        self.queued_ms = round((self.started - self.picked) * 1000, 3)
        if self._on_start is not None:
            self._on_start()

    def duration_ms(self) -> float:
        """Milliseconds since the start (starting now, when it has not yet)."""
        self.start()
        assert self.started is not None
        return (time.perf_counter() - self.started) * 1000


class CasePipeline:
    """One case at a time, from its job to its result record (and grade)."""

    def __init__(self, sender: Sender, workspaces: WorkspaceManager | None = None) -> None:
        self.sender = sender
        self.settings = sender.settings
        #: the workspaces of the cases run here (docs/eval-files.md, "Workspaces")
        self.workspaces = workspaces or WorkspaceManager()
        if self.settings.dumper is not None:
            self.settings.dumper.masker = sender.masker
        self._prompt_settings: dict[int, PromptSettings] = {}

    async def run(
        self,
        job: CaseJob,
        response: ProviderResponse | None = None,
        *,
        on_start: Callable[[], None] | None = None,
    ) -> tuple[dict[str, Any], CaseGrade | None]:
        """The case's result record and its grade (None when it could not be graded).
        ``response``: the target's answer, when it came from a batch. The case's time
        (``duration_ms``) counts from its first turn at its target; the time before it is
        ``queued_ms``. ``on_start`` is told when that turn comes (at once when the case
        needs none: an answer from the cache or a batch)."""
        clock = _StartClock(on_start)
        token = TURN_TAKEN.set(clock.start)
        cost_token = CASE_COST.set(CaseCost())
        try:
            if response is not None:
                clock.start()
            # text shortened during the case (an API's error, a program's stderr) is masked
            # with the run's secrets first; the record says so when that masked anything
            with masking_scope(self.sender.masker) as scope:
                record, grade = await self._run(job, response, clock)
        finally:
            TURN_TAKEN.reset(token)
            CASE_COST.reset(cost_token)
        if scope.masked:
            record["masked_secrets"] = True
        return record, grade

    async def _run(
        self, job: CaseJob, response: ProviderResponse | None, clock: _StartClock
    ) -> tuple[dict[str, Any], CaseGrade | None]:
        spec = job.case.workspace
        if spec is None or response is not None:
            return await self._line(job, response, clock, None)
        case, target = job.case, job.target
        try:
            self.sender.meter.check()  # the budget is spent: no workspace is made either
            async with self.workspaces.lease(
                spec,
                eval_id=case.id,
                target=target.name,
                repeat=job.repeat,
                setup=job.setup,
            ) as lease:
                record, grade = await self._line(job, None, clock, lease)
                await self.workspaces.finish(lease, passed=record["status"] == "ok")
                record["workspace"] = lease.record()
                for note in lease.notes:
                    self.sender.progress.note(f"{case.id} | {target.name}: {note}")
            return record, grade
        except BudgetReached as exc:
            record = skipped_record(
                case,
                target=target.name,
                provider=target.provider,
                prompt=None,
                reason=str(exc),
                repeat=job.repeat,
            )
        except WorkspaceError as exc:  # the workspace could not be made: the run's error
            record = error_record(
                case,
                target=target.name,
                provider=target.provider,
                prompt=None,
                error=str(exc),
                duration_ms=clock.duration_ms(),
                queued_ms=clock.queued_ms,
                repeat=job.repeat,
                workspace=exc.record,
            )
        return record, None

    async def _line(
        self,
        job: CaseJob,
        response: ProviderResponse | None,
        clock: _StartClock,
        lease: Lease | None,
    ) -> tuple[dict[str, Any], CaseGrade | None]:
        """build -> send -> grade -> record, in ``lease``'s workspace when the case has one."""
        case, target, sender = job.case, job.target, self.sender
        workspace = lease.record() if lease is not None else None  # its place in the record
        prompt: Prompt | None = None
        attempts = 0 if response is None else response.attempts
        threshold = (
            job.pass_threshold if job.pass_threshold is not None else self.settings.pass_threshold
        )
        try:
            prompt = self.prompt(job)  # build
            if case.live and response is None:  # the same line, in a loop
                run = await converse(sender, job, threshold)
                clock.start()
                duration_ms = clock.duration_ms()
                record = live_result(
                    run,
                    job,
                    prompt,
                    threshold,
                    duration_ms=duration_ms,
                    queued_ms=clock.queued_ms,
                    workspace=workspace,
                )
                return record, None
            if response is None:  # send
                response, attempts = await sender.answer(job, prompt)
            else:  # a batch's answer: priced here, as every other answer is by its sender
                sender.meter.account(target.provider, response)
            clock.start()  # no turn was needed (an answer from the cache): it starts now
            sender.note_ending(job, response)
            # before any evaluator (a judge, a script) or record sees it
            response, masked = sender.masker.response(response)
            grade = await sender.grade(  # grade
                job,
                case,
                prompt,
                response.text,
                sender.judge(case, target),
                latency_ms=response.latency_ms,
                cost_usd=response.cost_usd,
                trajectory=response.trajectory,
                trajectory_error=response.trajectory_error,
            )
            record = result_record(  # record
                case,
                target=target.name,
                provider=target.provider,
                prompt=prompt,
                response=response,
                grade=grade,
                duration_ms=clock.duration_ms(),
                queued_ms=clock.queued_ms,
                pass_threshold=threshold,
                attempts=attempts,
                repeat=job.repeat,
                cost=case_cost(),
                own_tools=target.provider.reports_trajectory,
                workspace=workspace,
            )
            if masked:
                record["masked_secrets"] = True
        except asyncio.CancelledError:
            raise
        except BudgetReached as exc:  # not run (or not graded): never a score
            grade = None
            record = skipped_record(
                case,
                target=target.name,
                provider=target.provider,
                prompt=prompt,
                reason=str(exc),
                response=response,
                duration_ms=clock.duration_ms() if clock.started is not None else 0.0,
                attempts=attempts,
                repeat=job.repeat,
                cost=case_cost(),
                workspace=workspace,
            )
        except Exception as exc:  # a case must never take the run down
            grade = None
            record = error_record(
                case,
                target=target.name,
                provider=target.provider,
                prompt=prompt,
                error=describe(exc),
                duration_ms=clock.duration_ms(),
                queued_ms=clock.queued_ms,
                attempts=attempts + getattr(exc, "attempts", 0),
                repeat=job.repeat,
                cost=case_cost(),
                workspace=workspace,
            )
        return record, grade

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
