"""The per-target gate in-process (``agentv.run.scheduling``): token buckets, AIMD concurrency,
whole-target pauses, pacing, token corrections, ``GatedProvider`` and ``Gates``, with exact values on a fake clock. The few tests on the real clock only wait
for another task to let a request through, under generous hang guards."""

from __future__ import annotations

import asyncio
from collections import deque

import pytest

from agentv.errors import ProviderTimeout
from agentv.messages import ChatMessage
from agentv.providers.base import (
    Provider,
    ProviderRequest,
    ProviderResponse,
    ProviderSettings,
    ProviderWrapper,
    Usage,
)
from agentv.run.scheduling import (
    GatedProvider,
    Gates,
    GateStats,
    TargetGate,
    TokenBucket,
    estimate_tokens,
)
from helpers import Clock, sent

HANG_GUARD = 10.0  # seconds; every wait here is for a step another task takes at once


# --- token buckets ------------------------------------------------------------------------------


def test_a_bucket_starts_full_and_refills_at_its_rate_up_to_a_minutes_worth() -> None:
    clock = Clock()
    bucket = TokenBucket(120, clock)  # two a second
    assert (bucket.rate, bucket.capacity, bucket.level) == (2.0, 120.0, 120.0)
    bucket.take(100)
    assert bucket.level == 20.0
    assert bucket.wait_for(20) == 0.0  # exactly there
    assert bucket.wait_for(21) == 0.5  # one more unit: half a second
    assert bucket.wait_for(30) == 5.0
    assert bucket.wait_for(500) == 50.0  # more than a minute's worth waits for a full bucket
    clock.now += 2.0
    assert (bucket.wait_for(30), bucket.level) == (3.0, 24.0)
    clock.now += 1.0  # refilled from the last refill, not from the start
    assert (bucket.wait_for(30), bucket.level) == (2.0, 26.0)
    clock.now += 1000.0
    assert (bucket.wait_for(120), bucket.level) == (0.0, 120.0)  # never above capacity


def test_a_bucket_can_go_below_zero_and_takes_back_what_was_over_estimated() -> None:
    clock = Clock()
    bucket = TokenBucket(60, clock)
    bucket.take(50)
    clock.now += 5.0
    bucket.take(20)  # refilled first: 10 + 5 - 20
    assert bucket.level == -5.0
    assert bucket.wait_for(1) == 6.0
    bucket.give_back(8)
    assert bucket.level == 3.0
    bucket.give_back(100)
    assert bucket.level == 60.0  # never above capacity


# --- the gate's limit, pauses and pace ----------------------------------------------------------


def test_a_new_gate() -> None:
    gate = TargetGate(4, clock=Clock())
    assert (gate.max_limit, gate.limit, gate.in_flight, gate.peak) == (4, 4, 0, 0)
    assert (gate.paused_until, gate.paused_for, gate.rate) == (0.0, 0.0, None)
    assert gate.stats == GateStats(requests=0, throttled=0, throttled_seconds=0.0, lowest_limit=4)
    assert gate._rpm is None and gate._tpm is None
    assert gate._wait_time(1000.0) == 0.0
    for workers in (0, 1):  # at least one request at once
        one = TargetGate(workers, clock=Clock())
        assert (one.max_limit, one.limit, one.stats.lowest_limit) == (1, 1, 1)


async def turn(gate: TargetGate, tokens: float | None = None) -> None:
    """``gate.acquire``, under the hang guard (with the default tokens when None)."""
    waiting = gate.acquire() if tokens is None else gate.acquire(tokens)
    await asyncio.wait_for(waiting, HANG_GUARD)


async def test_turns_count_requests_and_the_most_at_once() -> None:
    gate = TargetGate(2, clock=Clock())
    await turn(gate)
    await turn(gate)
    assert (gate.in_flight, gate.peak, gate.stats.requests) == (2, 2, 2)
    assert gate._wait_time(0.0) is None  # full: until one ends
    gate.release()
    assert (gate.in_flight, gate._changed.is_set()) == (1, True)
    assert gate._wait_time(0.0) == 0.0
    await asyncio.wait_for(gate.requeue(), HANG_GUARD)  # its turn back, and a new one
    assert (gate.in_flight, gate.peak, gate.stats.requests) == (1, 2, 3)
    gate.release()
    await turn(gate)
    assert (gate.in_flight, gate.peak, gate.stats.requests) == (1, 2, 4)


