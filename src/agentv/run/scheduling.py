"""How many requests each target gets at once, and when: one gate per target, shared by
every request sent to it (a candidate's answer and a judge's grade alike), so a slow or
rate-limited target never takes the others' capacity and a judge's load counts where it
lands.

A gate starts by letting ten requests go at once, one more with each quick answer (as TCP's
slow start, but at most doubling every 50 ms; doubling by time instead while no answer has
come), up to the target's ``workers``: an API with a small burst refuses a few of the first
requests, not all of them.

A 429, a 503 or an "overloaded" answer pauses the whole target until the server's
``Retry-After`` has passed (not just the one request), and from then on the gate paces its
requests by a rate it keeps estimating from the server's answers, as TCP's BBR estimates
bandwidth instead of only backing off:

- the first round of refusals sets the pace just under what the server accepted in the last
  second of sending (the requests sent, less those refused), then doubles it until the next
  refusal: at the start of a run that count is the server's burst, far from its rate either
  way. When the server refused several requests at once, each with the wait it asks for,
  the longest of those waits is the time it takes to free one request: the pace heads
  straight for one over it instead (against a limit without burst, which took one request
  of the opening's ten, doubling from one a second would take a second to get there);
- each later round makes the pace that met the refusal the top to hold just under, and
  restarts a little below it; a refusal met on the way there, or while holding, says the top
  was too high, and the new one is what the server accepted lately (the share of requests
  it refused lowering it further); after holding a few seconds the pace grows again,
  probing for more;
- the refusals of requests sent before a round began, or during its pause, are news of that
  round, however short the server's wait; a lone refusal while holding (one of the last 40
  requests) only pauses: requests bunched up on their way (a busy client) are refused at
  any pace, and slowing down for them would only spiral down. A few (up to three of the
  last 40) lower the top by 2 % without starting over: the pace at which such refusals stay
  rare is just under the one that met them. After either, the next request goes when the
  pause ends (the refused one took nothing from the server), not a step of the pace later;
  paced turns are taken to a tenth of a millisecond (the waiter wakes early and looks
  again at every turn of the event loop: a timer alone wakes up to a millisecond late), and
  a request that left later than its turn (``left``, told by the HTTP transport) moves the
  next turn back. For the same reason a round never takes the top under 95 % of what the
  server accepted over the last five seconds;
- how many requests go at once follows the pace and the shortest answer time seen lately
  (twice what the pace needs, plus two), never above ``workers``.

Optional ``max_rpm`` / ``max_tpm`` token buckets pace requests and tokens per minute; tokens
are estimated from the request's size before the call and corrected from the reported usage
after.

A turn is held only while a request is on its way: a request waiting to be retried (its
back-off, or the target's pause) gives its turn back and queues again for a new one, so a
lane may run more cases than its gate has turns and keep them all busy; any other error
(a 500) leaves the pace alone. Requests that have to wait for a turn stand in line and get
their turns in order; a request that comes while others stand there joins the line, even
when a turn is free at that moment (it is the first one's).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol

from agentv.errors import ProviderTimeout
from agentv.providers.base import (
    DEADLINE,
    Provider,
    ProviderRequest,
    ProviderResponse,
    ProviderWrapper,
    Throttle,
)

#: a target's concurrency when neither --workers nor its `workers` says
DEFAULT_WORKERS = 3
#: requests at once when a target is new, one more with each answer (doubling with each
#: round trip, as TCP's slow start) up to its ``workers``: an API whose burst is smaller
#: refuses a few of the first requests, not all; when no answer has come after
#: OPENING_WAIT_S (a slow API), doubling every OPENING_DOUBLING_S instead
OPENING_LIMIT = 10
OPENING_WAIT_S = 0.025
OPENING_DOUBLING_S = 0.025
#: ... and however quick the answers, it at most doubles every OPENING_FASTEST_S: against
#: an API that answers at once, requests in flight when its burst runs out are refused
OPENING_FASTEST_S = 0.05
#: an answer adds no request in the opening when its round trip took over QUEUED times
#: the shortest (it waited in the client, whose own work is what holds requests up); the
#: opening ends OPENING_S after the first request at the latest
QUEUED = 2.0
OPENING_S = 0.5
#: a waiter woken this much later than due says the client is busy: the opening's clock
#: stops meanwhile
OPENING_LAG_S = 0.005
#: the server's rate is estimated from what it accepted in this much sending time
ESTIMATE_S = 1.0
#: ... but over this much at least, when less has passed since the first round
SHORTEST_S = 0.25
#: a later round's top is no less than LONG_SHARE of what was accepted over LONG_S
LONG_S = 5.0
LONG_SHARE = 0.95
#: after the first round of refusals the pace is PACE_SHARE of what the server accepted
#: in the last second (its burst, at the start of a run, which may be far from its rate
#: either way), doubling every STARTUP_DOUBLING_S until the next refusal
PACE_SHARE = 0.9
#: ... unless WAIT_REFUSALS refusals at least, each with the server's wait, say more: the
#: longest of those waits is the time the server takes to free one request (the others came
#: later, as it did), so one over it is its rate: the pace heads for it at once, as for a top
WAIT_REFUSALS = 2
#: ... when it took at most WAIT_TOOK of them (more, and the refusals came while its
#: bucket refilled, each asking for less than a whole request's time)
WAIT_TOOK = 2
STARTUP_DOUBLING_S = 0.1
#: after a later round it restarts at RESTART_SHARE of what was accepted and heads for
#: HOLD_SHARE of the pace that met the refusal (halving the gap every RECOVER_HALF_S), holds
#: there until HOLD_S, then grows by PROBE_GROWTH a second until the next refusal
RESTART_SHARE = 0.95
HOLD_SHARE = 0.98
RECOVER_HALF_S = 0.2
RECOVER_HOLD_S = 1.0  # by then it holds (the gap to the top halved five times)
HOLD_S = 4.0
PROBE_GROWTH = 1.1
#: after a round met on the way to the top (which was too high), it holds SHORT_HOLD_S
SHORT_HOLD_S = 1.5
#: a later round restarts at no less than DEEP_CUT of the pace that met it; the one that
#: ends the doubling at no less than STARTUP_CUT (it overshoots by a fraction of a step)
DEEP_CUT = 0.5
STARTUP_CUT = 0.75
#: a refusal while holding, one of at most NOISE_REFUSALS of the last NOISE_REQUESTS
#: requests, changes nothing but the pause: a request that reached the server sooner than
#: its pace said
NOISE_REQUESTS = 40
NOISE_REFUSALS = 1
#: one of at most FEW_REFUSALS of them lowers the top by FEW_CUT, without starting over:
#: near a limit without burst, requests that reach the server a little unevenly are refused
#: now and then, and the pace that keeps that rare is just under the one that met them
FEW_REFUSALS = 3
FEW_CUT = 0.02
#: a paced request this late for its turn still counts as gone at its turn
LATE_S = 0.002
#: a timer wakes its task up to a millisecond late (the event loop's poll counts whole
#: milliseconds), so spacing paced requests by timers alone lets them wander by as much:
#: a waiter wakes this long before its turn and looks again at every turn of the loop
SPIN_S = 0.0015
SPIN_MAX_RATE = 100.0
#: a request waiting for its pace looks again this often while the pace doubles
RECHECK_S = 0.05
#: the pace's floor (requests a second; after the first round: FIRST_RATE) and cap
MIN_RATE = 0.1
FIRST_RATE = 1.0
MAX_RATE = 1e6
#: requests at once while paced: LIMIT_GAIN times pace x shortest answer time, plus spare
LIMIT_GAIN = 2.0
LIMIT_SPARE = 2
#: the shortest answer time is forgotten after this long; pauses after LOOKBACK_S
LATENCY_S = 10.0
LOOKBACK_S = 120.0


def lane_size(turns: int) -> int:
    """How many cases a lane runs at once for a gate of ``turns``: a quarter more, so that
    the turns given back by cases that wait (a retry's back-off, a conversation between two
    turns) are used by the others."""
    return turns * 5 // 4 + 1


class TokenBucket:
    """``per_minute`` units a minute, at most that many at once (a minute's burst)."""

    def __init__(self, per_minute: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = per_minute / 60.0
        self.capacity = float(per_minute)
        self.level = self.capacity
        self._clock = clock
        self._at = clock()

    def _refill(self) -> None:
        now = self._clock()
        self.level = min(self.capacity, self.level + (now - self._at) * self.rate)
        self._at = now

    def wait_for(self, amount: float) -> float:
        """Seconds until ``amount`` units are there (0: now); nothing is taken."""
        self._refill()
        need = min(amount, self.capacity) - self.level
        return max(0.0, need / self.rate) if need > 0 else 0.0

    def take(self, amount: float) -> None:
        """Take ``amount`` units (the level may go below zero: a correction)."""
        self._refill()
        self.level -= amount

    def give_back(self, amount: float) -> None:
        """Return units taken by an estimate that was too high."""
        self.level = min(self.capacity, self.level + amount)

    def available(self) -> float:
        """The units there now, refilled up to the clock's time (below zero after a
        correction)."""
        self._refill()
        return self.level


@dataclass
class GateStats:
    """What a target's gate saw, for the summary."""

    requests: int = 0
    throttled: int = 0  # 429 / 503 / overloaded answers
    throttled_seconds: float = 0.0  # time the whole target was paused
    lowest_limit: int = 0


@dataclass(frozen=True)
class GateState:
    """A target's gate at one moment (``TargetGate.snapshot``): what it lets through now,
    and the estimates that decide it. Times are on the gate's clock."""

    #: requests at once it allows now, and at most (the target's ``workers``)
    limit: int
    max_limit: int
    #: requests on their way now, the most at once so far, and requests standing in line
    in_flight: int
    peak: int
    waiting: int
    #: when the target's pause ends (0.0: never paused)
    paused_until: float
    #: seconds a request (of the snapshot's ``tokens``) waits now before it looks again for a
    #: turn: 0.0 (it goes at once), None (until a request ends or the limit grows); while
    #: the pace doubles, RECHECK_S at most
    wait: float | None
    #: the opening: whether requests at once are still growing from OPENING_LIMIT, when its
    #: first request went (its clock: moved on by the time the client was busy), when the
    #: first answer came, and the quick answers counted (one more request at once each)
    opening: bool
    first_start: float | None
    first_answer_at: float | None
    answers: int
    #: the shortest time to an answer lately (None: none seen)
    min_latency: float | None
    #: whether requests are paced (after a first round of refusals); the pace at this moment
    #: and the one the last request or round was given (requests a second; None: not paced)
    paced: bool
    pace: float | None
    rate: float | None
    #: the last round's estimate: where the pace restarted, the top it heads for (None:
    #: doubling, after the first round), when it restarted (the end of the round's pause)
    #: and how long it holds under the top before probing for more
    base: float
    top: float | None
    epoch: float
    hold: float
    #: when the last round's first refusal came, and how it was met: the first after the
    #: doubling, while probing, while holding under the top; ``noise``: a refusal of a few,
    #: let pass with a pause (and the top a little lower for more than one)
    cut_at: float
    after_startup: bool
    probing: bool
    holding: bool
    noise: bool
    #: when the last request got its turn (None: none yet), and the turn the last paced one
    #: took (a request late for its turn by LATE_S or less counts as gone at its turn)
    last_sent: float | None
    last_start: float
    #: the levels of the ``max_rpm`` and ``max_tpm`` buckets now (None: no such limit)
    rpm_level: float | None
    tpm_level: float | None
    #: whether a waiter wakes SPIN_S before its turn and looks again until then (the real
    #: clock)
    spins: bool


class TargetGate:
    """At most ``limit`` requests to one target in flight, adapting to the target's answers;
    counts the most seen at once. ``snapshot`` shows its state."""

    def __init__(
        self,
        limit: int,
        *,
        max_rpm: float | None = None,
        max_tpm: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_limit = max(1, limit)
        self.limit = self.max_limit
        self.in_flight = 0
        self.peak = 0
        self.paused_until = 0.0
        self._clock = clock
        #: on the real clock, a waiter wakes SPIN_S before its time and looks again at each
        #: turn of the event loop until then (a clock that only moves when every task waits,
        #: as a simulation's, would never get there)
        self._spins = clock is time.monotonic
        self._rpm = TokenBucket(max_rpm, clock) if max_rpm else None
        self._tpm = TokenBucket(max_tpm, clock) if max_tpm else None
        self._changed = asyncio.Event()  # a request ended, or the limit grew
        self.stats = GateStats(lowest_limit=self.max_limit)
        #: the opening: requests at once grow from OPENING_LIMIT to ``limit`` (False: done),
        #: one more with each answer (``_answers``), or by time until the first answer
        self._opening = self.max_limit > OPENING_LIMIT
        self._first_start: float | None = None
        self._first_answer_at: float | None = None
        self._answers = 0
        #: requests a second once throttled (None: not paced), and when the last went out
        #: (by the pace: a request late for its turn counts as gone at its turn)
        self.rate: float | None = None
        self._last_start = -math.inf
        #: once throttled (``_paced``): where the pace restarted after the last round of
        #: refusals, the top it heads for (None: doubling, after the first round), and
        #: when it started (the end of the round's pause)
        self._paced = False
        self._base = 0.0
        self._top: float | None = None
        self._epoch = 0.0
        self._hold_s = HOLD_S  # how long the pace holds under the top before probing
        #: the current round of refusals: when its first came (the cut), the pace before
        #: it (None: the first round), and the latest send time of a request it refused
        self._cut_at = -math.inf
        self._round_pace: float | None = None
        self._after_startup = False
        self._probing = False
        self._holding = False  # the round was met while holding under the top
        self._noise = False  # the round's one refusal was let pass (``_alone``)
        self._round_paused_until = 0.0  # the end of the round's pause
        #: the longest wait the server asked for in the round (0: none said), and how many
        #: refusals the round had
        self._round_wait = 0.0
        self._round_refused = 0
        #: when the last NOISE_REQUESTS requests went out (while paced)
        self._recent: deque[float] = deque(maxlen=NOISE_REQUESTS)
        self._opened = 0.0  # when the first round's pause ended
        self._round_end = 0.0
        #: when recent requests went out and when the refused ones had gone out (a second
        #: of sending back, pauses left out), and the recent pauses as [start, end]
        self._starts: deque[float] = deque()
        self._refusals: deque[float] = deque()
        self._pauses: deque[list[float]] = deque()
        self._paused_total = 0.0  # their length, all together
        #: the shortest time to an answer lately, and when it was seen
        self._min_latency: float | None = None
        self._min_latency_at = 0.0
        #: requests waiting for a turn, in order; only the first watches ``_changed``
        self._line: deque[asyncio.Future[None]] = deque()

    # --- waiting for a turn -----------------------------------------------------------------

    def _wait_time(self, tokens: float) -> float | None:
        """Seconds to wait before a request may go (0: now; None: until one ends)."""
        now = self._clock()
        if now < self.paused_until:
            return self.paused_until - now
        if self.in_flight >= self.limit:
            return None
        if self._opening:
            opened = self._opening_wait(now)
            if opened != 0:
                return opened
        if self._rpm is None and self._tpm is None and self.rate is None:
            return 0.0  # nothing paces this target
        waits = [b.wait_for(n) for b, n in ((self._rpm, 1), (self._tpm, tokens)) if b]
        if self._paced:
            # the next start is 1 / pace after the last; while the pace doubles, a waiter
            # looks again every RECHECK_S
            wait = max(0.0, self._last_start + 1.0 / self._pace_at(now) - now)
            waits.append(min(wait, RECHECK_S) if self._top is None else wait)
        return max(waits, default=0.0)

    def _opening_wait(self, now: float) -> float | None:
        """Seconds until the opening lets one more request be in flight (0: now; None:
        at the next answer)."""
        allowed = OPENING_LIMIT + self._answers
        first = self._first_start
        fastest = None  # when the time cap lets one more in flight
        if first is not None:
            if now - first >= OPENING_S:
                allowed = self.max_limit
            elif self._first_answer_at is None and now - first > OPENING_WAIT_S:
                # no answer yet: a slow server, whose answers would clock the opening late
                late = now - first - OPENING_WAIT_S
                allowed = max(allowed, OPENING_LIMIT * 2 ** (late / OPENING_DOUBLING_S))
            else:
                cap = int(OPENING_LIMIT * 2 ** ((now - first) / OPENING_FASTEST_S) + 1e-9)
                if cap < allowed:
                    allowed = cap
                    grown = math.log2((allowed + 1) / OPENING_LIMIT) * OPENING_FASTEST_S
                    fastest = first + grown
        if allowed >= self.max_limit:
            self._opening = False  # open: every turn is there
            return 0.0
        if self.in_flight < allowed:
            return 0.0
        if first is None:
            return None
        if self._first_answer_at is not None:
            until = first + OPENING_S if fastest is None else min(fastest, first + OPENING_S)
            return max(RECHECK_S / 50, until - now)  # or at the next answer
        growth = math.log2((self.in_flight + 1) / OPENING_LIMIT) * OPENING_DOUBLING_S
        return max(RECHECK_S / 50, first + OPENING_WAIT_S + growth - now)

    def try_acquire(self, tokens: float = 0.0) -> bool:
        """Take a turn if one is free now and nobody stands in line (what ``acquire`` does
        without waiting). A free turn with a line belongs to its first: a request that
        took it instead (a conversation's next turn, sent the moment its last answer came)
        would starve the line for the whole run."""
        if self._line or self._wait_time(tokens) != 0:
            return False
        self._enter(tokens)
        return True

    async def acquire(self, tokens: float = 0.0) -> None:
        """Wait for a turn: the target not paused, a free slot, and room in the buckets.

        Waiting requests stand in line: only the first one watches the gate (a request
        ending, the limit growing, the pause or pace running out), and it wakes the next
        once it has its turn, so one free slot never wakes every waiting request."""
        line = self._line
        if not line and self._wait_time(tokens) == 0:
            self._enter(tokens)
            return
        me: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        line.append(me)
        try:
            if line[0] is not me:
                await me  # woken when the requests ahead of it have had their turns
            while True:
                wait = self._wait_time(tokens)
                if wait == 0:
                    break
                self._changed.clear()
                if wait is None:
                    await self._changed.wait()
                elif wait <= SPIN_S and self._spinning():
                    await asyncio.sleep(0)  # the last moments: other tasks run meanwhile
                else:
                    early = SPIN_S if self._spinning() else 0.0
                    due = self._clock() + wait - early
                    try:
                        await asyncio.wait_for(self._changed.wait(), wait - early)
                    except TimeoutError:
                        self._woke(due)
        finally:
            self._leave_line(me)
        self._enter(tokens)

    def _spinning(self) -> bool:
        """Whether a waiter wakes SPIN_S early and looks again at every turn of the loop
        until its time: on the real clock, for turns (the opening's waits are looks again),
        at a pace whose spacing a millisecond matters to (faster, the loop would hardly
        ever rest)."""
        return self._spins and not self._opening and (self.rate or 0.0) <= SPIN_MAX_RATE

    def _woke(self, due: float) -> None:
        """A waiter woke from a wait that was due at ``due``. Woken late, the client was
        busy: the opening's clock stops meanwhile (its requests were not sent yet, and the
        answers that came were not read: more requests would only meet more refusals)."""
        late = self._clock() - due
        if self._opening and late > OPENING_LAG_S and self._first_start is not None:
            self._first_start += late

    def _leave_line(self, me: asyncio.Future[None]) -> None:
        """``me`` stops waiting (it has its turn, or was cancelled); a new first in line
        is woken to watch the gate."""
        line = self._line
        if line[0] is not me:
            line.remove(me)  # cancelled while others were ahead of it
            return
        line.popleft()
        if line and not line[0].done():
            line[0].set_result(None)

    def _enter(self, tokens: float) -> None:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        self.stats.requests += 1
        now = self._clock()
        if self._first_start is None:
            self._first_start = now
        starts = self._starts
        starts.append(now)
        horizon = now - LONG_S - self._paused_total
        while starts[0] < horizon:
            starts.popleft()
        if self._paced:
            self._recent.append(now)
            self.rate = self._pace_at(now)
            # a request late for its turn by more than a timer's usual lateness gives the
            # next one no credit (it would follow too closely); by less, the turns keep
            # their spacing (or the lateness of every wake-up would slow the pace)
            due = self._last_start + 1.0 / self.rate
            self._last_start = due if now - due <= LATE_S else now
        if self._rpm is not None:
            self._rpm.take(1)
        if self._tpm is not None:
            self._tpm.take(tokens)

    @property
    def waiting(self) -> bool:
        """Whether requests stand in line for a turn."""
        return bool(self._line)

    def release(self) -> None:
        """A request ended."""
        self.in_flight -= 1
        self._changed.set()

    async def requeue(self, tokens: float = 0.0, *, after: float = 0.0) -> None:
        """Give up this request's turn, wait ``after`` seconds without one (a retry's
        back-off: other requests use the turn meanwhile), then wait for a new one (after
        the target's pause, within its current limit and buckets). The caller holds a turn
        before and after, also when cancelled meanwhile, so its own release stays right."""
        self.release()
        try:
            if after > 0:
                await asyncio.sleep(after)
            await self.acquire(tokens)
        except BaseException:  # cancelled: back to holding a turn, which the caller ends
            self.in_flight += 1
            raise

    # --- what the target answered ---------------------------------------------------------

    def succeeded(self, sent_at: float | None = None) -> None:
        """One more answer, to a request sent at ``sent_at`` (None: not known): how long
        answers take sets how many requests the pace needs at once; in the opening, one
        more request at once."""
        now = self._clock()
        if sent_at is not None:
            latency = now - sent_at
            known = self._min_latency
            if known is None or latency <= known or now - self._min_latency_at > LATENCY_S:
                self._min_latency = max(0.0, latency)
                self._min_latency_at = now
        if self._opening:
            if self._first_answer_at is None:
                self._first_answer_at = now
            # an answer that waited in the client (its round trip twice the shortest) says
            # the client is what holds requests up: more at once would only queue
            if sent_at is None or now - sent_at <= QUEUED * (self._min_latency or 0.0):
                self._answers += 1
        if sent_at is not None and self._paced:
            self._fit_limit(now)

    def left(self, at: float) -> None:
        """A request left at ``at``. Paced, one that left over LATE_S after the last turn (the
        client stalled between its turn and the wire) moves the next turn back: spaced from
        the last turn, it would reach the server too soon after, and be refused."""
        if self._paced and at > self._last_start + LATE_S and at >= self.paused_until:
            self._last_start = at

    def now(self) -> float:
        """The gate's clock (when a request goes out, for ``throttled``'s ``sent_at``)."""
        return self._clock()

    def throttled(self, wait: float, *, sent_at: float | None = None, asked: bool = False) -> None:
        """The target said "too much" to a request sent at ``sent_at`` (None: just now):
        pause everything for ``wait`` s (``asked``: the wait the server asked for, its
        ``Retry-After``) and pace the requests under the rate the server accepted. A request
        sent before the last cut, or refused during the pause, brings the same news as the
        one that cut: it is one more refusal of that round, counted in its estimate, however
        short the server's wait. After one of a few refusals (``_alone``), the next request
        goes when the pause ends (the refused one took no turn at the server), the pace
        spacing the others from it."""
        self.stats.throttled += 1
        now = self._clock()
        sent = now if sent_at is None else sent_at
        self._refusals.append(sent)
        until = now + max(0.0, wait)
        self._pause_until(now, until)
        if now < self._round_paused_until or (sent_at is not None and sent_at < self._cut_at):
            # news of the round on: its estimate counts this refusal too
            self._round_end = max(self._round_end, sent)
            self._round_wait = max(self._round_wait, wait if asked else 0.0)
            self._round_refused += 1
            if self._noise:  # not alone after all: a round like any other
                self._noise = False
                self._new_round(now)
            else:
                self._estimate_round(now)
            self._round_paused_until = self.paused_until
            return
        self._cut_at = now
        self._round_end = sent
        self._round_wait = wait if asked else 0.0
        self._round_refused = 1
        self._opening = False
        refusals = self._alone(now)
        self._noise = refusals is not None
        if refusals is None:
            self._new_round(now)
        else:
            if refusals > NOISE_REFUSALS:
                self._lower_top(now)
            self._resume_at_pause_end()
        self._round_paused_until = self.paused_until

    def _resume_at_pause_end(self) -> None:
        """The paced turn after one of a few refusals comes when the pause ends, not a step
        of the pace after the refused request's: the server took nothing from it (when the
        pause ends, it has room for one), and the step would leave that room unused. Not
        after a round: a pace too high must lose the step, or it would keep the server's
        rate by its refusals."""
        if self.rate:
            self._last_start = min(self._last_start, self.paused_until - 1.0 / self.rate)

    def _lower_top(self, now: float) -> None:
        """One of a few refusals while under the top: the top goes FEW_CUT under the one
        the pace heads for (or the pace now, when lower), the pace stays on its way to it
        and the probe still comes HOLD_S after the last round."""
        assert self._top is not None
        self._top = min(self._top, self._pace_at(now) / HOLD_SHARE) * (1.0 - FEW_CUT)
        self._base = min(self._base, self._top)
        self.rate = self._pace_at(now)
        self._fit_limit(now)

    def _alone(self, now: float) -> int | None:
        """How many of the last NOISE_REQUESTS requests were refused (those since the
        first round's pause, when fewer have gone), this one included, when this refusal
        was met under the top (not while doubling or probing) and at most FEW_REFUSALS of
        them were (None otherwise): requests that reached the server sooner than their
        pace said (the client was busy when the one before went out), not a pace far too
        high. With fewer than NOISE_REQUESTS requests, one refusal is never called alone."""
        if not self._paced or self._top is None or now - self._epoch >= self._hold_s:
            return None
        recent = self._recent
        oldest = max(recent[0], self._opened) if recent else self._opened
        refused = sum(1 for t in self._refusals if t >= oldest)
        if refused > FEW_REFUSALS:
            return None
        if len(recent) < NOISE_REQUESTS:  # too few requests to call one refusal alone
            return max(refused, NOISE_REFUSALS + 1)
        return refused

    def _new_round(self, now: float) -> None:
        """A round of refusals starts: the pace restarts from its estimate."""
        self._round_pace = self._pace_at(now) if self._paced else None
        self._after_startup = self._paced and self._top is None
        self._probing = self._paced and now - self._epoch >= self._hold_s
        # a round met while holding lowers the top without starting over: the probe
        # that finds the edge again comes HOLD_S after the last one, whatever comes between
        self._holding = (
            self._top is not None and not self._probing and now - self._epoch >= RECOVER_HOLD_S
        )
        self._paced = True
        self._estimate_round(now)

    def _pause_until(self, now: float, until: float) -> None:
        """Pause the target until ``until`` at least, counting the seconds added."""
        if until <= self.paused_until:
            return
        self.stats.throttled_seconds += until - max(now, self.paused_until)
        pauses = self._pauses
        if pauses and pauses[-1][1] >= now:
            pauses[-1][1] = until  # the current pause, longer
        else:
            pauses.append([now, until])
        while pauses[0][1] < now - LOOKBACK_S:
            pauses.popleft()
        self._paused_total = sum(end - start for start, end in pauses)
        self.paused_until = until

    def _estimate_round(self, now: float) -> None:
        """Where the pace restarts after this round's refusals so far, and where it then
        heads (its top).

        The first round: from what the server accepted in the last second of sending (at
        the start of a run: its burst), doubling (``_top`` None). A later round met while
        probing (HOLD_S after the round before): that pace is the new top, the edge it
        found. One met sooner, on the way to the top, or while holding under it: the top was
        too high, and the new one is what the server accepted in the last second. Either
        way never above the pace that met the refusal, nor under the share of it that the
        second's refusals of this round leave (one aside: the edge itself), or half of it; and never
        under LONG_SHARE of what the server accepted over the last LONG_S (it takes that
        much at least: refusals at a lower pace came from requests bunched up on their way,
        and slowing down for them would only spiral down). Just after the doubling, the top
        is the pace that met it (the doubling overshoots by a step at most) and the restart
        half of it at least."""
        accepted, sent, refused = self._accepted_rate(self._round_end, ESTIMATE_S)
        before = self._round_pace
        if before is None:
            # the server's longest wait after refusing several at once is the time a token
            # takes: its rate, known at once (a limit without burst accepted only one)
            told = 0.0
            took = sent - refused
            if self._round_refused >= WAIT_REFUSALS and took <= WAIT_TOOK and self._round_wait:
                told = 1.0 / self._round_wait
            self._opened = self.paused_until
            if told > max(accepted, FIRST_RATE):
                self._base = self._top = told
            else:
                self._base = max(accepted, FIRST_RATE)
                self._top = None
        elif self._after_startup:
            self._top = before
            self._base = max(MIN_RATE, min(accepted, before), STARTUP_CUT * before)
        else:
            kept = DEEP_CUT
            if not self._holding and sent:
                kept = max(DEEP_CUT, 1.0 - (refused - 1) / sent)
            floor = max(MIN_RATE, min(accepted, before), kept * before)
            long_run, _, _ = self._accepted_rate(self._round_end, LONG_S)
            floor = max(floor, LONG_SHARE * long_run)
            self._base = floor
            self._top = before if self._probing else floor
        if not self._holding:
            self._epoch = self.paused_until
            # the edge found by probing is held long; a top cut on the way to it may be
            # under the server's rate: probing comes back sooner
            self._hold_s = HOLD_S if self._probing or self._after_startup else SHORT_HOLD_S
        self.rate = self._pace_at(now)
        self._fit_limit(now)

    def _accepted_rate(self, end: float, length: float) -> tuple[float, int, int]:
        """Requests a second the server accepted of those sent in the ``length`` s of
        sending up to ``end`` (pauses left out; after the first round, since its pause
        ended: the opening's requests went out before anything was known), less those
        refused; and how many were sent and refused. Over SHORTEST_S at least (0 when a
        whole LONG_S is asked for and not there yet)."""
        start = self._window_start(end, length)
        span = length
        if self._round_pace is not None and start < self._opened:
            start = self._opened
            span = end - start - self._paused_between(start, end)
            if length == LONG_S:
                return 0.0, 0, 0
            span = max(SHORTEST_S, span)
        sent = 0
        for t in reversed(self._starts):
            if t < start:
                break
            if t <= end:
                sent += 1
        refused = sum(1 for t in self._refusals if start <= t <= end)
        refusals = self._refusals
        while refusals and refusals[0] < start - LOOKBACK_S:
            refusals.popleft()
        return max(0, sent - refused) / span, sent, refused

    def _window_start(self, end: float, length: float) -> float:
        """Where ``length`` s of sending up to ``end`` start, the pauses between left out."""
        t, remaining = end, length
        for start, stop in reversed(self._pauses):  # the latest first
            if start >= t:
                continue
            sending = t - min(stop, t)
            if sending >= remaining:
                break
            remaining -= sending
            t = start
        return t - remaining

    def _paused_between(self, start: float, end: float) -> float:
        """Seconds the target was paused between ``start`` and ``end``."""
        return sum(max(0.0, min(end, b) - max(start, a)) for a, b in self._pauses)

    def _pace_at(self, now: float) -> float:
        """The pace at ``now``, from the end of the round's pause: after the first round,
        PACE_SHARE of what was accepted, doubling every STARTUP_DOUBLING_S; after a later
        one, from RESTART_SHARE of the restart up to HOLD_SHARE of the top (the gap halved
        every RECOVER_HALF_S), held there until HOLD_S, then growing by PROBE_GROWTH a
        second (finding out whether the server takes more)."""
        t = max(0.0, now - self._epoch)
        top = self._top
        if top is None:
            pace = PACE_SHARE * self._base * 2 ** min(t / STARTUP_DOUBLING_S, 40.0)
        elif t < self._hold_s:
            held = HOLD_SHARE * top
            pace = held - (held - RESTART_SHARE * self._base) * 2 ** (-t / RECOVER_HALF_S)
        else:
            pace = HOLD_SHARE * top * PROBE_GROWTH ** min(t - self._hold_s, 400.0)
        return max(MIN_RATE, min(MAX_RATE, pace))

    def _fit_limit(self, now: float) -> None:
        """Requests at once for the pace: LIMIT_GAIN times what the shortest answers need
        at it, plus LIMIT_SPARE, at most ``workers`` (no answer seen yet: as it is)."""
        if self._min_latency is None:
            return
        need = math.ceil(LIMIT_GAIN * self._pace_at(now) * self._min_latency) + LIMIT_SPARE
        limit = min(self.max_limit, need)
        if limit > self.limit:
            self._changed.set()
        self.limit = limit
        self.stats.lowest_limit = min(self.stats.lowest_limit, limit)

    @property
    def counts_tokens(self) -> bool:
        """Whether requests' tokens matter here (``max_tpm``)."""
        return self._tpm is not None

    def used_tokens(self, estimated: float, actual: int | None) -> None:
        """Correct the token bucket once the real usage is known."""
        if self._tpm is None or actual is None:
            return
        if actual > estimated:
            self._tpm.take(actual - estimated)
        else:
            self._tpm.give_back(estimated - actual)

    @property
    def paused_for(self) -> float:
        """Seconds until the target resumes (0: not paused)."""
        return max(0.0, self.paused_until - self._clock())

    def snapshot(self, tokens: float = 0.0) -> GateState:
        """The gate's state at its clock's time, for tests, logs and measurements.

        Args:
            tokens: the tokens of the request whose ``wait`` the snapshot tells (for a
                ``max_tpm`` bucket).

        Returns:
            A ``GateState``; taking it changes nothing a request would not (the opening
            ends when its time has come, the buckets refill to the clock's time).
        """
        wait = self._wait_time(tokens)
        now = self._clock()
        return GateState(
            limit=self.limit,
            max_limit=self.max_limit,
            in_flight=self.in_flight,
            peak=self.peak,
            waiting=len(self._line),
            paused_until=self.paused_until,
            wait=wait,
            opening=self._opening,
            first_start=self._first_start,
            first_answer_at=self._first_answer_at,
            answers=self._answers,
            min_latency=self._min_latency,
            paced=self._paced,
            pace=self._pace_at(now) if self._paced else None,
            rate=self.rate,
            base=self._base,
            top=self._top,
            epoch=self._epoch,
            hold=self._hold_s,
            cut_at=self._cut_at,
            after_startup=self._after_startup,
            probing=self._probing,
            holding=self._holding,
            noise=self._noise,
            last_sent=self._starts[-1] if self._starts else None,
            last_start=self._last_start,
            rpm_level=self._rpm.available() if self._rpm is not None else None,
            tpm_level=self._tpm.available() if self._tpm is not None else None,
            spins=self._spins,
        )


def estimate_tokens(request: ProviderRequest) -> int:
    """A request's input tokens, guessed before the call: about 4 characters a token."""
    return tokens_of(sum(len(m.content) for m in request.messages) or len(request.question))


def tokens_of(chars: int) -> int:
    """The tokens guessed for ``chars`` characters of a request (about 4 a token)."""
    return chars // 4 + 1


class Gate(Throttle, Protocol):
    """A target's gate as a request sees it: a ``TargetGate`` here, a ``RemoteGate`` on a
    Ray cluster (``agentv.run.executors.ray_gates``)."""

    limit: int
    max_limit: int
    counts_tokens: bool
    stats: GateStats

    def try_acquire(self, tokens: float = 0.0) -> bool: ...

    async def acquire(self, tokens: float = 0.0) -> None: ...

    def release(self) -> None: ...

    @property
    def waiting(self) -> bool: ...

    def used_tokens(self, estimated: float, actual: int | None) -> None: ...


#: agent targets enforce their time limit themselves (and clean up); the gate's is a backstop
AGENT_GRACE_S = 10.0

#: told each time a request of the current case gets its turn at a gate: a case's time is
#: counted from its first turn (before it, it was queued behind other cases), and the live
#: view shows it as running from then (``agentv.run.pipeline``)
TURN_TAKEN: ContextVar[Callable[[], None] | None] = ContextVar("agentv_turn_taken", default=None)


class GatedProvider(ProviderWrapper):
    """A provider whose requests are each sent in a turn of its target's gate, the gate told
    how they went. A request with a time limit (``request.timeout``) gets that long from
    when its turn comes (an agent ``AGENT_GRACE_S`` more: it stops itself, and cleans up);
    past it the request fails as ``ProviderTimeout``."""

    def __init__(self, wrapped: Provider, gate: Gate) -> None:
        super().__init__(wrapped)
        self.gate = gate

    async def invoke(self, request: ProviderRequest) -> ProviderResponse:
        """The wrapped provider's answer, sent when the gate lets it through."""
        gate = self.gate
        estimated = estimate_tokens(request) if gate.counts_tokens else 0
        if not gate.try_acquire(estimated):  # mostly a turn is free: no waiting to set up
            await gate.acquire(estimated)
        try:
            told = TURN_TAKEN.get()
            if told is not None:
                told()
            response = await self._send(request)
        finally:
            gate.release()
        usage = response.usage
        gate.used_tokens(estimated, usage.input_tokens if usage is not None else None)
        return response

    async def _send(self, request: ProviderRequest) -> ProviderResponse:
        timeout = request.timeout
        if timeout is None:
            return await self.wrapped.invoke(request)
        limit = timeout + (AGENT_GRACE_S if self.is_agent else 0.0)
        try:
            async with asyncio.timeout(limit) as scope:  # from when the gate lets it through
                when = scope.when()
                assert when is not None  # a timeout of `limit` seconds
                told = DEADLINE.set((asyncio.current_task(), when))
                try:
                    return await self.wrapped.invoke(request)
                finally:
                    DEADLINE.reset(told)
        except TimeoutError:
            raise ProviderTimeout(
                self.name, f"target {self.name!r} did not answer within {timeout:g}s"
            ) from None


class Gates:
    """The run's gates, one per target provider, made on first use."""

    def __init__(self) -> None:
        self._gates: dict[int, tuple[Provider, Gate]] = {}

    def for_provider(self, provider: Provider, limit: int) -> Gate:
        """The gate of ``provider`` (``limit`` and its ``max_rpm``/``max_tpm`` apply when it
        is made); the provider learns its gate as its throttle, to report throttling and
        successes."""
        found = self._gates.get(id(provider))
        if found is None:
            gate = self._make(provider, limit)
            provider.throttle = gate
            found = self._gates[id(provider)] = (provider, gate)
        return found[1]

    def _make(self, provider: Provider, limit: int) -> Gate:
        return TargetGate(limit, max_rpm=max_rpm(provider), max_tpm=max_tpm(provider))

    def by_target(self) -> dict[str, Gate]:
        """Each gate under its target's name."""
        return {provider.name: gate for provider, gate in self._gates.values()}


def max_rpm(provider: Provider) -> float | None:
    """The requests a minute ``provider``'s target allows itself (None: no limit of its own)."""
    return getattr(provider.settings, "max_rpm", None)


def max_tpm(provider: Provider) -> float | None:
    """The tokens a minute ``provider``'s target allows itself (None: no limit of its own)."""
    return getattr(provider.settings, "max_tpm", None)
