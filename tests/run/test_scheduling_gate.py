"""The per-target gate in-process (``agentv.run.scheduling``): token buckets, the opening,
whole-target pauses, the pace and its rounds, token corrections, ``GatedProvider`` and
``Gates``. Each scenario drives a gate through its public calls on a clock the test moves
(``support.clock.Clock``) and reads ``TargetGate.snapshot`` with exact values. The few
tests on the real clock only wait for another task to let a request through, under
generous hang guards."""

from __future__ import annotations

import asyncio
import itertools
import math
from dataclasses import replace

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
    DEEP_CUT,
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
    STARTUP_CUT,
    STARTUP_DOUBLING_S,
    GatedProvider,
    Gates,
    GateState,
    GateStats,
    TargetGate,
    TokenBucket,
    estimate_tokens,
)
from support.clock import Clock

#: seconds; every wait here is for a step another task takes at once. Under mutmut's CPU
#: limit: a mutant that makes a wait spin fails the test instead of timing out
HANG_GUARD = 10.0


def sent(gate: TargetGate, count: int = 1) -> None:
    """``count`` requests through ``gate`` at its clock's time, each ending at once (a gate
    that is neither paused nor paced lets them all go)."""
    for _ in range(count):
        assert gate.try_acquire()
        gate.release()


def paced(gate: TargetGate, clock: Clock, count: int) -> list[float]:
    """``count`` requests through a paced ``gate``, each the moment it lets it go (the clock
    moves on to its turn), each ending at once; when each went."""
    times = []
    for _ in range(count):
        for _ in range(100):  # a turn is a few waits away at most (the pace moves as it waits)
            if gate.try_acquire():
                break
            wait = gate.snapshot().wait
            assert wait  # neither a turn now nor a wait for a request to end
            clock.now = max(clock.now + wait, math.nextafter(clock.now, math.inf))
        else:
            pytest.fail(f"no turn after 100 waits (at {clock.now})")
        times.append(clock.now)
        gate.release()
    return times


def held(top: float, *, latency: float | None = 0.125) -> tuple[Clock, TargetGate]:
    """A gate of 50 at 100.0 whose first round set its top at ``top``: its first two
    requests both refused, each with the server's wait of ``1 / top`` s (a limit without a
    burst). Its pace restarts when that pause ends (``epoch``), heads for the top and holds
    under it until SHORT_HOLD_S later. Its answers take ``latency`` s (None: none came)."""
    clock = Clock()
    gate = TargetGate(50, clock=clock)
    sent(gate, 2)
    for _ in range(2):
        gate.throttled(1 / top, sent_at=clock.now, asked=True)
    if latency is not None:
        gate.succeeded(sent_at=clock.now - latency)
    state = gate.snapshot()
    assert (state.top, state.base, state.epoch) == (top, top, 100.0 + 1 / top)
    assert (state.hold, state.after_startup, state.probing, state.holding) == (
        SHORT_HOLD_S,
        False,
        False,
        False,
    )
    return clock, gate


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
    clock.now += 0.5
    assert (bucket.available(), bucket.level) == (27.0, 27.0)
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

NEW = GateState(
    limit=4,
    max_limit=4,
    in_flight=0,
    peak=0,
    waiting=0,
    paused_until=0.0,
    wait=0.0,
    opening=False,
    first_start=None,
    first_answer_at=None,
    answers=0,
    min_latency=None,
    paced=False,
    pace=None,
    rate=None,
    base=0.0,
    top=None,
    epoch=0.0,
    hold=HOLD_S,
    cut_at=-math.inf,
    after_startup=False,
    probing=False,
    holding=False,
    noise=False,
    last_sent=None,
    last_start=-math.inf,
    rpm_level=None,
    tpm_level=None,
    spins=False,
)


def test_a_new_gate() -> None:
    gate = TargetGate(4, clock=Clock())
    assert gate.snapshot(1000.0) == NEW
    assert (gate.max_limit, gate.limit, gate.in_flight, gate.peak) == (4, 4, 0, 0)
    assert (gate.paused_until, gate.paused_for, gate.rate, gate.waiting) == (0.0, 0.0, None, False)
    assert gate.stats == GateStats(requests=0, throttled=0, throttled_seconds=0.0, lowest_limit=4)
    for workers in (0, 1):  # at least one request at once
        one = TargetGate(workers, clock=Clock())
        assert one.snapshot() == replace(NEW, limit=1, max_limit=1)
        assert one.stats.lowest_limit == 1
    limited = TargetGate(4, max_rpm=60, max_tpm=600, clock=Clock())
    assert limited.snapshot() == replace(NEW, rpm_level=60.0, tpm_level=600.0)
    # on the real clock a waiter wakes a little early and looks again until its turn
    assert TargetGate(4).snapshot().spins is True


async def turn(gate: TargetGate, tokens: float | None = None) -> None:
    """``gate.acquire``, under the hang guard (with the default tokens when None)."""
    waiting = gate.acquire() if tokens is None else gate.acquire(tokens)
    await asyncio.wait_for(waiting, HANG_GUARD)


async def test_turns_count_requests_and_the_most_at_once() -> None:
    clock = Clock()
    gate = TargetGate(2, clock=clock)
    await turn(gate)
    await turn(gate)
    state = gate.snapshot()
    assert (state.in_flight, state.peak, state.wait, state.last_sent) == (2, 2, None, 100.0)
    assert gate.stats.requests == 2  # full: a request waits until one ends
    gate.release()
    assert (gate.in_flight, gate.snapshot().wait) == (1, 0.0)
    await asyncio.wait_for(gate.requeue(), HANG_GUARD)  # its turn back, and a new one
    assert (gate.in_flight, gate.peak, gate.stats.requests) == (1, 2, 3)
    gate.release()
    clock.now = 100.5
    await turn(gate)
    state = gate.snapshot()
    assert (state.in_flight, state.peak, state.last_sent, gate.stats.requests) == (1, 2, 100.5, 4)