def test_throttling_halves_the_limit_pauses_the_target_and_starts_pacing() -> None:
    clock = Clock()
    gate = TargetGate(8, clock=clock)
    sent(gate, 3)
    clock.now = 100.5
    sent(gate, 3)
    clock.now = 101.0
    gate.throttled(2.0)
    # the six requests of the last second (100.0 included), less the one refused, at 0.9
    assert (gate.limit, gate.paused_until, gate.paused_for) == (4, 103.0, 2.0)
    assert gate.rate == pytest.approx(0.9 * 5)
    assert gate.stats == GateStats(requests=6, throttled=1, throttled_seconds=2.0, lowest_limit=4)
    assert gate._wait_time(0.0) == 2.0
    clock.now = 102.0
    assert (gate.paused_for, gate._wait_time(0.0)) == (1.0, 1.0)
    gate.throttled(3.0)  # the same news during the pause: it is longer, not cut again
    assert (gate.limit, gate.paused_until) == (4, 105.0)
    assert gate.rate == pytest.approx(0.9 * 4)  # one request fewer was accepted
    assert gate.stats == GateStats(requests=6, throttled=2, throttled_seconds=4.0, lowest_limit=4)
    gate.throttled(0.5)  # a shorter one changes nothing but the count and the pace
    gate.throttled(-1.0)
    assert (gate.limit, gate.paused_until) == (4, 105.0)
    assert gate.rate == pytest.approx(0.9 * 2)
    assert gate.stats == GateStats(requests=6, throttled=4, throttled_seconds=4.0, lowest_limit=4)
    clock.now = 104.75
    gate.throttled(0.5)  # a little past the pause: a quarter of a second more
    assert (gate.limit, gate.paused_until) == (4, 105.25)
    assert gate.stats == GateStats(requests=6, throttled=5, throttled_seconds=4.25, lowest_limit=4)
    assert gate.rate == 1.0  # one request accepted: 0.9 a second, but one at least
    clock.now = 105.5  # after the pause: cut again, the pace by a third at least
    sent(gate, 5)
    gate.throttled(1.0)
    assert (gate.limit, gate.paused_until) == (2, 106.5)
    assert gate.rate == pytest.approx(2 / 3)  # not the 0.9 x 4 of what was accepted
    assert gate.stats.throttled_seconds == 5.25 and gate.stats.lowest_limit == 2
    clock.now = 106.5
    # no longer paused, but paced: the five sent at 105.5 used a second each
    assert (gate.paused_for, gate._wait_time(0.0)) == (0.0, 4.0)
    gate.throttled(0.0)  # no wait: cut, no pause
    assert (gate.limit, gate.paused_until, gate.stats.throttled_seconds) == (1, 106.5, 5.25)
    assert gate.rate == 0.5  # two thirds of two thirds is under the floor
    for step in range(1, 6):
        clock.now = 200.0 + step
        gate.throttled(-3.0)  # a negative wait is no wait
        assert gate.paused_until == clock.now
    assert (gate.limit, gate.rate, gate.stats.lowest_limit) == (1, 0.5, 1)  # the floors
    assert gate.stats.throttled_seconds == 5.25


def test_refusals_during_the_pause_bring_the_pace_down_to_what_was_accepted() -> None:
    clock = Clock()
    gate = TargetGate(50, clock=clock)
    sent(gate, 50)  # a burst; the server takes 20 and refuses 30 at once
    clock.now = 100.005
    gate.throttled(0.05)
    assert (gate.limit, gate.rate) == (25, pytest.approx(0.9 * 49))
    for _ in range(29):
        clock.now += 0.001
        gate.throttled(0.05)
    assert (gate.limit, gate.rate) == (25, pytest.approx(0.9 * 20))
    assert gate.stats.throttled == 30 and gate.stats.lowest_limit == 25
    clock.now = 101.5  # later, every request of the last second refused: the floor
    sent(gate, 3)
    for _ in range(3):
        gate.throttled(0.05)
    assert (gate.limit, gate.rate) == (12, 0.5)


