"""Hostile and broken servers, on loopback, for the four LM APIs: what comes back is bounded
(an endless body, a gzip bomb, a body larger than announced), and a request that got no
answer says why (refused, reset, DNS, TLS, timeout) with the URL."""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

import pytest

from agentv.errors import ProviderError, ProviderTimeout
from agentv.providers.failures import ResponseTooLarge, connection_failure
from agentv.providers.transport import http_client
from support.cli import agentv_cli_peak
from support.fakes import FakeLLMServer, Fault, refused
from support.files import write
from support.providers import LM_KINDS, MakeProvider, ask
from support.results import rows

REQUEST = ask(question="Hello?")
MIB = 1 << 20


def _base(kind: str, url: str) -> dict[str, str]:
    """The fields that point a target of ``kind`` at ``url``."""
    if kind == "openai":
        return {"base_url": f"{url}/v1"}
    if kind == "azure":
        return {"endpoint": url}
    return {"base_url": url}


def _shown(kind: str, url: str) -> str:
    """How errors name the place a target of ``kind`` sends to, for ``url``."""
    return f"{url}/v1" if kind == "openai" else url


# --- bounded answers ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", LM_KINDS)
async def test_an_endless_body_stops_at_max_response_bytes_and_is_not_retried(
    kind: str, llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    llm_server.script(Fault.endless_body(), Fault.endless_body())
    provider = make_provider(kind, max_response_bytes=4 * MIB, max_retries=3, timeout_seconds=120)
    started = time.monotonic()
    with pytest.raises(ProviderError) as info:
        await provider.invoke(REQUEST)
    assert time.monotonic() - started < 60  # a hang guard: cut at the cap, not timed out
    assert not isinstance(info.value, ProviderTimeout)
    assert str(info.value) == (
        f"target 't' ({kind}): the server sent more than max_response_bytes (4 MiB) and was "
        "cut off; raise the target's max_response_bytes if answers are meant to be that "
        f"large (from {_shown(kind, llm_server.url)})"
    )
    assert info.value.attempts == 1 and not info.value.retryable
    assert len(llm_server.requests) == 1
    # agentv hung up: the server's writes failed a few buffers past the cap
    assert await asyncio.to_thread(llm_server.endless_ended.wait, 10)
    assert llm_server.endless_sent[0] < 16 * MIB


@pytest.mark.parametrize("kind", LM_KINDS)
async def test_a_gzip_bomb_stops_at_max_response_bytes_once_decompressed(
    kind: str, llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    llm_server.script(Fault.bomb(1 << 30), Fault.bomb(1 << 30))  # 1 GiB from about 1 MiB
    provider = make_provider(kind, max_retries=3)  # the default cap: 32 MiB
    with pytest.raises(ProviderError) as info:
        await provider.invoke(REQUEST)
    assert "the server decompressed to more than max_response_bytes (32 MiB)" in str(info.value)
    assert len(llm_server.requests) == 1


@pytest.mark.parametrize("status", [200, 500])
async def test_a_body_announced_larger_than_the_cap_is_refused_before_it_is_read(
    status: int, llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    # error bodies are bounded too, and a 500 that is too large is not retried
    llm_server.script(*[Fault.body(b"x" * (2 * MIB), status=status)] * 2)
    provider = make_provider("anthropic", max_response_bytes=MIB, max_retries=2)
    with pytest.raises(ProviderError, match=r"more than max_response_bytes \(1 MiB\)"):
        await provider.invoke(REQUEST)
    assert len(llm_server.requests) == 1


@pytest.mark.parametrize("kind", LM_KINDS)
async def test_a_compressed_answer_within_the_cap_is_read(
    kind: str, llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    import gzip
    import json

    payloads = {
        "openai": {"choices": [{"message": {"content": "zipped"}, "finish_reason": "stop"}]},
        "anthropic": {
            "id": "m",
            "type": "message",
            "role": "assistant",
            "model": "c",
            "content": [{"type": "text", "text": "zipped"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 1, "output_tokens": 1},
        },
        "gemini": {"candidates": [{"content": {"parts": [{"text": "zipped"}]}}]},
    }
    body = gzip.compress(json.dumps(payloads.get(kind, payloads["openai"])).encode())
    llm_server.script(Fault(200, raw_body=body, content_encoding="gzip"))
    response = await make_provider(kind).invoke(REQUEST)
    assert response.text == "zipped"
    assert llm_server.requests[0].headers["accept-encoding"] == "gzip, deflate"


@pytest.mark.parametrize("use_aiohttp", [True, False])
async def test_the_bound_holds_on_either_transport(
    use_aiohttp: bool, llm_server: FakeLLMServer
) -> None:
    llm_server.script(Fault.endless_body(), Fault.bomb(64 * MIB))
    async with http_client(2 * MIB, use_aiohttp=use_aiohttp) as client:
        with pytest.raises(ResponseTooLarge) as info:
            await client.post(f"{llm_server.url}/v1/chat/completions", json={})
        assert not info.value.decompressed
        with pytest.raises(ResponseTooLarge) as info:
            await client.post(f"{llm_server.url}/v1/chat/completions", json={})
        assert info.value.decompressed
        answer = await client.post(f"{llm_server.url}/v1/chat/completions", json={})
        assert answer.json()["choices"][0]["message"]["content"] == "Hello from the fake LLM."


@pytest.mark.parametrize("use_aiohttp", [True, False])
async def test_a_small_compressed_body_read_whole_is_bounded_the_same(
    use_aiohttp: bool, llm_server: FakeLLMServer
) -> None:
    """A body of known length up to 64 KiB is read whole at once (aiohttp), then made
    plain: a small bomb (8 MiB from a few KiB) stops at the cap as a streamed one does, and
    a corrupt one is refused."""
    from agentv.providers.failures import ResponseRejected

    corrupt = Fault(200, raw_body=b"\x1f\x8b\x08\x00not gzip at all", content_encoding="gzip")
    llm_server.script(Fault.bomb(8 * MIB), corrupt)
    async with http_client(2 * MIB, use_aiohttp=use_aiohttp) as client:
        with pytest.raises(ResponseTooLarge) as info:
            await client.post(f"{llm_server.url}/v1/chat/completions", json={})
        assert info.value.decompressed
        with pytest.raises(ResponseRejected, match="corrupt compressed body"):
            await client.post(f"{llm_server.url}/v1/chat/completions", json={})
        for _ in range(3):  # and the connection goes on serving plain answers
            answer = await client.post(f"{llm_server.url}/v1/chat/completions", json={})
            assert answer.json()["choices"][0]["message"]["content"] == "Hello from the fake LLM."


async def test_a_small_body_announced_larger_than_a_small_cap_is_refused_unread() -> None:
    """With a cap under 64 KiB, a body announced above it is refused at once, not read
    whole first (this server announces 50,000 bytes and never sends them); an answer within
    the cap is read, and says how long it took (``elapsed``) as httpx2's own reading does."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        request = await reader.readuntil(b"\r\n\r\n")
        if b"/hang" in request.split(b"\r\n", 1)[0]:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 50000\r\n\r\n")
            await writer.drain()
            await asyncio.sleep(120)
        else:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n" + b'{"a": 1}')
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        async with http_client(1000, use_aiohttp=True) as client:
            started = time.monotonic()
            with pytest.raises(ResponseTooLarge) as info:
                await client.get(f"{url}/hang", timeout=120)
            # a hang guard: refused at once, not read until the server gives up
            assert time.monotonic() - started < 60 and not info.value.decompressed
            answer = await client.get(f"{url}/plain", timeout=5)
            assert answer.json() == {"a": 1}
            assert answer.elapsed.total_seconds() >= 0
    finally:
        server.close()


# --- no answer at all -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", LM_KINDS)
async def test_a_refused_connection_is_named_with_the_url(
    kind: str, make_provider: MakeProvider
) -> None:
    with refused() as url:
        provider = make_provider(kind, max_retries=2, **_base(kind, url))
        started = time.monotonic()
        with pytest.raises(ProviderError) as info:
            await provider.invoke(REQUEST)
    assert time.monotonic() - started < 30  # a hang guard
    assert str(info.value) == (
        f"target 't' ({kind}): cannot reach {_shown(kind, url)}: connection refused (is the "
        "server running?) (gave up after 3 attempts)"
    )
    assert not isinstance(info.value, ProviderTimeout)


@pytest.mark.parametrize("kind", LM_KINDS)
async def test_a_reset_is_named_as_such(
    kind: str, llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    llm_server.script(Fault.reset(), Fault.reset())
    with pytest.raises(ProviderError) as info:
        await make_provider(kind, max_retries=1).invoke(REQUEST)
    assert str(info.value) == (
        f"target 't' ({kind}): cannot reach {_shown(kind, llm_server.url)}: the connection "
        "was reset (the server dropped it unanswered) (gave up after 2 attempts)"
    )


@pytest.mark.parametrize("kind", LM_KINDS)
async def test_tls_to_a_plain_http_server_is_a_tls_failure_not_retried(
    kind: str, llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    url = llm_server.url.replace("http://", "https://")
    provider = make_provider(kind, max_retries=3, **_base(kind, url))
    with pytest.raises(ProviderError) as info:
        await provider.invoke(REQUEST)
    assert str(info.value) == (
        f"target 't' ({kind}): cannot reach {_shown(kind, url)}: TLS handshake failed: wrong "
        "version number (is it an http:// server?)"
    )
    assert info.value.attempts == 1


@pytest.mark.parametrize("kind", LM_KINDS)
async def test_a_name_that_does_not_resolve_is_a_dns_failure_not_retried(
    kind: str, make_provider: MakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    # no resolver is asked: the lookup of this one name fails as a real one would
    real = socket.getaddrinfo

    def lookup(host: object, *args: object, **kwargs: object) -> object:
        if host == "no-such-host.invalid":
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", lookup)
    url = "http://no-such-host.invalid:8000"
    provider = make_provider(kind, max_retries=3, **_base(kind, url))
    with pytest.raises(ProviderError) as info:
        await provider.invoke(REQUEST)
    assert str(info.value).startswith(
        f"target 't' ({kind}): cannot reach {_shown(kind, url)}: DNS lookup failed ("
    )
    assert "Name or service not known" in str(info.value)
    assert info.value.attempts == 1


@pytest.mark.parametrize("kind", LM_KINDS)
async def test_a_timeout_names_the_url(
    kind: str, llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    llm_server.script(Fault.hanging())
    with pytest.raises(ProviderTimeout) as info:
        await make_provider(kind, timeout_seconds=0.5).invoke(REQUEST)
    assert str(info.value) == (
        f"target 't' ({kind}): no answer within 0.5 s from {_shown(kind, llm_server.url)}"
    )


@pytest.mark.parametrize("use_aiohttp", [True, False])
async def test_refused_and_reset_are_told_apart_on_either_transport(
    use_aiohttp: bool, llm_server: FakeLLMServer
) -> None:
    async with http_client(MIB, use_aiohttp=use_aiohttp) as client:
        with refused() as url, pytest.raises(Exception) as info:
            await client.post(f"{url}/v1/chat/completions", json={})
        failure = connection_failure(info.value)
        assert failure is not None and failure.reason.startswith("connection refused")
        llm_server.script(Fault.reset())
        with pytest.raises(Exception) as info:
            await client.post(f"{llm_server.url}/v1/chat/completions", json={})
        failure = connection_failure(info.value)
        assert failure is not None and failure.reason.startswith("the connection was reset")


@pytest.mark.slow
def test_a_run_against_hostile_servers_stays_small(repo: Path, llm_server: FakeLLMServer) -> None:
    # An endless body (1 MiB chunks for ever) and a gzip bomb (1 GiB from 1 MiB), each met
    # with the default cap (32 MiB): agentv used to grow to gigabytes on either.
    llm_server.script(Fault.endless_body(), Fault.bomb(1 << 30))
    write(
        repo,
        ".agentv/targets.yaml",
        f"$schema: agentv-targets-v2.2\ntargets:\n  - name: default\n    provider: openai\n"
        f"    base_url: {llm_server.url}/v1\n    model: m\n    max_retries: 0\n",
    )
    cases = "".join(
        f"  - id: case-{i}\n    outcome: anything\n"
        "    input_messages: [{role: user, content: hi}]\n"
        "    execution: {evaluators: [{type: contains, value: x}]}\n"
        for i in range(2)
    )
    write(repo, "evals/two.yaml", f"$schema: agentv-eval-v2\nevalcases:\n{cases}")
    proc, peak_kib = agentv_cli_peak(
        repo, "eval", "evals/two.yaml", "--out", "r.jsonl", "--workers", "1"
    )
    assert proc.returncode == 3, proc.stderr
    assert peak_kib < 300 * 1024, f"agentv grew to {peak_kib // 1024} MiB"
    errors = sorted(r["error"] for r in rows(repo / "r.jsonl"))
    assert "the server decompressed to more than max_response_bytes (32 MiB)" in errors[0]
    assert "the server sent more than max_response_bytes (32 MiB)" in errors[1]
    assert len(llm_server.requests) == 2