async def test_a_freed_turn_goes_to_the_first_in_line_not_to_a_later_request() -> None:
    gate = TargetGate(1, clock=Clock())
    await turn(gate)
    waiter = asyncio.ensure_future(gate.acquire())
    await asyncio.sleep(0)  # it stands in line
    assert (gate.snapshot().waiting, gate.waiting) == (1, True)
    gate.release()  # the turn is free; its waiter is not awake yet
    # a request that comes now (a conversation's next turn, sent the moment its answer
    # came) does not take it: it would do so at every turn and starve the line
    assert not gate.try_acquire()
    await asyncio.wait_for(waiter, HANG_GUARD)
    assert (gate.in_flight, gate.stats.requests, gate.snapshot().waiting) == (1, 2, 0)
    gate.release()
    assert gate.try_acquire()  # nobody in line: taken at once


# --- the opening ---------------------------------------------------------------------------------


def test_a_gate_of_many_workers_opens_ten_at_a_time_and_one_more_with_each_quick_answer() -> None:
    clock = Clock()
    gate = TargetGate(50, clock=clock)
    assert (
        gate.snapshot().opening
        and TargetGate(OPENING_LIMIT, clock=clock).snapshot().opening is False
    )
    assert [gate.try_acquire() for _ in range(11)] == [True] * 10 + [False]
    # no answer yet: the 11th once the opening's clock says so (or at the next answer)
    state = gate.snapshot()
    assert state.wait == pytest.approx(OPENING_WAIT_S + math.log2(1.1) * OPENING_DOUBLING_S)
    assert (state.first_start, state.first_answer_at, state.answers) == (100.0, None, 0)
    clock.now += 0.001
    gate.succeeded(sent_at=100.0)  # the first answer: its round trip is the shortest
    state = gate.snapshot()
    assert (state.answers, state.min_latency, state.first_answer_at) == pytest.approx(
        (1, 0.001, 100.001)
    )
    gate.release()
    # one more at once for the answer, but not before the opening has had the time to
    # double that far (a doubling every OPENING_FASTEST_S at most), however quick it was
    assert [gate.try_acquire() for _ in range(2)] == [True, False]
    eleventh = OPENING_FASTEST_S * math.log2(11 / 10)
    assert gate.snapshot().wait == pytest.approx(eleventh - 0.001)
    clock.now = 100.0 + eleventh
    assert [gate.try_acquire() for _ in range(2)] == [True, False]  # 11 at once
    assert gate.snapshot().wait == pytest.approx(OPENING_S - eleventh)  # or the next answer
    clock.now += 0.011
    gate.succeeded(sent_at=clock.now - 0.011)  # 11 ms: it waited in the client: no more
    gate.succeeded(sent_at=clock.now - 0.002)  # 2 ms, twice the shortest: one more
    assert gate.snapshot().answers == 2
    clock.now = 100.0 + OPENING_S  # the opening's end: every turn
    state = gate.snapshot()
    assert (state.wait, state.opening, state.in_flight) == (0.0, False, 11)


def test_without_answers_the_opening_doubles_every_few_milliseconds() -> None:
    clock = Clock()
    gate = TargetGate(50, clock=clock)
    assert all(gate.try_acquire() for _ in range(10))
    # no answer yet: a slow server; after OPENING_WAIT_S, twice as many every doubling
    growth = math.log2(11 / 10) * OPENING_DOUBLING_S  # the 11th: a tenth more
    assert gate.snapshot().wait == pytest.approx(OPENING_WAIT_S + growth)
    clock.now = 100.0 + OPENING_WAIT_S + 0.999 * OPENING_DOUBLING_S  # nearly 20 at once
    assert sum(gate.try_acquire() for _ in range(15)) == 10
    expected = (math.log2(21 / 10) - 0.999) * OPENING_DOUBLING_S
    assert gate.snapshot().wait == pytest.approx(expected)
    clock.now = 100.0 + OPENING_WAIT_S + 3 * OPENING_DOUBLING_S  # 80: all 50 are there
    state = gate.snapshot()
    assert (state.wait, state.opening) == (0.0, False)


async def test_a_waiter_woken_late_stops_the_openings_clock() -> None:
    clock = Clock()
    gate = TargetGate(50, clock=clock)
    assert all(gate.try_acquire() for _ in range(10))  # ten at once, no answer yet

    async def woken(late: float) -> None:
        """One more request waits for the opening's clock; meanwhile the client is busy
        until ``late`` s past its time (the test's clock moves on while its timer runs)."""
        wait = gate.snapshot().wait
        assert wait
        waiter = asyncio.create_task(gate.acquire())
        await asyncio.sleep(0)  # it looks, and waits for its time
        clock.now += wait + late
        await asyncio.wait_for(waiter, HANG_GUARD)  # its timer: it looks again, and goes

    await woken(0.075)  # 75 ms late: the opening's clock stops that long
    assert gate.snapshot().first_start == pytest.approx(100.075)
    clock.now += 0.002  # on the opening's clock, the 12th's time has come
    assert gate.try_acquire()
    await woken(OPENING_LAG_S / 2)  # in time, near enough: nothing changes
    assert gate.snapshot().first_start == pytest.approx(100.075)
    gate.throttled(0.05)  # the opening is over: lateness says nothing any more
    await woken(0.075)
    assert gate.snapshot().first_start == pytest.approx(100.075)
    assert (gate.in_flight, gate.stats.requests) == (14, 14)


