"""The gate against simulated rate-limited APIs on a virtual clock (``gate_sim``): for each
limit shape and server latency of ``make bench``'s S5 sweep, the pace is found within a
stated time and held, the 429s stay a small share, and repeated rounds of 429s never
spiral the pace down. The client is modelled as a busy one: each request takes 0.7 ms of
its event loop to send and as long to read, and reaches the server up to 2 ms late."""

from __future__ import annotations

import pytest

from agentv.run.scheduling import OPENING_LIMIT
from support.fakes import BucketLimit, WindowLimit
from support.gate_sim import SimResult, simulate

CLIENT = {"cpu": 0.0007, "jitter": 0.002}
LATENCIES = (0.0, 0.1, 2.0)


def per_second(result: SimResult, *, span: float = 2.0) -> list[float]:
    """Requests the server accepted per second, over each ``span`` s from the first request
    (the last, partial one left out)."""
    first = min(t for t, _ in result.arrivals)
    last = max(t for t, ok in result.arrivals if ok)
    windows = int((last - first) // span)
    return [
        result.accepted_between(first + i * span, first + (i + 1) * span) / span
        for i in range(windows)
    ]


@pytest.mark.parametrize("latency", LATENCIES)
@pytest.mark.parametrize(("burst", "found_within"), [(20, 2.0), (1, 2.0)])
def test_a_per_second_limit_is_found_within_seconds_and_held(
    latency: float, burst: int, found_within: float
) -> None:
    result = simulate(BucketLimit(20, burst), latency=latency, cases=600, **CLIENT)
    assert result.failed == 0
    assert result.refused_share <= 0.1
    assert result.goodput >= 0.9
    # from then on, every 2 s the server took at least 0.85 of its limit's requests
    rates = per_second(result)
    assert min(rates[int(found_within // 2) :]) >= 0.85 * 20, rates
    assert max(rates[1:]) <= 20 + 0.5 * burst  # never over the limit after the opening


@pytest.mark.parametrize("latency", LATENCIES)
def test_a_per_minute_window_is_waited_out_in_one_pause(latency: float) -> None:
    result = simulate(WindowLimit(600, 60), latency=latency, cases=1000, **CLIENT)
    assert result.failed == 0 and result.refused_share <= 0.1
    first = min(t for t, _ in result.arrivals)
    accepted = sorted(t - first for t, ok in result.arrivals if ok)
    # 600 in the first minute, then nothing until the next window opens
    assert [t for t in accepted if t < 60.0] == accepted[:600]
    assert accepted[600] >= 60.0 and accepted[600] < 60.5
    refused = [t - first for t, ok in result.arrivals if not ok]
    # the refusals are those of the requests on their way when the window closed (one
    # round), and none come while the target waits for the next one
    assert refused and max(refused) - min(refused) < 0.1
    assert result.goodput >= 0.9


class Drained(BucketLimit):
    """A token bucket that another client empties at the times given (a shared key): each
    time, the target meets a new round of 429s."""

    def __init__(self, rate: float, burst: float, at: tuple[float, ...]) -> None:
        super().__init__(rate, burst)
        self._at_times = list(at)
        self.drained: list[float] = []

    def take(self, now: float) -> float | None:
        while self._at_times and now >= self._at_times[0]:
            self.drained.append(self._at_times.pop(0))
            self._level, self._at = -1.0 * self.rate, now  # a second of the server's rate gone
        return super().take(now)


@pytest.mark.parametrize("latency", LATENCIES)
def test_repeated_rounds_of_429s_never_spiral_the_pace_down(latency: float) -> None:
    drains = (4.0, 5.0, 9.0, 9.5, 14.0)  # rounds close together too
    limit = Drained(20, 20, drains)
    result = simulate(limit, latency=latency, cases=500, **CLIENT)
    assert limit.drained == list(drains)
    assert result.failed == 0 and result.refused_share <= 0.1
    # each drain costs the second of requests another client took, no more: the target
    # is back at the server's rate within 2 s of the last one
    rates = per_second(result)
    assert min(rates[8:]) >= 0.85 * 20, rates
    assert result.goodput >= 0.8  # five seconds' worth of requests went to the other client
    gate = result.gate
    assert gate._top is not None and gate._top >= 0.95 * 20


def test_a_lower_limit_is_followed_down_and_a_higher_one_found_again() -> None:
    class Changing(BucketLimit):
        def take(self, now: float) -> float | None:
            self.rate = 10.0 if 10.0 <= now < 25.0 else 20.0
            return super().take(now)

    result = simulate(Changing(20, 1), latency=0.1, cases=700, **CLIENT)
    assert result.failed == 0 and result.refused_share <= 0.1
    rates = per_second(result)  # 2-s windows from the start
    assert all(8 <= r <= 10.5 for r in rates[8:12]), rates  # 16-24 s: at the new limit
    assert min(rates[18:]) >= 0.85 * 20, rates  # 11 s after it rose: at 20 a second again


def test_the_opening_costs_at_most_a_window_of_refusals() -> None:
    # 50 workers against a limit without burst: the first requests go out ten at a time
    # (one more as the first answer comes): the server refuses all but the first, and the
    # target waits (50 workers at once would have met 49 refusals)
    result = simulate(BucketLimit(20, 1), latency=0.0, cases=100, **CLIENT)
    first = min(t for t, _ in result.arrivals)
    opening = [ok for t, ok in result.arrivals if t < first + 0.05]
    assert opening[0] and opening.count(False) == len(opening) - 1 <= OPENING_LIMIT + 1


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_short_run_against_a_burst_answered_at_once_keeps_429s_a_small_share(seed: int) -> None:
    # the shortest cell of S5 with a burst: its opening's refusals weigh the most. Answers
    # at once would let the opening grow with each (20 of them in 20 ms) and more requests
    # be in flight, each refused, when the burst runs out; it at most doubles every
    # OPENING_FASTEST_S
    result = simulate(BucketLimit(20, 20), latency=0.0, cases=300, seed=seed, **CLIENT)
    assert result.failed == 0 and result.goodput >= 0.9
    assert result.refused_share <= 0.1


@pytest.mark.parametrize("latency", [0.0, 2.0])
@pytest.mark.parametrize("seed", [0, 1])
def test_a_client_that_stalls_between_a_turn_and_the_wire_keeps_its_goodput(
    latency: float, seed: int
) -> None:
    # one piece of the client's work in fifty takes 10 ms longer: a request whose turn came
    # reaches the wire late, and the next one, spaced from its turn, would follow it too
    # closely for a limit without burst; the transport says when it left (``left``)
    stalls = (0.02, 0.01)
    result = simulate(
        BucketLimit(20, 1), latency=latency, cases=1000, seed=seed, stalls=stalls, **CLIENT
    )
    assert result.failed == 0 and result.refused_share <= 0.05
    assert result.goodput >= 0.935


def test_an_unlimited_server_is_never_paced() -> None:
    result = simulate(BucketLimit(10_000, 10_000), latency=0.1, cases=2000)
    gate = result.gate
    assert (result.refused, gate.rate, gate.limit, gate.peak) == (0, None, 50, 50)
    # 2,000 requests of 0.1 s, 50 at a time: 4 s, the opening's tenth of a second aside
    assert result.window < 4.3
