"""How many direct requests may be in flight: one limit shared by every job.

A server with a small queue answers 429 (or 503) when it is full. Sending the
same load again only earns more 429s, so the limit learns the server's
capacity instead of hunting for it:

* **the first window, full and paced**: the limit starts at the ``--max-connections``
  ceiling, and until the first answer requests leave one at a time,
  ``FIRST_WINDOW_PACE_S`` after the previous one really went (a client whose loop
  stalled sends one when it wakes, not the backlog). A server's 429 comes back
  without doing the work, so a local or nearby server capped below the ceiling
  refuses about one request before the cap is learned; one further away sees at
  most ``ceiling − cap`` refusals once, each sent again first in line. Most servers
  take the whole ceiling (a vLLM server queues rather than refuses; a provider's
  rate limit counts requests or tokens per minute), and they are full from the
  first round trip: starting at a quarter and doubling per round trip held a
  300 ms server at 26 of 32 on average, 1.28× its ideal time against 1.12×;
* **slow start**, only when ``initial`` is below the ceiling: one more slot per
  answer, at most one per ``GROWTH_PACE_S``, up to the ceiling or the first "busy"
  answer. Growth follows answers, so the first 429 comes when the requests in
  flight pass the server's cap by about one; the pace bounds how many more go out
  before that 429 is read by a client starved of CPU, which reads answers in bursts;
* **the cap, measured**: the server refused a request because it was full, and
  it can only have held requests of this run that were sent before the refused
  one and not yet answered, all of them counted in flight when the refused one
  was sent. That count (its *depth*) is an upper bound on the server's size,
  exact when the client reads answers promptly, and a refusal **cuts** the cap
  and the limit to it (refusals of requests sent before the last cut lower the
  cap to their depth too, without a new cut). At the limit a request is never
  refused (what the client counts in flight is never less than what the server
  holds), so the limit holds the server full instead of sawing below its size
  as a multiplicative decrease does; a cap read too high (a client starved of
  CPU, reading answers late) costs one more 429 per slot on the way down.
  Counting what is in flight when the refusal is *read* instead swings both
  ways under load (a burst of 30 at a server of 16 read as 29; answers read
  before the refusal but sent after it read it as 7);
* **growing back**: the largest cap held for a whole window of answers without
  a refusal is remembered (``high``). Below it (the server's cap changed, or a
  depth was read one short because two requests reached the server in the
  other order) the limit grows back after ``REGROW_WINDOWS`` windows, one slot
  per answer at most one per ``GROWTH_PACE_S``; a refusal on the way keeps the
  cap (up to the refused depth) and waits as long again. ``FORGET_AFTER``
  refused attempts in a row (the server shrank for good), or one at a size
  never held for a window, forget ``high``;
* **probing, rarely**: at ``high`` the limit stays put; one slot above it is
  tried after ``probe_windows`` windows of answers, and each probe the server
  refuses doubles the wait before the next (a cap that keeps answering 429 is
  probed less and less); a probe that a whole window of answers passes
  raises the cap (the server grew).

A refused request is not made to sleep while the server has room for it: it
goes first in line for the next slot (see :mod:`aeval.engine.direct.client`).
Waiters are otherwise served first come, first served, so jobs that queue
their requests in turn share the limit fairly.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio

__all__ = ["DEFAULT_PROBE_WINDOWS", "AimdLimiter", "AimdStats", "Ticket"]

# Spacing of the first window's requests (until the first answer): a local or
# nearby server's 429 comes back within it, before much of the window is out;
# a window of 32 is out in 64 ms.
FIRST_WINDOW_PACE_S = 0.002
# Slow start: at most one more slot per this many seconds (at most 40 a second: a
# ceiling of 32 from a first window of 8 in 0.36 s).
GROWTH_PACE_S = 0.015
# Windows of answers at the learned cap before one slot above it is tried: a
# probe costs one quick 429 when the cap holds, and at most this many windows
# at one slot below the server's room when it grew. Each refused probe doubles it.
DEFAULT_PROBE_WINDOWS = 8
# Windows of answers at a cap below the largest size the server has shown (it refused
# more, then fewer: a cap that changed) before growing back towards that size: a server
# whose cap was halved and restored is full again within a few round trips.
REGROW_WINDOWS = 2
# Growing back refused this many times in a row: the server shrank for good, and the
# cap is probed rarely again (every DEFAULT_PROBE_WINDOWS windows, doubling).
FORGET_AFTER = 4


@dataclass(frozen=True, slots=True)
class Ticket:
    """One held slot: the congestion epoch it was taken in, and how many other
    requests were in flight when it was sent (give it to :meth:`AimdLimiter.busy`)."""

    epoch: int
    depth: int


@dataclass(frozen=True, slots=True)
class AimdStats:
    """What the limiter did: the limit now, its lowest value, how often it was cut."""

    limit: float
    lowest: float
    decreases: int
    in_use: int
    cap: float | None = None  # the server's capacity as learned (None: no 429 yet)
    busy: int = 0  # "busy" answers seen
    high: float | None = None  # the largest capacity the server has shown


class AimdLimiter:
    """A concurrency limit that learns a server's capacity from its "busy" answers.

    :param ceiling: the most slots ever (``--max-connections``).
    :param floor: the least slots ever (one request at a time still makes progress).
    :param initial: the first window; default: the ceiling. Below it, the limit
        grows by slow start.
    :param probe_windows: windows of answers at the learned cap before one slot
        above it is tried (doubled after each probe the server refuses).
    :param growth_pace_s: the slow start's least time between two added slots.
    """

    def __init__(
        self,
        ceiling: int,
        *,
        floor: int = 1,
        initial: int | None = None,
        probe_windows: int = DEFAULT_PROBE_WINDOWS,
        growth_pace_s: float = GROWTH_PACE_S,
    ) -> None:
        if ceiling < 1 or floor < 1 or floor > ceiling:
            raise ValueError(f"need 1 <= floor ({floor}) <= ceiling ({ceiling})")
        if initial is None:
            initial = ceiling
        if not floor <= initial <= ceiling:
            raise ValueError(f"need floor ({floor}) <= initial ({initial}) <= ceiling ({ceiling})")
        if probe_windows < 1:
            raise ValueError(f"probe_windows must be at least 1, got {probe_windows}")
        self.ceiling = ceiling
        self.floor = floor
        self.limit = float(initial)
        self.lowest = self.limit
        self.cap: float | None = None
        self.decreases = 0
        self.busy_answers = 0
        self.in_use = 0
        self._epoch = 0
        self._base_windows = probe_windows
        self._probe_windows = probe_windows
        self.high: float | None = None  # the largest size the server has shown
        self._held = 0  # answers since the limit reached the cap, or since a probe began
        self._high_proven = False  # ``high`` held for a whole window without a refusal
        self._regrowths_refused = 0  # in a row, below ``high``
        self._paced = True  # until the first answer
        self._next_send = -math.inf
        self._pace_lock = anyio.Lock()
        self._waiters: deque[anyio.Event] = deque()
        self._sending = 0  # slots whose request has been sent (in the block)
        self._growth_pace = growth_pace_s
        self._next_growth = -math.inf

    @property
    def slots(self) -> int:
        return max(self.floor, math.floor(self.limit))

    def stats(self) -> AimdStats:
        return AimdStats(
            self.limit,
            self.lowest,
            self.decreases,
            self.in_use,
            self.cap,
            self.busy_answers,
            self.high,
        )

    @asynccontextmanager
    async def slot(self, *, first: bool = False) -> AsyncIterator[Ticket]:
        """Hold one slot while the block runs (send the request in it); yields its
        :class:`Ticket` (give it to :meth:`busy`). Waits while full: first come,
        first served, or ahead of everyone with ``first`` (a request the server
        just refused)."""
        if self._paced:
            # One sender at a time, each a pace after the previous one really went: a
            # client whose loop stalled sends one request when it wakes, not the whole
            # backlog of requests whose sleeps ran out meanwhile.
            async with self._pace_lock:
                if self._paced:
                    await anyio.sleep(max(0.0, self._next_send - anyio.current_time()))
                    self._next_send = anyio.current_time() + FIRST_WINDOW_PACE_S
        if self.in_use >= self.slots or (self._waiters and not first):
            event = anyio.Event()
            if first:
                self._waiters.appendleft(event)
            else:
                self._waiters.append(event)
            try:
                await event.wait()
            except BaseException:
                if event.is_set():  # woken with a slot handed over: give it on
                    self.in_use -= 1
                    self._wake()
                else:
                    self._waiters.remove(event)
                raise
        else:
            self.in_use += 1
        ticket = Ticket(self._epoch, self._sending)
        self._sending += 1
        try:
            yield ticket
        finally:
            self._sending -= 1
            self.in_use -= 1
            self._wake()

    def success(self) -> None:
        """An answer came back: hold at the cap, grow back towards the size the server
        had, or probe above it."""
        self._paced = False
        if self.cap is None:
            # Slow start: one more slot per answer, up to the ceiling, paced.
            if self.limit < self.ceiling and self._grow_now():
                self.limit = min(float(self.ceiling), self.limit + 1.0)
                self._wake()
            return
        self._held += 1
        high = self.high if self.high is not None else self.cap
        if self.limit > self.cap:
            if self.limit < high and self._grow_now():
                # Growing back: the server held ``high`` for a window before it refused;
                # one slot per answer (paced) finds out within a round trip if it does again.
                self.limit += 1.0
            if self._held >= self.limit:  # a whole window above the cap: the server has room
                self.cap = float(math.floor(self.limit))
                if self.cap > high:  # a probe above the largest size seen passed: it grew
                    self._probe_windows = self._base_windows
                if self.cap >= high:
                    self._proved(self.cap)
                self._held = 0
            self._wake()
            return
        if self._held >= self.cap and self.cap >= high:
            self._proved(self.cap)  # a window at the cap without a refusal: it holds that
        if self.cap < high and self._held >= REGROW_WINDOWS * self.cap:
            self.limit = self.cap + 1.0  # below the size the server held: try to grow back
            self._held = 0
        elif self._held >= self._probe_windows * self.cap and self.cap < self.ceiling:
            self.limit = self.cap + 1.0  # at the largest size seen: probe, rarely
            self._held = 0
        self._wake()

    def busy(self, ticket: Ticket) -> None:
        """The server said 429/503 to the request holding ``ticket`` (still held)."""
        self._paced = False
        self.busy_answers += 1
        # At most what the server held of ours: what was in flight when this was sent.
        depth = float(min(self.ceiling, max(self.floor, ticket.depth)))
        if self.cap is not None and self.limit > self.cap:
            # Growing or probing above the cap, refused: the server holds the cap it held
            # at for windows without a refusal (a depth read one short, from two requests
            # reaching the server in the other order, is not news), and up to this depth.
            self.cap = max(self.cap, depth)
            if self.high is not None and self.cap < self.high:
                self._regrowths_refused += 1
                if not self._high_proven or self._regrowths_refused >= FORGET_AFTER:
                    # A size never held for a window (the first refusal's depth, read
                    # high by a client reading answers late), or the server shrank for
                    # good: the cap is probed rarely now.
                    self.high = self.cap
            else:
                self._probe_windows *= 2  # the next probe waits twice as long
        elif self.cap is None or ticket.epoch == self._epoch:
            # A cut: the server is full with what was in flight when this was sent (not
            # a fraction of it: that many were answered until now). The size before the
            # cut (``high``) is kept, to grow back to when the server has room again.
            if self.cap is None:
                self.high, self._high_proven = depth, False
            self.cap = depth
        else:
            # Sent before the last cut, refused after it: its depth bounds the size too.
            self.cap = min(self.cap, depth)
        self._held = 0
        self.limit = self.cap
        self.lowest = min(self.lowest, self.cap)
        if ticket.epoch == self._epoch:  # one congestion, however many refusals it brings
            self._epoch += 1
            self.decreases += 1

    def _proved(self, size: float) -> None:
        self.high, self._high_proven, self._regrowths_refused = size, True, 0

    def _grow_now(self) -> bool:
        """Whether a slot may be added now (at most one per growth pace)."""
        now = anyio.current_time()
        if now < self._next_growth:
            return False
        self._next_growth = now + self._growth_pace
        return True

    def _wake(self) -> None:
        # A slot is handed to the waiter (counted before it runs), so a newcomer
        # cannot take it first: first come, first served.
        while self._waiters and self.in_use < self.slots:
            self.in_use += 1
            self._waiters.popleft().set()