# --- a round of refusals, and the pace ---------------------------------------------------------


def test_the_first_round_paces_at_what_the_server_accepted_and_pauses_the_target() -> None:
    clock = Clock()
    gate = TargetGate(50, clock=clock)
    sent(gate, 50)  # fifty requests at once (each answered at once); the server takes 20
    clock.now = 100.005
    gate.throttled(0.05, sent_at=100.0)
    state = gate.snapshot()
    assert (state.paced, state.top, state.opening, state.cut_at) == (True, None, False, 100.005)
    assert state.base == 49.0  # the 50 sent in the last second, less the one refused
    assert state.rate == state.pace == pytest.approx(PACE_SHARE * 49)
    assert (state.paused_until, state.epoch) == (pytest.approx(100.055),) * 2
    for _ in range(29):  # the same round: its estimate counts each, one cut
        clock.now += 0.001
        gate.throttled(0.05, sent_at=100.0)
    state = gate.snapshot()
    assert state.base == 20.0 and state.rate == pytest.approx(PACE_SHARE * 20)
    assert (state.cut_at, state.paused_until) == (100.005, pytest.approx(100.084))
    assert gate.stats == GateStats(  # each one's wait counts from its arrival
        requests=50, throttled=30, throttled_seconds=pytest.approx(0.079), lowest_limit=50
    )
    assert state.limit == 50  # no answer seen: nothing says how many the pace needs at once


def test_after_the_first_round_the_pace_doubles_until_the_next() -> None:
    clock = Clock()
    gate = TargetGate(5, clock=clock)
    gate.throttled(0.5)  # nothing sent in the last second: one a second at least
    state = gate.snapshot()
    assert (state.base, state.rate, state.pace) == (FIRST_RATE,) + (PACE_SHARE * FIRST_RATE,) * 2
    clock.now = 100.5 + STARTUP_DOUBLING_S  # one doubling after the pause
    assert gate.snapshot().pace == pytest.approx(2 * PACE_SHARE)
    clock.now = 100.5 + 10 * STARTUP_DOUBLING_S
    assert gate.snapshot().pace == pytest.approx(1024 * PACE_SHARE)
    clock.now = 100.5 + 100
    assert gate.snapshot().pace == MAX_RATE  # capped, and never an overflow
    assert gate.snapshot().rate == PACE_SHARE * FIRST_RATE  # the pace the last request had


def test_a_later_rounds_pace_heads_for_the_top_holds_then_probes() -> None:
    clock, gate = held(20.0)
    epoch = 100.05
    assert gate.snapshot().pace == pytest.approx(RESTART_SHARE * 20)  # paused until the epoch
    heights = {}
    for after in (0.0, RECOVER_HALF_S, 3 * RECOVER_HALF_S, SHORT_HOLD_S, SHORT_HOLD_S + 2):
        clock.now = epoch + after
        heights[after] = gate.snapshot().pace
    held_at = HOLD_SHARE * 20
    gap = held_at - RESTART_SHARE * 20
    assert heights == pytest.approx(
        {
            0.0: RESTART_SHARE * 20,
            RECOVER_HALF_S: held_at - gap / 2,  # the gap to the hold halves...
            3 * RECOVER_HALF_S: held_at - gap / 8,
            SHORT_HOLD_S: held_at,  # ...and it holds there
            SHORT_HOLD_S + 2: held_at * PROBE_GROWTH**2,  # then probes for more
        }
    )


def test_the_pace_never_goes_under_its_floor() -> None:
    clock = Clock()
    gate = TargetGate(5, clock=clock)
    bases = []
    for _ in range(6):  # one refusal after the other, and nothing accepted meanwhile
        gate.throttled(0.0)
        bases.append(gate.snapshot().base)
    # one a second after the first, then each round at most halves what the last kept
    assert bases[0] == FIRST_RATE and bases[-2] > MIN_RATE
    assert all(later < earlier for earlier, later in itertools.pairwise(bases))
    state = gate.snapshot()
    assert (state.base, state.top, state.pace) == (MIN_RATE, MIN_RATE, MIN_RATE)


def test_a_refusal_met_probing_makes_its_pace_the_top() -> None:
    clock, gate = held(20.0)
    clock.now = 100.05 + SHORT_HOLD_S  # the hold is over: probing from here
    paced(gate, clock, 22)  # a second of requests at the pace
    probe = gate.snapshot().pace
    assert probe is not None and probe > HOLD_SHARE * 20
    gate.throttled(0.01)
    state = gate.snapshot()
    assert (state.probing, state.holding, state.noise) == (True, False, False)
    assert state.top == pytest.approx(probe)  # the edge it found
    assert (state.epoch, state.hold) == (clock.now + 0.01, HOLD_S)
    # the restart: that pace too (one refusal: the edge; the server refused none besides)
    assert state.base == pytest.approx(probe)
    assert state.limit == math.ceil(LIMIT_GAIN * state.rate * 0.125) + LIMIT_SPARE


