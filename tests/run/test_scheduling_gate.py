"""The per-target gate in-process (``agentv.run.scheduling``): token buckets, AIMD concurrency,
whole-target pauses, pacing, token corrections, ``GatedProvider`` and ``Gates``, with exact values on a fake clock. The few tests on the real clock only wait
for another task to let a request through, under generous hang guards."""

from __future__ import annotations

import asyncio
import math
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
    ESTIMATE_S,
    FEW_CUT,
    FIRST_RATE,
    HOLD_S,
    HOLD_SHARE,
    LATE_S,
    LATENCY_S,
    LIMIT_GAIN,
    LIMIT_SPARE,
    LONG_S,
    LONG_SHARE,
    MAX_RATE,
    MIN_RATE,
    NOISE_REQUESTS,
    OPENING_DOUBLING_S,
    OPENING_FASTEST_S,
    OPENING_LAG_S,
    OPENING_LIMIT,
    OPENING_S,
    OPENING_WAIT_S,
    PACE_SHARE,
    PROBE_GROWTH,
    RECHECK_S,
    RECOVER_HALF_S,
    RESTART_SHARE,
    SHORT_HOLD_S,
    SHORTEST_S,
    STARTUP_CUT,
    STARTUP_DOUBLING_S,
    GatedProvider,
    Gates,
    GateStats,
    TargetGate,
    TokenBucket,
    estimate_tokens,
)
from support.clock import Clock

HANG_GUARD = 30.0  # seconds; every wait here is for a step another task takes at once


def sent(gate: TargetGate, count: int = 1) -> None:
    """``count`` requests through ``gate`` at its clock's time, whatever its pace says
    (each enters and ends at once)."""
    for _ in range(count):
        gate._enter(0.0)
        gate.release()


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


async def test_a_freed_turn_goes_to_the_first_in_line_not_to_a_later_request() -> None:
    gate = TargetGate(1, clock=Clock())
    await turn(gate)
    waiter = asyncio.ensure_future(gate.acquire())
    await asyncio.sleep(0)  # it stands in line
    assert len(gate._line) == 1
    gate.release()  # the turn is free; its waiter is not awake yet
    # a request that comes now (a conversation's next turn, sent the moment its answer
    # came) does not take it: it would do so at every turn and starve the line
    assert not gate.try_acquire()
    await asyncio.wait_for(waiter, HANG_GUARD)
    assert (gate.in_flight, gate.stats.requests, len(gate._line)) == (1, 2, 0)
    gate.release()
    assert gate.try_acquire()  # nobody in line: taken at once


# --- the opening ---------------------------------------------------------------------------------


def test_a_gate_of_many_workers_opens_ten_at_a_time_and_one_more_with_each_quick_answer() -> None:
    clock = Clock()
    gate = TargetGate(50, clock=clock)
    assert gate._opening and TargetGate(OPENING_LIMIT, clock=clock)._opening is False
    assert [gate.try_acquire() for _ in range(11)] == [True] * 10 + [False]
    # no answer yet: the 11th once the opening's clock says so (or at the next answer)
    assert gate._wait_time(0.0) == pytest.approx(OPENING_WAIT_S + math.log2(1.1) * 0.025)
    clock.now += 0.001
    gate.succeeded(sent_at=100.0)  # the first answer: its round trip is the shortest
    assert (gate._answers, gate._min_latency, gate._first_answer_at) == pytest.approx(
        (1, 0.001, 100.001)
    )
    gate.release()
    # one more at once for the answer, but not before the opening has had the time to
    # double that far (a doubling every OPENING_FASTEST_S at most), however quick it was
    assert [gate.try_acquire() for _ in range(2)] == [True, False]
    eleventh = OPENING_FASTEST_S * math.log2(11 / 10)
    assert gate._wait_time(0.0) == pytest.approx(eleventh - 0.001)
    clock.now = 100.0 + eleventh
    assert [gate.try_acquire() for _ in range(2)] == [True, False]  # 11 at once
    assert gate._wait_time(0.0) == pytest.approx(OPENING_S - eleventh)  # or the next answer
    clock.now += 0.011
    gate.succeeded(sent_at=clock.now - 0.011)  # 11 ms: it waited in the client: no more
    gate.succeeded(sent_at=clock.now - 0.002)  # 2 ms, twice the shortest: one more
    assert gate._answers == 2
    clock.now = 100.0 + OPENING_S  # the opening's end: every turn
    assert (gate._wait_time(0.0), gate._opening) == (0.0, False)


