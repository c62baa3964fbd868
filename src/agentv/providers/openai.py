"""OpenAI chat completions: ``provider: openai`` (OpenAI and any compatible server such as
vLLM, Ollama or LM Studio) and ``provider: azure`` (Azure OpenAI deployments).

Both send the same wire format through the official ``openai`` async SDK; they differ only
in how the client is built (base URL and bearer key vs. Azure endpoint, deployment path,
``api-version`` and ``api-key`` header).
"""

from __future__ import annotations

import re
from typing import Any, Literal
from urllib.parse import quote, urlsplit

import orjson
from pydantic import Field, field_validator

from agentv.messages import ChatMessage, ToolCall
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
    json_text,
    not_json,
    paired_call_id,
    pick,
    resolve_api_key,
    safe_url,
    stainless_failure,
    tool_call,
)
from agentv.providers.registry import require_sdk

AZURE_DEFAULT_API_VERSION = "2024-10-01-preview"

MaxTokensParam = Literal["max_completion_tokens", "max_tokens"]
#: Hosts whose API knows ``max_completion_tokens``: OpenAI's and Azure OpenAI's own. Every
#: other server gets ``max_tokens``, the name compatible servers (llama.cpp, vLLM, Ollama,
#: LM Studio, gateways) have always read; some ignore ``max_completion_tokens`` silently.
_OWN_HOSTS = ("api.openai.com",)
_AZURE_HOST_SUFFIXES = (".openai.azure.com", ".cognitiveservices.azure.com")


class OpenAISettings(LLMSettings):
    """``provider: openai`` fields."""

    model: str = Field(min_length=1)
    base_url: str | None = Field(
        default=None, validation_alias=aliases("base_url", "baseUrl", "baseURL")
    )
    api_key: str | None = Field(
        default=None, repr=False, validation_alias=aliases("api_key", "apiKey")
    )
    organization: str | None = None
    #: the name the output limit is sent under; None: by the server (``token_limit_param``)
    max_tokens_param: MaxTokensParam | None = Field(
        default=None, validation_alias=aliases("max_tokens_param", "maxTokensParam")
    )

    _base_url = field_validator("base_url")(http_url)

    @property
    def token_limit_param(self) -> MaxTokensParam:
        """``max_tokens_param``, else ``max_completion_tokens`` for OpenAI's own API and
        ``max_tokens`` for any other ``base_url``."""
        if self.max_tokens_param is not None:
            return self.max_tokens_param
        host = urlsplit(self.base_url).hostname if self.base_url else "api.openai.com"
        return "max_completion_tokens" if host in _OWN_HOSTS else "max_tokens"


class AzureOpenAISettings(LLMSettings):
    """``provider: azure`` fields; ``model`` is the deployment name."""

    endpoint: str = Field(
        min_length=1,
        validation_alias=aliases("endpoint", "resource", "resourceName", "resource_name"),
    )
    api_key: str | None = Field(
        default=None, repr=False, validation_alias=aliases("api_key", "apiKey")
    )
    model: str = Field(
        min_length=1,
        validation_alias=aliases("model", "deployment", "deploymentName", "deployment_name"),
    )
    api_version: str = Field(
        default=AZURE_DEFAULT_API_VERSION,
        validation_alias=aliases("api_version", "version", "apiVersion"),
    )
    #: the name the output limit is sent under; None: by the endpoint (``token_limit_param``)
    max_tokens_param: MaxTokensParam | None = Field(
        default=None, validation_alias=aliases("max_tokens_param", "maxTokensParam")
    )

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, value: str) -> str:
        # a resource name (letters, digits, hyphens), or a URL
        if re.fullmatch(r"\s*[A-Za-z0-9][A-Za-z0-9-]*\s*", value):
            return value
        if "://" not in value:
            raise ValueError(
                "must be an Azure resource name (letters, digits and hyphens) or an "
                "http:// or https:// URL with a host, such as https://my-resource.openai.azure.com"
            )
        return http_url(value)

    @field_validator("api_version", mode="before")
    @classmethod
    def _strip_prefix(cls, value: Any) -> Any:
        # Users paste `api-version=2024-...` from a URL; the original AgentV accepted that too.
        if isinstance(value, str):
            value = re.sub(r"(?i)^\s*api[-_]?version\s*=\s*", "", value).strip()
            return value or AZURE_DEFAULT_API_VERSION
        return value

    @property
    def endpoint_url(self) -> str:
        """A bare resource name means ``https://<name>.openai.azure.com``."""
        endpoint = self.endpoint.strip()
        if "://" in endpoint:
            return endpoint.rstrip("/")
        return f"https://{endpoint}.openai.azure.com"

    @property
    def token_limit_param(self) -> MaxTokensParam:
        """``max_tokens_param``, else ``max_completion_tokens`` for Azure's own endpoints
        (a resource name, ``*.openai.azure.com``, ``*.cognitiveservices.azure.com``) and
        ``max_tokens`` for any other URL (a gateway, a compatible server)."""
        if self.max_tokens_param is not None:
            return self.max_tokens_param
        host = (urlsplit(self.endpoint_url).hostname or "").lower()
        own = host.endswith(_AZURE_HOST_SUFFIXES)
        return "max_completion_tokens" if own else "max_tokens"


