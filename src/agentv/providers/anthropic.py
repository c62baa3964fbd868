"""Anthropic messages API: ``provider: anthropic``, through the official async SDK.

The wire shape differs from chat completions in four ways, each handled here:
the system message goes to the top-level ``system`` field; turns must alternate, so
consecutive turns of the same role are merged into one; tool calls are ``tool_use`` blocks
and their results ``tool_result`` blocks inside a user turn; and a final assistant turn is
a *prefill* the model continues from. The API also requires ``max_tokens``.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator, model_validator

from agentv.messages import ChatMessage
from agentv.providers.base import ProviderRequest, Usage
from agentv.providers.llm import (
    Answer,
    CallFailure,
    LLMProvider,
    LLMSettings,
    NotJSON,
    Payload,
    aliases,
    finish_reason,
    http_url,
    paired_call_id,
    pick,
    resolve_api_key,
    safe_url,
    stainless_failure,
    tool_call,
)
from agentv.providers.registry import require_sdk

#: Sent when the target sets no ``max_output_tokens`` (the API has no default of its own).
DEFAULT_MAX_TOKENS = 4096
#: Room left for the answer above the thinking budget when no limit is configured.
_ANSWER_ROOM = 4096


class AnthropicSettings(LLMSettings):
    """``provider: anthropic`` fields."""

    model: str = Field(min_length=1, validation_alias=aliases("model", "deployment", "variant"))
    base_url: str | None = Field(
        default=None, validation_alias=aliases("base_url", "baseUrl", "baseURL")
    )
    api_key: str | None = Field(
        default=None, repr=False, validation_alias=aliases("api_key", "apiKey")
    )
    #: tokens of extended thinking; the API's minimum is 1024
    thinking_budget: int | None = Field(
        default=None, ge=1024, validation_alias=aliases("thinking_budget", "thinkingBudget")
    )

    _base_url = field_validator("base_url")(http_url)

    @model_validator(mode="after")
    def _room_for_answer(self) -> AnthropicSettings:
        if (
            self.thinking_budget is not None
            and self.max_output_tokens is not None
            and self.max_output_tokens <= self.thinking_budget
        ):
            raise ValueError(
                "max_output_tokens must be greater than thinking_budget "
                "(the thinking tokens count towards it)"
            )
        return self


def _text_blocks(text: str) -> list[dict[str, Any]]:
    # The API rejects empty text blocks, so blank text is not sent as one.
    return [{"type": "text", "text": text}] if text.strip() else []


def to_anthropic_request(messages: list[ChatMessage]) -> tuple[str | None, list[dict[str, Any]]]:
    """``(system, messages)`` for the messages API: the system message goes to the top-level
    field, tool results travel in user turns, and consecutive turns of one role merge."""
    system = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
    turns: list[dict[str, Any]] = []
    called: set[str] = set()

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:
            return
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)  # the API wants roles to alternate
        else:
            turns.append({"role": role, "content": list(blocks)})

    for msg in messages:
        match msg.role:
            case "system":
                continue
            case "user":
                add("user", _text_blocks(msg.content))
            case "assistant":
                blocks = _text_blocks(msg.content)
                blocks += [
                    {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
                    for c in msg.tool_calls
                ]
                called.update(c.id for c in msg.tool_calls)
                add("assistant", blocks)
            case "tool":
                block = {
                    "type": "tool_result",
                    "tool_use_id": paired_call_id(msg, called),
                    "content": msg.content,
                }
                add("user", [block])

    if turns and turns[-1]["role"] == "assistant":
        # A final assistant turn is a prefill; the API rejects one ending in whitespace.
        last = turns[-1]["content"][-1]
        if last["type"] == "text":
            last["text"] = last["text"].rstrip()
    for turn in turns:
        blocks = turn["content"]
        if len(blocks) == 1 and blocks[0]["type"] == "text":
            turn["content"] = blocks[0]["text"]  # the plain form, easier to read in logs
    return system or None, turns


#: the messages API's stop reasons (a refusal is the model's safety stop)
FINISH_WORDS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
    "refusal": "content_filter",
}


def from_anthropic_message(message: Any) -> Answer:
    """Text (all text blocks), reasoning (thinking blocks), usage, how the answer ended
    and raw JSON."""
    texts: list[str] = []
    thoughts: list[str] = []
    calls = []
    for block in message.content or []:
        kind = getattr(block, "type", None)
        if kind == "text":
            texts.append(block.text)
        elif kind == "thinking":
            thoughts.append(block.thinking)
        elif kind == "tool_use":
            calls.append(tool_call(block.id, block.name, block.input))
    usage = None
    if message.usage is not None:
        inp, out = message.usage.input_tokens, message.usage.output_tokens
        # Anthropic counts the prompt-cache reads and writes apart from `input_tokens`;
        # agentv's input tokens are all of them, the reads also as cached input
        read = getattr(message.usage, "cache_read_input_tokens", None) or 0
        written = getattr(message.usage, "cache_creation_input_tokens", None) or 0
        counts = (inp, out, read, written)
        if all(isinstance(n, int) and not isinstance(n, bool) for n in counts):
            inp += read + written
            usage = Usage(inp, out, inp + out, read or None)
        else:  # what is not a count is said (``Usage.ignored``), never added up
            usage = Usage(inp, out, None, read or None)
    reason, raw_reason = finish_reason(getattr(message, "stop_reason", None), FINISH_WORDS)
    return Answer(
        text="".join(texts),
        reasoning="\n\n".join(thoughts) if thoughts else None,
        usage=usage,
        raw=message.model_dump(mode="json", exclude_unset=True),
        finish_reason=reason,
        finish_reason_raw=raw_reason,
        tool_calls=tuple(calls),
    )


class AnthropicProvider(LLMProvider):
    """Claude models through ``anthropic.AsyncAnthropic``."""

    kind = "anthropic"
    needs_user_turn = True  # the API rejects a conversation without one
    Settings = AnthropicSettings
    settings: AnthropicSettings

    def __init__(self, name: str, settings: AnthropicSettings) -> None:  # type: ignore[override]
        super().__init__(name, settings)
        self._sdk: Any = require_sdk("anthropic", target=name, kind=self.kind)
        key = resolve_api_key(
            self, settings.api_key, ("ANTHROPIC_API_KEY",), custom_url=bool(settings.base_url)
        )
        self.api_key_in_use = key
        self._url = safe_url(settings.base_url) or "https://api.anthropic.com"
        self._client: Any = self._sdk.AsyncAnthropic(
            api_key=key,
            base_url=settings.base_url or None,
            max_retries=0,  # the retry settings of the target apply, not the SDK's
            http_client=self.http_client(),
        )

    def max_tokens(self) -> int:
        """The output limit: the configured one, else room for thinking plus an answer."""
        if self.settings.max_output_tokens is not None:
            return self.settings.max_output_tokens
        budget = self.settings.thinking_budget
        return budget + _ANSWER_ROOM if budget else DEFAULT_MAX_TOKENS

    def build_payload(self, request: ProviderRequest) -> Payload:
        system, turns = to_anthropic_request(request.messages)
        limit = self.max_tokens()
        body: dict[str, Any] = {"model": self.model_for(request), "max_tokens": limit}
        if system is not None:
            body["system"] = system
        body["messages"] = turns
        temperature = pick(request.temperature, self.settings.temperature)
        if temperature is not None:  # Anthropic's API takes no seed
            body["temperature"] = temperature
        if self.settings.thinking_budget:
            body["thinking"] = {"type": "enabled", "budget_tokens": self.settings.thinking_budget}
        if request.tools:
            body["tools"] = [
                {
                    "name": t["name"],
                    "description": t["description"],
                    "input_schema": t["parameters"],
                }
                for t in request.tools
            ]
        return Payload(body, conversation=("system", "messages"), token_limit=("max_tokens", limit))

    async def call(self, payload: Payload, timeout: float) -> Answer:
        # An explicit timeout also keeps the SDK from refusing large max_tokens unstreamed;
        # it sits just above ours, so ours is the one that fires.
        kwargs = dict(payload.request)
        if "temperature" in kwargs:
            # Recent SDKs dropped the `temperature` argument; the field still goes in the
            # body, and the API (or gateway) decides whether the model accepts it.
            kwargs["extra_body"] = {"temperature": kwargs.pop("temperature")}
        message = await self._client.messages.create(**kwargs, timeout=timeout + 1)
        if isinstance(message, str):  # what the SDK makes of a body that is not JSON
            raise NotJSON(message)
        return from_anthropic_message(message)

    def translate_error(self, exc: BaseException) -> CallFailure | None:
        return stainless_failure(self, self._sdk, self._sdk.AnthropicError, exc)

    async def aclose(self) -> None:
        await self._client.close()
