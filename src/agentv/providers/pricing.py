"""What tokens cost: a target's prices, and the US dollars of a usage at those prices.

A target's prices come from its ``price:`` in targets.yaml when it has one, else from the
price table of the ``genai-prices`` package (bundled with it and read offline: agentv never
asks it to fetch newer prices), found by the target's API and model. A target neither
priced nor known there (an agent, a local model, a model the table does not list) has its
tokens counted but not priced: its cost is unknown, never zero (docs/results.md, "Cost").

Cost is computed from a ``Usage`` and the target that spent it (``Pricer.cost``), whoever
asked (a case's target, a judge, any other party of a run): ``agentv.run.costs`` meters a
run's requests with it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Annotated, Any, Protocol

from pydantic import BaseModel, ConfigDict, Field

#: a provider kind -> the API's name in genai-prices' table
_TABLE_PROVIDERS = {
    "openai": "openai",
    "azure": "azure",
    "anthropic": "anthropic",
    "gemini": "google",
}

#: the highest price per million tokens: $1,000 a token, far above any model's (tests price
#: tokens at whole dollars), and low enough that no count of tokens (``Usage``: at most
#: 10**12) prices at infinity
MAX_PRICE_PER_MTOK = 1_000_000_000.0
#: a number as written (``"2.5"`` is refused, not read as 2.5)
_USD = Annotated[float, Field(ge=0, le=MAX_PRICE_PER_MTOK, allow_inf_nan=False, strict=True)]


class TargetPrice(BaseModel):
    """A target's ``price:`` in targets.yaml: US dollars per million tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input_per_mtok: _USD
    output_per_mtok: _USD
    #: input tokens read from the vendor's prompt cache (default: ``input_per_mtok``)
    cached_input_per_mtok: _USD | None = None


class TokenCounts(Protocol):
    """Token counts as a request reported them (``agentv.providers.base.Usage`` is one)."""

    @property
    def input_tokens(self) -> int | None: ...
    @property
    def output_tokens(self) -> int | None: ...
    @property
    def cached_input_tokens(self) -> int | None: ...


class PricedTarget(Protocol):
    """What prices a target: its kind (the API), its settings (the ``model``) and its own
    ``price:`` (``agentv.providers.base.Provider`` is one)."""

    @property
    def kind(self) -> str: ...
    @property
    def settings(self) -> Any: ...
    @property
    def price(self) -> TargetPrice | None: ...


@dataclass(frozen=True, slots=True)
class Rates:
    """US dollars per million tokens, and where they come from."""

    input: float
    output: float
    cached_input: float
    source: str  # "targets.yaml", or "genai-prices 0.2.3: openai gpt-4o"

    def cost(self, usage: TokenCounts) -> float | None:
        """The US dollars of ``usage`` (None when it reports no tokens at all)."""
        return usage_cost(usage, self.input, self.output, self.cached_input)

    def to_dict(self) -> dict[str, Any]:
        return {
            "input_per_mtok": self.input,
            "output_per_mtok": self.output,
            "cached_input_per_mtok": self.cached_input,
            "source": self.source,
        }


def usage_cost(usage: TokenCounts, input_: float, output: float, cached: float) -> float | None:
    """The US dollars of ``usage`` at these prices per million tokens (cached input tokens
    are counted within the input tokens, and priced at ``cached``)."""
    inp, out = usage.input_tokens, usage.output_tokens
    if inp is None and out is None:
        return None
    inp = inp or 0
    hit = min(usage.cached_input_tokens or 0, inp)
    return ((inp - hit) * input_ + hit * cached + (out or 0) * output) / 1_000_000


def target_model(provider: PricedTarget, model: str | None = None) -> str | None:
    """The model a request to ``provider`` used: ``model`` (a judge's own), else the
    target's ``model`` setting."""
    if model:
        return model
    value = getattr(provider.settings, "model", None)
    return value if isinstance(value, str) and value.strip() else None