def to_openai_messages(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    """Neutral messages in the chat-completions form, tool calls and results native."""
    out: list[dict[str, Any]] = []
    called: set[str] = set()
    for msg in messages:
        if msg.role == "tool":
            out.append(
                {
                    "role": "tool",
                    "tool_call_id": paired_call_id(msg, called),
                    "content": msg.content,
                }
            )
            continue
        item: dict[str, Any] = {"role": msg.role, "content": msg.content}
        if msg.name is not None:
            item["name"] = msg.name
        if msg.role == "assistant" and msg.tool_calls:
            if not msg.content:
                # No text next to tool calls: the field is left out. OpenAI also takes
                # null, but strict compatible servers (llama.cpp's) reject null as well
                # as "", and every server takes it absent.
                del item["content"]
            item["tool_calls"] = [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": _arguments(call)},
                }
                for call in msg.tool_calls
            ]
            called.update(call.id for call in msg.tool_calls)
        out.append(item)
    return out


def _arguments(call: ToolCall) -> str:
    """A tool call's arguments as chat completions carry them: the text the model wrote,
    unchanged (spacing, key order, even text that is not JSON: the tool's answer says so),
    else the arguments as compact JSON (calls written in an eval file)."""
    return call.text if call.text is not None else json_text(call.arguments)


#: chat completions' finish reasons (``function_call`` is the legacy form of tool calls)
FINISH_WORDS = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
}


def from_openai_completion(data: dict[str, Any]) -> Answer:
    """Text, reasoning (when a compatible server returns it), usage, how the answer ended
    and raw JSON."""
    choices = data.get("choices") or []
    if not choices:
        raise ValueError("the API answered without any choice")
    choice = choices[0] if isinstance(choices[0], dict) else {}
    message = choice.get("message") or {}
    # vLLM and DeepSeek return `reasoning_content`; Ollama and OpenRouter `reasoning`.
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    usage = None
    u = data.get("usage")
    if isinstance(u, dict):
        details = u.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        usage = Usage(
            u.get("prompt_tokens"),
            u.get("completion_tokens"),
            u.get("total_tokens"),
            cached if isinstance(cached, int) and cached > 0 else None,
        )
    content = message.get("content")
    reason, raw_reason = finish_reason(choice.get("finish_reason"), FINISH_WORDS)
    calls = []
    for i, call in enumerate(message.get("tool_calls") or []):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not function.get("name"):
            continue  # not a function call agentv can answer
        calls.append(
            tool_call(call.get("id") or f"call_{i}", function["name"], function.get("arguments"))
        )
    return Answer(
        text=content if isinstance(content, str) else "",
        reasoning=reasoning if isinstance(reasoning, str) else None,
        usage=usage,
        raw=data,
        finish_reason=reason,
        finish_reason_raw=raw_reason,
        tool_calls=tuple(calls),
    )