def test_refusals_of_requests_sent_before_the_cut_are_the_same_news_without_a_pause() -> None:
    clock = Clock()
    gate = TargetGate(50, clock=clock)
    sent(gate, 50)  # at 100.0
    clock.now = 100.01
    gate.throttled(0.0, sent_at=100.0)  # the server asks for no wait at all
    assert (gate.limit, gate.paused_until, gate.rate) == (25, 100.01, pytest.approx(0.9 * 49))
    for step in range(1, 30):  # the rest of the burst's refusals, after the (empty) pause
        clock.now = 100.01 + step * 0.01
        gate.throttled(0.0, sent_at=100.0)
    assert (gate.limit, gate.rate) == (25, pytest.approx(0.9 * 20))  # cut once
    assert (gate.stats.throttled, gate.stats.throttled_seconds) == (30, 0.0)
    clock.now = 100.5
    gate.throttled(0.5, sent_at=100.0)  # a late one: the pause runs from now
    assert (gate.limit, gate.paused_until, gate.stats.throttled_seconds) == (25, 101.0, 0.5)
    assert gate.rate == pytest.approx(0.9 * 19)
    clock.now = 101.5
    sent(gate, 10)
    gate.throttled(0.0, sent_at=101.5)  # sent after the cut: new news, a new cut
    assert (gate.limit, gate.stats.lowest_limit) == (12, 12)
    assert gate.rate == pytest.approx(0.9 * 9)  # the ten of the last second, one refused
    gate.throttled(0.0)  # no time given: as if sent now, so a new cut
    assert gate.limit == 6
    gate.throttled(0.0, sent_at=101.5)  # sent at the very time of that cut: after it
    assert gate.limit == 3


def test_without_recent_requests_the_pace_starts_at_one_a_second() -> None:
    clock = Clock()
    gate = TargetGate(3, clock=clock)
    sent(gate, 5)
    clock.now = 101.5
    gate.throttled(1.0)
    assert (gate.limit, gate.rate) == (1, 1.0)


def test_only_the_last_seconds_requests_set_the_pace() -> None:
    clock = Clock()
    gate = TargetGate(3, clock=clock)
    sent(gate)  # 100.0
    clock.now = 100.75
    sent(gate)
    clock.now = 101.0
    sent(gate, 2)  # 100.0 is exactly a second old: kept, and counted
    gate.throttled(1.0)
    assert (list(gate._starts), gate.rate) == ([100.0, 100.75, 101.0, 101.0], 0.9 * 3)
    later = TargetGate(3, clock=clock)
    clock.now = 100.0
    sent(later)
    clock.now = 100.75
    sent(later)
    clock.now = 101.5
    sent(later, 2)  # 100.0 is more than a second old: dropped
    later.throttled(1.0)
    assert (list(later._starts), later.rate) == ([100.75, 101.5, 101.5], 0.9 * 2)
    quiet = TargetGate(3, clock=clock)
    clock.now = 100.0
    sent(quiet)
    clock.now = 100.5
    sent(quiet, 4)
    clock.now = 101.25  # none since 100.5: the one at 100.0 is kept, but not counted
    quiet.throttled(1.0)
    assert (list(quiet._starts), quiet.rate) == ([100.0] + [100.5] * 4, 0.9 * 3)


def test_each_window_of_successes_adds_one_request_at_once_up_to_the_workers() -> None:
    clock = Clock()
    gate = TargetGate(6, clock=clock)
    gate.throttled(0.0)  # no pause, so each one cuts: 6 -> 3 -> 1 -> 1
    gate.throttled(0.0)
    clock.now = 101.0
    gate.throttled(0.0)
    assert gate.limit == 1
    gate._changed.clear()
    gate.succeeded()  # a window of one
    assert (gate.limit, gate._changed.is_set()) == (2, True)
    gate._changed.clear()
    gate.succeeded()
    assert (gate.limit, gate._changed.is_set()) == (2, False)
    gate.succeeded()
    assert gate.limit == 3
    for expected in (3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 5, 6, 6, 6, 6, 6, 6, 6, 6):
        gate.succeeded()
        assert gate.limit == expected
    gate._changed.clear()
    gate.succeeded()
    assert (gate.limit, gate._changed.is_set()) == (6, False)


