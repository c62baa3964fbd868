"""A target that answers without any network: for dry runs, demos, tests and benchmarks.

It answers ``response``, or, given ``responses``, one of them drawn for each request: the
draw is seeded by ``seed`` and the request (its case, question, repeat and judge sample),
so that the same request always gets the same answer, and the runs of a repeated case or
the samples of a judge each get their own draw. A mock judge with ``responses`` is a noisy
judge whose scores come from a known distribution (docs/trusting-verdicts.md).

Given ``answers`` instead, it plays a script: the n-th request of a run of a case gets the
n-th entry (the last one again once the list is used up), text or tool calls, so that
tools, trajectories and live conversations run offline (docs/targets.md, "The mock
target").
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from agentv.messages import ToolCall, chat_to_dicts
from agentv.providers.base import (
    Provider,
    ProviderRequest,
    ProviderResponse,
    ProviderSettings,
    Usage,
)
from agentv.providers.llm import tool_call

DEFAULT_RESPONSE = (
    '{"answer":"Mock provider response. Configure targets.yaml to supply a custom value."}'
)
DRY_RUN_RESPONSE = '{"answer":"Mock dry-run response"}'
#: the dry run's judge: a valid verdict, said to be a stand-in
DRY_RUN_VERDICT = (
    '{"score": 1.0, "hits": [], "misses": [], '
    '"reasoning": "Dry run: no judge was called; this grade is a stand-in."}'
)


class MockToolCall(BaseModel):
    """A tool call a scripted answer makes: the tool's ``name`` and its ``arguments``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    arguments: dict[str, Any] = Field(default_factory=dict)
    id: str | None = Field(default=None, min_length=1)  # default: call_<answer>_<call>


class MockAnswer(BaseModel):
    """One scripted answer: its ``text`` and the ``tool_calls`` it makes (either may be
    left out)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str = ""
    tool_calls: tuple[MockToolCall, ...] = ()


class MockSettings(ProviderSettings):
    """``provider: mock`` fields."""

    response: str = DEFAULT_RESPONSE
    #: answers to draw from, one per request (each as likely; repeat one to weigh it)
    responses: list[str] | None = Field(default=None, min_length=1)
    #: what the draws of ``responses`` are seeded with
    seed: int = 0
    #: answers in order, one per request of a run of a case (``response`` is then unused);
    #: an entry written as text is an answer of that text
    answers: tuple[MockAnswer, ...] | None = None
    delay_ms: float = Field(default=0, ge=0, alias="delayMs")
    delay_min_ms: float = Field(default=0, ge=0, alias="delayMinMs")
    delay_max_ms: float = Field(default=0, ge=0, alias="delayMaxMs")
    system_prompt: str | None = Field(default=None, alias="systemPrompt")
    #: report tokens as an LM API would (about 4 characters a token of the messages and of
    #: the answer), to try prices, budgets and the cost evaluator offline
    report_usage: bool = Field(default=False, alias="reportUsage")

    @field_validator("answers", mode="before")
    @classmethod
    def _texts(cls, value: Any) -> Any:
        if isinstance(value, list):
            if not value:
                raise ValueError("list at least one answer, or leave `answers` out")
            return [{"text": item} if isinstance(item, str) else item for item in value]
        return value

    @model_validator(mode="after")
    def _one_way(self) -> MockSettings:
        if self.answers is not None and self.responses is not None:
            raise ValueError(
                "give `answers` (played in order) or `responses` (drawn for each request), not both"
            )
        return self


class MockProvider(Provider):
    """Returns ``response`` (one drawn of ``responses``, the next of ``answers``) after an
    optional delay; behaves like an LM API target."""

    kind = "mock"
    Settings = MockSettings
    settings: MockSettings
    #: a dry run stands it in for an agent: the case's workspace is still made
    works_in_workspace = True

    def __init__(self, name: str, settings: ProviderSettings) -> None:
        super().__init__(name, settings)
        #: requests answered from ``answers`` so far, per party and run of a case (its
        #: requests come one after the other: a tool round or a turn waits for the answer)
        self._sent: dict[tuple[str, str, int], int] = {}

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

    def scripted(self, request: ProviderRequest) -> tuple[str, tuple[ToolCall, ...]] | None:
        """The next of ``answers`` for ``request``'s run of its case: its text and tool
        calls (None: the mock has no ``answers``)."""
        script = self.settings.answers
        if not script:
            return None
        key = (request.party, request.eval_id, request.repeat)
        n = self._sent.get(key, 0)
        if request.attempt == 0:  # a retry is answered as the request it repeats
            self._sent[key] = n + 1
        else:
            n = max(n - 1, 0)
        said = script[min(n, len(script) - 1)]
        calls = tuple(
            tool_call(call.id or f"call_{n + 1}_{i + 1}", call.name, call.arguments)
            for i, call in enumerate(said.tool_calls)
        )
        return said.text, calls

    async def invoke(self, request: ProviderRequest) -> ProviderResponse:
        delay = self._delay()
        if delay > 0:
            await asyncio.sleep(delay)
        text, calls = self.scripted(request) or (self.answer(request), ())
        usage = None
        if self.settings.report_usage:
            said = sum(len(m.content) for m in request.messages) or len(request.question)
            inp, out = said // 4 + 1, len(text) // 4 + 1
            usage = Usage(inp, out, inp + out)
        raw: dict[str, Any] = {"response": text}
        if calls:
            raw["tool_calls"] = [call.to_dict() for call in calls]
        return ProviderResponse(
            text=text,
            usage=usage,
            raw=raw,
            sent=self.preview(request),
            latency_ms=delay * 1000,
            tool_calls=calls,
            finish_reason="tool_calls" if calls else None,
        )