def test_a_round_met_on_the_way_to_the_top_lowers_it_to_what_was_accepted() -> None:
    clock, gate = held(30.0)
    epoch = 100.0 + 1 / 30
    clock.now = epoch
    times = paced(gate, clock, 14)  # on the way to the top
    clock.now += 0.002
    pace = gate.snapshot().pace
    gate.throttled(0.01, sent_at=times[-1])  # one refused: not yet a round (a few, below)
    state = gate.snapshot()
    assert state.noise and state.top == pytest.approx((1 - FEW_CUT) * min(30, pace / HOLD_SHARE))
    before = state.pace  # where the round that the next refusals show starts from
    for t in times[-4:-1]:  # three more refused at once: one round of four after all
        gate.throttled(0.01, sent_at=t)
    state = gate.snapshot()
    # since the pause ended, 14 sent, four refused; the refusals past the edge leave
    # 1 - 3/14 of the pace; the larger of the two, but no more than the pace
    accepted = (14 - 4) / (times[-1] - epoch)
    kept = 1 - 3 / 14
    assert (state.noise, state.holding, state.probing) == (False, False, False)
    assert state.top == state.base == pytest.approx(max(min(accepted, before), kept * before))
    assert state.hold == SHORT_HOLD_S  # probing again sooner: the top may be too low now
    assert state.epoch == state.paused_until == pytest.approx(clock.now + 0.01)


def test_a_round_met_while_holding_lowers_the_top_without_starting_over() -> None:
    clock, gate = held(20.0)
    epoch = 100.05
    clock.now = epoch
    times = paced(gate, clock, 22)
    tops = []
    for after in (1.2, 1.25, 1.3):  # holding: a few refused, each lowering the top a little
        clock.now = epoch + after
        gate.throttled(0.01)
        tops.append(gate.snapshot().top)
    assert tops == sorted(tops, reverse=True) and tops[-1] < 20.0
    clock.now = epoch + 1.35
    before = gate.snapshot().pace
    gate.throttled(0.01)  # more than a few of the last requests refused: a round
    state = gate.snapshot()
    assert (state.holding, state.probing, state.noise) == (True, False, False)
    # the second of sending before it, the three pauses of 10 ms left out: what the server
    # accepted, but never under half the pace that met it
    sent_then = sum(1 for t in times if t >= clock.now - 1.03)
    accepted = sent_then - 4
    assert DEEP_CUT * before < accepted < before
    assert state.top == state.base == pytest.approx(accepted)
    assert (state.epoch, state.hold) == (epoch, SHORT_HOLD_S)  # the probe comes when it would


def test_a_lone_refusal_while_holding_only_pauses() -> None:
    clock, gate = held(50.0)
    epoch = 100.02
    clock.now = epoch
    times = paced(gate, clock, NOISE_REQUESTS)  # the last 40 requests...
    clock.now = epoch + 1.2  # holding
    gate.throttled(0.02)  # ...and this the one refusal among them
    state = gate.snapshot()
    assert (state.noise, state.top, state.epoch, state.cut_at) == (True, 50.0, epoch, clock.now)
    assert state.paused_until == pytest.approx(clock.now + 0.02) and gate.stats.throttled == 3
    round_end = clock.now
    clock.now += 0.01
    before = gate.snapshot().pace
    gate.throttled(0.02, sent_at=times[-1])  # a second, of the same round: a round after all
    # the top is what the server accepted in the second before (two of those refused)
    accepted = sum(1 for t in times if t >= round_end - 1.0) - 2
    state = gate.snapshot()
    assert (state.noise, state.holding) == (False, True)
    assert DEEP_CUT * before < accepted < before
    assert state.top == pytest.approx(accepted)
    # with fewer requests lately, one refusal is not called alone: a few, the top lower
    clock, few = held(50.0)
    clock.now = epoch
    paced(few, clock, NOISE_REQUESTS - 1)
    clock.now = epoch + 1.2
    pace = few.snapshot().pace
    few.throttled(0.02)
    state = few.snapshot()
    assert state.noise and state.top == pytest.approx((1 - FEW_CUT) * min(50.0, pace / HOLD_SHARE))


def test_a_refusal_before_the_last_40_requests_leaves_the_next_one_alone() -> None:
    clock, gate = held(100.0)
    epoch = 100.01
    clock.now = epoch
    paced(gate, clock, NOISE_REQUESTS)
    clock.now = epoch + 0.5
    gate.throttled(0.01)  # alone among the last 40: a pause
    clock.now = epoch + 0.51
    paced(gate, clock, NOISE_REQUESTS)  # 40 more: the refusal is older than all of them
    clock.now = epoch + 1.2
    gate.throttled(0.01)  # alone again: the top stays
    state = gate.snapshot()
    assert (state.noise, state.top, state.epoch, gate.stats.throttled) == (True, 100.0, epoch, 4)


def test_a_few_refusals_while_holding_take_the_top_a_little_lower() -> None:
    clock, gate = held(50.0)
    epoch = 100.02
    clock.now = epoch
    paced(gate, clock, NOISE_REQUESTS)
    clock.now = epoch + 1.1  # holding
    gate.throttled(0.01)  # alone: a pause
    assert gate.snapshot().top == 50.0
    clock.now = epoch + 1.2
    pace = gate.snapshot().pace
    gate.throttled(0.01)  # two of the last 40: a step lower
    top = gate.snapshot().top
    assert top == pytest.approx((1 - FEW_CUT) * min(50.0, pace / HOLD_SHARE))
    clock.now = epoch + 1.3
    pace = gate.snapshot().pace
    gate.throttled(0.01)  # three: a step lower again
    state = gate.snapshot()
    assert state.noise and state.paused_until == pytest.approx(clock.now + 0.01)
    # a step under the top the pace was heading for; the pace on its way, the probe due
    # SHORT_HOLD_S after the last round as before
    assert state.top == pytest.approx((1 - FEW_CUT) * min(top, pace / HOLD_SHARE))
    assert (state.epoch, state.hold) == (epoch, SHORT_HOLD_S)
    assert state.rate == pytest.approx(state.pace) and state.rate < pace
    clock.now += 0.005
    gate.throttled(0.01, sent_at=clock.now - 0.02)  # another of the same round: a round
    state = gate.snapshot()
    assert state.noise is False and state.top < (1 - FEW_CUT) * 50.0


