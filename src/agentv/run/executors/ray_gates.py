"""One gate per target for a whole Ray run, not one per worker process.

A local run has one ``TargetGate`` per target in its own process (``agentv.run.scheduling``).
On Ray, every worker process sends requests to the same APIs, so a 429 seen by one worker
has to pause all of them, a pace has to hold across the cluster, and a target's
``workers`` has to cap its requests wherever they come from. The driver starts one
``GateKeeper`` actor per run holding every target's gate; each worker's requests ask it for
their turns through a ``RemoteGate``, which offers requests what a ``TargetGate`` offers.
See docs/architecture.md ("Executors").

- Concurrency: a target's own ``workers`` caps its requests across the cluster. A target
  without it is capped only by the cases Ray runs at once (``--workers`` does not apply to
  Ray runs), so its limit starts there (and follows the pace once it is throttled). An
  agent target without ``workers``, ``max_rpm`` or ``max_tpm`` has nothing to share (the
  run never sees it throttled) and keeps a gate per process: no round trip per case.
- Turns are tickets: the keeper knows which case (its ``holder``, one per Ray task) holds
  each, so the turns of a case whose worker died are given back (``forget``), and a request
  cancelled while it waited gives back the turn it may have been granted meanwhile (``drop``).
- Clocks: a worker's ``now()`` is the keeper's clock (learned at each turn), so ``sent_at``
  compares with the keeper's rounds on any node.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agentv.run.scheduling import Gates, GateState, GateStats, TargetGate

if TYPE_CHECKING:
    from agentv.providers.base import Provider


@dataclass(frozen=True)
class GateSpec:
    """One target's gate as the keeper builds it."""

    name: str
    limit: int
    max_rpm: float | None = None
    max_tpm: float | None = None


class GateKeeper:
    """The run's gates, in one Ray actor (async: every call runs on its event loop, so a
    turn waited for holds nothing up)."""

    def __init__(self, specs: dict[int, GateSpec]) -> None:
        self._names = {key: spec.name for key, spec in specs.items()}
        self._gates = {
            key: TargetGate(spec.limit, max_rpm=spec.max_rpm, max_tpm=spec.max_tpm)
            for key, spec in specs.items()
        }
        self._granted: dict[str, tuple[str, int]] = {}  # ticket -> (holder, gate key)
        self._waiting: dict[str, asyncio.Task[Any]] = {}  # tickets waiting for a turn
        self._dropped: set[str] = set()  # tickets given up before they came

    async def acquire(
        self, key: int, tokens: float, holder: str, ticket: str
    ) -> tuple[float, int] | None:
        """Wait for a turn at gate ``key``; the keeper's clock and the gate's limit when it
        is granted, None when the ticket was dropped first."""
        if ticket in self._dropped:
            self._dropped.discard(ticket)
            return None
        gate = self._gates[key]
        self._waiting[ticket] = asyncio.current_task()  # type: ignore[assignment]
        try:
            await gate.acquire(tokens)
        except asyncio.CancelledError:  # dropped while waiting: no turn was taken
            return None
        finally:
            del self._waiting[ticket]
        self._granted[ticket] = (holder, key)
        return gate.now(), gate.limit

    def release(self, ticket: str, successes: int = 0, latency: float | None = None) -> None:
        """The request holding ``ticket`` ended (a ticket unknown here is already back),
        after ``successes`` answers at the gate, the quickest in ``latency`` s (sent along,
        one message fewer a request)."""
        found = self._granted.pop(ticket, None)
        if found is not None:
            gate = self._gates[found[1]]
            for i in range(successes):
                sent_at = gate.now() - latency if i == 0 and latency is not None else None
                gate.succeeded(sent_at)
            gate.release()

    def drop(self, ticket: str) -> None:
        """The request that asked for ``ticket`` stopped waiting for it: whether the turn
        was granted meanwhile, is still awaited, or was not asked for yet, none is held."""
        waiting = self._waiting.get(ticket)
        if waiting is not None:
            waiting.cancel()
        elif ticket in self._granted:
            self.release(ticket)
        else:
            self._dropped.add(ticket)

    def forget(self, holder: str) -> None:
        """Give back every turn of ``holder`` (a case whose worker died)."""
        for ticket, (owner, _) in list(self._granted.items()):
            if owner == holder:
                self.release(ticket)

    def throttled(self, key: int, wait: float, sent_at: float | None, asked: bool = False) -> None:
        self._gates[key].throttled(wait, sent_at=sent_at, asked=asked)

    def used_tokens(self, key: int, estimated: float, actual: int | None) -> None:
        self._gates[key].used_tokens(estimated, actual)

    def node(self) -> str:
        """The Ray node this keeper runs on."""
        import ray

        return ray.get_runtime_context().get_node_id()

    def stats(self) -> dict[str, GateStats]:
        """What each gate saw, under its target's name."""
        return {self._names[key]: gate.stats for key, gate in self._gates.items()}

    def snapshot(self, key: int) -> GateState:
        """The state of the gate of target ``key`` (``TargetGate.snapshot``)."""
        return self._gates[key].snapshot()


