"""How a run sends a request and hands the answer to the evaluators: the part of a case's
run that single-turn cases (``pipeline``), live conversations (``conversation``), simulated
users (``simulator``) and ``agentv regrade`` (``regrade``) share.

A ``Sender`` is made once per run (once per worker process on Ray). It wraps every
provider the run sends through once, whether it answers cases, judges them or plays a
simulated user: ``MeteredProvider(CachedProvider(GatedProvider(BudgetGate(provider))))``
(the budget gate only with a budget, the cache only with ``--cache``). Through it:

- ``answer`` asks a case's target (timeouts retried per case) and notes answers cut at the
  size limit; ``note_ending`` notes answers cut at the token limit;
- ``judge`` and ``user`` are the case's judge and its simulated user's target, as the run
  sends through them;
- ``grade`` runs the evaluators on an answer: ``grading_context`` is the one place an
  ``EvaluationContext`` is made.

Nothing here knows a case's record or a conversation's turns: those modules call this one,
never the reverse (docs/architecture.md, "Running").
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from agentv.errors import AgentVError, ProviderError, ProviderTimeout
from agentv.evaluators.base import CaseGrade, EvaluationContext, WorkspaceView
from agentv.evaluators.grading import grade_case, needs_judge
from agentv.providers.base import Provider, ProviderRequest, ProviderResponse, request_for_case
from agentv.results.dumps import PromptDumper
from agentv.results.record import DEFAULT_PASS_THRESHOLD
from agentv.run.cache import CachedProvider, ResponseCache
from agentv.run.costs import BudgetGate, Meter, MeteredProvider
from agentv.run.scheduling import DEFAULT_WORKERS, Gate, GatedProvider, Gates
from agentv.run.workspaces import CASE_WORKSPACE
from agentv.system.masking import Masker

if TYPE_CHECKING:
    from agentv.cases import EvalCase, EvaluatorConfig
    from agentv.evaluators.samples import SampleRule
    from agentv.prompts.builder import Prompt
    from agentv.run.plan import CaseJob
    from agentv.run.resume import Replay
    from agentv.targets import RunTarget
    from agentv.trajectory import Trajectory

#: at most one line about a target's retries this often (seconds)
RETRY_NOTE_INTERVAL = 5.0

#: answers cut at the token limit noted one by one per target, before a single "more"
CUT_NOTES = 3


class Notes(Protocol):
    """Where a run's notes go (the progress display, or nowhere)."""

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
    #: ``--judge-samples``: how many times each judge that says nothing of its own is asked
    #: about one answer (None: once); ``--on-uncertain``: what a judge's disagreeing
    #: samples make of a case (None: its own status, ``uncertain``)
    judge_samples: SampleRule | None = None
    on_uncertain: str | None = None


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
    #: the run's own workspace hooks (a file's before_all that failed, every after_all)
    hooks: list[dict[str, Any]] = field(default_factory=list)

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
JudgeOf = Callable[["RunTarget"], tuple[Provider, int]]


