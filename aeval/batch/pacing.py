"""Pacing of one run's batch calls: when to poll next, and when a model may create.

Plain state with no I/O: :class:`PollSchedule` spaces the polls of one batch,
:class:`ModelGate` holds a model's batch creations back while it is over the
API's enqueued-token limit.
"""

from __future__ import annotations

import random

import anyio

from aeval.api_settings import PollSettings
from aeval.batch.providers.base import RemoteBatch

__all__ = ["ModelGate", "PollSchedule"]


# At most this many polls of one batch are brought forward by its pace, so a pace
# that keeps promising an end that does not come cannot turn the backoff into
# polling every ``initial_s``.
_EARLY_POLLS = 3


class PollSchedule:
    """Waits between polls: ``initial`` growing by ``factor`` up to ``max``, each jittered.

    Fed the batch's request counts (:meth:`observe`), it also knows the batch's
    pace, and never waits past the moment that pace says the counts will be
    complete: with a backoff grown to tens of seconds, the last wait would
    otherwise overshoot the batch's end by up to a whole interval (on the
    offline demo, 4.5 s of a 19 s run). It costs at most three polls per
    batch, all near its end; a pace that stalls (counts stuck short of the
    total) predicts nothing and leaves the backoff alone.
    """

    def __init__(self, settings: PollSettings, rng: random.Random) -> None:
        self._settings = settings
        self._rng = rng
        self._next = settings.initial_s
        # (time, requests done) when the counts were first and last seen moving.
        self._first: tuple[float, int] | None = None
        self._last: tuple[float, int] | None = None
        self._total = 0
        self._early = 0  # polls brought forward by the pace so far

    def observe(self, remote: RemoteBatch, now: float) -> None:
        """Note the batch's counts at ``now`` (any monotonic clock, the same for
        :meth:`next_delay`)."""
        if remote.status != "in_progress" or not remote.total:
            return
        done = remote.completed + remote.failed
        self._total = remote.total
        if self._first is None:
            self._first = (now, done)
        if self._last is None or done > self._last[1]:
            self._last = (now, done)

    def done_in(self, now: float) -> float | None:
        """Seconds until the counts reach the total at the observed pace (0 once
        they have); None without a pace, or when that moment has passed with
        requests still open (the pace stalled)."""
        if self._last is not None and self._last[1] >= self._total:
            return 0.0  # every request answered: the batch finalizes next
        if self._first is None or self._last is None:
            return None
        (t0, d0), (t1, d1) = self._first, self._last
        if d1 <= d0 or t1 <= t0:
            return None
        left = (self._total - d1) * (t1 - t0) / (d1 - d0) - (now - t1)
        return left if left > 0 else None

    def next_delay(self, now: float | None = None) -> float:
        s = self._settings
        base = self._next
        self._next = min(s.max_s, self._next * s.factor)
        delay = base * self._rng.uniform(1 - s.jitter, 1 + s.jitter)
        done_in = self.done_in(now) if now is not None else None
        if done_in is not None and done_in < delay and self._early < _EARLY_POLLS:
            # Never sooner than the first interval: a pace is an estimate.
            self._early += 1
            delay = max(s.initial_s, done_in)
        return delay

    def reset(self) -> None:
        self._next = self._settings.initial_s


class ModelGate:
    """Per-model coordination for the enqueued-token limit.

    While a model is ``blocked`` (one of its batches was refused for the token
    limit), none of its shards creates a batch; the refused shard waits until
    the model has no batch in flight, then lifts the block and resubmits.
    """

    def __init__(self) -> None:
        self.in_flight = 0
        self.blocked = False
        self._changed = anyio.Condition()

    async def wait_unblocked(self) -> None:
        async with self._changed:
            while self.blocked:
                await self._changed.wait()

    async def wait_idle(self) -> None:
        async with self._changed:
            while self.in_flight > 0:
                await self._changed.wait()

    async def block(self) -> None:
        await self._change(blocked=True)

    async def unblock(self) -> None:
        await self._change(blocked=False)

    async def started(self) -> None:
        await self._change(in_flight=1)

    async def finished(self) -> None:
        await self._change(in_flight=-1)

    async def _change(self, *, blocked: bool | None = None, in_flight: int = 0) -> None:
        # Shielded: a count that a cancelled caller failed to take back would
        # hold the model's other shards forever.
        with anyio.CancelScope(shield=True):
            async with self._changed:
                if blocked is not None:
                    self.blocked = blocked
                self.in_flight = max(0, self.in_flight + in_flight)
                self._changed.notify_all()
