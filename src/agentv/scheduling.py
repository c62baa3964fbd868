"""How many requests each target gets at once: one gate per target, shared by every request
sent to it (a candidate's answer and a judge's grade alike), so a slow or rate-limited
target never takes the others' capacity and a judge's load counts where it lands.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentv.providers.base import Provider, ProviderRequest, ProviderResponse

#: a target's concurrency when neither --workers nor its `workers` says
DEFAULT_WORKERS = 3


class TargetGate:
    """At most ``limit`` requests to one target in flight; counts the most seen at once."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._semaphore = asyncio.Semaphore(limit)
        self.in_flight = 0
        self.peak = 0

    async def __aenter__(self) -> None:
        await self._semaphore.acquire()
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)

    async def __aexit__(self, *exc: object) -> None:
        self.in_flight -= 1
        self._semaphore.release()


class GatedProvider:
    """A provider whose requests pass through its target's gate; everything but ``invoke``
    is the wrapped provider's."""

    def __init__(self, provider: Provider, gate: TargetGate) -> None:
        self._provider = provider
        self._gate = gate

    def __getattr__(self, name: str) -> Any:
        return getattr(self._provider, name)

    async def invoke(self, request: ProviderRequest) -> ProviderResponse:
        """The wrapped provider's answer, sent when the gate lets it through."""
        async with self._gate:
            return await self._provider.invoke(request)


class Gates:
    """The run's gates, one per target provider, made on first use."""

    def __init__(self) -> None:
        self._gates: dict[int, TargetGate] = {}

    def for_provider(self, provider: Provider, limit: int) -> TargetGate:
        """The gate of ``provider`` (``limit`` applies when it is made)."""
        gate = self._gates.get(id(provider))
        if gate is None:
            gate = self._gates[id(provider)] = TargetGate(max(1, limit))
        return gate