def describe(exc: BaseException) -> str:
    """An exception as a record's ``error``: our own errors as they are, others named."""
    if isinstance(exc, AgentVError):
        return str(exc)
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def grading_context(
    job: CaseJob,
    case: EvalCase | Callable[[], EvalCase],
    prompt: Prompt,
    answer: str,
    judge: Provider | None,
    *,
    timeout: float | None = None,
    latency_ms: float | None = None,
    cost_usd: float | None = None,
    trajectory: Trajectory | None = None,
    trajectory_error: str | None = None,
    settings: RunSettings | None = None,
    workspace: WorkspaceView | None = None,
) -> EvaluationContext:
    """What the evaluators see of ``answer``, the answer of ``job``'s target to ``prompt``.

    The one place a run (and ``agentv estimate``, for a judge's prompt) makes an
    ``EvaluationContext``.

    Args:
        job: The run of the case on its target.
        case: The case as graded (a live turn's view of it, say), or a function that makes
            it when an evaluator first reads it.
        prompt: The request the answer came from (its ``question`` is the judge's).
        answer: The answer's text, masked.
        judge: The judge an ``llm_judge`` asks (None: the case needs none).
        timeout: Seconds a code evaluator may take (None: no limit).
        latency_ms: How long the answer took (the sum of a turn's requests).
        cost_usd: What the answer cost (None: unknown).
        trajectory: The tools the target called, in order (None: it could not say).
        trajectory_error: Why the target could not say which tools it called.
        settings: The run's settings: its pass threshold (unless the case's config sets
            one), judge samples and ``on_uncertain`` (default: a run's defaults).
        workspace: The workspace the target worked in, as it left it.

    Returns:
        The context the evaluators grade.
    """
    settings = settings if settings is not None else RunSettings()
    threshold = job.pass_threshold
    return EvaluationContext(
        case=case,
        prompt=prompt,
        candidate=answer,
        target_name=job.target.name,
        judge=judge,
        timeout=timeout,
        repeat=job.repeat,
        latency_ms=latency_ms,
        cost_usd=cost_usd,
        trajectory=trajectory,
        trajectory_error=trajectory_error,
        pass_threshold=threshold if threshold is not None else settings.pass_threshold,
        judge_samples=settings.judge_samples,
        on_uncertain=settings.on_uncertain,
        workspace=workspace,
    )


