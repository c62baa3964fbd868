"""OpenAI chat completions: ``provider: openai`` (OpenAI and any compatible server such as
vLLM, Ollama or LM Studio) and ``provider: azure`` (Azure OpenAI deployments).

Both send the same wire format through the official ``openai`` async SDK; they differ only
in how the client is built (base URL and bearer key vs. Azure endpoint, deployment path,
``api-version`` and ``api-key`` header).
"""

from __future__ import annotations

import functools
import itertools
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
    NotJSON,
    Payload,
    aliases,
    finish_reason,
    http_url,
    json_text,
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


@functools.cache
def _lean(client_class: type) -> type:
    """``client_class`` (the SDK's own) with two shortcuts for the requests agentv sends,
    each of which the SDK made again from nothing on every call (benchmarks/README.md, S8):

    - each URL it is given is parsed once (agentv gives it the same whole URL every time);
    - a request whose options differ from an earlier one's only in their body (bytes) is
      made from that one's method, URL, headers and extensions, with its own body and
      ``Content-Length``: the SDK's headers (auth, platform, retry count, read timeout) are
      worked out once per set of options, not per call.

    What goes on the wire is what the SDK's own ``_build_request`` makes
    (``tests/providers/test_transport_requests.py``), as long as the client's own settings
    (organization, default headers and query, time limit) stay as they were made: agentv
    never changes them. Were the SDK to name those steps otherwise, nothing but the saving
    would be lost."""

    class Client(client_class):  # type: ignore[misc,valid-type]
        _parsed: dict[str, Any]
        _built: dict[tuple[Any, ...], _Built]

        def _prepare_url(self, url: str) -> Any:
            parsed = self.__dict__.setdefault("_parsed", {})
            found = parsed.get(url)
            if found is None:
                found = super()._prepare_url(url)
                if len(parsed) < 64:
                    parsed[url] = found
            return found

        def _build_request(self, options: Any, *, retries_taken: int = 0) -> Any:
            key = _same_but_the_body(self, options, retries_taken)
            built = self.__dict__.setdefault("_built", {})
            found = built.get(key) if key is not None else None
            cookies = self._client.cookies  # httpx2's jar: what servers set, sent back
            if found is not None:
                return found.with_body(options.content, cookies)
            request = super()._build_request(options, retries_taken=retries_taken)
            # kept only when made with no cookie: each request gets the jar's of its time
            if key is not None and not cookies and len(built) < 64:
                kept = _Built.of(request, options.content)
                if kept is not None:
                    built[key] = kept
            return request

    Client.__name__ = Client.__qualname__ = client_class.__name__
    return Client


def _same_but_the_body(client: Any, options: Any, retries_taken: int) -> tuple[Any, ...] | None:
    """What ``_build_request`` makes a request of, less a body of bytes: requests with the
    same key differ only in their body. None: not such a request (JSON, files, a query,
    an idempotency header), or options that cannot be compared."""
    if (
        type(options.content) is not bytes
        or options.json_data is not None
        or options.extra_json is not None
        or options.files is not None
        or options.params
        or client._idempotency_header
    ):
        return None
    headers = options.headers
    timeout = options.timeout
    key = (
        options.method,
        options.url,
        retries_taken,
        repr(timeout),  # 5 and 5.0 are equal, but the SDK's read-timeout header says which
        tuple(headers.items()) if isinstance(headers, dict) else repr(headers),
        tuple(options.security.items()),
        # the API key as the SDK would send it now (a key it refreshes changes it)
        tuple(client._auth_headers(options.security).items()),
    )
    try:
        hash(key)
    except TypeError:
        return None
    return key


class _Built:
    """A request the SDK built, less its body: made again with another body."""

    __slots__ = ("extensions", "headers", "method", "url")

    def __init__(self, method: str, url: Any, headers: Any, extensions: dict[str, Any]) -> None:
        self.method = method
        self.url = url
        self.headers = headers
        self.extensions = extensions

    @classmethod
    def of(cls, request: Any, content: bytes) -> _Built | None:
        """``request`` kept, if it ends as the requests made with a body of bytes do
        (``Content-Length`` last), else None."""
        import httpx2

        raw = request.headers.raw
        if not raw or raw[-1] != (b"Content-Length", str(len(content)).encode("ascii")):
            return None
        if not isinstance(request.stream, httpx2.ByteStream) or request.content != content:
            return None
        headers = httpx2.Headers(raw[:-1])
        return cls(request.method, request.url, headers, _copied(request.extensions))

    def with_body(self, content: bytes, cookies: Any) -> Any:
        """The request again with ``content``, and the cookies of ``cookies`` (httpx2's
        jar) that are for its URL, as httpx2 adds them (after the other headers, before
        ``Content-Length``)."""
        import httpx2

        request = httpx2.Request(
            self.method,
            self.url,
            headers=self.headers,  # copied by the request
            stream=httpx2.ByteStream(content),
            extensions=_copied(self.extensions),
        )
        if cookies:
            cookies.set_cookie_header(request)
        request.headers["Content-Length"] = str(len(content))  # not among them: appended
        request.read()
        return request


