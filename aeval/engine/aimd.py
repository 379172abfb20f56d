"""How many direct requests may be in flight: one limit shared by every job, AIMD.

A server with a small queue answers 429 (or 503) when it is full. Sending the
same load again only earns more 429s, so the limit moves like TCP's window:
each answer raises it a little (additive increase, about one slot per
round-trip of the whole window), each "busy" lowers it by a factor
(multiplicative decrease), never below ``floor``, never above the
``--max-connections`` ceiling. A burst of 429s answering requests that were
all sent under the old limit counts as one signal (the *epoch* a request was
sent in must be the current one), or one full queue would halve the limit
once per rejected request.

Waiters are served first come, first served, so jobs that queue their requests
in turn share the limit fairly.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio

__all__ = ["DEFAULT_DECREASE", "AimdLimiter", "AimdStats"]

# Why 0.9 and not TCP's 0.5: the signal here is exact (the server counted its
# queue and said it is full), and every slot below the server's capacity idles
# it for a whole request latency, while a slot above it costs only one quick 429.
# Against a server capped at 32, 0.75 kept the limit between 25 and 33 (about 29
# on average: 1.24 × the ideal time in bench/engine_direct.py); 0.9 keeps it
# between 30 and 33. Cuts come once per round trip, so 64 → 32 still takes ~7
# quick rounds of 429s, while the server stays full.
DEFAULT_DECREASE = 0.9


@dataclass(frozen=True, slots=True)
class AimdStats:
    """What the limiter did: the limit now, its lowest value, how often it was cut."""

    limit: float
    lowest: float
    decreases: int
    in_use: int


class AimdLimiter:
    """A concurrency limit that grows on success and shrinks when the server is busy.

    :param ceiling: the most slots ever (``--max-connections``); the starting limit.
    :param decrease: the factor a "busy" answer multiplies the limit by.
    :param floor: the least slots ever (one request at a time still makes progress).
    """

    def __init__(self, ceiling: int, *, decrease: float = DEFAULT_DECREASE, floor: int = 1) -> None:
        if ceiling < 1 or floor < 1 or floor > ceiling:
            raise ValueError(f"need 1 <= floor ({floor}) <= ceiling ({ceiling})")
        if not 0 < decrease < 1:
            raise ValueError(f"decrease must be in (0, 1), got {decrease}")
        self.ceiling = ceiling
        self.floor = floor
        self._decrease = decrease
        self.limit = float(ceiling)
        self.lowest = float(ceiling)
        self.decreases = 0
        self.in_use = 0
        self._epoch = 0
        self._waiters: deque[anyio.Event] = deque()

    @property
    def slots(self) -> int:
        return max(self.floor, math.floor(self.limit))

    def stats(self) -> AimdStats:
        return AimdStats(self.limit, self.lowest, self.decreases, self.in_use)

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[int]:
        """Hold one slot while the block runs; yields the epoch it was taken in
        (give it to :meth:`busy`). Waits, first come first served, while full."""
        if self.in_use >= self.slots or self._waiters:
            event = anyio.Event()
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
        try:
            yield self._epoch
        finally:
            self.in_use -= 1
            self._wake()

    def success(self) -> None:
        """An answer came back: about one more slot per window of answers."""
        if self.limit < self.ceiling:
            self.limit = min(float(self.ceiling), self.limit + 1.0 / self.limit)
            self._wake()

    def busy(self, epoch: int) -> None:
        """The server said 429/503 to a request sent in ``epoch``: shrink, once per epoch."""
        if epoch != self._epoch:
            return  # sent under a limit that was already cut for this congestion
        self._epoch += 1
        self.decreases += 1
        self.limit = max(float(self.floor), self.limit * self._decrease)
        self.lowest = min(self.lowest, self.limit)

    def _wake(self) -> None:
        # A slot is handed to the waiter (counted before it runs), so a newcomer
        # cannot take it first: first come, first served.
        while self._waiters and self.in_use < self.slots:
            self.in_use += 1
            self._waiters.popleft().set()
