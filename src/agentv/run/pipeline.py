"""What one case goes through once a worker picks it: prompt -> target -> evaluators ->
result record.

``CasePipeline.run`` is everything a case goes through once it is picked to run: its
prompt built (``agentv.prompts.builder``), the target asked through that target's gate
(``agentv.run.scheduling``, timeouts retried per case), the answer's known secrets masked, the
evaluators run (``agentv.evaluators``) and the result record made (``agentv.results.record``).
It never raises for a case that fails: the record says ``error``. Who picks the cases and
where the records go is the executor's business: the local ``Orchestrator``, or a Ray
worker (``agentv.run.executors``), which run this same pipeline.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from agentv.errors import AgentVError, BudgetReached, ProviderError, ProviderTimeout
from agentv.evaluators.base import CaseGrade, EvaluationContext
from agentv.evaluators.grading import grade_case, needs_judge
from agentv.prompts.builder import Prompt, PromptSettings, build_prompt
from agentv.providers.base import (
    Provider,
    ProviderRequest,
    ProviderResponse,
    request_for_case,
    total_usage,
)
from agentv.results.dumps import PromptDumper
from agentv.results.outcome import (
    LiveFacts,
    error_record,
    evaluator_error_text,
    grading_fields,
    live_record,
    required_fields,
    result_record,
    skipped_record,
)
from agentv.results.record import DEFAULT_PASS_THRESHOLD, USER_ERROR
from agentv.run.cache import CachedProvider, ResponseCache
from agentv.run.conversation import (
    aggregate_score,
    converse,
    plan_digest,
    turn_record,
    user_part,
)
from agentv.run.costs import CASE_COST, BudgetGate, CaseCost, Meter, MeteredProvider
from agentv.run.plan import CaseJob
from agentv.run.scheduling import DEFAULT_WORKERS, TURN_TAKEN, Gate, GatedProvider, Gates
from agentv.system.masking import Masker, masking_scope
from agentv.targets import RunTarget

if TYPE_CHECKING:
    from agentv.cases import EvalCase
    from agentv.run.simulator import Replay

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
    #: ``--replay-user``: recorded user turns by (dataset, eval id, repeat)
    replay_user: Mapping[tuple[str, str, int], Replay] | None = None
    #: US dollars after which no request is sent (``--budget-usd``); None: no limit
    budget_usd: float | None = None


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
        #: prices every answer, adds up the run's spend, holds its budget
        self.meter = Meter(settings.budget_usd, on_unpriced=progress.note, on_stop=progress.note)
        #: each provider as the run sends through it (its gate, the cache), made once
        self._senders: dict[int, Provider] = {}
        # per run target (they live as long as the run): looked up once, not once per case
        self._target_senders: dict[int, tuple[Provider, Gate]] = {}
        self._judges: dict[int, Provider] = {}
        self._prompt_settings: dict[int, PromptSettings] = {}
        self._cut_notes: dict[str, int] = {}  # target -> answers noted as cut at the limit
        self._ignored_noted: set[str] = set()  # targets whose server ignored the limit

    def watch(self, target: RunTarget) -> None:
        """Make ``target``'s retries visible (counted, and noted now and then)."""
        target.provider.on_retry = self.notes

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
            with masking_scope(self.masker) as scope:
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
        case, target = job.case, job.target
        prompt: Prompt | None = None
        attempts = 0 if response is None else response.attempts
        threshold = (
            job.pass_threshold if job.pass_threshold is not None else self.settings.pass_threshold
        )
        try:
            prompt = self.prompt(job)
            if case.live and response is None:
                return await self._live(job, prompt, clock, threshold), None
            if response is None:
                response, attempts = await self._answer(job, prompt)
            else:  # a batch's answer: priced here, as every other answer is by its sender
                self.meter.account(target.provider, response)
            clock.start()  # no turn was needed (an answer from the cache): it starts now
            self._note_ending(job, response)
            # before any evaluator (a judge, a script) or record sees it
            response, masked = self.masker.response(response)
            grade = await grade_case(
                EvaluationContext(
                    case=case,
                    prompt=prompt,
                    candidate=response.text,
                    target_name=target.name,
                    judge=self.judge_for(job.case, job.target),
                    timeout=self.settings.agent_timeout or None,
                    repeat=job.repeat,
                    latency_ms=response.latency_ms,
                    cost_usd=response.cost_usd,
                    trajectory=response.trajectory,
                    trajectory_error=response.trajectory_error,
                )
            )
            record = result_record(
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
                cost=_case_cost(),
                own_tools=target.provider.reports_trajectory,
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
                cost=_case_cost(),
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
                cost=_case_cost(),
            )
        return record, grade

    async def _live(
        self, job: CaseJob, prompt: Prompt, clock: _StartClock, threshold: float
    ) -> dict[str, Any]:
        """A live case's record: its conversation run turn by turn
        (``agentv.run.conversation``), scored by its ``aggregation``."""
        case, target = job.case, job.target
        run = await converse(self, job, threshold)
        clock.start()
        turns = [turn_record(t, threshold) for t in run.turns]
        hits = [f"turn {t.index}: {h}" for t in run.turns if t.grade for h in t.grade.hits]
        misses = [f"turn {t['turn']}: {m}" for t in turns for m in t.get("misses", ())]
        # a required evaluator that missed fails the case, in a turn or over the conversation
        gates = [
            f"turn {t['turn']}: {name}" for t in turns for name in t.get("failed_required", ())
        ]
        errors = [
            f"turn {t.index}: {text}"
            for t in run.turns
            if (text := t.error or (t.grade and evaluator_error_text(t.grade)))
        ]
        if run.check_error is not None:
            errors.append(run.check_error)
        reasoning = None
        if run.grade is not None:
            names, gate_misses = required_fields(run.grade, threshold)
            gates += names
            hits += run.grade.hits
            misses += [*run.grade.misses, *gate_misses]
            reasoning = run.grade.reasoning
            if (text := evaluator_error_text(run.grade)) is not None:
                errors.append(text)
        score = aggregate_score(run, case.aggregation)
        if run.user_error is not None:
            status = USER_ERROR  # the simulated user's failure, not the model's
            errors = [f"the simulated user failed: {run.user_error}"]
        elif errors:
            status = "error"
        elif run.stopped is not None or score is None or score < threshold or gates:
            status = "failed"  # a conversation stopped by a failed turn did not get through
        else:
            status = "ok"
        responses = run.responses
        latencies = [r.latency_ms for r in responses if r.latency_ms is not None]
        facts = LiveFacts(
            score=score or 0.0,
            status=status,
            hits=hits,
            misses=misses,
            answer=run.turns[-1].answer if run.turns else "",
            turns=turns,
            aggregation=case.aggregation,
            grading=grading_fields(run.grade, threshold) if run.grade is not None else {},
            failed_required=gates,
            reasoning=reasoning,
            expected_aspect_count=sum(
                g.expected_aspect_count
                for g in [*(t.grade for t in run.turns), run.grade]
                if g is not None
            ),
            usage=total_usage(r.usage for r in responses),
            latency_ms=sum(latencies) if latencies else None,
            stopped=run.stopped,
            error="; ".join(errors) if errors else None,
            plan_digest=plan_digest(case),
            cached=bool(responses) and all(r.cached for r in responses),
            user=user_part(run, job),
            cost=_case_cost(),
            trajectory=run.trajectory,
            trajectory_error=run.trajectory_error,
            own_tools=bool(case.tools) or target.provider.reports_trajectory,
        )
        return live_record(
            case,
            target=target.name,
            provider=target.provider,
            prompt=run.last_request or prompt,
            response=run.last_response,
            facts=facts,
            duration_ms=clock.duration_ms(),
            queued_ms=clock.queued_ms,
            attempts=run.attempts,
            repeat=job.repeat,
        )

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

    def sender(self, provider: Provider, limit: int) -> Provider:
        """``provider`` as every request of this run reaches it: through its target's gate
        (at most ``limit`` at once, when the gate is made) and, with ``--cache``, the cache.
        Made once per provider, the same whether it answers cases or judges them."""
        found = self._senders.get(id(provider))
        if found is None:
            # the budget is read when the request's turn comes, the moment it would go out
            inner = provider if self.meter.budget is None else BudgetGate(provider, self.meter)
            found = GatedProvider(inner, self.gates.for_provider(provider, limit))
            if self.settings.cache is not None:
                found = CachedProvider(
                    found, self.settings.cache, stored=self._masked, on_hit=self._cache_hit
                )
            found = MeteredProvider(found, self.meter)  # every answer priced, reused or not
            self._senders[id(provider)] = found
        return found

    def gate(self, target: RunTarget) -> Gate:
        """``target``'s gate (made on first use)."""
        return self.gates.for_provider(target.provider, target_workers(self.settings, target))

    def _target_sender(self, target: RunTarget) -> Provider:
        return self._target_sent(target)[0]

    def _target_sent(self, target: RunTarget) -> tuple[Provider, Gate]:
        """``target``'s sender and its gate."""
        found = self._target_senders.get(id(target))
        if found is None:
            sender = self.sender(target.provider, target_workers(self.settings, target))
            found = self._target_senders[id(target)] = (sender, self.gate(target))
        return found

    def user_sender(self, job: CaseJob) -> Provider:
        """The target playing ``job``'s simulated user, as the run sends through it: its
        own gate (its rate limits) and the cache."""
        assert job.user is not None
        return self._target_sender(job.user)

    def judge_for(self, case: EvalCase, target: RunTarget) -> Provider | None:
        """The judge of ``case`` (a live turn's view of it, say) on ``target``, if it needs
        one. Built before the run (planning checks every judge a case needs); here it is
        only looked up, and sent through as the run sends through any target."""
        if not needs_judge(case):
            return None
        found = self._judges.get(id(target))
        if found is None:
            judge, limit = self.judge_of(target)
            judge.on_retry = self.notes
            found = self._judges[id(target)] = self.sender(judge, limit)
        return found

    def _masked(self, response: ProviderResponse) -> ProviderResponse:
        return self.masker.response(response)[0]

    def _cache_hit(self, request: ProviderRequest) -> None:
        if request.party == "judge":
            self.stats.judge_cache_hits += 1
        else:
            self.stats.cache_hits += 1

    async def _answer(
        self, job: CaseJob, prompt: Prompt, tools: tuple[dict[str, Any], ...] = ()
    ) -> tuple[ProviderResponse, int]:
        """The target's answer and the requests it took (timeouts retried per case);
        ``tools``: what the model may call (a live case's)."""
        sender, gate = self._target_sent(job.target)
        timeout = self.settings.agent_timeout or None
        tries = self.settings.max_retries + 1
        attempts = 0
        last: ProviderTimeout | None = None
        for attempt in range(tries):
            request = request_for_case(
                job.case, prompt, attempt=attempt, timeout=timeout, repeat=job.repeat, tools=tools
            )
            try:
                response = await sender.invoke(request)
            except ProviderTimeout as exc:
                attempts += exc.attempts
                last = exc
                continue
            except ProviderError as exc:
                exc.attempts += attempts
                raise
            if response.cached:
                return response, attempts
            if gate.waiting:
                # the request that waits for the turn this one freed goes out before this
                # answer is graded and recorded: answers come back in bunches, and a freed
                # turn stayed idle meanwhile (benchmarks/README.md, S8). Its cost is counted
                # by now, so a budget sees it.
                await asyncio.sleep(0)
            attempts += response.attempts
            self.stats.requests += 1
            if isinstance(response.raw, dict) and response.raw.get("truncated"):
                self.progress.note(
                    f"{job.target.name}: the answer to {job.case.id!r} was cut at the "
                    "target's max_output_bytes"
                )
            return response, attempts
        assert last is not None
        if tries > 1:
            error = ProviderTimeout(job.target.name, f"{last} (after {tries} attempts)")
        else:
            error = last
        error.attempts = attempts
        raise error


def _case_cost() -> dict[str, Any] | None:
    """The record's ``cost`` of the case being run."""
    found = CASE_COST.get()
    return found.to_dict() if found is not None else None


#: answers cut at the token limit noted one by one per target, before a single "more"
_CUT_NOTES = 3


def describe(exc: BaseException) -> str:
    """An exception as a record's ``error``: our own errors as they are, others named."""
    if isinstance(exc, AgentVError):
        return str(exc)
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
