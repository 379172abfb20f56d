"""Pacing of one run's batch calls: when to poll next, and when a model may create.

Plain state with no I/O: :class:`PollSchedule` spaces the polls of one batch,
:class:`ModelGate` holds a model's batch creations back while it is over the
API's enqueued-token limit.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

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


@dataclass
class ModelGate:
    """Per-model coordination for the enqueued-token limit.

    While a model is ``blocked`` (one of its batches was refused for the token
    limit), none of its shards creates a batch; the refused shard waits until
    the model has no batch in flight, then lifts the block and resubmits.
    """

    in_flight: int = 0
    blocked: bool = False
    changed: anyio.Event = field(default_factory=anyio.Event)

    def _notify(self) -> None:
        self.changed.set()
        self.changed = anyio.Event()

    async def wait_unblocked(self) -> None:
        while self.blocked:
            await self.changed.wait()

    async def wait_idle(self) -> None:
        while self.in_flight > 0:
            await self.changed.wait()

    def block(self) -> None:
        self.blocked = True
        self._notify()

    def unblock(self) -> None:
        self.blocked = False
        self._notify()

    def started(self) -> None:
        self.in_flight += 1
        self._notify()

    def finished(self) -> None:
        self.in_flight = max(0, self.in_flight - 1)
        self._notify()