def test_a_cut_starts_the_windows_and_the_pace_afresh() -> None:
    clock = Clock()
    gate = TargetGate(4, clock=clock)
    for _ in range(5):
        gate.succeeded()  # at the top: counted, but the limit stays
    clock.now = 200.0
    gate.throttled(0.0)
    assert (gate.limit, gate.rate) == (2, 1.0)  # no request in the last second
    gate.succeeded()
    assert (gate.limit, gate.rate) == (2, 2.0)  # half a window; a rate's worth of successes
    gate.succeeded()
    assert (gate.limit, gate.rate) == (3, 2.0)
    gate.succeeded()  # two successes at a pace of two: three a second
    assert (gate.limit, gate.rate) == (3, 3.0)
    gate.succeeded()  # one of the three the pace needs now
    clock.now = 200.5
    sent(gate, 4)
    clock.now = 201.0
    gate.throttled(0.0)
    assert (gate.limit, gate.rate) == (1, 2.0)  # 3 // 2, and 3 x 2/3 (under 0.9 x 3)
    gate.succeeded()  # a new window of one; a new count towards the pace
    assert (gate.limit, gate.rate) == (2, 2.0)
    gate.succeeded()
    assert (gate.limit, gate.rate) == (2, 3.0)


def test_the_pace_grows_by_a_tenth_or_one_after_a_rate_of_successes() -> None:
    clock = Clock()
    gate = TargetGate(4, clock=clock)
    clock.now = 200.0
    gate.throttled(0.0)  # no success in the last second: one a second
    assert gate.rate == 1.0
    rates = []
    for _ in range(30):
        gate.succeeded()
        rates.append(gate.rate)
    # 1 -> 2 after one success, -> 3 after two more, -> 4 after three more, ...
    assert (
        rates
        == [2.0]
        + [2.0, 3.0]
        + [3.0] * 2
        + [4.0]
        + [4.0] * 3
        + [5.0]
        + [5.0] * 4
        + [6.0]
        + [6.0] * 5
        + [7.0]
        + [7.0] * 6
        + [8.0]
        + [8.0] * 2
    )
    gate.rate = 20.0
    gate._paced_successes = 0
    for _ in range(19):
        gate.succeeded()
    assert gate.rate == 20.0
    gate.succeeded()
    assert gate.rate == 22.0  # a tenth, once that is more than one
    gate.rate = 0.5
    gate.succeeded()
    assert gate.rate == 1.5


async def test_a_paced_gate_spaces_its_requests() -> None:
    clock = Clock()
    gate = TargetGate(4, clock=clock)
    gate.throttled(0.0)  # rate 1.0: a request a second
    assert (gate.rate, gate._wait_time(0.0)) == (1.0, 0.0)
    gate.rate = 2.0
    await turn(gate)
    gate.release()
    assert (gate._next_start, gate._wait_time(0.0)) == (100.5, 0.5)
    clock.now = 100.5
    await turn(gate)
    gate.release()
    assert (gate._next_start, gate._wait_time(0.0)) == (101.0, 0.5)
    clock.now = 103.0  # long after: the next may go at once, and the one after half a second on
    assert gate._wait_time(0.0) == 0.0
    await turn(gate)
    assert gate._next_start == 103.5


def test_the_longest_of_the_waits_counts() -> None:
    clock = Clock()
    gate = TargetGate(4, max_rpm=60, max_tpm=600, clock=clock)
    assert gate._rpm is not None and gate._tpm is not None
    assert (gate._rpm.capacity, gate._tpm.capacity) == (60.0, 600.0)
    gate._rpm.take(60)  # the next request in a second
    assert gate._wait_time(0.0) == 1.0
    gate._tpm.take(600)  # 300 tokens in half a minute
    assert gate._wait_time(300.0) == 30.0
    assert gate._wait_time(0.0) == 1.0
    gate.throttled(0.0)
    gate.rate = 0.1
    gate._next_start = 150.0
    assert gate._wait_time(0.0) == 50.0
    clock.now = 101.0
    gate.throttled(2.0)  # a pause counts before all else
    assert gate._wait_time(10_000.0) == 2.0


