"""Pacing of one run's batch calls: when to poll next, and when a model may create.

Plain state with no I/O: :class:`PollSchedule` spaces the polls of one batch,
:class:`ModelGate` holds a model's batch creations back while it is over the
API's enqueued-token limit.
"""

from __future__ import annotations

import random

import anyio

from aeval.config import PollSettings

__all__ = ["ModelGate", "PollSchedule"]


class PollSchedule:
    """Waits between polls: ``initial`` growing by ``factor`` up to ``max``, each jittered."""

    def __init__(self, settings: PollSettings, rng: random.Random) -> None:
        self._settings = settings
        self._rng = rng
        self._next = settings.initial_s

    def next_delay(self) -> float:
        s = self._settings
        base = self._next
        self._next = min(s.max_s, self._next * s.factor)
        return base * self._rng.uniform(1 - s.jitter, 1 + s.jitter)

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