class Sender:
    """Every request of a run goes out through here, the way the run wraps its target."""

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
        self.progress = progress
        self.masker = masker or Masker()
        self.gates = gates or Gates()
        self.notes = RetryNotes(stats, progress, self.gates)
        #: prices every answer, adds up the run's spend, holds its budget
        self.meter = Meter(settings.budget_usd, on_unpriced=progress.note, on_stop=progress.note)
        #: each provider as the run sends through it (its gate, the cache), made once
        self._wrapped: dict[int, Provider] = {}
        # per run target (they live as long as the run): looked up once, not once per case
        self._targets: dict[int, tuple[Provider, Gate]] = {}
        self._judges: dict[int, Provider] = {}
        self._cut_notes: dict[str, int] = {}  # target -> answers noted as cut at the limit
        self._ignored_noted: set[str] = set()  # targets whose server ignored the limit

    def watch(self, target: RunTarget) -> None:
        """Make ``target``'s retries visible (counted, and noted now and then)."""
        target.provider.on_retry = self.notes

    def wrap(self, provider: Provider, limit: int) -> Provider:
        """``provider`` as every request of this run reaches it: through its target's gate
        (at most ``limit`` at once, when the gate is made) and, with ``--cache``, the cache.
        Made once per provider, the same whether it answers cases or judges them."""
        found = self._wrapped.get(id(provider))
        if found is None:
            # the budget is read when the request's turn comes, the moment it would go out
            inner = provider if self.meter.budget is None else BudgetGate(provider, self.meter)
            found = GatedProvider(inner, self.gates.for_provider(provider, limit))
            if self.settings.cache is not None:
                found = CachedProvider(
                    found, self.settings.cache, stored=self._masked, on_hit=self._cache_hit
                )
            found = MeteredProvider(found, self.meter)  # every answer priced, reused or not
            self._wrapped[id(provider)] = found
        return found

    def gate(self, target: RunTarget) -> Gate:
        """``target``'s gate (made on first use)."""
        return self.gates.for_provider(target.provider, target_workers(self.settings, target))

    def _target(self, target: RunTarget) -> tuple[Provider, Gate]:
        """``target`` as the run sends through it, and its gate."""
        found = self._targets.get(id(target))
        if found is None:
            wrapped = self.wrap(target.provider, target_workers(self.settings, target))
            found = self._targets[id(target)] = (wrapped, self.gate(target))
        return found

    def user(self, job: CaseJob) -> Provider:
        """The target playing ``job``'s simulated user, as the run sends through it: its
        own gate (its rate limits) and the cache."""
        assert job.user is not None
        return self._target(job.user)[0]

    def judge(self, case: EvalCase, target: RunTarget) -> Provider | None:
        """The judge of ``case`` (a live turn's view of it, say) on ``target``, if it needs
        one. Built before the run (planning checks every judge a case needs); here it is
        only looked up, and sent through as the run sends through any target."""
        if not needs_judge(case):
            return None
        found = self._judges.get(id(target))
        if found is None:
            judge, limit = self.judge_of(target)
            judge.on_retry = self.notes
            found = self._judges[id(target)] = self.wrap(judge, limit)
        return found

    def _masked(self, response: ProviderResponse) -> ProviderResponse:
        return self.masker.response(response)[0]

    def _cache_hit(self, request: ProviderRequest) -> None:
        if request.party == "judge":
            self.stats.judge_cache_hits += 1
        else:
            self.stats.cache_hits += 1

    async def answer(
        self, job: CaseJob, prompt: Prompt, tools: tuple[dict[str, Any], ...] = ()
    ) -> tuple[ProviderResponse, int]:
        """The target's answer to ``prompt`` and the requests it took (timeouts retried per
        case); ``tools``: what the model may call (a live case's)."""
        sender, gate = self._target(job.target)
        timeout = self.settings.agent_timeout or None
        workspace = CASE_WORKSPACE.get()
        # an agent that timed out in a workspace left its changes there: a second try would
        # not start where the first did, so it is not retried (docs/eval-files.md)
        tries = self.settings.max_retries + 1 if workspace is None else 1
        attempts = 0
        last: ProviderTimeout | None = None
        for attempt in range(tries):
            request = request_for_case(
                job.case,
                prompt,
                attempt=attempt,
                timeout=timeout,
                repeat=job.repeat,
                tools=tools,
                workspace=workspace.path if workspace is not None else None,
                sandbox=workspace.sandbox if workspace is not None else None,
            )
            try:
                response = await sender.invoke(request)
            except ProviderTimeout as exc:
                attempts += exc.attempts
                last = exc
                if workspace is not None:
                    await workspace.settle()  # what it changed before it was stopped
                continue
            except ProviderError as exc:
                exc.attempts += attempts
                if workspace is not None:
                    await workspace.settle()  # what it changed before it failed
                raise
            if workspace is not None:
                await workspace.settle()  # what the agent changed, before anything grades it
            if response.cached:
                return response, attempts
            if gate.waiting:
                # the request that waits for the turn this one freed goes out before this
                # answer is graded and recorded: answers come back in bunches, and a freed
                # turn stayed idle meanwhile. Its cost is counted by now, so a budget sees it.
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

    def note_ending(self, job: CaseJob, response: ProviderResponse) -> None:
        """Warn on screen about an answer cut at the output token limit (the first few of
        each target, then once that more follow) and, once per target, about a server that
        did not honour the limit: both would otherwise look like complete answers."""
        target = job.target.name
        if response.finish_reason == "length":
            count = self._cut_notes[target] = self._cut_notes.get(target, 0) + 1
            if count <= CUT_NOTES:
                self.progress.note(
                    f"{target}: the answer to {job.case.id!r} was cut at the output token "
                    "limit (finish_reason: length); raise the target's max_output_tokens"
                )
            elif count == CUT_NOTES + 1:
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

    async def grade(
        self,
        job: CaseJob,
        case: EvalCase | Callable[[], EvalCase],
        prompt: Prompt,
        answer: str,
        judge: Provider | None,
        *,
        latency_ms: float | None = None,
        cost_usd: float | None = None,
        trajectory: Trajectory | None = None,
        trajectory_error: str | None = None,
        evaluators: tuple[EvaluatorConfig, ...] | None = None,
    ) -> CaseGrade:
        """``case``'s evaluators (``evaluators``, when given: the list of the case as
        graded, without making it) on ``answer``, already masked; the arguments are
        ``grading_context``'s. Never raises for a grading problem."""
        ctx = grading_context(
            job,
            case,
            prompt,
            answer,
            judge,
            timeout=self.settings.agent_timeout or None,
            latency_ms=latency_ms,
            cost_usd=cost_usd,
            trajectory=trajectory,
            trajectory_error=trajectory_error,
            settings=self.settings,
            workspace=CASE_WORKSPACE.get(),
        )
        return await grade_case(ctx, evaluators)