def test_without_answers_the_opening_doubles_every_few_milliseconds() -> None:
    clock = Clock()
    gate = TargetGate(50, clock=clock)
    assert all(gate.try_acquire() for _ in range(10))
    # no answer yet: a slow server; after OPENING_WAIT_S, twice as many every doubling
    growth = math.log2(11 / 10) * OPENING_DOUBLING_S  # the 11th: a tenth more
    assert gate._wait_time(0.0) == pytest.approx(OPENING_WAIT_S + growth)
    clock.now = 100.0 + OPENING_WAIT_S + 0.999 * OPENING_DOUBLING_S  # nearly 20 at once
    assert sum(gate.try_acquire() for _ in range(15)) == 10
    expected = (math.log2(21 / 10) - 0.999) * OPENING_DOUBLING_S
    assert gate._wait_time(0.0) == pytest.approx(expected)
    clock.now = 100.0 + OPENING_WAIT_S + 3 * OPENING_DOUBLING_S  # 80: all 50 are there
    assert (gate._wait_time(0.0), gate._opening) == (0.0, False)


def test_a_waiter_woken_late_stops_the_openings_clock() -> None:
    clock = Clock()
    gate = TargetGate(50, clock=clock)
    assert all(gate.try_acquire() for _ in range(10))
    clock.now = 100.1
    gate._woke(100.0 + OPENING_WAIT_S)  # 75 ms late: the client was busy
    assert gate._first_start == pytest.approx(100.075)
    gate._woke(100.1 - OPENING_LAG_S)  # just in time: nothing changes
    assert gate._first_start == pytest.approx(100.075)
    assert gate._wait_time(0.0) == pytest.approx(OPENING_WAIT_S - 0.025)
    gate._opening = False
    gate._woke(99.0)  # once open, lateness says nothing
    assert gate._first_start == pytest.approx(100.075)


# --- a round of refusals, and the pace ---------------------------------------------------------


def test_the_first_round_paces_at_what_the_server_accepted_and_pauses_the_target() -> None:
    clock = Clock()
    gate = TargetGate(50, clock=clock)
    sent(gate, 50)  # an opening of 50 at once (a gate of old); the server takes 20
    clock.now = 100.005
    gate.throttled(0.05, sent_at=100.0)
    assert (gate._paced, gate._top, gate._opening) == (True, None, False)
    assert gate._base == 49.0  # the 50 sent in the last second, less the one refused
    assert gate.rate == pytest.approx(PACE_SHARE * 49)
    assert (gate.paused_until, gate._epoch) == (pytest.approx(100.055),) * 2
    for _ in range(29):  # the same round: its estimate counts each, one cut
        clock.now += 0.001
        gate.throttled(0.05, sent_at=100.0)
    assert gate._base == 20.0 and gate.rate == pytest.approx(PACE_SHARE * 20)
    assert gate.paused_until == pytest.approx(100.084)  # each one's wait, from its arrival
    assert gate.stats == GateStats(
        requests=50, throttled=30, throttled_seconds=pytest.approx(0.079), lowest_limit=50
    )
    assert gate.limit == 50  # no answer seen: nothing says how many the pace needs at once


def test_after_the_first_round_the_pace_doubles_until_the_next() -> None:
    clock = Clock()
    gate = TargetGate(5, clock=clock)
    gate.throttled(0.5)  # nothing sent in the last second: one a second at least
    assert (gate._base, gate.rate) == (FIRST_RATE, PACE_SHARE * FIRST_RATE)
    clock.now = 100.5 + STARTUP_DOUBLING_S  # one doubling after the pause
    assert gate._pace_at(clock.now) == pytest.approx(2 * PACE_SHARE)
    clock.now = 100.5 + 10 * STARTUP_DOUBLING_S
    assert gate._pace_at(clock.now) == pytest.approx(1024 * PACE_SHARE)
    clock.now = 100.5 + 100
    assert gate._pace_at(clock.now) == MAX_RATE  # capped, and never an overflow


def _paced(top: float, *, at: float = 100.0, hold: float = HOLD_S) -> tuple[Clock, TargetGate]:
    """A gate holding at ``top`` since ``at`` (a later round's pace), whose answers take 0.1 s."""
    clock = Clock()
    clock.now = at
    gate = TargetGate(50, clock=clock)
    gate._opening = False
    gate._paced = True
    gate._base = gate._top = top
    gate._epoch, gate._opened, gate._hold_s = at, at - 10, hold
    gate._min_latency, gate._min_latency_at = 0.1, at
    return clock, gate


