"""The providers' HTTP client builds the requests the SDKs send most by a shorter way than
httpx2's general one (``agentv.providers.transport``, the client ``http_client`` makes);
what it builds must be exactly what httpx2 builds, and anything else takes httpx2's way."""

from __future__ import annotations

import time
from typing import Any

import httpx2
import pytest

from agentv.providers.base import SENDING
from agentv.providers.registry import provider_class
from agentv.providers.transport import http_client
from support.fakes import FakeLLMServer
from support.providers import LM_KINDS, MakeProvider, ask, provider_fields

#: what the SDKs pass: a list of header pairs, some of them the client's own names
SDK_HEADERS = [
    ("Accept", "application/json"),
    ("Content-Type", "application/json"),
    ("User-Agent", "AsyncOpenAI/Python 9.9"),
    ("Authorization", "Bearer sk-test-0000"),
    ("X-Stainless-Retry-Count", "0"),
    ("X-Twice", "a"),
    ("X-Twice", "b"),
]


def plain_client() -> httpx2.AsyncClient:
    """httpx2's own client with the same settings as ``http_client``'s."""
    return httpx2.AsyncClient(timeout=httpx2.Timeout(600.0), follow_redirects=True)


def shape(request: httpx2.Request) -> tuple[Any, ...]:
    return (
        request.method,
        str(request.url),
        request.headers.raw,
        request.content,
        request.extensions,
    )


@pytest.mark.parametrize("timeout", [httpx2.Timeout(5.0, connect=2.0), 7.5, None, "default"])
def test_a_whole_url_with_header_pairs_and_bytes_is_built_as_httpx2_builds_it(
    timeout: Any,
) -> None:
    ours, theirs = http_client(1000), plain_client()
    given: dict[str, Any] = {} if timeout == "default" else {"timeout": timeout}
    for url in ("http://127.0.0.1:9/v1/chat/completions", "https://h.example/a%2Fb?api-version=1"):
        for _ in range(2):  # the second time from the URL kept
            args = dict(content=b'{"model": "m"}', headers=list(SDK_HEADERS), **given)
            built = ours.build_request("POST", url, params=None, files=None, **args)
            assert shape(built) == shape(theirs.build_request("POST", url, **args))


def test_other_requests_take_httpx2s_way() -> None:
    ours, theirs = http_client(1000), plain_client()
    ours.base_url = theirs.base_url = "http://127.0.0.1:9/api/"
    cases: list[tuple[str, dict[str, Any]]] = [
        ("v1/messages", {"content": b"{}", "headers": list(SDK_HEADERS)}),  # relative
        ("http://h.example/x", {"json": {"a": 1}, "headers": list(SDK_HEADERS)}),
        ("http://h.example/x", {"content": b"{}", "params": {"q": "1"}, "headers": []}),
        ("http://h.example/x", {"content": b"{}", "headers": {"Accept": "text/plain"}}),
        ("http://h.example/x", {"content": b"{}", "cookies": {"c": "1"}, "headers": []}),
    ]
    for url, args in cases:
        assert shape(ours.build_request("POST", url, **args)) == shape(
            theirs.build_request("POST", url, **args)
        ), (url, args)


class _Told:
    """A throttle that keeps what it is told: when each request was sent for (its answer's
    ``sent_at``) and when it left."""

    def __init__(self) -> None:
        self.sent_at: list[float | None] = []
        self.left_at: list[float] = []

    def now(self) -> float:
        return time.monotonic()

    def succeeded(self, sent_at: float | None = None) -> None:
        self.sent_at.append(sent_at)

    def throttled(self, wait: float, *, sent_at: float | None = None, asked: bool = False) -> None:
        pass

    async def requeue(self, tokens: float = 0.0, *, after: float = 0.0) -> None:
        pass

    def left(self, at: float) -> None:
        self.left_at.append(at)


