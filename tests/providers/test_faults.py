"""Faults of a real server, on the loopback fake, for the four LM APIs (issue 16): a
target's ``timeout_seconds`` bounds each request (a hang before any byte, after the
headers, half-way through the body), resets are retried, empty answers are errors that
are retried once, and ``retry_max_delay_ms`` caps ``Retry-After``."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from agentv.errors import ProviderError, ProviderHTTPError, ProviderTimeout
from support.fakes import FakeLLMServer, Fault
from support.providers import LM_KINDS, MakeProvider, ask

REQUEST = ask(question="Hello?")
#: what the orchestrator passes as the case's limit (--agent-timeout's default)
RUN_LIMIT = 120.0
#: a hang guard (seconds), far under the longer limit of each test: the shorter one fired
HANG_GUARD = 30.0


@pytest.mark.parametrize("fault", ["hanging", "hang_after_headers", "stall_mid_body"])
@pytest.mark.parametrize("kind", LM_KINDS)
async def test_timeout_seconds_bounds_a_request_even_under_the_runs_longer_limit(
    kind: str, fault: str, llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    llm_server.script(getattr(Fault, fault)())
    provider = make_provider(kind, timeout_seconds=1, max_retries=0)
    started = time.monotonic()
    with pytest.raises(ProviderTimeout) as info:
        await provider.invoke(ask(question="Hello?", timeout=RUN_LIMIT))
    elapsed = time.monotonic() - started
    assert elapsed < HANG_GUARD, f"{kind} waited {elapsed:.1f} s on a {fault} server"
    assert "no answer within 1 s" in str(info.value)
    assert len(llm_server.requests) == 1


@pytest.mark.parametrize("kind", LM_KINDS)
async def test_the_runs_limit_wins_when_it_is_the_shorter(
    kind: str, llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    llm_server.script(Fault.stall_mid_body())
    provider = make_provider(kind, timeout_seconds=60, max_retries=0)
    started = time.monotonic()
    with pytest.raises(ProviderTimeout, match=r"no answer within 0\.5 s"):
        await provider.invoke(ask(question="Hello?", timeout=0.5))
    assert time.monotonic() - started < HANG_GUARD  # not the target's 60 s


@pytest.mark.parametrize("kind", LM_KINDS)
async def test_a_reset_connection_is_retried_then_answered(
    kind: str, llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    llm_server.script(Fault.reset())
    response = await make_provider(kind, timeout_seconds=5).invoke(REQUEST)
    assert response.text == "Hello from the fake LLM."
    assert response.attempts == 2
    assert len(llm_server.requests) == 2


@pytest.mark.parametrize("kind", LM_KINDS)
async def test_an_empty_answer_is_retried_once_then_an_error(
    kind: str, llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    llm_server.script(*[Fault.empty_answer()] * 5)
    provider = make_provider(kind, name="t", max_retries=3)
    with pytest.raises(ProviderError) as info:
        await provider.invoke(REQUEST)
    assert len(llm_server.requests) == 2  # one retry, however many max_retries allows
    assert str(info.value) == (
        f"target 't' ({kind}): the API returned an empty answer (gave up after 2 attempts)"
    )
    assert info.value.attempts == 2
    assert not isinstance(info.value, ProviderTimeout)


@pytest.mark.parametrize("kind", LM_KINDS)
async def test_an_empty_answer_then_a_real_one_succeeds(
    kind: str, llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    llm_server.script(Fault.empty_answer())
    response = await make_provider(kind).invoke(REQUEST)
    assert response.text == "Hello from the fake LLM."
    assert response.attempts == 2


async def test_an_empty_answer_with_no_retries_left_fails_at_once(
    llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    llm_server.script(Fault.empty_answer(), Fault.empty_answer())
    with pytest.raises(ProviderError, match=r"^target 't' \(openai\): the API returned an empty"):
        await make_provider("openai", max_retries=0).invoke(REQUEST)
    assert len(llm_server.requests) == 1


@pytest.mark.parametrize("header", ["retry_after", "retry_after_ms"])
@pytest.mark.parametrize("kind", LM_KINDS)
async def test_a_retry_after_beyond_retry_max_delay_fails_at_once_as_rate_limited(
    kind: str, header: str, llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    asked = {"retry_after": 3600} if header == "retry_after" else {"retry_after_ms": 3_600_000}
    llm_server.script(*[Fault(429, "Rate limit reached. Please retry later.", **asked)] * 3)
    provider = make_provider(kind, retry_max_delay_ms=2000, max_retries=3)
    started = time.monotonic()
    with pytest.raises(ProviderHTTPError) as info:
        await provider.invoke(ask(question="Hello?", timeout=RUN_LIMIT))
    assert time.monotonic() - started < HANG_GUARD  # not the hour asked for
    assert len(llm_server.requests) == 1
    assert info.value.status == 429
    assert not isinstance(info.value, ProviderTimeout)
    message = str(info.value)
    assert message.startswith(f"target 't' ({kind}): HTTP 429: Rate limit reached.")
    assert message.endswith(
        "(rate limited: the server asked to wait 3600 s, more than retry_max_delay_ms allows (2 s))"
    )


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
async def test_a_retry_after_within_retry_max_delay_is_waited(
    kind: str, llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    llm_server.script(Fault(429, "slow down", retry_after_ms=300))
    provider = make_provider(kind, retry_max_delay_ms=1000)
    response = await provider.invoke(REQUEST)
    assert response.text == "Hello from the fake LLM."
    first, second = llm_server.requests
    assert second.received_at - first.received_at >= 0.28


async def test_a_rate_limit_wait_beyond_the_cases_limit_fails_as_rate_limited(
    llm_server: FakeLLMServer, make_provider: MakeProvider
) -> None:
    # the wait asked for is within retry_max_delay_ms but longer than the case's minute
    llm_server.script(*[Fault(429, "slow down", retry_after=600)] * 2)
    provider = make_provider("openai", retry_max_delay_ms=3_600_000)
    started = time.monotonic()
    with pytest.raises(ProviderHTTPError) as info:
        await provider.invoke(ask(question="Hello?", timeout=60))
    assert time.monotonic() - started < HANG_GUARD  # at once: not the case's minute
    assert len(llm_server.requests) == 1
    assert info.value.status == 429
    assert str(info.value).endswith(
        "(rate limited: the server asked to wait 600 s, more than is left of the request's "
        "time limit)"
    )


@pytest.fixture
def timers(monkeypatch: pytest.MonkeyPatch) -> list[float | None]:
    """The delay of each ``asyncio.timeout`` made from now on, in order."""
    made: list[float | None] = []
    timeout = asyncio.timeout

    def counted(delay: float | None) -> asyncio.Timeout:
        made.append(delay)
        return timeout(delay)

    monkeypatch.setattr(asyncio, "timeout", counted)
    return made


@pytest.mark.parametrize(
    ("timeout_seconds", "run_limit", "said", "count"),
    [
        (1, RUN_LIMIT, "no answer within 1 s", 2),  # the target's own limit is timed too
        (60, 0.5, "did not answer within 0.5s", 1),  # the run's limit alone is timed
    ],
)
async def test_through_the_runs_gate_the_shorter_limit_fires_and_is_the_only_one_timed(
    timeout_seconds: float,
    run_limit: float,
    said: str,
    count: int,
    llm_server: FakeLLMServer,
    make_provider: MakeProvider,
    timers: list[float | None],
) -> None:
    from agentv.run.scheduling import GatedProvider, TargetGate

    llm_server.script(Fault.stall_mid_body())
    provider = make_provider("openai", timeout_seconds=timeout_seconds, max_retries=0)
    gated = GatedProvider(provider, TargetGate(4))
    started = time.monotonic()
    with pytest.raises(ProviderTimeout) as info:
        await gated.invoke(ask(question="Hello?", timeout=run_limit))
    assert said in str(info.value)
    assert time.monotonic() - started < HANG_GUARD
    assert len(timers) == count, timers


async def test_a_task_started_within_a_gated_call_times_its_own_requests(
    llm_server: FakeLLMServer, make_provider: MakeProvider, timers: list[float | None]
) -> None:
    # the gate's limit is its own task's: a task started meanwhile (a user's code calling a
    # model on its own) inherits the context, not the gate's timer
    from agentv.providers.base import ProviderResponse, ProviderWrapper
    from agentv.run.scheduling import GatedProvider, TargetGate

    spawned: list[asyncio.Task[Any]] = []

    class Spawns(ProviderWrapper):
        async def invoke(self, request: Any) -> ProviderResponse:
            spawned.append(asyncio.create_task(self.wrapped.invoke(REQUEST)))
            return ProviderResponse(text="started")

    llm_server.script(Fault.stall_mid_body())
    inner = make_provider("openai", timeout_seconds=1, max_retries=0)
    await GatedProvider(Spawns(inner), TargetGate(4)).invoke(ask(question="Hi", timeout=0.3))
    with pytest.raises(ProviderTimeout, match="no answer within 1 s"):
        await spawned[0]
    assert timers == [0.3, 1]  # the gate's, then the spawned request's own
