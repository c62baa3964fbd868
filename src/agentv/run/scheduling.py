"""How many requests each target gets at once, and when: one gate per target, shared by
every request sent to it (a candidate's answer and a judge's grade alike), so a slow or
rate-limited target never takes the others' capacity and a judge's load counts where it
lands.

A gate adapts to the target (AIMD, as TCP does): it starts at the target's ``workers``;
a 429, a 503 or an "overloaded" answer halves it and pauses the whole target until the
server's ``Retry-After`` has passed (not just the one request); each window of successes
(as many as the current limit) adds one back, never above ``workers``. Concurrency alone
cannot hold a rate when answers come fast, so a throttled gate also paces its requests at
nine tenths of what the server accepted in the last second, at least one a second: the
requests sent then, less those refused. The refusals of requests sent before the cut, or
received during the pause, bring the same news: each takes one off what was accepted, but
the limit is cut once per round, however short the server's wait. A later round also cuts
the pace by at least a third (never below half a request a second); it grows by a tenth
(at least one request a second) for each second of successes. Optional
``max_rpm`` / ``max_tpm`` token buckets pace requests and tokens per minute; tokens are
estimated from the request's size before the call and corrected from the reported usage
after.

A turn is held only while a request is on its way: a request waiting to be retried (its
back-off, or the target's pause) gives its turn back and queues again for a new one, so a
lane may run more cases than its gate has turns and keep them all busy; any other error
(a 500) leaves the limit and the pace alone. Requests that have to wait for a turn stand
in line and get their turns in order.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol

from agentv.errors import ProviderTimeout
from agentv.providers.base import (
    Provider,
    ProviderRequest,
    ProviderResponse,
    ProviderWrapper,
    Throttle,
)

#: a target's concurrency when neither --workers nor its `workers` says
DEFAULT_WORKERS = 3
#: a throttled gate paces its requests at this share of what the server accepted: just
#: under the server's rate, so its bucket refills a little instead of refusing the next one
PACE_SHARE = 0.9


class TokenBucket:
    """``per_minute`` units a minute, at most that many at once (a minute's burst)."""

    def __init__(self, per_minute: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = per_minute / 60.0
        self.capacity = float(per_minute)
        self.level = self.capacity
        self._clock = clock
        self._at = clock()

    def _refill(self) -> None:
        now = self._clock()
        self.level = min(self.capacity, self.level + (now - self._at) * self.rate)
        self._at = now

    def wait_for(self, amount: float) -> float:
        """Seconds until ``amount`` units are there (0: now); nothing is taken."""
        self._refill()
        need = min(amount, self.capacity) - self.level
        return max(0.0, need / self.rate) if need > 0 else 0.0

    def take(self, amount: float) -> None:
        """Take ``amount`` units (the level may go below zero: a correction)."""
        self._refill()
        self.level -= amount

    def give_back(self, amount: float) -> None:
        """Return units taken by an estimate that was too high."""
        self.level = min(self.capacity, self.level + amount)


@dataclass
class GateStats:
    """What a target's gate saw, for the summary."""

    requests: int = 0
    throttled: int = 0  # 429 / 503 / overloaded answers
    throttled_seconds: float = 0.0  # time the whole target was paused
    lowest_limit: int = 0


class TargetGate:
    """At most ``limit`` requests to one target in flight, adapting to the target's answers;
    counts the most seen at once."""

    def __init__(
        self,
        limit: int,
        *,
        max_rpm: float | None = None,
        max_tpm: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_limit = max(1, limit)
        self.limit = self.max_limit
        self.in_flight = 0
        self.peak = 0
        self.paused_until = 0.0
        self._successes = 0
        self._clock = clock
        self._rpm = TokenBucket(max_rpm, clock) if max_rpm else None
        self._tpm = TokenBucket(max_tpm, clock) if max_tpm else None
        self._changed = asyncio.Event()  # a request ended, or the limit grew
        self.stats = GateStats(lowest_limit=self.max_limit)
        #: requests a second once throttled (None: not paced), and when the next may go
        self.rate: float | None = None
        self._next_start = 0.0
        self._starts: deque[float] = deque()  # when the last second's requests went out
        self._paced_successes = 0
        #: the round since the last cut: the requests sent in the second before it, those
        #: refused since, and the pace before it (None: not paced), which the new one stays under
        self._sent = 0
        self._refused = 0
        self._pace_cap: float | None = None
        self._cut_at = -math.inf  # when the limit was last cut
        #: requests waiting for a turn, in order; only the first watches ``_changed``
        self._line: deque[asyncio.Future[None]] = deque()

    # --- waiting for a turn -----------------------------------------------------------------

    def _wait_time(self, tokens: float) -> float | None:
        """Seconds to wait before a request may go (0: now; None: until one ends)."""
        now = self._clock()
        if now < self.paused_until:
            return self.paused_until - now
        if self.in_flight >= self.limit:
            return None
        if self._rpm is None and self._tpm is None and self.rate is None:
            return 0.0  # nothing paces this target
        waits = [b.wait_for(n) for b, n in ((self._rpm, 1), (self._tpm, tokens)) if b]
        if self.rate is not None:
            waits.append(max(0.0, self._next_start - now))
        return max(waits, default=0.0)

    def try_acquire(self, tokens: float = 0.0) -> bool:
        """Take a turn if one is free now (what ``acquire`` does without waiting)."""
        if self._wait_time(tokens) != 0:
            return False
        self._enter(tokens)
        return True

    async def acquire(self, tokens: float = 0.0) -> None:
        """Wait for a turn: the target not paused, a free slot, and room in the buckets.

        Waiting requests stand in line: only the first one watches the gate (a request
        ending, the limit growing, the pause or pace running out), and it wakes the next
        once it has its turn, so one free slot never wakes every waiting request."""
        line = self._line
        if not line and self._wait_time(tokens) == 0:
            self._enter(tokens)
            return
        me: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        line.append(me)
        try:
            if line[0] is not me:
                await me  # woken when the requests ahead of it have had their turns
            while True:
                wait = self._wait_time(tokens)
                if wait == 0:
                    break
                self._changed.clear()
                if wait is None:
                    await self._changed.wait()
                else:
                    try:
                        await asyncio.wait_for(self._changed.wait(), wait)
                    except TimeoutError:
                        pass
        finally:
            self._leave_line(me)
        self._enter(tokens)

    def _leave_line(self, me: asyncio.Future[None]) -> None:
        """``me`` stops waiting (it has its turn, or was cancelled); a new first in line
        is woken to watch the gate."""
        line = self._line
        if line[0] is not me:
            line.remove(me)  # cancelled while others were ahead of it
            return
        line.popleft()
        if line and not line[0].done():
            line[0].set_result(None)

    def _enter(self, tokens: float) -> None:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        self.stats.requests += 1
        now = self._clock()
        starts = self._starts
        starts.append(now)
        while starts[0] < now - 1.0:
            starts.popleft()
        if self.rate is not None:
            self._next_start = max(now, self._next_start) + 1.0 / self.rate
        if self._rpm is not None:
            self._rpm.take(1)
        if self._tpm is not None:
            self._tpm.take(tokens)

    def release(self) -> None:
        """A request ended."""
        self.in_flight -= 1
        self._changed.set()

    async def requeue(self, tokens: float = 0.0, *, after: float = 0.0) -> None:
        """Give up this request's turn, wait ``after`` seconds without one (a retry's
        back-off: other requests use the turn meanwhile), then wait for a new one (after
        the target's pause, within its current limit and buckets). The caller holds a turn
        before and after, also when cancelled meanwhile, so its own release stays right."""
        self.release()
        try:
            if after > 0:
                await asyncio.sleep(after)
            await self.acquire(tokens)
        except BaseException:  # cancelled: back to holding a turn, which the caller ends
            self.in_flight += 1
            raise

    # --- what the target answered ---------------------------------------------------------

    def succeeded(self) -> None:
        """One more success: after a window of them, one more request at once (and, when
        paced, about a second of them adds one request a second)."""
        self._successes += 1
        if self.limit < self.max_limit and self._successes >= self.limit:
            self._successes = 0
            self.limit += 1
            self._changed.set()
        if self.rate is not None:
            self._paced_successes += 1
            if self._paced_successes >= self.rate:
                self._paced_successes = 0
                self.rate += max(1.0, self.rate / 10)

    def now(self) -> float:
        """The gate's clock (when a request goes out, for ``throttled``'s ``sent_at``)."""
        return self._clock()

    def throttled(self, wait: float, *, sent_at: float | None = None) -> None:
        """The target said "too much" to a request sent at ``sent_at`` (None: just now):
        halve the limit, pause everything for ``wait`` s, and pace the requests under what
        the server accepted. A request sent before the last cut, or refused during the
        pause, brings the same news as the one that cut: the limit is cut once per round
        of requests, however short the server's wait."""
        self.stats.throttled += 1
        now = self._clock()
        until = now + max(0.0, wait)
        if now < self.paused_until or (sent_at is not None and sent_at < self._cut_at):
            # one more refusal of that round: the pause may be longer, and the server
            # accepted one request fewer than the pace counted
            self._pause_until(now, until)
            self._refused += 1
            self._pace()
            return
        self._cut_at = now
        self._successes = 0
        self.limit = max(1, self.limit // 2)
        self._sent = sum(1 for t in self._starts if t >= now - 1.0)
        self._refused = 1
        self._pace_cap = self.rate
        self._pace()
        self._paced_successes = 0
        self.stats.lowest_limit = min(self.stats.lowest_limit, self.limit)
        self._pause_until(now, until)

    def _pause_until(self, now: float, until: float) -> None:
        """Pause the target until ``until`` at least, counting the seconds added."""
        self.stats.throttled_seconds += max(0.0, until - max(now, self.paused_until))
        self.paused_until = max(self.paused_until, until)

    def _pace(self) -> None:
        """The pace from the requests of the second before the round's cut that were not
        refused: at least one a second the first time; after that at least half of one,
        and at most two thirds of the pace before the cut."""
        pace = PACE_SHARE * max(0, self._sent - self._refused)
        if self._pace_cap is None:
            self.rate = max(1.0, pace)
        else:
            self.rate = max(0.5, min(pace, self._pace_cap * 2 / 3))

    @property
    def counts_tokens(self) -> bool:
        """Whether requests' tokens matter here (``max_tpm``)."""
        return self._tpm is not None

    def used_tokens(self, estimated: float, actual: int | None) -> None:
        """Correct the token bucket once the real usage is known."""
        if self._tpm is None or actual is None:
            return
        if actual > estimated:
            self._tpm.take(actual - estimated)
        else:
            self._tpm.give_back(estimated - actual)

    @property
    def paused_for(self) -> float:
        """Seconds until the target resumes (0: not paused)."""
        return max(0.0, self.paused_until - self._clock())


def estimate_tokens(request: ProviderRequest) -> int:
    """A request's input tokens, guessed before the call: about 4 characters a token."""
    chars = sum(len(m.content) for m in request.messages) or len(request.question)
    return chars // 4 + 1


class Gate(Throttle, Protocol):
    """A target's gate as a request sees it: a ``TargetGate`` here, a ``RemoteGate`` on a
    Ray cluster (``agentv.run.executors.ray_gates``)."""

    limit: int
    max_limit: int
    counts_tokens: bool
    stats: GateStats

    def try_acquire(self, tokens: float = 0.0) -> bool: ...

    async def acquire(self, tokens: float = 0.0) -> None: ...

    def release(self) -> None: ...

    def used_tokens(self, estimated: float, actual: int | None) -> None: ...


#: agent targets enforce their time limit themselves (and clean up); the gate's is a backstop
AGENT_GRACE_S = 10.0

#: told each time a request of the current case gets its turn at a gate: a case's time is
#: counted from its first turn (before it, it was queued behind other cases), and the live
#: view shows it as running from then (``agentv.run.pipeline``)
TURN_TAKEN: ContextVar[Callable[[], None] | None] = ContextVar("agentv_turn_taken", default=None)


class GatedProvider(ProviderWrapper):
    """A provider whose requests are each sent in a turn of its target's gate, the gate told
    how they went. A request with a time limit (``request.timeout``) gets that long from
    when its turn comes (an agent ``AGENT_GRACE_S`` more: it stops itself, and cleans up);
    past it the request fails as ``ProviderTimeout``."""

    def __init__(self, wrapped: Provider, gate: Gate) -> None:
        super().__init__(wrapped)
        self.gate = gate

    async def invoke(self, request: ProviderRequest) -> ProviderResponse:
        """The wrapped provider's answer, sent when the gate lets it through."""
        gate = self.gate
        estimated = estimate_tokens(request) if gate.counts_tokens else 0
        if not gate.try_acquire(estimated):  # mostly a turn is free: no waiting to set up
            await gate.acquire(estimated)
        try:
            told = TURN_TAKEN.get()
            if told is not None:
                told()
            response = await self._send(request)
        finally:
            gate.release()
        usage = response.usage
        gate.used_tokens(estimated, usage.input_tokens if usage is not None else None)
        return response

    async def _send(self, request: ProviderRequest) -> ProviderResponse:
        timeout = request.timeout
        if timeout is None:
            return await self.wrapped.invoke(request)
        limit = timeout + (AGENT_GRACE_S if self.is_agent else 0.0)
        try:
            async with asyncio.timeout(limit):  # from when the gate lets it through
                return await self.wrapped.invoke(request)
        except TimeoutError:
            raise ProviderTimeout(
                self.name, f"target {self.name!r} did not answer within {timeout:g}s"
            ) from None


class Gates:
    """The run's gates, one per target provider, made on first use."""

    def __init__(self) -> None:
        self._gates: dict[int, tuple[Provider, Gate]] = {}

    def for_provider(self, provider: Provider, limit: int) -> Gate:
        """The gate of ``provider`` (``limit`` and its ``max_rpm``/``max_tpm`` apply when it
        is made); the provider learns its gate as its throttle, to report throttling and
        successes."""
        found = self._gates.get(id(provider))
        if found is None:
            gate = self._make(provider, limit)
            provider.throttle = gate
            found = self._gates[id(provider)] = (provider, gate)
        return found[1]

    def _make(self, provider: Provider, limit: int) -> Gate:
        return TargetGate(limit, max_rpm=max_rpm(provider), max_tpm=max_tpm(provider))

    def by_target(self) -> dict[str, Gate]:
        """Each gate under its target's name."""
        return {provider.name: gate for provider, gate in self._gates.values()}


def max_rpm(provider: Provider) -> float | None:
    """The requests a minute ``provider``'s target allows itself (None: no limit of its own)."""
    return getattr(provider.settings, "max_rpm", None)


def max_tpm(provider: Provider) -> float | None:
    """The tokens a minute ``provider``'s target allows itself (None: no limit of its own)."""
    return getattr(provider.settings, "max_tpm", None)
