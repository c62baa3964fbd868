"""A target that answers without any network: for dry runs, demos, tests and benchmarks.

It answers ``response``, or, given ``responses``, one of them drawn for each request: the
draw is seeded by ``seed`` and the request (its case, question, repeat and judge sample),
so that the same request always gets the same answer, and the runs of a repeated case or
the samples of a judge each get their own draw. A mock judge with ``responses`` is a noisy
judge whose scores come from a known distribution (docs/trusting-verdicts.md).
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from typing import Any

from pydantic import Field

from agentv.messages import chat_to_dicts
from agentv.providers.base import (
    Provider,
    ProviderRequest,
    ProviderResponse,
    ProviderSettings,
    Usage,
)

DEFAULT_RESPONSE = (
    '{"answer":"Mock provider response. Configure targets.yaml to supply a custom value."}'
)
DRY_RUN_RESPONSE = '{"answer":"Mock dry-run response"}'
#: the dry run's judge: a valid verdict, said to be a stand-in
DRY_RUN_VERDICT = (
    '{"score": 1.0, "hits": [], "misses": [], '
    '"reasoning": "Dry run: no judge was called; this grade is a stand-in."}'
)


class MockSettings(ProviderSettings):
    """``provider: mock`` fields."""

    response: str = DEFAULT_RESPONSE
    #: answers to draw from, one per request (each as likely; repeat one to weigh it)
    responses: list[str] | None = Field(default=None, min_length=1)
    #: what the draws of ``responses`` are seeded with
    seed: int = 0
    delay_ms: float = Field(default=0, ge=0, alias="delayMs")
    delay_min_ms: float = Field(default=0, ge=0, alias="delayMinMs")
    delay_max_ms: float = Field(default=0, ge=0, alias="delayMaxMs")
    system_prompt: str | None = Field(default=None, alias="systemPrompt")
    #: report tokens as an LM API would (about 4 characters a token of the messages and of
    #: the answer), to try prices, budgets and the cost evaluator offline
    report_usage: bool = Field(default=False, alias="reportUsage")


class MockProvider(Provider):
    """Returns ``response`` after an optional delay; behaves like an LM API target."""

    kind = "mock"
    Settings = MockSettings
    settings: MockSettings

    def _delay(self) -> float:
        s = self.settings
        if s.delay_min_ms > 0 or s.delay_max_ms > 0:
            low = s.delay_min_ms
            return random.uniform(low, max(low, s.delay_max_ms)) / 1000
        return s.delay_ms / 1000

    def preview(self, request: ProviderRequest) -> dict[str, Any]:
        """The messages, as an LM API target would send them."""
        return {"messages": chat_to_dicts(request.messages)}

    def answer(self, request: ProviderRequest) -> str:
        """``response``, or the one of ``responses`` drawn for ``request``: the same
        request (case, messages, repeat, judge sample) always draws the same."""
        choices = self.settings.responses
        if not choices:
            return self.settings.response
        said = [self.settings.seed, request.eval_id, request.repeat, request.sample]
        said += [request.question, *(m.content for m in request.messages)]
        digest = hashlib.sha256("\0".join(map(str, said)).encode("utf-8", "replace")).digest()
        return choices[int.from_bytes(digest[:8], "big") % len(choices)]

    async def invoke(self, request: ProviderRequest) -> ProviderResponse:
        delay = self._delay()
        if delay > 0:
            await asyncio.sleep(delay)
        text = self.answer(request)
        usage = None
        if self.settings.report_usage:
            said = sum(len(m.content) for m in request.messages) or len(request.question)
            inp, out = said // 4 + 1, len(text) // 4 + 1
            usage = Usage(inp, out, inp + out)
        return ProviderResponse(
            text=text,
            usage=usage,
            raw={"response": text},
            sent=self.preview(request),
            latency_ms=delay * 1000,
        )