async def test_a_turn_takes_a_request_and_its_tokens_from_the_buckets() -> None:
    clock = Clock()
    gate = TargetGate(4, max_rpm=60, max_tpm=600, clock=clock)
    await turn(gate, 100.0)
    await turn(gate, 250.0)
    assert gate._rpm is not None and gate._tpm is not None
    assert (gate._rpm.level, gate._tpm.level) == (58.0, 250.0)
    gate.used_tokens(100.0, 130)  # 30 more than estimated
    assert gate._tpm.level == 220.0
    gate.used_tokens(250.0, 50)  # 200 fewer
    assert gate._tpm.level == 420.0
    gate.used_tokens(250.0, None)  # unknown: the estimate stands
    assert gate._tpm.level == 420.0
    gate.used_tokens(10.0, 10)
    assert gate._tpm.level == 420.0
    gate.release()
    await turn(gate)  # no tokens said: none taken
    await asyncio.wait_for(gate.requeue(), HANG_GUARD)
    assert (gate._rpm.level, gate._tpm.level) == (56.0, 420.0)
    await asyncio.wait_for(gate.requeue(20.0), HANG_GUARD)
    assert (gate._rpm.level, gate._tpm.level) == (55.0, 400.0)
    plain = TargetGate(4, clock=clock)
    plain.used_tokens(1.0, 1000)  # no token bucket: nothing to correct
    assert plain._tpm is None


# --- waiting for a turn (the real clock) ----------------------------------------------------------


def test_one_bucket_alone_paces_too() -> None:
    clock = Clock()
    by_requests = TargetGate(4, max_rpm=60, clock=clock)
    assert by_requests._rpm is not None and by_requests._tpm is None
    by_requests._rpm.take(60)
    assert by_requests._wait_time(0.0) == 1.0
    by_tokens = TargetGate(4, max_tpm=60, clock=clock)
    assert by_tokens._rpm is None and by_tokens._tpm is not None
    assert by_tokens._wait_time(90.0) == 0.0  # a full bucket lets one big request go
    by_tokens._tpm.take(60)
    assert by_tokens._wait_time(3.0) == 3.0


async def test_a_paused_gate_lets_the_request_go_once_the_pause_is_over() -> None:
    gate = TargetGate(2)
    gate.throttled(0.05)  # nobody ends a request meanwhile: the wait itself ends
    await turn(gate)
    assert (gate.in_flight, gate.paused_for) == (1, 0.0)


async def test_a_full_gate_lets_the_next_request_go_when_one_ends() -> None:
    gate = TargetGate(1)
    await turn(gate)
    waiting = asyncio.create_task(gate.acquire())
    for _ in range(5):
        await asyncio.sleep(0)
    assert (waiting.done(), gate.in_flight) == (False, 1)
    gate.release()
    await asyncio.wait_for(waiting, HANG_GUARD)
    assert (gate.in_flight, gate.peak, gate.stats.requests) == (1, 1, 2)
    gate.release()


async def test_a_grown_limit_lets_a_waiting_request_go() -> None:
    clock = Clock()
    gate = TargetGate(2, clock=clock)
    gate.throttled(0.0)  # limit 1
    gate.rate = None  # not paced: only the limit holds it
    await turn(gate)
    waiting = asyncio.create_task(gate.acquire())
    for _ in range(5):
        await asyncio.sleep(0)
    assert waiting.done() is False
    gate.succeeded()  # a window of one: limit 2, and the waiting request is told
    await asyncio.wait_for(waiting, HANG_GUARD)
    assert (gate.limit, gate.in_flight, gate.peak) == (2, 2, 2)


async def test_a_request_backing_off_holds_no_turn_until_its_wait_is_over() -> None:
    gate = TargetGate(1)
    await turn(gate)
    backing_off = asyncio.create_task(gate.requeue(after=0.05))
    await asyncio.sleep(0)
    assert gate.in_flight == 0  # its turn is free for others while it waits
    assert gate.try_acquire() is True
    gate.release()
    await asyncio.wait_for(backing_off, HANG_GUARD)
    assert (gate.in_flight, gate.peak, gate.stats.requests) == (1, 1, 3)
    assert (gate.limit, gate.stats.throttled) == (1, 0)  # waiting to retry is no throttling


async def test_a_request_backing_off_queues_behind_the_turn_taken_meanwhile() -> None:
    gate = TargetGate(1)
    await turn(gate)
    backing_off = asyncio.create_task(gate.requeue(after=0.01))
    await asyncio.sleep(0)
    assert gate.try_acquire() is True  # another request uses the turn
    await asyncio.sleep(0.05)
    assert backing_off.done() is False  # its wait is over, but the turn is taken
    gate.release()
    await asyncio.wait_for(backing_off, HANG_GUARD)
    assert (gate.in_flight, gate.peak) == (1, 1)


