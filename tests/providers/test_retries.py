"""Retries, timeouts and error messages, with the SDKs' own retries off."""

from __future__ import annotations

import asyncio
import socket
import time

import pytest

from agentv.errors import ProviderError, ProviderHTTPError, ProviderTimeout
from agentv.providers.registry import provider_class
from agentv.run.scheduling import GatedProvider, Gates
from support.fakes import FakeLLMServer, Fault
from support.providers import KEYS, LM_KINDS, MakeProvider, ask

REQUEST = ask(question="Hello?")


def most_in_flight(received: list[float], answer_after: float) -> int:
    """The most requests the server held at once, from when each arrived: it answers each
    no sooner than ``answer_after`` seconds later, so requests that arrived within one such
    span were all waiting together. Serial dispatch gives 1, however slow the machine."""
    times = sorted(received)
    return max((sum(1 for u in times if t <= u < t + answer_after) for t in times), default=0)


@pytest.mark.parametrize("kind", LM_KINDS)
async def test_429_with_retry_after_is_waited_out_then_succeeds(
    kind: str, llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    llm_server.script(Fault.rate_limited(retry_after=0.4))
    # retry_max_delay_ms caps Retry-After: it must allow the 0.4 s asked here
    response = await make_provider(kind, retry_max_delay_ms=1000).invoke(REQUEST)
    assert response.text == "Hello from the fake LLM."
    first, second = llm_server.requests
    # The backoff settings say milliseconds; the server said 0.4 s, and that is what we waited.
    assert second.received_at - first.received_at >= 0.38
    assert first.body == second.body


@pytest.mark.parametrize("kind", LM_KINDS)
async def test_500_is_retried_exactly_max_retries_times_then_fails_clearly(
    kind: str, llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    llm_server.script(*[Fault.server_error()] * 10)
    provider = make_provider(kind, name="my-target", max_retries=2)
    with pytest.raises(ProviderHTTPError) as info:
        await provider.invoke(REQUEST)
    assert len(llm_server.requests) == 3
    err = info.value
    assert err.status == 500
    assert err.target == "my-target"
    message = str(err)
    assert "\n" not in message
    assert message.startswith(f"target 'my-target' ({kind}): HTTP 500: ")
    assert "The server had an error while processing your request." in message
    assert "gave up after 3 attempts" in message
    assert KEYS[kind] not in message


@pytest.mark.parametrize("kind", LM_KINDS)
async def test_400_is_not_retried(
    kind: str, llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    llm_server.script(Fault.bad_request("messages: roles must alternate"), Fault.server_error())
    with pytest.raises(ProviderHTTPError) as info:
        await make_provider(kind).invoke(REQUEST)
    assert len(llm_server.requests) == 1
    assert info.value.status == 400
    assert str(info.value) == f"target 't' ({kind}): HTTP 400: messages: roles must alternate"


@pytest.mark.parametrize("status", [401, 403, 404])
async def test_auth_and_not_found_errors_never_retried_even_if_listed(
    status: int, llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    llm_server.script(*[Fault(status, "nope")] * 3)
    provider = make_provider("openai", retry_status_codes=[status, 500])
    with pytest.raises(ProviderHTTPError) as info:
        await provider.invoke(REQUEST)
    assert len(llm_server.requests) == 1
    assert info.value.status == status


async def test_status_outside_the_configured_list_is_not_retried(
    llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    llm_server.script(Fault.server_error(), Fault.server_error())
    provider = make_provider("anthropic", retry_status_codes=[429])
    with pytest.raises(ProviderHTTPError):
        await provider.invoke(REQUEST)
    assert len(llm_server.requests) == 1


async def test_backoff_grows_between_attempts(
    llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    llm_server.script(Fault.server_error(), Fault.server_error())
    provider = make_provider(
        "openai", retry_initial_delay_ms=100, retry_backoff_factor=3, retry_max_delay_ms=10_000
    )
    await provider.invoke(REQUEST)
    t0, t1, t2 = (r.received_at for r in llm_server.requests)
    # 100 ms then 300 ms, each with jitter in [0.75, 1.25)
    assert t1 - t0 >= 0.075
    assert t2 - t1 >= 0.225


@pytest.mark.parametrize("kind", LM_KINDS)
async def test_a_hanging_request_times_out_without_retry(
    kind: str, llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    llm_server.script(Fault.hanging(), Fault.hanging())
    provider = make_provider(kind, timeout_seconds=0.3)
    started = time.monotonic()
    with pytest.raises(ProviderTimeout) as info:
        await provider.invoke(REQUEST)
    assert time.monotonic() - started < 60  # a hang guard: the fake would hold it for an hour
    assert len(llm_server.requests) == 1
    assert "no answer within 0.3 s" in str(info.value)
    assert info.value.retryable  # the run may retry the case (--max-retries)


async def test_request_timeout_overrides_the_target_timeout(
    llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    llm_server.script(Fault.hanging())
    provider = make_provider("openai", timeout_seconds=60)
    with pytest.raises(ProviderTimeout, match=r"0\.2 s"):
        await provider.invoke(ask(question="hi", timeout=0.2))


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.parametrize("kind", LM_KINDS)
async def test_connection_refused_is_retried_then_reported(kind: str) -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    cls = provider_class(kind)
    fields = {
        "api_key": KEYS[kind],
        "model": "m",
        "max_retries": 2,
        "retry_initial_delay_ms": 100,
        "retry_max_delay_ms": 100,
        ("endpoint" if kind == "azure" else "base_url"): url,
    }
    provider = cls("local", cls.Settings.model_validate(fields))
    started = time.monotonic()
    try:
        with pytest.raises(ProviderError) as info:
            await provider.invoke(REQUEST)
    finally:
        await provider.aclose()
    # two waits of about 100 ms show the two retries happened
    assert time.monotonic() - started >= 0.15
    message = str(info.value)
    assert message.startswith(f"target 'local' ({kind}): cannot reach http://127.0.0.1:")
    assert "gave up after 3 attempts" in message
    assert info.value.retryable


async def test_many_concurrent_requests_share_one_client(
    llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    llm_server.delay_ms = 200
    provider = make_provider("openai")
    answers = await asyncio.gather(*(provider.invoke(ask(question=f"q{i}")) for i in range(60)))
    assert len(answers) == 60 and len(llm_server.requests) == 60
    # Requests overlapped (how fast that is belongs to benchmarks/micro.py).
    assert most_in_flight([r.received_at for r in llm_server.requests], 0.2) > 1


async def test_a_500_backing_off_leaves_its_turn_to_another_request_and_the_limit_alone(
    llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    llm_server.delay_ms = 50
    llm_server.script(Fault.server_error())  # the first request only
    provider = make_provider("openai", retry_initial_delay_ms=400)
    gate = Gates().for_provider(provider, 1)  # one request at a time
    gated = GatedProvider(provider, gate)
    answers = await asyncio.gather(
        gated.invoke(ask(question="first")), gated.invoke(ask(question="second"))
    )
    assert [a.attempts for a in answers] == [2, 1]
    asked = [r.body["messages"][-1]["content"] for r in llm_server.requests]
    # while the first waited to retry (0.3 s or more), the second had the turn
    assert asked == ["first", "second", "first"]
    assert most_in_flight([r.received_at for r in llm_server.requests], 0.05) == 1
    # a 500 is no sign of load: the target neither slowed down nor paused
    assert (gate.limit, gate.stats.throttled, gate.rate, gate.in_flight) == (1, 0, None, 0)
    assert (gate.peak, gate.stats.requests) == (1, 3)
