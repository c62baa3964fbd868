"""The requests the providers' HTTP client (``agentv.providers.transport.http_client``)
sends: built by the SDKs themselves, their headers reaching the server as given on either
transport, the server's cookies sent back, and each request telling its throttle when it
left."""

from __future__ import annotations

import time
from typing import Any

import pytest

from agentv.providers.base import SENDING
from agentv.providers.registry import provider_class
from agentv.providers.transport import http_client
from support.fakes import FakeLLMServer
from support.providers import KEYS, LM_KINDS, MakeProvider, ask, provider_fields


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
async def test_each_request_carries_the_sdks_own_headers_and_its_own_body(
    kind: str, llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    # the SDK builds every request itself: its headers, the key, the time limit it was given
    provider = make_provider(kind, timeout_seconds=7)
    for question in ("Say hi.", "Say hi, then count to " + "ten, " * 200):
        await provider.invoke(ask(question))
    first, second = llm_server.requests
    assert [len(r.raw) for r in (first, second)] == [
        int(r.headers["content-length"]) for r in (first, second)
    ]
    assert len(second.raw) > len(first.raw) + 1000
    assert second.body["messages"][-1]["content"].endswith("ten, ten, ")
    # the same headers for both, but the body's length
    assert {**first.headers, "content-length": "-"} == {**second.headers, "content-length": "-"}
    auth = {"openai": "authorization", "azure": "api-key"}[kind]
    sdk_class = {"openai": "AsyncOpenAI", "azure": "AsyncAzureOpenAI"}[kind]
    headers = first.headers
    assert headers[auth] == ("Bearer " if kind == "openai" else "") + KEYS[kind]
    assert headers["user-agent"].startswith(f"{sdk_class}/Python ")
    assert headers["content-type"] == "application/json"
    assert headers["accept-encoding"] == "gzip, deflate"  # decompressed by agentv, capped
    assert headers["x-stainless-retry-count"] == "0"  # the SDK retries nothing itself
    assert headers["x-stainless-read-timeout"] == "8.0"  # just above the target's 7 s
    assert "idempotency-key" not in headers


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
            for _ in range(4):
                await provider.invoke(ask("Say hi."))
        finally:
            await provider.aclose()
    assert [r.headers.get("cookie") for r in server.requests] == [
        None,
        "affinity=node1",
        "affinity=node2",
        "affinity=node3",
    ]
