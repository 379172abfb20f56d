"""Carrying answers to the node actors in chunks and their verdicts back.

Callers queue answers on the driver (:meth:`Dispatcher.submit`); a few *lanes*
per actor each take up to ``chunk_size`` queued answers, send them in one Ray
call and hand each verdict to its waiting caller, in whatever order chunks
finish. A faster node simply takes more chunks. A chunk whose actor was lost is
queued again for the others (:meth:`Dispatcher.requeue`); a verdict is taken once.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from aeval.errors import AevalError
from aeval.verdicts import CheckResult, Status
from aeval.verify.ray_actors import Actor
from aeval.verify.ray_calls import RayCalls
from aeval.verify.ray_node_actor import Raised

__all__ = ["Dispatcher", "Item"]

# An answer whose chunk was lost with this many actors gets a verdict of its own
# instead of a fourth trip: it is most likely what kills them.
_MAX_LOSSES = 3


class Item:
    """One answer waiting for its verdict on the driver."""

    __slots__ = ("done", "error", "losses", "on_start", "request", "result", "wanted")

    def __init__(self, request: tuple[Any, ...], on_start: Callable[[float], object] | None):
        self.request = request
        self.on_start = on_start
        self.result: Any = None
        self.error: BaseException | None = None  # what its check raised instead
        self.done = anyio.Event()
        self.losses = 0
        self.wanted = True  # False once its caller was cancelled: not sent again

    def settle(self, result: Any) -> None:
        if not self.done.is_set():  # the first verdict is the one
            self.result = result
            self.done.set()

    def fail(self, error: BaseException) -> None:
        if not self.done.is_set():
            self.error = error
            self.done.set()


class Dispatcher:
    """The driver's queue of answers and the lanes that take them to the actors.

    :param on_lost: called with an actor whose node (or process) was lost; its
        chunk in flight is queued again here.
    """

    def __init__(self, calls: RayCalls, chunk_size: int, on_lost: Callable[[Actor], None]) -> None:
        self._calls = calls
        self.chunk_size = chunk_size
        self._on_lost = on_lost
        self.chunks_sent = 0
        self.chunks_lost = 0  # chunks sent again because their actor died
        self.chunks_by_node: Counter[str] = Counter()  # chunks that came back, per node
        self._queue: MemoryObjectSendStream[Item] | None = None
        self._recv: MemoryObjectReceiveStream[Item] | None = None

    def open(self) -> None:
        self._queue, self._recv = anyio.create_memory_object_stream[Item](math.inf)

    def close(self) -> None:
        for stream in (self._queue, self._recv):
            if stream is not None:
                stream.close()

    def wake_all(self) -> None:
        """Wake every caller still waiting, without a verdict (the cluster is gone)."""
        assert self._recv is not None
        while True:
            try:
                item = self._recv.receive_nowait()
            except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                break
            item.done.set()

    async def submit(
        self, request: tuple[Any, ...], on_start: Callable[[float], object] | None
    ) -> Item:
        """Queue one request and wait for its verdict (or error, or wake-up without one)."""
        if self._queue is None:
            raise AevalError(
                "RayVerifierPool.check() needs 'async with RayVerifierPool(...) as pool'"
            )
        item = Item(request, on_start)
        self._queue.send_nowait(item)
        try:
            await item.done.wait()
        except BaseException:
            item.wanted = False
            raise
        return item

    async def lane(self, actor: Actor) -> None:
        """Keep one chunk at a time in flight to ``actor`` until it dies."""
        scope = anyio.CancelScope()
        actor.scopes.append(scope)
        with scope:
            while actor.alive:
                await self._send(actor, await self._take())

    async def _take(self) -> list[Item]:
        """Up to ``chunk_size`` queued answers (waiting for the first)."""
        assert self._recv is not None
        chunk: list[Item] = []
        while not chunk:
            first = await self._recv.receive()
            if first.wanted and not first.done.is_set():
                chunk.append(first)
        # Let callers scheduled with the first queue theirs; never cancelled here,
        # so no answer taken can be dropped.
        await anyio.lowlevel.cancel_shielded_checkpoint()
        while len(chunk) < self.chunk_size:
            try:
                item = self._recv.receive_nowait()
            except anyio.WouldBlock:
                break
            if item.wanted and not item.done.is_set():
                chunk.append(item)
        return chunk

    async def _send(self, actor: Actor, chunk: list[Item]) -> None:
        """Send ``chunk`` to ``actor`` and hand each verdict (or error) to its caller.

        Ray's errors are told apart. The actor or its node lost (the actor died or
        cannot be reached, the node or the result's object is gone): the actor is
        retired and the chunk queued again for the others. An error of the call
        itself (``RayTaskError``: a request the node could not read, a bug): the
        actor is fine, so a chunk of one gets that error as its result, and a
        larger one is sent again one answer a call, so that only the answer at
        fault gets it. Any other error of Ray's is the chunk's result too.
        """
        errors = self._calls.errors
        settled = False
        try:
            _started(actor, chunk)
            actor.on_node += len(chunk)
            self.chunks_sent += 1
            try:
                ref = actor.handle.check_chunk.remote([item.request for item in chunk])
                results = await self._calls.resolve(ref)
            finally:
                actor.on_node -= len(chunk)
            for item, result in zip(chunk, results, strict=True):
                if isinstance(result, Raised):
                    item.fail(self._as_result(actor, result.error))
                else:
                    item.settle(result)
            settled = True
            self.chunks_by_node[actor.node_id] += 1
            spent = [r.elapsed_ms for r in results if getattr(r, "elapsed_ms", 0) > 0]
            if spent:
                actor.check_s = 0.7 * actor.check_s + 0.3 * (sum(spent) / len(spent) / 1e3)
        except (
            errors.RayActorError,
            errors.NodeDiedError,
            errors.ObjectLostError,
            errors.WorkerCrashedError,
            errors.LocalRayletDiedError,
        ):
            self._on_lost(actor)
        except errors.RayError as err:
            settled = True  # by here, or by the calls of one below
            if len(chunk) == 1:
                chunk[0].fail(self._as_result(actor, err))
            else:
                async with anyio.create_task_group() as tg:
                    for item in chunk:
                        tg.start_soon(self._send, actor, [item])
        finally:
            if not settled:
                self.requeue(chunk)

    def _as_result(self, actor: Actor, err: BaseException) -> BaseException:
        """What the caller of a check that failed on ``actor`` gets raised: the check's
        own error when it is aeval's, else an :class:`AevalError` naming it."""
        cause: BaseException = err
        if isinstance(err, self._calls.errors.RayTaskError):
            cause = getattr(err, "cause", None) or err
        if isinstance(cause, AevalError):
            return cause
        lines = str(cause).strip().splitlines()
        error = AevalError(
            f"verifying on the Ray node {actor.node_id}: {type(cause).__name__}: "
            + (lines[-1] if lines else "")
        )
        error.__cause__ = err
        return error

    def requeue(self, chunk: list[Item]) -> None:
        """Queue again the answers of a chunk whose verdicts never came."""
        assert self._queue is not None
        self.chunks_lost += 1
        for item in chunk:
            if item.done.is_set() or not item.wanted:
                continue
            item.losses += 1
            if item.losses >= _MAX_LOSSES:
                item.settle(
                    CheckResult(
                        Status.RESOURCE_LIMIT,
                        f"{item.losses} Ray actors died while holding this check",
                    )
                )
                continue
            try:
                self._queue.send_nowait(item)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                item.done.set()  # the pool is closing: its caller is being cancelled


def _started(actor: Actor, chunk: list[Item]) -> None:
    """Tell the callers that asked (``on_start``) when their check should begin on the node.

    The node says nothing until the chunk is done, so the moment is reckoned:
    now, plus the answers ahead of it there spread over the node's workers,
    times (twice) what a check recently took there. A caller timing the check itself
    (the reward's per-round budget) then does not count the wait behind the
    answers sent before it.
    """
    now = anyio.current_time()
    for position, item in enumerate(chunk):
        if item.on_start is not None:
            ahead = (actor.on_node + position) // actor.workers
            # Twice the recent mean: a check's cost has a long tail, and reckoning
            # too late only lets a straggler run a little longer before it is set aside.
            item.on_start(now + ahead * 2 * actor.check_s)