def _copied(extensions: dict[str, Any]) -> dict[str, Any]:
    """A request's extensions, each dict among them copied (the timeouts): a request's own
    may be changed while it is sent."""
    return {k: dict(v) if isinstance(v, dict) else v for k, v in extensions.items()}


#: numbers the requests of this process (their idempotency keys)
_REQUEST_NUMBERS = itertools.count(1)


class _ChatCompletionsProvider(LLMProvider):
    """The chat-completions mapping shared by OpenAI and Azure."""

    settings: OpenAISettings | AzureOpenAISettings  # type: ignore[assignment]
    _client: Any
    _sdk: Any
    _url: str

    def __init__(self, name: str, settings: OpenAISettings | AzureOpenAISettings) -> None:
        super().__init__(name, settings)
        self._urls: dict[str, str] = {}  # whole URL of each model's endpoint
        self._options: dict[str, Any] = {}  # the SDK's request options per whole URL

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

        # The SDK's `request` with options made from the provider's own (`_options_for`):
        # a body of bytes skips the SDK's type-driven transformation and its JSON encoding
        # (the body is wire-ready already), which cost milliseconds per call; errors are
        # raised by the SDK as usual. Its own timeout sits just above ours, so ours fires.
        options = self._options_for(self._whole_url(payload.request["model"])).model_copy(
            update={
                "content": orjson.dumps(payload.request),
                "timeout": timeout + 1,
                # a key of our own, unique per request as the SDK's, spares the SDK a uuid4
                # per call; the OpenAI and Azure clients send none
                "idempotency_key": f"agentv-{next(_REQUEST_NUMBERS)}",
            }
        )
        # cast to httpx2's response: the SDK hands it over as it is, read, not wrapped in
        # a response object of its own to be parsed
        content = (await self._client.request(httpx2.Response, options)).content
        try:
            data = orjson.loads(content)
        except orjson.JSONDecodeError:
            raise NotJSON(content.decode("utf-8", errors="replace")) from None
        return from_openai_completion(data)

    def _options_for(self, url: str) -> Any:
        """The SDK's request options for a call of ``url``, made once per URL as the SDK's
        ``post`` makes them (its pydantic model's defaults cost more than the request's own
        building); each call copies them with its body, time limit and key."""
        options = self._options.get(url)
        if options is None:
            from openai._models import FinalRequestOptions

            options = self._options[url] = FinalRequestOptions.construct(
                method="post",
                url=url,
                json_data=None,
                content=b"",
                files=None,
                timeout=None,
                # the SDK's own `chat.completions.create` asks for bearer auth alone; said
                # here, its wider default is not deep-copied on every call either
                security={"bearer_auth": True},
                idempotency_key=None,
            )
        return options

    def _whole_url(self, model: str) -> str:
        """``endpoint_for(model)`` joined to the client's base URL as the SDK joins them, once
        per model: a whole URL is sent as it is, where a relative one is parsed and joined
        again on every call."""
        whole = self._urls.get(model)
        if whole is None:
            base = self._client.base_url
            path = base.raw_path + self.endpoint_for(model).lstrip("/").encode("ascii")
            whole = self._urls[model] = str(base.copy_with(raw_path=path))
        return whole

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
        self._client = _lean(self._sdk.AsyncOpenAI)(
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
        self._client = _lean(self._sdk.AsyncAzureOpenAI)(
            azure_endpoint=settings.endpoint_url,
            api_key=key,
            api_version=settings.api_version,
            max_retries=0,
            http_client=self.http_client(),
        )

    def endpoint_for(self, model: str) -> str:
        # The SDK adds /deployments/<model> only to bodies it encodes itself; ours are bytes.
        return f"/deployments/{quote(model, safe=_PATH_SAFE)}/chat/completions"