class Pricer:
    """Prices for a run's targets, each looked up once (thread-safe: Ray workers and the
    driver's threads share none, but a process's threads may)."""

    def __init__(self) -> None:
        self._rates: dict[tuple[str, str | None], Rates | None] = {}
        self._exact: dict[tuple[str, str | None], Any] = {}
        self._lock = threading.Lock()

    def known(self, provider: PricedTarget, model: str | None = None) -> bool:
        """Whether ``rates`` answers at once (no table to load: run it in a thread first
        when an event loop must not wait the half second the table takes to load)."""
        if getattr(provider, "price", None) is not None:
            return True
        return (provider.kind, target_model(provider, model)) in self._rates

    def rates(self, provider: PricedTarget, model: str | None = None) -> Rates | None:
        """``provider``'s prices for ``model`` (default: its own); None when unknown."""
        override: TargetPrice | None = getattr(provider, "price", None)
        if override is not None:
            cached = override.cached_input_per_mtok
            return Rates(
                override.input_per_mtok,
                override.output_per_mtok,
                override.input_per_mtok if cached is None else cached,
                "targets.yaml",
            )
        key = (provider.kind, target_model(provider, model))
        if key in self._rates:
            return self._rates[key]
        with self._lock:
            if key in self._rates:  # found by another thread meanwhile
                return self._rates[key]
            found, exact = _table_rates(*key)
            self._rates[key] = found
            if exact is not None:
                self._exact[key] = exact
        return found

    def cost(
        self, provider: PricedTarget, usage: TokenCounts | None, model: str | None = None
    ) -> Cost:
        """What ``usage`` cost on ``provider`` (a request's ``model`` when it named one)."""
        if usage is not None and usage.ignored:  # counts that are not counts: unknown
            return Cost(None, priced=False, ignored=usage.ignored)
        if usage is None or (usage.input_tokens is None and usage.output_tokens is None):
            return Cost(None, priced=True)  # nothing reported: nothing to price
        rates = self.rates(provider, model)
        if rates is None:
            return Cost(None, priced=False)
        exact = self._exact.get((provider.kind, target_model(provider, model)))
        if exact is not None and getattr(provider, "price", None) is None:
            return Cost(exact(usage), priced=True)
        return Cost(rates.cost(usage), priced=True)


@dataclass(frozen=True, slots=True)
class Cost:
    """The US dollars of one usage; ``priced`` False when it had tokens and no price."""

    usd: float | None
    priced: bool
    #: why it is not priced though the target has prices: the counts the server reported
    #: that are not counts (``Usage.ignored``)
    ignored: tuple[str, ...] = ()


def _table_rates(kind: str, model: str | None) -> tuple[Rates | None, Any]:
    """(rates, exact pricer) of ``model`` on ``kind``'s API in genai-prices' bundled table:
    the exact pricer is set when the model's prices depend on the prompt's length (tiers),
    which flat rates cannot say."""
    table_provider = _TABLE_PROVIDERS.get(kind)
    if table_provider is None or not model:
        return None, None
    # imported here: only a run that prices an LM answer pays for loading the table
    import genai_prices
    from genai_prices.types import TieredPrices

    def calc(inp: int, out: int, cached: int = 0) -> float:
        usage = genai_prices.Usage(input_tokens=inp, output_tokens=out, cache_read_tokens=cached)
        found = genai_prices.calc_price(usage, model, provider_id=table_provider)
        return float(found.total_price)

    try:
        found = genai_prices.calc_price(
            genai_prices.Usage(input_tokens=1000, output_tokens=1000),
            model,
            provider_id=table_provider,
        )
    except LookupError:
        return None, None
    source = f"genai-prices {genai_prices.__version__}: {found.provider.id} {found.model.id}"
    prices = vars(found.model_price)
    # per million tokens, from 1,000 (a prompt that short is in any price's first tier)
    rates = Rates(
        input=calc(1000, 0) * 1000,
        output=calc(0, 1000) * 1000,
        cached_input=(
            calc(1000, 0, 1000) * 1000 if prices.get("cache_read_mtok") is not None else 0.0
        ),
        source=source,
    )
    if prices.get("cache_read_mtok") is None:
        rates = Rates(rates.input, rates.output, rates.input, source)
    exact = None
    if any(isinstance(v, TieredPrices) for v in prices.values()):

        def exact(usage: TokenCounts) -> float:
            inp = usage.input_tokens or 0
            return calc(inp, usage.output_tokens or 0, min(usage.cached_input_tokens or 0, inp))

    return rates, exact