@pytest.mark.parametrize("kind", LM_KINDS)
async def test_each_request_tells_its_throttle_when_it_left(
    kind: str, llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    # a paced target spaces its next turn from when a request really left (docs/rate-limits.md)
    provider = make_provider(kind)
    told = _Told()
    provider.throttle = told
    for _ in range(2):
        await provider.invoke(ask("Say hi."))
    assert len(llm_server.requests) == 2 and len(told.left_at) == 2
    assert all(
        sent is not None and sent <= left
        for sent, left in zip(told.sent_at, told.left_at, strict=True)
    )
    assert all(
        left <= rec.received_at for left, rec in zip(told.left_at, llm_server.requests, strict=True)
    )
    assert SENDING.get() is None  # asked for each request only


@pytest.mark.parametrize("kind", ["openai", "azure"])
async def test_the_sdk_client_parses_each_url_once_as_the_sdk_would(
    kind: str, make_provider: MakeProvider
) -> None:
    client = make_provider(kind)._client  # type: ignore[attr-defined]
    sdk_class = type(client).__mro__[1]  # the SDK's own client class
    for url in ("http://127.0.0.1:9/v1/chat/completions", "/deployments/d/chat/completions"):
        first = client._prepare_url(url)
        assert client._prepare_url(url) is first  # kept, not parsed again
        assert first == sdk_class._prepare_url(client, url)


@pytest.mark.parametrize("kind", ["openai", "azure"])
async def test_requests_differing_only_in_their_body_are_built_as_the_sdk_builds_them(
    kind: str, make_provider: MakeProvider
) -> None:
    provider: Any = make_provider(kind)
    client = provider._client
    sdk_class = type(client).__mro__[1]  # the SDK's own client class
    url = provider._whole_url("m")
    bodies = [b'{"model": "m"}', b'{"model": "m", "messages": [' + b"1," * 500 + b"1]}"]
    # the call's time limit (5 and 5.0 are sent differently), retries taken
    settings = [(5.0, 0), (5, 0), (7.5, 0), (5.0, 1)]
    for _ in range(2):  # the second time from what the first kept
        for body in bodies:
            for timeout, retries in settings:
                options = provider._options_for(url).model_copy(
                    update={"content": body, "timeout": timeout, "idempotency_key": "k"}
                )
                options = await client._prepare_options(options)
                ours = client._build_request(options, retries_taken=retries)
                theirs = sdk_class._build_request(client, options, retries_taken=retries)
                assert shape(ours) == shape(theirs)
                assert ours.headers["Content-Length"] == str(len(body))
    assert len(client._built) == len(settings)  # one per set of options, not per body

    # a new API key (a key the SDK refreshes) is sent from the next request on
    client.api_key = "sk-rotated-1111"
    options = await client._prepare_options(
        provider._options_for(url).model_copy(update={"content": bodies[0], "timeout": 5.0})
    )
    ours = client._build_request(options)
    assert shape(ours) == shape(sdk_class._build_request(client, options))
    assert b"sk-rotated-1111" in b"".join(value for _, value in ours.headers.raw)


@pytest.mark.parametrize("kind", ["openai", "azure"])
async def test_other_sdk_requests_take_the_sdks_way(kind: str, make_provider: MakeProvider) -> None:
    from openai._models import FinalRequestOptions

    provider: Any = make_provider(kind)
    client = provider._client
    sdk_class = type(client).__mro__[1]
    url = provider._whole_url("m")
    others = [
        {"json_data": {"model": "m"}},
        {"content": b"{}", "params": {"q": "1"}},
        {"json_data": {"model": "m"}, "extra_json": {"a": 1}},
        {"content": iter([b"{}"])},  # a body that is not bytes (a stream)
    ]
    for fields in others:
        options = await client._prepare_options(
            FinalRequestOptions.construct(method="post", url=url, timeout=5.0, **fields)
        )
        ours = client._build_request(options)
        theirs = sdk_class._build_request(client, options)
        if "json_data" in fields:
            assert shape(ours) == shape(theirs)
        else:
            assert ours.headers.raw == theirs.headers.raw
    assert not client.__dict__.get("_built")  # none of them kept


@pytest.mark.parametrize("kind", ["openai", "azure"])
def test_a_calls_options_are_the_sdks_post_options(kind: str, make_provider: MakeProvider) -> None:
    # what `post` would make of the same call (its fields, and which of them were given)
    from openai import NotGiven
    from openai._models import FinalRequestOptions

    provider: Any = make_provider(kind)
    url = provider._whole_url("m")
    update = {"content": b'{"model": "m"}', "timeout": 61.0, "idempotency_key": "agentv-9"}
    ours = provider._options_for(url).model_copy(update=update)
    theirs = FinalRequestOptions.construct(
        method="post",
        url=url,
        json_data=None,
        files=None,
        security={"bearer_auth": True},
        **update,
    )

    def fields(options: Any) -> dict[str, Any]:  # each default NotGiven is its own object
        return {k: "not given" if isinstance(v, NotGiven) else v for k, v in options}

    assert fields(ours) == fields(theirs)
    assert ours.model_fields_set == theirs.model_fields_set


@pytest.mark.parametrize("use_aiohttp", [True, False])
async def test_headers_reach_the_server_as_given_on_either_transport(
    use_aiohttp: bool, llm_server: FakeLLMServer
) -> None:
    # a UTF-8 value (as bytes: httpx2 takes str values in ASCII only) and a name's case
    headers = [(b"X-Note", "café ☕".encode()), (b"X-MiXed-Case", b"Value")]
    async with http_client(1 << 20, use_aiohttp=use_aiohttp) as client:
        response = await client.post(
            f"{llm_server.url}/v1/chat/completions",
            content=b'{"model": "m", "messages": [{"role": "user", "content": "Hi"}]}',
            headers=headers,
        )
    assert response.status_code == 200
    got = llm_server.requests[-1].headers
    assert got["x-note"] == "café ☕"
    assert got["x-mixed-case"] == "Value"


@pytest.mark.parametrize("kind", ["openai", "azure"])
async def test_cookies_the_server_sets_are_sent_back_with_each_later_request(kind: str) -> None:
    # a load balancer keeping a client on one node, rotating its cookie with each answer
    with FakeLLMServer(sets_cookie=True) as server:
        cls = provider_class(kind)
        provider: Any = cls("t", cls.Settings.model_validate(provider_fields(kind, server)))
        try:
            for _ in range(3):
                await provider.invoke(ask("Say hi."))
            # and as the SDK itself builds it, with the cookie the jar holds now
            client = provider._client
            options = await client._prepare_options(
                provider._options_for(provider._whole_url("m")).model_copy(
                    update={"content": b"{}", "timeout": 5.0}
                )
            )
            sdk_class = type(client).__mro__[1]
            ours = client._build_request(options)
            assert shape(ours) == shape(sdk_class._build_request(client, options))
        finally:
            await provider.aclose()
    assert [r.headers.get("cookie") for r in server.requests] == [
        None,
        "affinity=node1",
        "affinity=node2",
    ]
    assert ours.headers["cookie"] == "affinity=node3"
