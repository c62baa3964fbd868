"""A run's money: every answer priced (``agentv.providers.pricing``), each case's cost kept for its
record, the run's spend added up, and ``--budget-usd`` held (docs/running.md, "A budget").

Two wrappers, set by ``Sender.wrap`` (``agentv.run.sending``) around every provider the run
sends through:

- ``MeteredProvider`` (outermost) prices each answer, cached or not, and adds it to the
  cost of the case being run (``CASE_COST``) and, when it was sent (not reused from
  ``--cache``), to the run's spend;
- ``BudgetGate`` (innermost, inside the target's gate) refuses to send a request once the
  run's spend has reached the budget, at the moment the request would go out: requests
  already sent finish, nothing more is sent, and an answer the cache holds is still reused
  (it costs nothing).

Who spent what is the request's ``party``: the case's target (``candidate``), a judge, and
any other party a run adds (a simulated user's requests, under their own party name): each
is priced the same way, from its usage and the target that answered it, and kept apart.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from agentv.errors import BudgetReached
from agentv.providers.base import Provider, ProviderRequest, ProviderResponse, ProviderWrapper
from agentv.providers.pricing import Cost, Pricer, target_model
from agentv.results.record import usd as dollars

#: a request's party -> its key in a record's ``cost`` (a party not listed keeps its name)
PARTY_KEYS = {"candidate": "target", "judge": "judge"}


@dataclass
class CaseCost:
    """What one run of a case cost, by party: US dollars spent (sent this time), reused
    (answers from ``--cache``), and whether some of its tokens had no price."""

    #: key -> [usd, reused usd, some tokens unpriced, some tokens priced]
    parties: dict[str, list[Any]] = field(default_factory=dict)

    def add(self, party: str, usd: float | None, *, reused: bool, priced: bool) -> None:
        """One answer of ``party``'s: its price (None: it reported no tokens, or they have
        no price, then ``priced`` is False)."""
        if usd is None and priced:
            return  # no tokens reported (an agent, a mock): nothing known to price
        entry = self.parties.setdefault(PARTY_KEYS.get(party, party), [0.0, 0.0, False, False])
        if usd is not None:
            entry[1 if reused else 0] += usd
            entry[3] = True
        if not priced:
            entry[2] = True

    def carry(self, cost: dict[str, Any]) -> None:
        """What a record's ``cost`` says an earlier run paid for answers this run takes
        from it (a conversation ``--resume`` goes on from), counted as reused: nothing is
        paid for them again. Anything that is not a price is left out."""
        for key, entry in cost.items():
            if not isinstance(key, str) or not isinstance(entry, dict):
                continue
            amounts = [entry.get("usd"), entry.get("reused_usd")]
            usd = [a for a in amounts if _price(a)]
            if not usd and entry.get("unpriced") is not True:
                continue
            kept = self.parties.setdefault(key, [0.0, 0.0, False, False])
            if usd:
                kept[1] += sum(usd)
                kept[3] = True
            if entry.get("unpriced") is True:
                kept[2] = True

    def to_dict(self) -> dict[str, Any] | None:
        """The record's ``cost``: ``{party: {usd, reused_usd, unpriced}}`` (None: no answer
        reported tokens)."""
        if not self.parties:
            return None
        out: dict[str, Any] = {}
        for key, (usd, reused, unpriced, priced) in self.parties.items():
            entry: dict[str, Any] = {}
            if priced:
                entry["usd"] = dollars(usd)
                if reused:
                    entry["reused_usd"] = dollars(reused)
            if unpriced:
                entry["unpriced"] = True
            out[key] = entry
        return out


def _price(value: Any) -> bool:
    """Whether ``value`` is an amount of US dollars a record may hold."""
    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    )


#: the cost of the case being run (set by ``CasePipeline.run`` for the case's task)
CASE_COST: ContextVar[CaseCost | None] = ContextVar("agentv_case_cost", default=None)


def case_cost() -> dict[str, Any] | None:
    """The record's ``cost`` of the case being run (None: no case, or nothing priced)."""
    found = CASE_COST.get()
    return found.to_dict() if found is not None else None


