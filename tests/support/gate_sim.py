"""A target's gate against a simulated rate-limited API, in virtual time.

``simulate`` runs cases through the real ``TargetGate`` and the real retry loop of
``LLMProvider`` (``Retry-After`` honoured, the whole target paused and paced) against a
server that decides like the loopback fake (``fakes.BucketLimit`` / ``fakes.WindowLimit``)
and answers after a fixed latency. The event loop's clock is virtual: it jumps to the next
timer whenever nothing is ready, so a minute of requests takes a fraction of a second and
every run is the same. What the server saw comes back as a ``SimResult``.
"""

from __future__ import annotations

import asyncio
import math
import random
import selectors
from dataclasses import dataclass, field
from typing import Any

from agentv.messages import ChatMessage
from agentv.providers.base import SENDING, ProviderRequest
from agentv.providers.llm import Answer, CallFailure, LLMProvider, LLMSettings, Payload
from agentv.run.scheduling import GatedProvider, TargetGate, lane_size
from support.fakes import BucketLimit, WindowLimit


class _JumpingSelector(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
    """Polls without blocking; when nothing is ready, the loop's clock jumps just past its
    next timer instead of waiting for it (also a timer due within the clock's resolution:
    the clock must move for a gate that waits for it)."""

    loop: VirtualTimeLoop

    def select(self, timeout: float | None = None) -> list[Any]:
        ready = super().select(0)
        loop = self.loop
        if ready or loop._ready:  # type: ignore[attr-defined]
            return ready
        timers = loop._scheduled  # type: ignore[attr-defined]
        if not timers:
            raise RuntimeError("the simulation is stuck: nothing is ready and no timer is set")
        loop.now = max(loop.now, math.nextafter(timers[0].when(), math.inf))
        return ready


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock (``time()``) moves only when every task waits for a timer."""

    def __init__(self) -> None:
        selector = _JumpingSelector()
        super().__init__(selector)
        selector.loop = self
        self.now = 0.0
        self._clock_resolution = 0.0  # a timer runs once the clock is past it, never before

    def time(self) -> float:
        return self.now


class _Refused(Exception):
    def __init__(self, wait: float) -> None:
        self.wait = wait


class SimServer:
    """Decides each request at its arrival (``limit``), refuses at once with the seconds
    the next one would need, and answers an accepted one after ``latency`` s. The way
    there and back takes ``one_way`` s each, plus up to ``jitter`` s more on the way
    there (a busy client, a busy network)."""

    def __init__(
        self,
        limit: BucketLimit | WindowLimit,
        latency: float,
        *,
        one_way: float = 0.0005,
        jitter: float = 0.0,
        seed: int = 0,
    ) -> None:
        self.limit = limit
        self.latency = latency
        self.one_way = one_way
        self.jitter = jitter
        self.rng = random.Random(seed)
        #: (arrival time, accepted) of every request
        self.arrivals: list[tuple[float, bool]] = []
        self.answered: list[float] = []  # when each accepted request's answer left

    async def handle(self) -> None:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(self.one_way + self.rng.uniform(0, self.jitter))
        now = loop.time()
        wait = self.limit.take(now)
        self.arrivals.append((now, wait is None))
        if wait is not None:
            await asyncio.sleep(self.one_way)
            raise _Refused(wait)
        await asyncio.sleep(self.latency)
        self.answered.append(loop.time())
        await asyncio.sleep(self.one_way)


class SimProvider(LLMProvider):
    """An LM API target whose calls go to a ``SimServer``. A client's event loop does one
    thing at a time: each request takes ``cpu`` s of it to send and as long again to read
    its answer, in turn with every other request."""

    kind = "sim"

    def __init__(
        self,
        server: SimServer,
        *,
        cpu: float = 0.0,
        stalls: tuple[float, float] = (0.0, 0.0),
        seed: int = 0,
        **settings: Any,
    ) -> None:
        super().__init__("sim", LLMSettings(**settings))
        self.server = server
        self.cpu = cpu
        #: (share, seconds): that share of the pieces of work takes that much longer (a
        #: collection of the garbage collector, a slow callback), holding up all the others
        self.stalls = stalls
        self._stall_rng = random.Random(seed)
        self._loop_busy = asyncio.Lock()

    def build_payload(self, request: ProviderRequest) -> Payload:
        return Payload({"q": request.question})

    async def _work(self) -> None:
        if self.cpu:
            share, length = self.stalls
            stall = length if share and self._stall_rng.random() < share else 0.0
            async with self._loop_busy:
                await asyncio.sleep(self.cpu + stall)

    async def call(self, payload: Payload, timeout: float) -> Answer:
        await self._work()
        sending = SENDING.get()  # as the transport says it: the request leaves now
        if sending is not None:
            sending()
        try:
            await self.server.handle()
        finally:
            await self._work()
        return Answer(text="ok")

    def translate_error(self, exc: BaseException) -> CallFailure | None:
        if isinstance(exc, _Refused):
            return CallFailure("Rate limit reached.", status=429, retry_after=exc.wait)
        return None


@dataclass
class SimResult:
    """What the server saw of a simulated run."""

    arrivals: list[tuple[float, bool]]
    answered: list[float]
    failed: int
    gate: TargetGate
    per_second: float  # the limit's long-run rate
    rates: list[float] = field(default_factory=list)  # the gate's pace after each request

    @property
    def requests(self) -> int:
        return len(self.arrivals)

    @property
    def refused(self) -> int:
        return sum(1 for _, ok in self.arrivals if not ok)

    @property
    def refused_share(self) -> float:
        return self.refused / self.requests if self.requests else 0.0

    @property
    def window(self) -> float:
        """From the first request to the last accepted one, plus one request's share of the
        limit (a run at exactly the limit's rate has a goodput of 1; how long the answers
        take does not count: the limit counts requests)."""
        first = min(t for t, _ in self.arrivals)
        return max(t for t, ok in self.arrivals if ok) - first + 1 / self.per_second

    @property
    def goodput(self) -> float:
        """Accepted requests per second of the window, over the limit's rate."""
        return sum(1 for _, ok in self.arrivals if ok) / self.window / self.per_second

    def accepted_between(self, start: float, end: float) -> int:
        """Requests the server accepted that arrived in [start, end)."""
        return sum(1 for t, ok in self.arrivals if ok and start <= t < end)

    def steady_from(self, span: float = 2.0, share: float = 0.9) -> float:
        """The earliest time from which every ``span`` s window of arrivals (up to the last
        full one) had at least ``share`` of the limit's rate accepted: when the gate
        found its pace and kept it."""
        first = min(t for t, _ in self.arrivals)
        last = max(t for t, ok in self.arrivals if ok)
        starts = [first + i * 0.1 for i in range(int((last - span - first) / 0.1) + 1)]
        good = [
            self.accepted_between(s, s + span) >= share * self.per_second * span for s in starts
        ]
        for i in range(len(good) - 1, -1, -1):
            if not good[i]:
                return starts[i] + 0.1 - first if i + 1 < len(starts) else last - first
        return 0.0


def simulate(
    limit: BucketLimit | WindowLimit,
    *,
    latency: float,
    cases: int,
    workers: int = 50,
    jitter: float = 0.0,
    cpu: float = 0.0,
    stalls: tuple[float, float] = (0.0, 0.0),
    seed: int = 0,
    **settings: Any,
) -> SimResult:
    """``cases`` requests through one gate of ``workers`` against ``limit``, run as a
    lane does (a quarter more cases at once than the gate has turns)."""
    loop = VirtualTimeLoop()
    asyncio.set_event_loop(loop)  # the provider's lock is made for it
    server = SimServer(limit, latency, jitter=jitter, seed=seed)
    provider = SimProvider(server, cpu=cpu, stalls=stalls, seed=seed, **settings)
    gate = TargetGate(workers, clock=loop.time)
    provider.throttle = gate
    gated = GatedProvider(provider, gate)
    random.seed(seed)  # the retry back-off's jitter
    todo = iter(range(cases))
    failed = 0
    rates: list[float] = []

    async def lane() -> None:
        nonlocal failed
        for i in todo:
            request = ProviderRequest(question=f"q{i}", messages=[ChatMessage("user", "q")])
            try:
                await gated.invoke(request)
            except Exception:
                failed += 1
            rates.append(gate.rate or 0.0)

    async def run() -> None:
        await asyncio.gather(*(lane() for _ in range(lane_size(workers))))

    try:
        loop.run_until_complete(run())
    finally:
        loop.close()
    return SimResult(server.arrivals, server.answered, failed, gate, limit.per_second, rates)