async def test_on_the_real_clock_a_paced_turn_is_never_taken_before_its_time() -> None:
    gate = TargetGate(5)  # the real clock: its waiter wakes early and looks again until due
    assert gate.snapshot().spins and not TargetGate(5, clock=Clock()).snapshot().spins
    sent(gate, 2)
    for _ in range(2):  # both refused, each told to wait 20 ms: about 50 a second from here
        gate.throttled(0.02, sent_at=gate.now(), asked=True)
    assert gate.snapshot().top == 50.0
    for _ in range(20):
        last = gate.snapshot().last_start
        await asyncio.wait_for(gate.acquire(), HANG_GUARD)
        state = gate.snapshot()
        # the pace when the turn was taken spaces it from the one before
        assert state.last_sent is not None and state.last_sent >= last + 1.0 / state.rate
        gate.release()


def test_after_a_few_refusals_the_next_turn_comes_when_the_pause_ends() -> None:
    clock, gate = held(50.0)
    epoch = 100.02
    clock.now = epoch
    paced(gate, clock, NOISE_REQUESTS)
    clock.now = epoch + 1.2  # holding
    paced(gate, clock, 1)  # refused: its turn taken, the next one a step of the pace later
    gate.throttled(0.01)  # alone: a pause, and the refused request took nothing
    state = gate.snapshot()
    assert state.noise and state.wait == pytest.approx(0.01)  # the pause's end
    clock.now += 0.01
    assert gate.snapshot().wait == 0.0  # not a step after the refused one
    # a round (more than a few refusals lately): the step is lost, the pace must slow down
    clock, other = held(50.0)
    clock.now = epoch
    paced(other, clock, NOISE_REQUESTS)
    for after in (1.1, 1.15, 1.2):
        clock.now = epoch + after
        other.throttled(0.001)
    clock.now = epoch + 1.3
    paced(other, clock, 1)
    other.throttled(0.01)
    clock.now += 0.01
    state = other.snapshot()
    assert state.noise is False
    assert state.wait == pytest.approx(1 / state.pace - 0.01) and state.wait > 0.0


def test_a_request_that_left_late_moves_the_next_turn_back() -> None:
    clock, gate = held(20.0)
    clock.now = 100.05 + 1.2  # holding, near 19.6 a second: a turn every 51 ms
    paced(gate, clock, 1)
    state = gate.snapshot()
    step, taken = 1 / state.rate, state.last_start
    assert taken == clock.now and state.wait == pytest.approx(step)
    gate.left(taken + LATE_S / 2)  # on its way at once (the time to build it): as it was
    assert gate.snapshot().last_start == taken
    gate.left(taken + 0.01)  # the client stalled between its turn and the wire
    assert gate.snapshot().wait == pytest.approx(0.01 + step)  # spaced from when it left
    # a request that leaves while the target is paused is one of the round that paused it
    gate.throttled(0.5)
    gate.left(clock.now + 0.2)
    assert gate.snapshot().last_start == pytest.approx(taken + 0.01)
    # not paced: nothing is spaced
    fresh = TargetGate(50, clock=clock)
    fresh.left(clock.now + 1.0)
    assert fresh.snapshot().last_start == -math.inf


def test_the_first_round_paces_at_the_rate_the_servers_wait_says() -> None:
    clock = Clock()
    gate = TargetGate(50, clock=clock)
    sent(gate, 10)  # ten at once against a limit of 20 a second without burst: one taken
    for step in range(9):  # the others refused, each told how long a token takes, less
        clock.now = 100.001 + step * 0.001  # the time since (a token is on its way)
        gate.throttled(0.05 - step * 0.001, sent_at=100.0, asked=True)
    # one over the longest wait: 20 a second, the top; the pace heads for it at once
    state = gate.snapshot()
    assert state.top == state.base == pytest.approx(20.0)
    assert state.rate == pytest.approx(RESTART_SHARE * 20.0)
    assert state.hold == SHORT_HOLD_S  # probing soon: the server may take more
    # a server that took more of them (a burst) refused the rest while its bucket refilled,
    # each asking for less than a request's time: its waits say nothing
    burst = TargetGate(50, clock=Clock())
    sent(burst, 30)
    for step in range(9):
        burst.throttled(0.01 - step * 0.001, sent_at=100.0, asked=True)
    assert (burst.snapshot().top, burst.snapshot().base) == (None, 21.0)
    # a wait that was not the server's word (a backoff) says nothing: doubling as before
    other = TargetGate(50, clock=Clock())
    sent(other, 10)
    for _ in range(9):
        other.throttled(0.05, sent_at=100.0)
    assert (other.snapshot().top, other.snapshot().base) == (None, FIRST_RATE)
    # nor does one refusal's wait (it may have come when a token was nearly there)
    alone = TargetGate(50, clock=Clock())
    sent(alone, 10)
    alone.throttled(0.05, sent_at=100.0, asked=True)
    assert alone.snapshot().top is None


