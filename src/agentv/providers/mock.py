"""A target that answers without any network: for dry runs, demos, tests and benchmarks."""

from __future__ import annotations

import asyncio
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
    #: a dry run stands it in for an agent: the case's workspace is still made
    works_in_workspace = True

    def _delay(self) -> float:
        s = self.settings
        if s.delay_min_ms > 0 or s.delay_max_ms > 0:
            low = s.delay_min_ms
            return random.uniform(low, max(low, s.delay_max_ms)) / 1000
        return s.delay_ms / 1000

    def preview(self, request: ProviderRequest) -> dict[str, Any]:
        """The messages, as an LM API target would send them."""
        return {"messages": chat_to_dicts(request.messages)}

    async def invoke(self, request: ProviderRequest) -> ProviderResponse:
        delay = self._delay()
        if delay > 0:
            await asyncio.sleep(delay)
        usage = None
        if self.settings.report_usage:
            said = sum(len(m.content) for m in request.messages) or len(request.question)
            inp, out = said // 4 + 1, len(self.settings.response) // 4 + 1
            usage = Usage(inp, out, inp + out)
        return ProviderResponse(
            text=self.settings.response,
            usage=usage,
            raw={"response": self.settings.response},
            sent=self.preview(request),
            latency_ms=delay * 1000,
        )