def test_a_later_rounds_pace_heads_for_the_top_holds_then_probes() -> None:
    _, gate = _paced(20.0)
    assert gate._pace_at(100.0) == pytest.approx(RESTART_SHARE * 20)
    held = HOLD_SHARE * 20
    gap = held - RESTART_SHARE * 20
    assert gate._pace_at(100.0 + RECOVER_HALF_S) == pytest.approx(held - gap / 2)
    assert gate._pace_at(100.0 + 3 * RECOVER_HALF_S) == pytest.approx(held - gap / 8)
    assert gate._pace_at(100.0 + HOLD_S) == pytest.approx(held)
    assert gate._pace_at(100.0 + HOLD_S + 2) == pytest.approx(held * PROBE_GROWTH**2)
    assert gate._pace_at(99.0) == gate._pace_at(100.0)  # before the pause ends: the restart
    gate._base = gate._top = 0.001
    assert gate._pace_at(100.0) == MIN_RATE


def test_a_refusal_met_probing_makes_its_pace_the_top() -> None:
    clock, gate = _paced(20.0)
    clock.now = 100.0 + HOLD_S + 1  # probing: 10 % over the hold
    sent(gate, 21)
    probe = gate._pace_at(clock.now)
    gate.throttled(0.01)
    assert (gate._probing, gate._holding, gate._top) == (True, False, pytest.approx(probe))
    assert gate._epoch == clock.now + 0.01 and gate._hold_s == HOLD_S
    # the restart: that pace too (one refusal: the edge; the server refused none besides)
    assert gate._base == pytest.approx(probe)
    assert gate.limit == math.ceil(LIMIT_GAIN * gate.rate * 0.1) + LIMIT_SPARE


def test_a_refusal_on_the_way_to_the_top_lowers_it_to_what_was_accepted() -> None:
    clock, gate = _paced(30.0)  # a top too high: refused on the way to it
    clock.now = 100.5
    gate._recent.extend([100.0] * 15)
    sent(gate, 25)  # the last second: 25 sent
    for t in (100.1, 100.2, 100.3):  # three refused among them (earlier rounds)
        gate._refusals.append(t)
    pace = gate._pace_at(clock.now)
    gate.throttled(0.01)
    # 25 sent, four refused: 21 accepted; the refusals past the edge leave 1 - 3/25 of the
    # pace; the larger of the two, but no more than the pace
    kept = 1 - 3 / 25
    assert gate._top == gate._base == pytest.approx(max(21.0, kept * pace))
    assert gate._hold_s == SHORT_HOLD_S  # probing again sooner: the top may be too low now
    assert gate._epoch == pytest.approx(100.51)


def test_a_refusal_while_holding_lowers_the_top_without_starting_over() -> None:
    clock, gate = _paced(20.0)
    clock.now = 102.0  # holding
    sent(gate, 30)
    for t in (101.2, 101.3, 101.4, 101.5):  # more than a few of the last 40: a round
        gate._refusals.append(t)
    gate._recent.extend([101.1] * 40)
    pace = gate._pace_at(102.0)  # near the hold: the gap to it halved ten times
    gate.throttled(0.01)
    assert (gate._holding, gate._probing) == (True, False)
    assert gate._top == pytest.approx(pace)  # the pace that met it (less than was accepted)
    assert gate._epoch == 100.0  # the probe still comes HOLD_S after the last round


def test_a_lone_refusal_while_holding_only_pauses() -> None:
    clock, gate = _paced(20.0)
    clock.now = 102.0
    gate._recent.extend([101.0] * NOISE_REQUESTS)  # the last 40 requests...
    sent(gate, 20)
    gate.throttled(0.02)  # ...and this the one refusal among them
    assert (gate._noise, gate._top, gate._epoch) == (True, 20.0, 100.0)
    assert gate.paused_until == pytest.approx(102.02) and gate.stats.throttled == 1
    clock.now = 102.01
    gate.throttled(0.02, sent_at=101.99)  # a second, of the same round: a round after all
    # a round after all: the top is what the server accepted (20 sent, 2 refused)
    assert gate._noise is False and gate._top == 18.0
    few = _paced(20.0)[1]
    few._clock.now = 102.0  # type: ignore[attr-defined]
    few._recent.extend([101.0] * (NOISE_REQUESTS - 1))  # too few requests to call it alone
    pace = few._pace_at(102.0)
    few.throttled(0.02)
    top = (1 - FEW_CUT) * min(20.0, pace / HOLD_SHARE)
    assert few._noise is True and few._top == pytest.approx(top)