def test_a_later_round_never_goes_under_most_of_what_was_accepted_over_five_seconds() -> None:
    clock, gate = held(20.0)
    clock.now = 100.05
    times = paced(gate, clock, 130)  # over six seconds at the pace, probing for the last
    assert times[-1] - 100.05 > LONG_S
    before = gate.snapshot().pace
    gate.throttled(0.01, sent_at=times[-1])  # the edge, met probing...
    for t in times[-15:-1]:  # ...and many more refused: the last second's estimate is low
        gate.throttled(0.01, sent_at=t)
    state = gate.snapshot()
    last_second = sum(1 for t in times if t >= times[-1] - 1.0)
    short = max(min(last_second - 15, before), DEEP_CUT * before, (1 - 14 / last_second) * before)
    # but over the last five seconds the server took far more
    long = LONG_SHARE * (sum(1 for t in times if t >= times[-1] - LONG_S) - 15) / LONG_S
    assert short < long
    assert state.probing and state.top == pytest.approx(before)
    assert state.base == pytest.approx(long)


def test_the_round_after_the_doubling_keeps_its_pace_as_the_top() -> None:
    clock = Clock()
    gate = TargetGate(5, clock=clock)
    gate.throttled(0.0)  # the first round: doubling from one a second
    clock.now = 100.5
    paced(gate, clock, 3)
    pace = gate.snapshot().pace
    gate.throttled(0.01)
    state = gate.snapshot()
    assert state.after_startup and state.top == pytest.approx(pace)
    assert state.base == pytest.approx(STARTUP_CUT * pace)  # little was accepted meanwhile
    assert state.hold == HOLD_S


def test_refusals_of_requests_sent_before_the_cut_are_news_of_its_round() -> None:
    clock = Clock()
    gate = TargetGate(50, clock=clock)
    sent(gate, 50)
    clock.now = 100.01
    gate.throttled(0.0, sent_at=100.0)  # no wait at all
    for step in range(1, 30):  # the rest of the burst's refusals, after the (empty) pause
        clock.now = 100.01 + step * 0.01
        gate.throttled(0.0, sent_at=100.0)
    state = gate.snapshot()
    assert (state.cut_at, state.base) == (100.01, 20.0)
    assert (gate.stats.throttled, gate.stats.throttled_seconds) == (30, 0.0)
    clock.now = 101.5
    paced(gate, clock, 10)
    gate.throttled(0.0, sent_at=clock.now)  # sent after the cut: a new round
    state = gate.snapshot()
    assert state.cut_at == clock.now and state.after_startup


def test_a_rounds_estimate_leaves_the_pauses_and_the_opening_out() -> None:
    clock, gate = held(20.0)
    epoch = 100.05
    clock.now = epoch
    assert len(paced(gate, clock, 10)) == 10
    clock.now = epoch + 0.5
    gate.throttled(0.3)  # a few: paused until 0.8 s
    clock.now = epoch + 0.8
    assert len(paced(gate, clock, 7)) == 7
    for after in (1.15, 1.16):
        clock.now = epoch + after
        gate.throttled(0.001)
    clock.now = epoch + 1.2
    before = gate.snapshot().pace
    gate.throttled(0.001)  # the fourth since the first round: a round, while holding
    state = gate.snapshot()
    assert state.holding
    # a second of sending before it reaches back past the first round's pause: the
    # estimate counts from that pause's end (the first requests went out before anything
    # was known), less the time paused since
    span = 1.2 - (0.3 + 0.001 + 0.001)
    accepted = (17 - 4) / span
    assert DEEP_CUT * before < accepted < before
    assert state.top == state.base == pytest.approx(accepted)
    assert gate.stats.throttled_seconds == pytest.approx(1 / 20 + 0.3 + 3 * 0.001)


def test_the_limit_follows_the_pace_and_the_shortest_answers() -> None:
    clock, gate = held(20.0, latency=None)
    assert gate.snapshot().limit == 50  # no answer seen: as many as the workers
    clock.now = 100.55
    gate.succeeded(sent_at=100.05)  # answers take half a second
    state = gate.snapshot()
    assert state.limit == math.ceil(LIMIT_GAIN * state.pace * 0.5) + LIMIT_SPARE
    gate.succeeded(sent_at=100.5)  # a quicker one: fewer at once
    state = gate.snapshot()
    assert state.limit == math.ceil(LIMIT_GAIN * state.pace * 0.05) + LIMIT_SPARE == 4
    assert gate.stats.lowest_limit == 4
    clock.now = 100.55 + LATENCY_S + 1  # the shortest is forgotten: a slower one counts
    gate.succeeded(sent_at=clock.now - 2.0)
    assert (gate.snapshot().limit, gate.snapshot().min_latency) == (50, 2.0)  # the workers
    gate.succeeded()  # without its time: nothing learnt
    assert gate.snapshot().min_latency == 2.0


def late_for_the_next_turn(gate: TargetGate, clock: Clock, late: float) -> None:
    """Move the clock to ``late`` s past the next paced turn: a step of the pace (as it
    is then) after the last turn."""
    last = gate.snapshot().last_start
    at = clock.now
    for _ in range(20):  # the pace moves slowly: its step at the turn, found in a few
        clock.now = at
        pace = gate.snapshot().pace
        assert pace is not None
        at = last + 1 / pace + late
    clock.now = at


async def test_a_paced_gate_spaces_its_requests() -> None:
    clock, gate = held(2.0, latency=None)  # half a second apart, about
    epoch = 100.5
    clock.now = epoch
    await turn(gate)
    gate.release()
    state = gate.snapshot()
    assert state.last_start == epoch
    assert state.wait == pytest.approx(1 / state.pace)
    late_for_the_next_turn(gate, clock, LATE_S / 2)  # a little late: it keeps its turn
    await turn(gate)
    gate.release()
    state = gate.snapshot()
    assert state.last_start == pytest.approx(epoch + 1 / state.rate)
    assert state.last_start == pytest.approx(clock.now - LATE_S / 2)
    late_for_the_next_turn(gate, clock, 2 * LATE_S)  # late by more: no credit
    await turn(gate)
    gate.release()
    assert gate.snapshot().last_start == clock.now
    clock.now += 10.0  # long after: at once, and no credit for the time unused
    assert gate.snapshot().wait == 0.0
    await turn(gate)
    assert gate.snapshot().last_start == clock.now


