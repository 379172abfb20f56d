"""Concurrent small reward calls, scored together: one pool call per chunk, not per sample.

verl's reward loop awaits ``compute_score`` once per sample, a whole step's
samples at once in one event loop; OpenRLHF's remote reward client posts one
request per sample. Scored one by one, each sample would pay its own trip to
the pool (and, on a cluster, its own Ray call), and the pool would see one
check at a time. A :class:`MicroBatcher` gathers the checks that arrive within
``max_wait_s`` of each other (or until ``max_batch`` are waiting, or for at
most ``MAX_WAITS`` times ``max_wait_s``)
and sends them in one :meth:`EquivalenceReward.verdicts_in_pool` call, under
one deadline; every caller gets its own verdicts back. Several chunks may be in
flight at once: the pool serves them all.

The chunks are gathered and scored in the reward's own event loop (the one
its pool lives in), whatever loop or thread the callers run in: so the checks
of concurrent callers from several loops share chunks too, and a caller's
cancellation (a plain ``Task.cancel``, an ``asyncio.wait_for`` timeout) reaches
the chunk as an anyio cancellation there, which the chunk's shield holds off.
A cancelled caller drops its own verdicts and nothing else: the chunk it
opened is still sent and scored, and its peers get their verdicts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

import anyio
import anyio.lowlevel

from aeval.errors import AevalError, ConfigError
from aeval.reward.runtime import Pool
from aeval.reward.schedule import Check
from aeval.verdicts import CheckResult

T = TypeVar("T")


class ChunkReward(Protocol):
    """What the batcher asks of the reward it batches for
    (:class:`aeval.reward.equivalence.EquivalenceReward`)."""

    async def verdicts_in_pool(self, pool: Pool, checks: list[Check]) -> list[CheckResult]: ...

    async def run_in_pool(self, func: Callable[[Pool], Awaitable[T]]) -> T: ...


__all__ = ["DEFAULT_MAX_BATCH", "DEFAULT_MAX_WAIT_S", "MicroBatcher"]

# A GRPO step (128 prompts x 16 completions) in two chunks; far more than the
# pool has workers, so every worker stays busy while a chunk is scored.
DEFAULT_MAX_BATCH = 1024
# verl submits a step's samples within a few milliseconds of each other; when
# they come as rollouts finish instead, 20 ms is nothing next to generation.
DEFAULT_MAX_WAIT_S = 0.02
# A chunk that checks keep joining is sent at the latest this many waits after it opened.
MAX_WAITS = 10


@dataclass(eq=False)
class _Chunk:
    checks: list[Check] = field(default_factory=list)
    full: anyio.Event = field(default_factory=anyio.Event)
    done: anyio.Event = field(default_factory=anyio.Event)
    results: list[CheckResult] = field(default_factory=list)
    error: BaseException | None = None


class MicroBatcher:
    """Checks submitted concurrently, from any event loop, sent to the reward's pool in chunks.

    :param reward: the reward whose pool (local or Ray) and deadline score each chunk.
    :param max_batch: a chunk is sent as soon as it holds this many checks.
    :param max_wait_s: ... or once no check has joined it for this long (at most
        ``MAX_WAITS`` times this after it opened).
    """

    def __init__(
        self,
        reward: ChunkReward,
        *,
        max_batch: int = DEFAULT_MAX_BATCH,
        max_wait_s: float = DEFAULT_MAX_WAIT_S,
    ) -> None:
        if max_batch < 1:
            raise ConfigError(f"a reward chunk holds at least one check, got {max_batch}")
        if not max_wait_s >= 0:
            raise ConfigError(f"the chunk wait must be >= 0 seconds, got {max_wait_s!r}")
        self.reward = reward
        self.max_batch = max_batch
        self.max_wait_s = max_wait_s
        self._open: _Chunk | None = None  # touched only in the reward's loop
        self.chunks_sent = 0  # for logs and tests: how many pool calls the checks took
        self.checks_sent = 0

    async def check(self, checks: Sequence[Check]) -> list[CheckResult]:
        """The verdicts of ``checks`` (in order), scored in a chunk with whatever else is waiting.

        Await it from any event loop (asyncio or trio) or thread's loop. A
        submission larger than ``max_batch`` is one chunk of its own (with
        whatever was already waiting). Raises what the reward raises when no
        verifier can start (:class:`~aeval.errors.AevalError`). Cancelling a
        caller drops its verdicts, never the chunk that other callers share.
        """
        batch = list(checks)
        return await self.reward.run_in_pool(lambda pool: self._join(pool, batch))

    async def _join(self, pool: Pool, checks: list[Check]) -> list[CheckResult]:
        chunk = self._open
        leader = chunk is None
        if chunk is None:
            chunk = self._open = _Chunk()
        start = len(chunk.checks)
        chunk.checks.extend(checks)  # no await before this: concurrent callers join one chunk
        if len(chunk.checks) >= self.max_batch:
            chunk.full.set()
            self._open = None  # the next caller opens the next chunk
        if leader:
            await self._send(pool, chunk)
            await anyio.lowlevel.checkpoint_if_cancelled()  # a cancel that came while shielded
        else:
            await chunk.done.wait()
        if chunk.error is not None:
            raise chunk.error
        return chunk.results[start : start + len(checks)]

    async def _gather(self, chunk: _Chunk) -> None:
        """Until ``chunk`` is full, or no check has joined it for ``max_wait_s`` (and at
        most ``MAX_WAITS`` times that since it opened).

        Callers reach this loop from other threads, one hop each: a burst of
        them (verl's step) lands spread out when the machine is loaded, and a
        wait counted from the first arrival alone would cut it into pieces.
        """
        cap = anyio.current_time() + MAX_WAITS * self.max_wait_s
        while not chunk.full.is_set():
            seen = len(chunk.checks)
            left = cap - anyio.current_time()
            if left <= 0:
                break
            with anyio.move_on_after(min(self.max_wait_s, left)):
                await chunk.full.wait()
            if len(chunk.checks) == seen:
                break

    async def _send(self, pool: Pool, chunk: _Chunk) -> None:
        # Shielded: the other callers wait on this chunk, so it is sent and
        # scored even if the caller that opened it is cancelled meanwhile
        # (which then takes effect on its return, within the reward's deadline).
        with anyio.CancelScope(shield=True):
            try:
                await self._gather(chunk)
                if self._open is chunk:
                    self._open = None
                self.chunks_sent += 1
                self.checks_sent += len(chunk.checks)
                chunk.results = await self.reward.verdicts_in_pool(pool, chunk.checks)
            except Exception as exc:  # every caller of the chunk gets it
                chunk.error = exc
            except BaseException:  # the pool's loop is stopping (the reward was closed)
                chunk.error = AevalError("the reward was closed while this chunk was scored")
                raise
            finally:
                if self._open is chunk:
                    self._open = None
                chunk.done.set()