def test_a_few_refusals_while_holding_take_the_top_a_little_lower() -> None:
    clock, gate = _paced(20.0)
    clock.now = 102.0  # holding
    sent(gate, 30)
    gate._recent.extend([101.1] * NOISE_REQUESTS)
    for t in (101.2, 101.5):  # two earlier ones of the last 40: with this one, a few
        gate._refusals.append(t)
    pace = gate._pace_at(102.0)
    gate.throttled(0.01)
    assert gate._noise and gate.paused_until == pytest.approx(102.01)
    # a step under the top the pace was heading for; the pace on its way, the probe due
    # HOLD_S after the last round as before
    assert gate._top == pytest.approx((1 - FEW_CUT) * min(20.0, pace / HOLD_SHARE))
    assert gate._epoch == 100.0 and gate._hold_s == HOLD_S
    assert gate.rate == pytest.approx(gate._pace_at(102.0)) and gate.rate < pace
    clock.now = 102.005
    gate.throttled(0.01, sent_at=101.99)  # another of the same round: a round after all
    assert gate._noise is False and gate._top < (1 - FEW_CUT) * 20.0


async def test_on_the_real_clock_a_paced_turn_is_never_taken_before_its_time() -> None:
    gate = TargetGate(5)  # the real clock: its waiter wakes early and looks again until due
    assert gate._spins and not TargetGate(5, clock=Clock())._spins
    gate._opening = False
    gate._paced = True
    gate._base = gate._top = 50.0  # about 50 a second, 20 ms apart
    gate._epoch = gate._clock()
    for _ in range(5):
        last = gate._last_start
        await asyncio.wait_for(gate.acquire(), HANG_GUARD)
        # the pace when the turn was taken spaces it from the one before
        assert gate._starts[-1] >= last + 1.0 / gate.rate
        gate.release()


def test_after_a_few_refusals_the_next_turn_comes_when_the_pause_ends() -> None:
    clock, gate = _paced(20.0)
    clock.now = 102.0  # holding, 19.6 a second
    gate._recent.extend([101.1] * NOISE_REQUESTS)
    sent(gate, 1)  # refused: its turn taken, the next one a step of the pace later
    gate.throttled(0.01)  # alone: a pause, and the refused request took nothing
    assert gate._noise and gate._wait_time(0.0) == pytest.approx(0.01)  # the pause's end
    clock.now = 102.01
    assert gate._wait_time(0.0) == 0.0  # not 51 ms after the refused one
    # a round (more than a few refusals lately): the step is lost, the pace must slow down
    clock, other = _paced(20.0)
    clock.now = 102.0
    other._recent.extend([101.1] * NOISE_REQUESTS)
    other._refusals.extend([101.2, 101.3, 101.4, 101.5])
    sent(other, 1)
    other.throttled(0.01)
    clock.now = 102.01
    assert other._noise is False and other._wait_time(0.0) > 0.02


def test_a_request_that_left_late_moves_the_next_turn_back() -> None:
    clock, gate = _paced(20.0)
    clock.now = 102.0  # holding, 19.6 a second: a turn every 51 ms
    sent(gate, 1)
    step = 1 / gate.rate
    taken = gate._last_start
    assert gate._wait_time(0.0) == pytest.approx(step)
    gate.left(taken + LATE_S / 2)  # on its way at once (the time to build it): as it was
    assert gate._last_start == taken
    gate.left(taken + 0.01)  # the client stalled between its turn and the wire
    assert gate._wait_time(0.0) == pytest.approx(0.01 + step)  # spaced from when it left
    # a request that leaves while the target is paused is one of the round that paused it
    gate.throttled(0.5)
    gate.left(clock.now + 0.2)
    assert gate._last_start == pytest.approx(taken + 0.01)
    # not paced: nothing is spaced
    fresh = TargetGate(50, clock=clock)
    fresh.left(clock.now + 1.0)
    assert fresh._last_start == -math.inf