def test_while_the_pace_doubles_a_waiter_looks_again_soon() -> None:
    clock = Clock()
    gate = TargetGate(5, clock=clock)
    gate.throttled(0.0)
    sent(gate)  # at one a second: the next in a second, but the pace doubles meanwhile
    assert gate.snapshot().wait == RECHECK_S


def test_the_longest_of_the_waits_counts() -> None:
    clock = Clock()
    gate = TargetGate(50, max_rpm=60, max_tpm=600, clock=clock)
    sent(gate, 2)
    for _ in range(2):  # a limit of 1.25 a second: the pace's next turn in 1 / 1.1875 s
        gate.throttled(0.8, sent_at=100.0, asked=True)
    clock.now = 100.8
    assert gate.try_acquire(600.0)  # a request with a minute's tokens
    gate.release()
    state = gate.snapshot()
    assert (state.rpm_level, state.tpm_level) == (57.8, 0.0)  # room for requests
    assert state.wait == pytest.approx(1 / (RESTART_SHARE * 1.25))  # the pace's wait
    assert gate.snapshot(6000.0).wait == 60.0  # more than a minute's tokens: a full bucket
    gate.throttled(2.0)  # a pause counts before all else
    assert gate.snapshot(10_000.0).wait == 2.0


async def test_a_turn_takes_a_request_and_its_tokens_from_the_buckets() -> None:
    clock = Clock()
    gate = TargetGate(4, max_rpm=60, max_tpm=600, clock=clock)
    await turn(gate, 100.0)
    await turn(gate, 250.0)
    assert (gate.snapshot().rpm_level, gate.snapshot().tpm_level) == (58.0, 250.0)
    gate.used_tokens(100.0, 130)  # 30 more than estimated
    assert gate.snapshot().tpm_level == 220.0
    gate.used_tokens(250.0, 50)  # 200 fewer
    assert gate.snapshot().tpm_level == 420.0
    gate.used_tokens(250.0, None)  # unknown: the estimate stands
    assert gate.snapshot().tpm_level == 420.0
    gate.used_tokens(10.0, 10)
    assert gate.snapshot().tpm_level == 420.0
    gate.release()
    await turn(gate)  # no tokens said: none taken
    await asyncio.wait_for(gate.requeue(), HANG_GUARD)
    assert (gate.snapshot().rpm_level, gate.snapshot().tpm_level) == (56.0, 420.0)
    await asyncio.wait_for(gate.requeue(20.0), HANG_GUARD)
    assert (gate.snapshot().rpm_level, gate.snapshot().tpm_level) == (55.0, 400.0)
    plain = TargetGate(4, clock=clock)
    plain.used_tokens(1.0, 1000)  # no token bucket: nothing to correct
    assert plain.snapshot().tpm_level is None
    assert gate.counts_tokens and not plain.counts_tokens


def test_one_bucket_alone_paces_too() -> None:
    clock = Clock()
    by_requests = TargetGate(4, max_rpm=60, clock=clock)
    assert (by_requests.snapshot().rpm_level, by_requests.snapshot().tpm_level) == (60.0, None)
    sent(by_requests, 60)
    assert by_requests.snapshot().wait == 1.0
    by_tokens = TargetGate(4, max_tpm=60, clock=clock)
    assert (by_tokens.snapshot().rpm_level, by_tokens.snapshot().tpm_level) == (None, 60.0)
    assert by_tokens.snapshot(90.0).wait == 0.0  # a full bucket lets one big request go
    assert by_tokens.try_acquire(60.0)
    by_tokens.release()
    assert by_tokens.snapshot(3.0).wait == 3.0
    assert by_tokens.snapshot().wait == 0.0  # a request that says no tokens waits for none


# --- waiting for a turn (the real clock) ----------------------------------------------------------


async def test_a_paused_gate_lets_the_request_go_once_the_pause_is_over() -> None:
    gate = TargetGate(2)
    gate.throttled(0.05)  # nobody ends a request meanwhile: the wait itself ends
    await turn(gate)
    assert (gate.in_flight, gate.paused_for) == (1, 0.0)


