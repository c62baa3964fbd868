"""The providers' HTTP client builds the requests the SDKs send most by a shorter way than
httpx2's general one (``agentv.providers.transport``, the client ``http_client`` makes);
what it builds must be exactly what httpx2 builds, and anything else takes httpx2's way."""

from __future__ import annotations

import time
from typing import Any

import httpx2
import pytest
from wire_support import LM_KINDS, MakeProvider

from agentv.providers.base import SENDING
from agentv.providers.transport import http_client
from fakes import FakeLLMServer
from helpers import ask

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