@pytest.mark.parametrize("while_", ["backing off", "waiting for a turn"])
async def test_a_request_cancelled_during_a_requeue_still_holds_the_turn_its_caller_ends(
    while_: str,
) -> None:
    gate = TargetGate(3)
    await turn(gate)  # another request's turn
    await turn(gate)  # the one that requeues
    if while_ == "waiting for a turn":
        gate.throttled(10.0)  # paused: the requeue waits in line for its new turn
    task = asyncio.create_task(gate.requeue(after=10.0 if while_ == "backing off" else 0.0))
    for _ in range(3):
        await asyncio.sleep(0)
    assert (task.done(), gate.in_flight, len(gate._line)) == (
        False,
        1,
        0 if while_ == "backing off" else 1,
    )
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (gate.in_flight, len(gate._line), gate.stats.requests) == (2, 0, 2)
    gate.release()  # what GatedProvider does for its caller
    assert gate.in_flight == 1


async def test_a_requeue_without_a_wait_takes_a_free_turn_back_at_once() -> None:
    gate = TargetGate(1)
    await turn(gate)
    task = asyncio.create_task(gate.requeue())
    await asyncio.sleep(0)  # one step of the task: no sleep, no waiting in line
    assert task.done()
    assert (gate.in_flight, gate.stats.requests) == (1, 2)


async def test_a_request_arriving_during_a_pause_waits_even_for_exactly_a_second() -> None:
    clock = Clock()
    gate = TargetGate(2, clock=clock)
    gate.throttled(1.0)
    assert gate._wait_time(0.0) == 1.0
    waiting = asyncio.create_task(gate.acquire())
    for _ in range(3):
        await asyncio.sleep(0)
    assert (waiting.done(), gate.in_flight, len(gate._line)) == (False, 0, 1)
    clock.now += 1.0
    gate._changed.set()  # the first in line looks again: the pause is over
    await asyncio.wait_for(waiting, HANG_GUARD)
    assert (gate.in_flight, len(gate._line)) == (1, 0)


async def test_a_request_arriving_while_others_wait_goes_behind_them() -> None:
    gate = TargetGate(1)
    await turn(gate)
    entered: list[str] = []

    async def wait(name: str) -> None:
        await gate.acquire()
        entered.append(name)

    async def arrive_on(go: asyncio.Event) -> None:
        await go.wait()
        await wait("later")

    first = asyncio.create_task(wait("first"))
    go = asyncio.Event()
    later = asyncio.create_task(arrive_on(go))
    for _ in range(3):
        await asyncio.sleep(0)
    go.set()  # the later request arrives before the first in line has looked again...
    gate.release()  # ...at a free turn
    for _ in range(5):
        await asyncio.sleep(0)
    assert (entered, gate.in_flight, len(gate._line)) == (["first"], 1, 1)
    gate.release()
    await asyncio.wait_for(asyncio.gather(first, later), HANG_GUARD)
    assert entered == ["first", "later"]


async def test_waiting_requests_get_their_turns_in_order() -> None:
    gate = TargetGate(1)
    await turn(gate)
    entered: list[int] = []

    async def wait(i: int) -> None:
        await gate.acquire()
        entered.append(i)

    tasks = [asyncio.create_task(wait(i)) for i in range(4)]
    for _ in range(3):
        await asyncio.sleep(0)
    assert (entered, len(gate._line)) == ([], 4)
    tasks[1].cancel()  # one in the middle of the line gives up
    for _ in range(3):
        await asyncio.sleep(0)
    assert len(gate._line) == 3
    for expected in ([0], [0, 2], [0, 2, 3]):
        gate.release()
        for _ in range(5):
            await asyncio.sleep(0)
        assert entered == expected
        assert gate.in_flight == 1
    assert gate._line == deque()
    tasks[0].cancel()  # done already: nothing changes
    await asyncio.gather(*tasks, return_exceptions=True)


async def test_the_first_in_line_cancelled_passes_its_watch_to_the_next() -> None:
    clock = Clock()
    gate = TargetGate(1, clock=clock)
    await turn(gate)
    first = asyncio.create_task(gate.acquire())
    second = asyncio.create_task(gate.acquire())
    for _ in range(3):
        await asyncio.sleep(0)
    first.cancel()
    for _ in range(3):
        await asyncio.sleep(0)
    assert (first.cancelled(), len(gate._line)) == (True, 1)
    gate.release()
    await asyncio.wait_for(second, HANG_GUARD)
    assert (gate.in_flight, gate.stats.requests, len(gate._line)) == (1, 2, 0)