async def test_on_the_real_clock_a_request_waits_for_its_bucket_to_refill() -> None:
    gate = TargetGate(2, max_tpm=1200)  # 20 tokens a second, a minute's worth at once
    assert gate.try_acquire(1200.0)  # the minute's worth: one more token in 50 ms
    gate.release()
    wait = gate.snapshot(1.0).wait
    assert wait is not None and 0.0 < wait <= 0.05
    await turn(gate, 1.0)
    assert (gate.in_flight, gate.stats.requests, gate.rate) == (1, 2, None)


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
    clock, gate = held(1000.0, latency=None)  # a fast pace: only the limit holds requests
    gate.succeeded(sent_at=clock.now)  # answers at once: two at once are enough...
    assert gate.snapshot().limit == LIMIT_SPARE
    clock.now += LATENCY_S + 1  # ...but that was long ago
    for _ in range(2):  # both turns taken
        clock.now += gate.snapshot().wait or 0.0
        assert gate.try_acquire()
    waiting = asyncio.create_task(gate.acquire())
    for _ in range(5):
        await asyncio.sleep(0)
    assert waiting.done() is False and gate.snapshot().wait is None
    clock.now += 0.001  # the pace has room
    gate.succeeded(sent_at=clock.now - 0.002)  # answers take 2 ms now: more at once, told
    await asyncio.wait_for(waiting, HANG_GUARD)
    state = gate.snapshot()
    need = math.ceil(LIMIT_GAIN * state.pace * 0.002) + LIMIT_SPARE
    assert (state.limit, state.in_flight) == (need, 3)


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
    assert (task.done(), gate.in_flight, gate.snapshot().waiting) == (
        False,
        1,
        0 if while_ == "backing off" else 1,
    )
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (gate.in_flight, gate.snapshot().waiting, gate.stats.requests) == (2, 0, 2)
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
    assert gate.try_acquire()  # another request, on its way
    gate.throttled(1.0)
    assert gate.snapshot().wait == 1.0
    waiting = asyncio.create_task(gate.acquire())
    for _ in range(3):
        await asyncio.sleep(0)
    assert (waiting.done(), gate.in_flight, gate.snapshot().waiting) == (False, 1, 1)
    clock.now += 1.0
    gate.release()  # the other one ends: the first in line looks again, the pause is over
    await asyncio.wait_for(waiting, HANG_GUARD)
    assert (gate.in_flight, gate.snapshot().waiting) == (1, 0)


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
    assert (entered, gate.in_flight, gate.snapshot().waiting) == (["first"], 1, 1)
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
    assert (entered, gate.snapshot().waiting) == ([], 4)
    tasks[1].cancel()  # one in the middle of the line gives up
    for _ in range(3):
        await asyncio.sleep(0)
    assert gate.snapshot().waiting == 3
    for expected in ([0], [0, 2], [0, 2, 3]):
        gate.release()
        for _ in range(5):
            await asyncio.sleep(0)
        assert entered == expected
        assert gate.in_flight == 1
    assert (gate.snapshot().waiting, gate.waiting) == (0, False)
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
    assert (first.cancelled(), gate.snapshot().waiting) == (True, 1)
    gate.release()
    await asyncio.wait_for(second, HANG_GUARD)
    assert (gate.in_flight, gate.stats.requests, gate.snapshot().waiting) == (1, 2, 0)


async def test_a_freed_turn_after_a_pause_goes_down_the_line() -> None:
    gate = TargetGate(3)
    sent(gate, 2)
    for _ in range(2):  # paused for 50 ms, then paced at about 20 a second
        gate.throttled(0.05, sent_at=gate.now(), asked=True)
    waiting = [asyncio.create_task(gate.acquire()) for _ in range(3)]
    await asyncio.wait_for(asyncio.gather(*waiting), HANG_GUARD)
    assert (gate.in_flight, gate.snapshot().waiting) == (3, 0)  # each woke the next


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
    assert gate.snapshot().tpm_level == 560.0  # 11 taken, then 29 more
    assert (gate.in_flight, gate.stats.requests) == (0, 1)
    no_usage = FakeProvider(gate)
    await GatedProvider(no_usage, gate).invoke(req)
    assert gate.snapshot().tpm_level == 549.0  # the estimate stands


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
    assert gate.snapshot().tpm_level == 56.0  # 2 estimated, 4 used
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
    assert gate.snapshot().tpm_level == 489.0  # 100 + its 11 estimated


def test_try_acquire_takes_a_free_turn_at_once_and_leaves_a_busy_gate_alone() -> None:
    clock = Clock()
    gate = TargetGate(1, max_tpm=60, clock=clock)
    assert gate.try_acquire(60) is True
    assert (gate.in_flight, gate.peak, gate.stats.requests) == (1, 1, 1)
    assert gate.snapshot().tpm_level == 0.0
    assert gate.try_acquire() is False  # full: nothing taken
    assert (gate.in_flight, gate.stats.requests, gate.snapshot().tpm_level) == (1, 1, 0.0)
    gate.release()
    assert gate.try_acquire(1) is False  # a slot, but no token left
    assert (gate.in_flight, gate.stats.requests) == (0, 1)
    assert gate.try_acquire() is True  # no tokens by default: the empty bucket does not matter
    assert (gate.in_flight, gate.stats.requests, gate.snapshot().tpm_level) == (1, 2, 0.0)


def test_gates_one_per_provider_made_on_first_use() -> None:
    gates = Gates()
    assert gates.by_target() == {}
    first = FakeProvider()
    second = FakeProvider(name="limited", settings=RateSettings(max_rpm=30, max_tpm=1200))
    third = FakeProvider(name="bare", settings=ProviderSettings())  # no rate fields at all
    gate = gates.for_provider(first, 5)
    assert isinstance(gate, TargetGate)
    state = gate.snapshot()
    assert (gate.max_limit, state.rpm_level, state.tpm_level, first.throttle) == (
        5,
        None,
        None,
        gate,
    )
    assert gates.for_provider(first, 9) is gate  # made once: the first limit holds
    assert gate.max_limit == 5
    limited = gates.for_provider(second, 2)
    assert isinstance(limited, TargetGate)
    state = limited.snapshot()
    assert (limited.max_limit, state.rpm_level, state.tpm_level) == (2, 30.0, 1200.0)
    assert second.throttle is limited
    bare = gates.for_provider(third, 1)
    assert isinstance(bare, TargetGate)
    state = bare.snapshot()
    assert (state.rpm_level, state.tpm_level, third.throttle) == (None, None, bare)
    assert gates.by_target() == {"fake": gate, "limited": limited, "bare": bare}