def test_the_first_round_paces_at_the_rate_the_servers_wait_says() -> None:
    clock = Clock()
    gate = TargetGate(50, clock=clock)
    sent(gate, 10)  # ten at once against a limit of 20 a second without burst: one taken
    for step in range(9):  # the others refused, each told how long a token takes, less
        clock.now = 100.001 + step * 0.001  # the time since (a token is on its way)
        gate.throttled(0.05 - step * 0.001, sent_at=100.0, asked=True)
    # one over the longest wait: 20 a second, the top; the pace heads for it at once
    assert gate._top == gate._base == pytest.approx(20.0)
    assert gate.rate == pytest.approx(RESTART_SHARE * 20.0)
    assert gate._hold_s == SHORT_HOLD_S  # probing soon: the server may take more
    # a server that took more of them (a burst) refused the rest while its bucket refilled,
    # each asking for less than a request's time: its waits say nothing
    burst = TargetGate(50, clock=Clock())
    sent(burst, 30)
    for step in range(9):
        burst.throttled(0.01 - step * 0.001, sent_at=100.0, asked=True)
    assert burst._top is None and burst._base == 21.0
    # a wait that was not the server's word (a backoff) says nothing: doubling as before
    other = TargetGate(50, clock=Clock())
    sent(other, 10)
    for _ in range(9):
        other.throttled(0.05, sent_at=100.0)
    assert other._top is None and other._base == FIRST_RATE
    # nor does one refusal's wait (it may have come when a token was nearly there)
    alone = TargetGate(50, clock=Clock())
    sent(alone, 10)
    alone.throttled(0.05, sent_at=100.0, asked=True)
    assert alone._top is None


def test_a_later_round_never_goes_under_most_of_what_was_accepted_over_five_seconds() -> None:
    clock, gate = _paced(20.0, at=100.0)
    for second in range(6):  # 18 a second accepted for six seconds
        clock.now = 100.0 + second
        sent(gate, 18)
    clock.now = 105.5
    for t in (105.1, 105.2, 105.3, 105.35, 105.4):  # many refusals lately: a deep cut
        gate._refusals.append(t)
    gate._epoch = 105.4  # on the way to the top after a round
    gate.throttled(0.01)
    # the last second: 18 sent, 6 refused; the refusals would cut the pace to 13 a second,
    # but over the last five seconds the server took (5 x 18 - 6) / 5 a second
    assert gate._top == pytest.approx(LONG_SHARE * (5 * 18 - 6) / LONG_S)


def test_the_round_after_the_doubling_keeps_its_pace_as_the_top() -> None:
    clock = Clock()
    gate = TargetGate(5, clock=clock)
    gate.throttled(0.0)  # the first round: doubling from one a second
    clock.now = 100.5
    sent(gate, 3)
    pace = gate._pace_at(clock.now)
    gate.throttled(0.01)
    assert gate._after_startup and gate._top == pytest.approx(pace)
    assert gate._base == pytest.approx(STARTUP_CUT * pace)  # little was accepted meanwhile
    assert gate._hold_s == HOLD_S


def test_refusals_of_requests_sent_before_the_cut_are_news_of_its_round() -> None:
    clock = Clock()
    gate = TargetGate(50, clock=clock)
    sent(gate, 50)
    clock.now = 100.01
    gate.throttled(0.0, sent_at=100.0)  # no wait at all
    cut = gate._cut_at
    for step in range(1, 30):  # the rest of the burst's refusals, after the (empty) pause
        clock.now = 100.01 + step * 0.01
        gate.throttled(0.0, sent_at=100.0)
    assert (gate._cut_at, gate._base) == (cut, 20.0)
    assert (gate.stats.throttled, gate.stats.throttled_seconds) == (30, 0.0)
    clock.now = 101.5
    sent(gate, 10)
    gate.throttled(0.0, sent_at=101.5)  # sent after the cut: a new round
    assert gate._cut_at == 101.5 and gate._after_startup


def test_the_estimate_leaves_pauses_and_the_opening_out() -> None:
    clock = Clock()
    gate = TargetGate(5, clock=clock)
    sent(gate, 10)  # at 100.0: before a minute's pause
    gate._pause_until(100.2, 160.2)
    assert (gate._paused_total, gate.stats.throttled_seconds) == (pytest.approx(60.0),) * 2
    clock.now = 160.5
    sent(gate, 5)
    # a second of sending up to 160.5: 0.3 s after the pause, 0.7 s before it
    assert gate._accepted_rate(160.5, ESTIMATE_S) == (15.0, 15, 0)
    assert gate._paused_between(100.0, 161.0) == pytest.approx(60.0)
    gate._round_pace, gate._opened = 20.0, 160.3  # after the first round: since it opened
    assert gate._accepted_rate(160.5, ESTIMATE_S) == (5 / SHORTEST_S, 5, 0)
    assert gate._accepted_rate(160.5, LONG_S) == (0.0, 0, 0)  # not five seconds yet


