"""Google Gemini API: ``provider: gemini`` (aliases ``google``, ``google-gemini``), through
the official ``google-genai`` async client.

Wire differences handled here: the system message goes to ``systemInstruction``; the
assistant role is called ``model``; tool calls are ``functionCall`` parts and their results
``functionResponse`` parts (paired by id and by function name) in a user turn; consecutive
turns of the same role are merged. The payload is built in the API's own JSON form
(camelCase), which the SDK accepts as it is, so a preview shows what goes on the wire.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from agentv.messages import ChatMessage
from agentv.providers.base import ProviderRequest, Usage
from agentv.providers.llm import (
    Answer,
    CallFailure,
    LLMProvider,
    LLMSettings,
    Payload,
    aliases,
    finish_reason,
    http_url,
    paired_call_id,
    pick,
    resolve_api_key,
    retry_after_seconds,
    safe_url,
    tool_call,
)
from agentv.providers.registry import require_sdk

DEFAULT_MODEL = "gemini-2.5-flash"
#: The API version in the URL path; v1beta carries system instructions and function calling.
DEFAULT_API_VERSION = "v1beta"
GEMINI_API_URL = "https://generativelanguage.googleapis.com"


class GeminiSettings(LLMSettings):
    """``provider: gemini`` fields."""

    model: str = Field(
        default=DEFAULT_MODEL,
        min_length=1,
        validation_alias=aliases("model", "deployment", "variant"),
    )
    base_url: str | None = Field(
        default=None, validation_alias=aliases("base_url", "baseUrl", "baseURL")
    )
    api_key: str | None = Field(
        default=None, repr=False, validation_alias=aliases("api_key", "apiKey")
    )
    api_version: str = Field(
        default=DEFAULT_API_VERSION,
        min_length=1,
        validation_alias=aliases("api_version", "apiVersion"),
    )

    _base_url = field_validator("base_url")(http_url)


def _text_parts(text: str) -> list[dict[str, Any]]:
    # Blank text parts are rejected by the API.
    return [{"text": text}] if text.strip() else []


def to_gemini_request(messages: list[ChatMessage]) -> tuple[str | None, list[dict[str, Any]]]:
    """``(system_instruction, contents)`` in the API's JSON form: the assistant is ``model``,
    tool results are ``functionResponse`` parts of user turns (paired by name as well as
    id), and consecutive turns of one role merge."""
    system = "\n\n".join(m.content for m in messages if m.role == "system" and m.content)
    contents: list[dict[str, Any]] = []
    calls: dict[str, str] = {}  # call id -> function name (Gemini pairs results by name)

    def add(role: str, parts: list[dict[str, Any]]) -> None:
        if not parts:
            return
        if contents and contents[-1]["role"] == role:
            contents[-1]["parts"].extend(parts)
        else:
            contents.append({"role": role, "parts": list(parts)})

    for msg in messages:
        match msg.role:
            case "system":
                continue
            case "user":
                add("user", _text_parts(msg.content))
            case "assistant":
                parts = _text_parts(msg.content)
                for call in msg.tool_calls:
                    parts.append(
                        {"functionCall": {"id": call.id, "name": call.name, "args": call.arguments}}
                    )
                    calls[call.id] = call.name
                add("model", parts)
            case "tool":
                call_id = paired_call_id(msg, set(calls))
                response = {
                    "id": call_id,
                    "name": calls[call_id],
                    # "output" is the key the API documents for a function's result.
                    "response": {"output": msg.content},
                }
                add("user", [{"functionResponse": response}])
    return system or None, contents


#: Gemini's finish reasons; the filters' stops (safety, recitation, blocklists, personal
#: data) are content_filter
FINISH_WORDS = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "IMAGE_PROHIBITED_CONTENT": "content_filter",
    "IMAGE_RECITATION": "content_filter",
}


def from_gemini_response(response: Any) -> Answer:
    """Text (non-thought parts), reasoning (thought parts), usage, how the answer ended
    and raw JSON."""
    raw = response.model_dump(
        mode="json", by_alias=True, exclude_none=True, exclude={"sdk_http_response"}
    )
    candidates = response.candidates or []
    if not candidates:
        feedback = getattr(response, "prompt_feedback", None)
        reason = getattr(feedback, "block_reason", None)
        reason = getattr(reason, "value", reason)  # the enum's name, not `BlockedReason.X`
        raise ValueError(
            f"the API returned no candidate (prompt blocked: {reason})"
            if reason
            else "the API returned no candidate"
        )
    texts: list[str] = []
    thoughts: list[str] = []
    calls = []
    content = candidates[0].content
    for part in (content.parts if content else None) or []:
        function = getattr(part, "function_call", None)
        if function is not None and function.name:
            # Gemini pairs results by name; an id when the API gave one, else one of ours
            calls.append(
                tool_call(function.id or f"call_{len(calls)}", function.name, function.args)
            )
        if part.text is None:
            continue
        (thoughts if part.thought else texts).append(part.text)
    reason, raw_reason = finish_reason(getattr(candidates[0], "finish_reason", None), FINISH_WORDS)
    if reason == "stop" and calls:
        reason = "tool_calls"  # Gemini ends a turn of function calls with STOP
    usage = None
    meta = response.usage_metadata
    if meta is not None:
        usage = Usage(meta.prompt_token_count, meta.candidates_token_count, meta.total_token_count)
    return Answer(
        text="".join(texts),
        reasoning="\n\n".join(thoughts) if thoughts else None,
        usage=usage,
        raw=raw,
        finish_reason=reason,
        finish_reason_raw=raw_reason,
        tool_calls=tuple(calls),
    )


class GeminiProvider(LLMProvider):
    """Gemini models through ``google.genai.Client(...).aio``."""

    kind = "gemini"
    needs_user_turn = True  # the API rejects a conversation without one
    Settings = GeminiSettings
    settings: GeminiSettings

    def __init__(self, name: str, settings: GeminiSettings) -> None:  # type: ignore[override]
        super().__init__(name, settings)
        genai: Any = require_sdk("google.genai", target=name, kind=self.kind)
        self._types: Any = genai.types
        self._errors: Any = genai.errors
        key = resolve_api_key(
            self,
            settings.api_key,
            ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
            custom_url=bool(settings.base_url),
        )
        self.api_key_in_use = key
        self._url = safe_url(settings.base_url) or GEMINI_API_URL
        # the shared client (bounded bodies); the SDK then uses it instead of its own
        self._http: Any = self.http_client()
        options = self._types.HttpOptions(
            base_url=settings.base_url or None,
            api_version=settings.api_version,
            # attempts=1: no SDK retries (and no hidden retry on connection errors either);
            # the retry settings of the target apply.
            retry_options=self._types.HttpRetryOptions(attempts=1),
            httpx_async_client=self._http,
        )
        self._client: Any = genai.Client(api_key=key, vertexai=False, http_options=options).aio

    def build_payload(self, request: ProviderRequest) -> Payload:
        system, contents = to_gemini_request(request.messages)
        body: dict[str, Any] = {"model": self.model_for(request), "contents": contents}
        if system is not None:
            body["systemInstruction"] = {"parts": [{"text": system}]}
        config: dict[str, Any] = {}
        temperature = pick(request.temperature, self.settings.temperature)
        if temperature is not None:
            config["temperature"] = temperature
        if request.seed is not None:
            config["seed"] = request.seed
        limit = None
        if self.settings.max_output_tokens is not None:
            config["maxOutputTokens"] = self.settings.max_output_tokens
            limit = ("generationConfig.maxOutputTokens", self.settings.max_output_tokens)
        if config:
            body["generationConfig"] = config
        if request.tools:
            body["tools"] = [
                {
                    "functionDeclarations": [
                        {
                            "name": t["name"],
                            "description": t["description"],
                            "parameters": t["parameters"],
                        }
                        for t in request.tools
                    ]
                }
            ]
        return Payload(body, conversation=("contents", "systemInstruction"), token_limit=limit)

    async def call(self, payload: Payload, timeout: float) -> Answer:
        types = self._types
        body = payload.request
        config = dict(body.get("generationConfig", {}))
        if "systemInstruction" in body:
            config["systemInstruction"] = body["systemInstruction"]
        if "tools" in body:
            config["tools"] = body["tools"]
        generate_config = types.GenerateContentConfig.model_validate(config)
        # The SDK's own timeout (milliseconds) sits just above ours, so ours fires first.
        generate_config.http_options = types.HttpOptions(timeout=int((timeout + 1) * 1000))
        response = await self._client.models.generate_content(
            model=body["model"],
            contents=[types.Content.model_validate(c) for c in body["contents"]],
            config=generate_config,
        )
        return from_gemini_response(response)

    def translate_error(self, exc: BaseException) -> CallFailure | None:
        if isinstance(exc, self._errors.APIError):
            message = exc.message or exc.status or str(exc)
            headers = getattr(getattr(exc, "response", None), "headers", None)
            return CallFailure(
                " ".join(str(message).split()),
                status=exc.code if isinstance(exc.code, int) else None,
                retry_after=retry_after_seconds(headers),
            )
        return self.no_answer(exc)  # refused, reset, DNS, TLS, a timeout (else None)

    async def aclose(self) -> None:
        await self._client.aclose()
        await self._http.aclose()  # the SDK leaves a client it was given open