async def test_a_freed_turn_after_a_pause_goes_down_the_line() -> None:
    gate = TargetGate(3)
    gate.throttled(0.05)  # limit 1, paused, then paced at one a second
    gate.rate = None
    gate.limit = 3
    waiting = [asyncio.create_task(gate.acquire()) for _ in range(3)]
    await asyncio.wait_for(asyncio.gather(*waiting), HANG_GUARD)
    assert (gate.in_flight, len(gate._line)) == (3, 0)  # each woke the next


# --- through the gate -----------------------------------------------------------------------------


def request(*contents: str, question: str = "") -> ProviderRequest:
    return ProviderRequest(
        question=question, messages=[ChatMessage("user", text) for text in contents]
    )


def test_tokens_are_estimated_at_four_characters_each() -> None:
    assert estimate_tokens(request("abcdefg", "123456789")) == 5  # 16 // 4 + 1
    assert estimate_tokens(request("abc")) == 1  # 3 // 4 + 1
    assert estimate_tokens(request(question="0123456789")) == 3  # no messages: the question
    assert estimate_tokens(request("", question="01234567")) == 3
    assert estimate_tokens(request()) == 1


class RateSettings(ProviderSettings):
    max_rpm: float | None = None
    max_tpm: float | None = None


class FakeProvider(Provider):
    kind = "fake"

    def __init__(
        self,
        gate: TargetGate | None = None,
        usage: Usage | None = None,
        *,
        name: str = "fake",
        settings: ProviderSettings | None = None,
        hang: float = 0.0,
    ) -> None:
        super().__init__(name, settings or RateSettings())
        self.seen: list[tuple[str, int]] = []
        self._watch = gate
        self._usage = usage
        self._hang = hang

    async def invoke(self, req: ProviderRequest) -> ProviderResponse:
        in_flight = self._watch.in_flight if self._watch is not None else -1
        self.seen.append((req.question, in_flight))
        if req.question == "boom":
            raise RuntimeError("boom")
        if self._hang:
            await asyncio.sleep(self._hang)
        return ProviderResponse(text=f"answer to {req.question}", usage=self._usage)


class FakeAgent(FakeProvider):
    is_agent = True


async def test_a_gated_provider_sends_in_a_turn_and_corrects_the_tokens() -> None:
    clock = Clock()
    gate = TargetGate(2, max_tpm=600, clock=clock)
    provider = FakeProvider(gate, usage=Usage(input_tokens=40, output_tokens=7))
    req = request("x" * 40, question="q")  # estimated 11
    response = await GatedProvider(provider, gate).invoke(req)
    assert response == ProviderResponse(text="answer to q", usage=Usage(40, 7))
    assert provider.seen == [("q", 1)]  # called inside the turn
    assert gate._tpm is not None and gate._tpm.level == 560.0  # 11 taken, then 29 more
    assert (gate.in_flight, gate.stats.requests) == (0, 1)
    no_usage = FakeProvider(gate)
    await GatedProvider(no_usage, gate).invoke(req)
    assert gate._tpm.level == 549.0  # the estimate stands


async def test_a_gated_provider_ends_the_turn_of_a_failed_call() -> None:
    gate = TargetGate(2, clock=Clock())  # room for two: a second turn taken would show
    provider = FakeProvider(gate)
    with pytest.raises(RuntimeError, match=r"^boom$"):
        await GatedProvider(provider, gate).invoke(request(question="boom"))
    assert (gate.in_flight, gate.stats.requests, provider.seen) == (0, 1, [("boom", 1)])


async def test_a_gated_provider_is_a_provider_with_invoke_through_the_gate() -> None:
    gate = TargetGate(2, max_tpm=60, clock=Clock())
    provider = FakeProvider(gate, usage=Usage(input_tokens=4))
    gated = GatedProvider(provider, gate)
    assert isinstance(gated, Provider) and isinstance(gated, ProviderWrapper)
    assert (gated.name, gated.settings, gated.kind, gated.id) == (
        "fake",
        provider.settings,
        "fake",
        "fake:fake",
    )
    assert (gated.is_agent, GatedProvider(FakeAgent(), gate).is_agent) == (False, True)
    assert gated.innermost is provider
    response = await gated.invoke(request("abcd", question="hi"))
    assert response == ProviderResponse(text="answer to hi", usage=Usage(4, None))
    assert provider.seen == [("hi", 1)]
    assert (gate.in_flight, gate.stats.requests) == (0, 1)
    assert gate._tpm is not None and gate._tpm.level == 56.0  # 2 estimated, 4 used
    # what the run sets on a provider reaches the wrapped one, which uses it
    gated.throttle = gate
    assert provider.throttle is gate
    with pytest.raises(AttributeError):
        _ = gated.missing  # type: ignore[attr-defined]


