"""What runs on each node of a Ray cluster: :class:`NodeVerifier`, an actor holding a
:class:`~aeval.verify.pool.VerifierPool` there, fed a chunk of checks at a time."""

from __future__ import annotations

import asyncio
import os
import pickle
from typing import Any

import anyio

from aeval.errors import AevalError
from aeval.verify.limits import VerifyLimits
from aeval.verify.pool import VerifierPool
from aeval.verify.ray_test_hooks import hold_chunks_gate, hold_while
from aeval.verify.worker import PUBLISHED

__all__ = ["NodeVerifier", "Raised"]


class NodeVerifier:
    """The Ray actor on one node: a :class:`VerifierPool` there, fed a chunk at a time.

    One actor per node and setting serves every
    :class:`~aeval.verify.cluster.RayVerifierPool` of a Ray job (it is named, see
    :func:`~aeval.verify.ray_actors.actor_name`): a trainer's reward workers
    share the node's pool rather than each starting one. Each pool
    calls :meth:`attach` on entering and :meth:`release` on leaving; the last
    one out kills the workers and ends the actor.

    Its methods run on the actor's event loop (an async actor); the pool is
    entered by a task of its own, so it outlives every call.
    """

    def __init__(
        self, limits: VerifyLimits, workers: int, published: bool, published_binary: bool = False
    ) -> None:
        self._pool = VerifierPool(
            limits, workers, published=published, published_binary=published_binary
        )
        self._ready: asyncio.Future[None] | None = None
        self._stop: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self._users = 0
        self._closing = False
        self._hold = hold_chunks_gate()  # test hook: None outside tests

    async def attach(self) -> int:
        """One more pool uses this actor (its workers start with the first); the
        workers' count, or 0 when the actor is closing (ask for the node's actor again).
        """
        if self._closing:
            return 0
        if self._ready is None:
            ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._ready, self._stop = ready, asyncio.Event()

            async def hold() -> None:
                try:
                    async with self._pool:
                        ready.set_result(None)
                        assert self._stop is not None
                        await self._stop.wait()
                except BaseException as exc:
                    if not ready.done():
                        ready.set_exception(exc)
                    raise

            self._task = asyncio.create_task(hold())
        await asyncio.shield(self._ready)
        if self._closing:
            return 0
        self._users += 1
        return self._pool.workers

    async def release(self) -> int:
        """One pool fewer; the pools still using it. The last one out kills the workers
        (and then ends the actor)."""
        self._users -= 1
        if self._users > 0:
            return self._users
        self._closing = True
        await self.stop()
        return 0

    async def check_chunk(self, requests: list[tuple[Any, ...]]) -> list[Any]:
        """One verdict per request, in order (see
        :meth:`~aeval.verify.cluster.RayVerifierPool.check`); a request whose check
        raised gets a :class:`Raised` in its place, so its peers keep their verdicts."""
        if self._hold is not None:
            await hold_while(self._hold)
        results: list[Any] = [None] * len(requests)

        async def one(index: int) -> None:
            try:
                kind, *args = requests[index]
                if kind == PUBLISHED:
                    results[index] = await self._pool.check_published(*args)
                else:
                    text, truth, constants, details = args
                    results[index] = await self._pool.check(text, truth, constants, details=details)
            except Exception as exc:  # this check's own error: for its caller only
                results[index] = Raised.of(exc)

        async with anyio.create_task_group() as tg:
            for index in range(len(requests)):
                tg.start_soon(one, index)
        return results

    async def pids(self) -> tuple[int, int, tuple[int, ...]]:
        """(this actor's process id, its parent's, its pool's live workers)."""
        return os.getpid(), os.getppid(), self._pool.pids

    async def stop(self) -> None:
        """Kill the pool's workers."""
        if self._stop is not None and self._task is not None:
            self._stop.set()
            await self._task


class Raised:
    """A check's own error, carried back from its node in place of its verdict."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error

    @classmethod
    def of(cls, exc: BaseException) -> Raised:
        try:  # Ray pickles the results: an error it cannot carry becomes its text
            pickle.dumps(exc)
        except Exception:
            return cls(AevalError(f"{type(exc).__name__}: {exc}"))
        return cls(exc)