def test_the_limit_follows_the_pace_and_the_shortest_answers() -> None:
    clock, gate = _paced(20.0)
    gate._min_latency = None
    gate.limit = 50
    clock.now = 100.5
    gate.succeeded(sent_at=100.0)  # answers take half a second
    pace = gate._pace_at(100.5)
    assert gate.limit == math.ceil(LIMIT_GAIN * pace * 0.5) + LIMIT_SPARE
    gate._changed.clear()
    gate.succeeded(sent_at=100.45)  # a quicker one: fewer at once
    assert gate.limit == math.ceil(LIMIT_GAIN * pace * 0.05) + LIMIT_SPARE == 4
    assert gate.stats.lowest_limit == 4 and not gate._changed.is_set()
    clock.now = 100.5 + LATENCY_S + 1  # the shortest is forgotten: a slower one counts
    gate.succeeded(sent_at=clock.now - 2.0)
    assert gate.limit == 50 and gate._changed.is_set()  # at most the workers
    gate.succeeded()  # without its time: nothing learnt
    assert gate._min_latency == 2.0


async def test_a_paced_gate_spaces_its_requests() -> None:
    clock, gate = _paced(2.0)
    gate._top = gate._base = 2.0 / RESTART_SHARE  # the restart at 2 a second
    gate._epoch = clock.now = 1000.0
    gate._hold_s = 10**6  # a pace that stays at 2 a second...
    gate._min_latency = None
    gate._top = gate._base
    gate._pace_at = lambda now: 2.0  # type: ignore[method-assign]  # ...exactly
    await turn(gate)
    gate.release()
    assert gate._last_start == 1000.0
    assert gate._wait_time(0.0) == 0.5
    clock.now = 1000.5 + LATE_S / 2  # a little late: the next keeps its turn
    await turn(gate)
    gate.release()
    assert gate._last_start == 1000.5
    assert gate._wait_time(0.0) == pytest.approx(0.5 - LATE_S / 2)
    clock.now = 1001.0 + 2 * LATE_S  # late by more: no credit
    await turn(gate)
    gate.release()
    assert gate._last_start == clock.now
    clock.now += 10.0  # long after: at once, and no credit for the time unused
    assert gate._wait_time(0.0) == 0.0
    await turn(gate)
    assert gate._last_start == clock.now


def test_while_the_pace_doubles_a_waiter_looks_again_soon() -> None:
    clock = Clock()
    gate = TargetGate(5, clock=clock)
    gate.throttled(0.0)
    sent(gate)  # at one a second: the next in a second, but the pace doubles meanwhile
    assert gate._wait_time(0.0) == RECHECK_S


def test_the_longest_of_the_waits_counts() -> None:
    clock, gate = _paced(0.2)
    gate._rpm = TokenBucket(60, clock)
    gate._tpm = TokenBucket(600, clock)
    gate._rpm.take(60)  # the next request in a second
    gate._last_start = 100.0  # and the pace's next turn in 1 / 0.19 s
    assert gate._wait_time(0.0) == pytest.approx(1 / (RESTART_SHARE * 0.2))
    gate._tpm.take(600)
    assert gate._wait_time(6000.0) == 60.0  # more than a minute's tokens: a full bucket
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
    clock, gate = _paced(1000.0)  # a fast pace: only the limit holds requests
    gate._min_latency, gate._min_latency_at = 0.0, clock.now - LATENCY_S - 1  # long ago
    gate._fit_limit(clock.now)
    assert gate.limit == LIMIT_SPARE
    gate._enter(0.0)
    gate._enter(0.0)  # both turns taken
    waiting = asyncio.create_task(gate.acquire())
    for _ in range(5):
        await asyncio.sleep(0)
    assert waiting.done() is False
    gate._last_start = -math.inf  # the pace has room (this clock stands still)
    gate.succeeded(sent_at=clock.now - 0.002)  # answers take 2 ms now: more at once, told
    await asyncio.wait_for(waiting, HANG_GUARD)
    need = math.ceil(LIMIT_GAIN * gate._pace_at(clock.now) * 0.002) + LIMIT_SPARE
    assert (gate.limit, gate.in_flight) == (need, 3)


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