class Meter:
    """Prices every answer of a run and adds up what the run spent. ``budget``: US dollars
    after which nothing more is sent (None: no limit). ``on_unpriced`` is told once per
    target and model that answered with tokens but has no price."""

    def __init__(
        self,
        budget: float | None = None,
        *,
        pricer: Pricer | None = None,
        on_unpriced: Callable[[str], None] | None = None,
        on_stop: Callable[[str], None] | None = None,
    ) -> None:
        self.budget = budget
        self.pricer = pricer or Pricer()
        self.spent = 0.0  # sent this run
        self.reused = 0.0  # answers reused from --cache
        self.unpriced: dict[str, str] = {}  # "target (model)" -> what to do
        self.stopped = False  # a request was refused: the budget was reached
        self._on_unpriced = on_unpriced
        self._on_stop = on_stop

    @property
    def reached(self) -> bool:
        """The run's spend has reached its budget."""
        return self.budget is not None and self.spent >= self.budget

    def account(
        self,
        provider: Provider,
        response: ProviderResponse,
        *,
        party: str = "candidate",
        model: str | None = None,
    ) -> None:
        """Price ``response`` (an answer of ``provider`` to a request of ``party``, with
        its own ``model`` when it named one), and add it to the case's cost and, when it was
        sent, to the run's spend."""
        if response.reported_cost_usd is not None and provider.price is None:
            # the agent priced its own calls (it knows which models it used): its word
            cost = Cost(response.reported_cost_usd, priced=True)
        else:
            cost = self.pricer.cost(provider, response.usage, model)
        response.cost_usd = cost.usd
        if cost.usd is not None:
            if response.cached:
                self.reused += cost.usd
            else:
                self.spent += cost.usd
        if cost.ignored:
            self._not_counts(provider, cost.ignored)
        elif not cost.priced:
            self._unpriced(provider, model)
        case = CASE_COST.get()
        if case is not None:
            case.add(party, cost.usd, reused=response.cached, priced=cost.priced)

    def check(self) -> None:
        """Raise ``BudgetReached`` when nothing more may be sent."""
        if self.reached:
            assert self.budget is not None
            if not self.stopped and self._on_stop is not None:
                self._on_stop(
                    f"Budget reached: ${self.spent:.4f} spent of ${self.budget:g}; no more "
                    "requests are sent (those in flight finish), the runs left are recorded "
                    "as skipped"
                )
            self.stopped = True
            raise BudgetReached(self.budget, self.spent)

    def _not_counts(self, provider: Provider, ignored: tuple[str, ...]) -> None:
        """Said once per target: it answered with token counts that are not counts."""
        name = f"{provider.name} (usage)"
        if name in self.unpriced:
            return
        self.unpriced[name] = (
            f"target {provider.name!r}: the server reported token counts that are not "
            f"counts ({', '.join(ignored)}): those answers are not priced (their cost is "
            "unknown, and not counted toward --budget-usd)"
        )
        if self._on_unpriced is not None:
            self._on_unpriced(self.unpriced[name])

    def _unpriced(self, provider: Provider, model: str | None) -> None:
        name = f"{provider.name} ({target_model(provider, model) or provider.kind})"
        if name in self.unpriced:
            return
        self.unpriced[name] = (
            f"target {provider.name!r}: no price known for "
            f"{target_model(provider, model) or 'its answers'} ({provider.kind}); its tokens are "
            "counted, not priced: give the target a price: in targets.yaml "
            "(input_per_mtok, output_per_mtok)"
        )
        if self._on_unpriced is not None:
            self._on_unpriced(self.unpriced[name])


class MeteredProvider(ProviderWrapper):
    """A provider whose every answer is priced and counted by the run's ``Meter``."""

    def __init__(self, wrapped: Provider, meter: Meter) -> None:
        super().__init__(wrapped)
        self.meter = meter

    async def invoke(self, request: ProviderRequest) -> ProviderResponse:
        response = await self.wrapped.invoke(request)
        priced_by_itself = response.reported_cost_usd is not None and self.price is None
        if (
            response.usage is not None
            and not priced_by_itself
            and not self.meter.pricer.known(self, request.model)
        ):
            # the price table loads once per run, in a thread: the other requests in flight
            # must not wait for it (their time is measured)
            await asyncio.to_thread(self.meter.pricer.rates, self, request.model)
        self.meter.account(self, response, party=request.party, model=request.model)
        return response


class BudgetGate(ProviderWrapper):
    """Sends a request only while the run's spend is under its budget (``BudgetReached``
    otherwise). It sits inside the target's gate: the spend is read when the request's turn
    has come, the moment it would go out."""

    def __init__(self, wrapped: Provider, meter: Meter) -> None:
        super().__init__(wrapped)
        self.meter = meter

    async def invoke(self, request: ProviderRequest) -> ProviderResponse:
        self.meter.check()
        return await self.wrapped.invoke(request)