#: the Ray task this worker process runs now (its case holds the turns it takes)
_holder = ""
_tickets = itertools.count()


def hold_for(holder: str) -> None:
    """The turns taken from now on belong to ``holder`` (one per Ray task)."""
    global _holder
    _holder = holder


class RemoteGate:
    """A target's gate as a worker process sees it: what requests ask of a ``TargetGate``,
    answered by the run's keeper."""

    def __init__(self, keeper: Any, key: int, spec: GateSpec) -> None:
        self._keeper = keeper
        self._key = key
        self.max_limit = spec.limit
        self.limit = spec.limit  # as of the last turn granted
        self.counts_tokens = spec.max_tpm is not None
        #: this process's share (the keeper's gate holds the run's figures)
        self.stats = GateStats(lowest_limit=spec.limit)
        self._held: list[str] = []  # tickets of this process's requests in flight
        self._successes = 0  # answers not yet told to the keeper (they go with a release)
        self._latency: float | None = None  # the quickest of them, in seconds
        self._offset = 0.0  # the keeper's clock minus this process's

    def try_acquire(self, tokens: float = 0.0) -> bool:
        return False  # every turn is the keeper's to give

    @property
    def waiting(self) -> bool:
        return False  # the keeper's line is not in this process

    async def acquire(self, tokens: float = 0.0) -> None:
        ticket = f"{os.getpid()}-{next(_tickets)}"
        ref = self._keeper.acquire.remote(self._key, tokens, _holder, ticket)
        try:
            granted = await ref
        except asyncio.CancelledError:
            self._keeper.drop.remote(ticket)
            raise
        if granted is None:  # the keeper was stopped (the run is ending)
            raise RuntimeError("the run's rate limits were stopped before this request")
        keeper_now, self.limit = granted
        self.stats.requests += 1
        self._offset = keeper_now - time.monotonic()
        self._held.append(ticket)

    def release(self) -> None:
        # turns are alike: any ticket of this gate will do (none left: a requeue that was
        # cancelled already gave its turn back)
        if self._held:
            self._keeper.release.remote(self._held.pop(), self._successes, self._latency)
            self._successes = 0
            self._latency = None

    async def requeue(self, tokens: float = 0.0, *, after: float = 0.0) -> None:
        self.release()
        if after > 0:
            await asyncio.sleep(after)
        await self.acquire(tokens)

    def succeeded(self, sent_at: float | None = None) -> None:
        # an answer ends its request, whose turn goes back next: the keeper hears of both
        # in one message
        self._successes += 1
        if sent_at is not None:
            latency = self.now() - sent_at
            if self._latency is None or latency < self._latency:
                self._latency = latency

    def now(self) -> float:
        return time.monotonic() + self._offset

    def left(self, at: float) -> None:
        # a message to the keeper per request would cost more than a late send: the
        # keeper spaces turns by when it gave them
        pass

    def throttled(self, wait: float, *, sent_at: float | None = None, asked: bool = False) -> None:
        self._keeper.throttled.remote(self._key, wait, sent_at, asked)

    def used_tokens(self, estimated: float, actual: int | None) -> None:
        if self.counts_tokens and actual is not None:
            self._keeper.used_tokens.remote(self._key, estimated, actual)


class RemoteGates(Gates):
    """A worker's gates: one ``RemoteGate`` per provider, on the run's keeper."""

    def __init__(self, keeper: Any, keys: dict[int, int], specs: dict[int, GateSpec]) -> None:
        super().__init__()
        self._keeper = keeper
        self._keys = keys  # id(provider) in this process -> its gate's key
        self._specs = specs

    def _make(self, provider: Provider, limit: int) -> Any:
        key = self._keys[id(provider)]
        if key not in self._specs:  # an agent without limits: nothing to share
            return super()._make(provider, limit)
        return RemoteGate(self._keeper, key, self._specs[key])
