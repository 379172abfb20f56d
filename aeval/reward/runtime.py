"""The reward's worker pool and the event loop it lives in, on a thread of its own.

Why a thread of its own: :class:`~aeval.verify.VerifierPool` is an anyio
object that must stay in the event loop that entered it, while a trainer calls
the reward from wherever it is: synchronously from a thread with no loop
(TRL's default), from inside a running loop (a notebook, an async trainer),
or from another loop as a coroutine (TRL's async reward functions run in a
daemon loop of TRL's own). A fresh loop per call (``anyio.run``) would have
to start and kill the workers every step, and cannot run inside a running
loop. An anyio ``BlockingPortal`` gives one long-lived loop with thread-safe
``call``/``start_task_soon``: the pool is entered there once and reused by
every caller, from any thread or loop.

The portal runs on a daemon thread of our own rather than through
``anyio.from_thread.start_blocking_portal``, whose executor thread never
comes up in a forked child (a data-loader worker forked from the trainer
hung on its first call), and so that an unclosed reward never holds up
interpreter exit (the workers are still killed by the reward's finaliser).
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from contextlib import ExitStack
from typing import TypeVar

import anyio
import anyio.from_thread

from aeval.reward.node_pool import NodePool
from aeval.verify.checker import Checker, open_checker
from aeval.verify.limits import VerifyLimits
from aeval.verify.pool import VerifierPool

__all__ = ["Pool", "PoolRuntime"]

T = TypeVar("T")
# Where a reward's checks run: its own pool (local or on a Ray cluster), or the machine's.
Pool = Checker | NodePool


def _start_portal() -> tuple[anyio.from_thread.BlockingPortal, threading.Thread]:
    """An event loop serving a portal on a new daemon thread, until ``portal.stop``."""
    ready: Future[anyio.from_thread.BlockingPortal] = Future()

    async def serve() -> None:
        async with anyio.from_thread.BlockingPortal() as portal:
            ready.set_result(portal)
            await portal.sleep_until_stopped()

    def run() -> None:
        try:
            anyio.run(serve)
        except BaseException as exc:  # reported to the caller waiting below
            if not ready.done():
                ready.set_exception(exc)

    thread = threading.Thread(target=run, name="aeval-reward", daemon=True)
    thread.start()
    return ready.result(), thread


async def _result(future: Future[T]) -> T:
    """``future``'s result, awaited in the calling event loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # trio: a thread waits for it
        return await anyio.to_thread.run_sync(future.result, abandon_on_cancel=True)
    # Resolved by a callback the portal's thread schedules on this loop.
    return await asyncio.wrap_future(future)


class PoolRuntime:
    """A :class:`VerifierPool` entered in a portal thread's event loop; started lazily."""

    def __init__(
        self,
        limits: VerifyLimits,
        workers: int | None,
        ray_address: str | None = None,
        shared: bool = False,
    ) -> None:
        self.limits = limits
        self.workers = workers
        self.ray_address = ray_address
        self.shared = shared and ray_address is None
        self._lock = threading.Lock()
        self._stack: ExitStack | None = None
        self._portal: anyio.from_thread.BlockingPortal | None = None
        self._pool: Pool | None = None
        self._pid = 0

    def _started(self) -> tuple[anyio.from_thread.BlockingPortal, Pool]:
        with self._lock:
            if self._stack is not None and self._pid != os.getpid():
                # A forked child (e.g. a data-loader worker) inherits the object
                # but not the thread or the workers, which stay the parent's.
                self._stack = self._portal = self._pool = None
            if self._portal is None or self._pool is None:
                stack = ExitStack()
                try:
                    portal, thread = _start_portal()
                    stack.callback(thread.join)
                    stack.callback(lambda: portal.call(portal.stop))
                    pool: Pool = (
                        NodePool(self.limits, self.workers)
                        if self.shared
                        else open_checker(self.limits, self.workers, ray_address=self.ray_address)
                    )
                    stack.enter_context(portal.wrap_async_context_manager(pool))
                except BaseException:
                    stack.close()
                    raise
                self._stack, self._portal, self._pool = stack, portal, pool
                self._pid = os.getpid()
            return self._portal, self._pool

    @property
    def running(self) -> bool:
        return self._pool is not None and self._pid == os.getpid()

    @property
    def pids(self) -> tuple[int, ...]:
        """Process ids of the live workers (empty before the first call and after close)."""
        pool = self._pool
        # A pool on a Ray cluster has no workers in this process; the machine's
        # shared pool has them in its server.
        if isinstance(pool, VerifierPool | NodePool) and self.running:
            return pool.pids
        return ()

    @property
    def server_pid(self) -> int | None:
        """The process id of the machine's shared pool server this reward uses, if any."""
        pool = self._pool
        return pool.server_pid if isinstance(pool, NodePool) and self.running else None

    def call(self, func: Callable[[Pool], Awaitable[T]]) -> T:
        """Run ``func(pool)`` in the pool's loop and wait for it, from any thread."""
        portal, pool = self._started()
        return portal.call(func, pool)

    async def call_async(self, func: Callable[[Pool], Awaitable[T]]) -> T:
        """Run ``func(pool)`` in the pool's loop; await it from any event loop (asyncio, trio).

        Concurrent calls share the pool. Under asyncio a call waits without
        holding a thread, so how many run at once is not bounded by the
        loop's worker threads (40 by default): TRL gathers its async reward
        functions in one loop, and verl awaits one ``compute_score`` per sample.
        """
        if self._portal is not None and self._pool is not None and self._pid == os.getpid():
            portal, pool = self._portal, self._pool
        else:  # starting the pool blocks: not on the caller's loop
            portal, pool = await anyio.to_thread.run_sync(self._started)
        future: Future[T] = portal.start_task_soon(func, pool)
        try:
            return await _result(future)
        except BaseException:
            future.cancel()  # cancels the task in the pool's loop, which kills busy workers
            raise

    def close(self) -> None:
        """Kill the workers and stop the loop's thread. Idempotent; a later call starts anew."""
        with self._lock:
            stack, same_process = self._stack, self._pid == os.getpid()
            self._stack = self._portal = self._pool = None
        if stack is not None and same_process:
            stack.close()