def to_openai_tools(tools: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    """Tools in the chat-completions form (functions)."""
    return [
        {
            "type": "function",
            "function": {
                "name": t["name"],
                "description": t["description"],
                "parameters": t["parameters"],
            },
        }
        for t in tools
    ]


class _ChatCompletionsProvider(LLMProvider):
    """The chat-completions mapping shared by OpenAI and Azure."""

    settings: OpenAISettings | AzureOpenAISettings  # type: ignore[assignment]
    _client: Any
    _sdk: Any
    _url: str

    def build_payload(self, request: ProviderRequest) -> Payload:
        body: dict[str, Any] = {
            "model": self.model_for(request),
            "messages": to_openai_messages(request.messages),
        }
        if request.tools:
            body["tools"] = to_openai_tools(request.tools)
        temperature = pick(request.temperature, self.settings.temperature)
        if temperature is not None:
            body["temperature"] = temperature
        if request.seed is not None:
            body["seed"] = request.seed
        limit = None
        if self.settings.max_output_tokens is not None:
            limit = (self.settings.token_limit_param, self.settings.max_output_tokens)
            body[limit[0]] = limit[1]
        return Payload(body, token_limit=limit)

    def endpoint_for(self, model: str) -> str:
        """The path of the chat-completions call, relative to the client's base URL."""
        return "/chat/completions"

    async def call(self, payload: Payload, timeout: float) -> Answer:
        import httpx2  # the SDK's HTTP library: loaded with it

        # The SDK's own way to send a body it does not build (its `post`, as its README
        # shows for custom requests): a body of bytes skips its type-driven transformation
        # and its JSON encoding (the body is wire-ready already), which cost milliseconds
        # per call; errors are raised by the SDK as usual. Its own timeout sits just above
        # ours, so ours fires. Bearer auth alone is asked for, as the SDK's own
        # `chat.completions.create` asks. Cast to httpx2's response: the SDK hands it over
        # read, not wrapped in a model of its own to be parsed.
        response = await self._client.post(
            self.endpoint_for(payload.request["model"]),
            cast_to=httpx2.Response,
            content=orjson.dumps(payload.request),
            options={"timeout": timeout + 1, "security": {"bearer_auth": True}},
        )
        content = response.content
        try:
            data = orjson.loads(content)
        except orjson.JSONDecodeError:
            raise not_json(content) from None
        return from_openai_completion(data)

    def translate_error(self, exc: BaseException) -> CallFailure | None:
        return stainless_failure(self, self._sdk, self._sdk.OpenAIError, exc)

    async def aclose(self) -> None:
        await self._client.close()


class OpenAIProvider(_ChatCompletionsProvider):
    """OpenAI, or any server that speaks its chat-completions API (set ``base_url``)."""

    kind = "openai"
    Settings = OpenAISettings
    settings: OpenAISettings

    def __init__(self, name: str, settings: OpenAISettings) -> None:  # type: ignore[override]
        super().__init__(name, settings)
        self._sdk = require_sdk("openai", target=name, kind=self.kind)
        custom = bool(settings.base_url)
        # Local OpenAI-compatible servers usually need no key; the SDK insists on one.
        key = resolve_api_key(
            self,
            settings.api_key,
            ("OPENAI_API_KEY",),
            custom_url=custom,
            placeholder="EMPTY" if custom else None,
        )
        self.api_key_in_use = key
        self._url = safe_url(settings.base_url) or "https://api.openai.com/v1"
        self._client = self._sdk.AsyncOpenAI(
            api_key=key,
            base_url=settings.base_url or None,
            organization=settings.organization or None,
            max_retries=0,  # the retry settings of the target apply, not the SDK's
            http_client=self.http_client(),
        )


# Characters a URL path segment may hold unencoded (RFC 3986 pchar, less the unreserved
# ones quote() keeps anyway); "/" is not among them.
_PATH_SAFE = "!$&'()*+,;=:@"


class AzureOpenAIProvider(_ChatCompletionsProvider):
    """An Azure OpenAI deployment (``model`` is the deployment name)."""

    kind = "azure"
    Settings = AzureOpenAISettings
    settings: AzureOpenAISettings

    def __init__(self, name: str, settings: AzureOpenAISettings) -> None:  # type: ignore[override]
        super().__init__(name, settings)
        self._sdk = require_sdk("openai", target=name, kind=self.kind)
        key = resolve_api_key(self, settings.api_key, ("AZURE_OPENAI_API_KEY",), custom_url=False)
        self.api_key_in_use = key
        self._url = safe_url(settings.endpoint_url)
        # No fixed deployment in the client: each call names its own (endpoint_for), so a
        # judge's `model` picks the deployment.
        self._client = self._sdk.AsyncAzureOpenAI(
            azure_endpoint=settings.endpoint_url,
            api_key=key,
            api_version=settings.api_version,
            max_retries=0,
            http_client=self.http_client(),
        )

    def endpoint_for(self, model: str) -> str:
        # The SDK adds /deployments/<model> only to bodies it encodes itself; ours are bytes.
        return f"/deployments/{quote(model, safe=_PATH_SAFE)}/chat/completions"