async def test_a_gated_provider_bounds_a_request_with_a_time_limit_from_its_turn() -> None:
    gate = TargetGate(1)
    slow = GatedProvider(FakeProvider(gate, hang=5.0), gate)
    req = request(question="q")
    req.timeout = 0.05
    with pytest.raises(ProviderTimeout, match=r"^target 'fake' did not answer within 0.05s$"):
        await asyncio.wait_for(slow.invoke(req), HANG_GUARD)
    assert gate.in_flight == 0
    # an agent stops itself at its limit: the gate's is a backstop, a grace later
    agent = GatedProvider(FakeAgent(gate, hang=0.2), gate)
    answer = await asyncio.wait_for(agent.invoke(req), HANG_GUARD)
    assert answer.text == "answer to q"


async def test_a_gated_provider_waits_for_a_busy_gate_with_the_requests_tokens() -> None:
    clock = Clock()
    gate = TargetGate(1, max_tpm=600, clock=clock)
    assert gate.try_acquire(100)  # someone else's turn
    provider = FakeProvider(gate)
    req = request("x" * 40, question="q")  # estimated 11
    task = asyncio.create_task(GatedProvider(provider, gate).invoke(req))
    await asyncio.sleep(0)
    assert (provider.seen, gate.stats.requests) == ([], 1)  # waiting
    gate.release()
    response = await asyncio.wait_for(task, HANG_GUARD)
    assert response.text == "answer to q"
    assert (provider.seen, gate.in_flight, gate.stats.requests) == ([("q", 1)], 0, 2)
    assert gate._tpm is not None and gate._tpm.level == 489.0  # 100 + its 11 estimated


def test_try_acquire_takes_a_free_turn_at_once_and_leaves_a_busy_gate_alone() -> None:
    clock = Clock()
    gate = TargetGate(1, max_tpm=60, clock=clock)
    assert gate.try_acquire(60) is True
    assert (gate.in_flight, gate.peak, gate.stats.requests) == (1, 1, 1)
    assert gate._tpm is not None and gate._tpm.level == 0.0
    assert gate.try_acquire() is False  # full: nothing taken
    assert (gate.in_flight, gate.stats.requests, gate._tpm.level) == (1, 1, 0.0)
    gate.release()
    assert gate.try_acquire(1) is False  # a slot, but no token left
    assert (gate.in_flight, gate.stats.requests) == (0, 1)
    assert gate.try_acquire() is True  # no tokens by default: the empty bucket does not matter
    assert (gate.in_flight, gate.stats.requests, gate._tpm.level) == (1, 2, 0.0)


def test_gates_one_per_provider_made_on_first_use() -> None:
    gates = Gates()
    assert gates.by_target() == {}
    first = FakeProvider()
    second = FakeProvider(name="limited", settings=RateSettings(max_rpm=30, max_tpm=1200))
    third = FakeProvider(name="bare", settings=ProviderSettings())  # no rate fields at all
    gate = gates.for_provider(first, 5)
    assert isinstance(gate, TargetGate)
    assert (gate.max_limit, gate._rpm, gate._tpm, first.throttle) == (5, None, None, gate)
    assert gates.for_provider(first, 9) is gate  # made once: the first limit holds
    assert gate.max_limit == 5
    limited = gates.for_provider(second, 2)
    assert isinstance(limited, TargetGate)
    assert limited._rpm is not None and limited._tpm is not None
    assert (limited.max_limit, limited._rpm.capacity, limited._tpm.capacity) == (2, 30.0, 1200.0)
    assert second.throttle is limited
    bare = gates.for_provider(third, 1)
    assert isinstance(bare, TargetGate)
    assert (bare._rpm, bare._tpm, third.throttle) == (None, None, bare)
    assert gates.by_target() == {"fake": gate, "limited": limited, "bare": bare}
