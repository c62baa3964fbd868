"""``latency`` and ``cost``: what the target's answer took, against a limit.

Each reads a figure of the answer itself, not of its text: ``latency`` the time the
target took (``latency_ms``), ``cost`` its price (``agentv.providers.pricing``; an answer reused from
``--cache`` has the price it had when it was bought). Score 1 at or under the limit, else
0; a figure that is unknown (an agent that reports no tokens, a model with no price) is an
evaluator error, never a pass.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from agentv.cases import EvaluatorConfig
from agentv.evaluators.base import EvaluationContext, EvaluatorScore, EvaluatorSpec, failed


def _verdict(config: EvaluatorConfig, ok: bool, said: str) -> EvaluatorScore:
    return EvaluatorScore(
        name=config.name,
        type=config.type,
        score=1.0 if ok else 0.0,
        hits=[said] if ok else [],
        misses=[] if ok else [said],
    )


class LatencySpec(EvaluatorSpec):
    """Passes when the target took at most ``max_ms`` milliseconds to answer (its
    ``latency_ms``; a live conversation's requests summed)."""

    type: Literal["latency"]
    max_ms: Annotated[float, Field(gt=0, allow_inf_nan=False)]

    async def evaluate(self, ctx: EvaluationContext, config: EvaluatorConfig) -> EvaluatorScore:
        took = ctx.latency_ms
        if took is None:
            return failed(config, "the target did not say how long its answer took")
        ok = took <= self.max_ms
        word = "within" if ok else "over"
        return _verdict(config, ok, f"answered in {took:,.0f} ms, {word} {self.max_ms:g} ms")


class CostSpec(EvaluatorSpec):
    """Passes when the target's answer cost at most ``max_usd`` US dollars (a live
    conversation's requests summed; reused from ``--cache`` or not: the answer's price)."""

    type: Literal["cost"]
    max_usd: Annotated[float, Field(ge=0, allow_inf_nan=False)]

    async def evaluate(self, ctx: EvaluationContext, config: EvaluatorConfig) -> EvaluatorScore:
        cost = ctx.cost_usd
        if cost is None:
            return failed(
                config,
                "the answer's cost is unknown (no tokens reported, or no price for the "
                "target's model: give the target a price: in targets.yaml)",
            )
        ok = cost <= self.max_usd
        word = "within" if ok else "over"
        return _verdict(config, ok, f"cost ${cost:.6f}, {word} ${self.max_usd:g}")
