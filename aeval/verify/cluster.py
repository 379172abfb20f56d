"""RayVerifierPool: aeval's killable pool on every node of a Ray cluster, behind the same API.

Each node with CPUs runs one Ray actor, :class:`NodeVerifier`, which holds an
ordinary :class:`~aeval.verify.pool.VerifierPool` sized to that node's CPUs;
every pool of one Ray job with the same settings shares it (a trainer's reward
workers start one pool per node between them, not one each).
The hard limits stay aeval's: a check runs in a worker process of that pool,
under its wall-clock budget and memory cap, and is killed there; Ray only
places the actors (pinned to their node, reserving no Ray resources, so they
never wait behind a trainer's reservations) and carries chunks of checks to
them and verdicts back.

A Ray call costs far more than a cheap check, so :meth:`RayVerifierPool.check`
queues its answer on the driver, and a few *lanes* per actor each take up to
``chunk_size`` queued answers, send them in one call and hand each verdict to
its waiting caller, in whatever order chunks finish. A faster node simply
takes more chunks.

Faults: when an actor dies with chunks in flight (its node was lost), those
chunks are queued again and go to the other actors; a verdict is taken once,
so every answer gets exactly one. An error of a check itself (Ray's
``RayTaskError`` from a healthy actor) is that check's result, raised to its
caller; it never retires an actor. The driver looks for new nodes now and then
and after every loss, and starts actors there. When no actor is left and no
node with CPUs answers for ``gone_after_s`` seconds, every waiting and later
check raises :class:`~aeval.errors.AevalError` saying the cluster is gone; a
run stops there with what it had stored, and ``resume`` carries on.

The parts, one module each: where to connect (:mod:`~aeval.verify.ray_address`),
which nodes are alive (:mod:`~aeval.verify.ray_nodes`), the actor on a node
(:mod:`~aeval.verify.ray_node_actor`) and joining or leaving it
(:mod:`~aeval.verify.ray_actors`), chunks out and verdicts back
(:mod:`~aeval.verify.ray_dispatch`), lost nodes (:mod:`~aeval.verify.ray_recovery`),
and the test hooks (:mod:`~aeval.verify.ray_test_hooks`). This module composes them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any, cast

import anyio
from anyio.abc import TaskGroup

from aeval.errors import AevalError, ConfigError
from aeval.verdicts import CheckResult
from aeval.verify.limits import DEFAULT_LIMITS, VerifyLimits
from aeval.verify.published import PublishedResult
from aeval.verify.ray_actors import Actor, NodeActors
from aeval.verify.ray_address import CONNECTION, AevalConnection, resolve_address
from aeval.verify.ray_calls import RayCalls
from aeval.verify.ray_dispatch import Dispatcher
from aeval.verify.ray_extra import import_ray
from aeval.verify.ray_node_actor import NodeVerifier, Raised
from aeval.verify.ray_nodes import ClusterNodes
from aeval.verify.ray_recovery import Recovery
from aeval.verify.ray_test_hooks import HOLD_CHUNKS_ENV
from aeval.verify.worker import CHECK, PUBLISHED

__all__ = [
    "DEFAULT_CHUNK_SIZE",
    "HOLD_CHUNKS_ENV",
    "NodeVerifier",
    "RayVerifierPool",
    "resolve_address",
]
# Importable here by their old names too (tests/test_verify_cluster.py uses them).
_AevalConnection = AevalConnection
_Raised = Raised

# Answers per Ray call. A call costs ~1-2 ms of driver and actor time on this
# machine and a cheap check ~5 ms: 16 make the call overhead a few per cent
# of the chunk's work while a node's pipe still holds several chunks
# (bench/ray_rescore.py measures other sizes; docs/ray.md).
DEFAULT_CHUNK_SIZE = 16


class RayVerifierPool:
    """An async context manager that verifies answers in aeval's pools on a Ray cluster.

    The same interface as :class:`~aeval.verify.pool.VerifierPool` (see
    :class:`~aeval.verify.checker.Checker`); pick one with
    :func:`~aeval.verify.checker.open_checker`. ``address``: ``HOST:PORT``,
    ``ray://…``, or ``"auto"`` (see :func:`resolve_address`); ``workers_per_node``
    defaults to the node's CPUs; ``chunk_size``: answers per Ray call;
    ``gone_after_s``: how long no node may answer before the cluster counts as gone.

    Entering connects unless this process is connected (leaving disconnects only
    then) and joins the actor of every node with CPUs, starting it unless another
    pool of the Ray job with the same settings has. ``workers`` is then the checks
    callers should keep in flight (half of what the lanes hold). A check raises
    what it raised on its node, as a local check would.
    """

    def __init__(
        self,
        address: str = "auto",
        limits: VerifyLimits = DEFAULT_LIMITS,
        workers_per_node: int | None = None,
        *,
        published: bool = False,
        published_binary: bool = False,
        chunk_size: int = DEFAULT_CHUNK_SIZE,
        gone_after_s: float = 15.0,
    ) -> None:
        if workers_per_node is not None and workers_per_node < 1:
            raise AevalError(f"RayVerifierPool needs at least one worker, got {workers_per_node}")
        if chunk_size < 1:
            raise AevalError(f"RayVerifierPool needs a chunk size of at least 1, got {chunk_size}")
        self._calls = RayCalls(import_ray())
        self.address = address
        self.limits = limits
        self.published, self.published_binary = published, published_binary
        self.workers = 0
        self._actors = NodeActors(
            self._calls, limits, published, published_binary, workers_per_node, chunk_size
        )
        self._dispatch = Dispatcher(self._calls, chunk_size, self._on_lost)
        self._recovery = Recovery(gone_after_s)
        self._nodes: ClusterNodes | None = None
        self._connected_here = False
        self._tg: TaskGroup | None = None
        self._gone: AevalError | None = None

    @property
    def nodes(self) -> tuple[str, ...]:
        """Ids of the nodes with a live actor."""
        return tuple(sorted(a.node_id for a in self._actors.live()))

    # The dispatcher's counts: chunks sent, sent again (their actor died), back per node.
    @property
    def chunks_sent(self) -> int:
        return self._dispatch.chunks_sent

    @property
    def chunks_lost(self) -> int:
        return self._dispatch.chunks_lost

    @property
    def chunks_by_node(self) -> Counter[str]:
        return self._dispatch.chunks_by_node

    async def __aenter__(self) -> RayVerifierPool:
        ray = self._calls.ray
        try:
            # Off the event loop: it may wait for another pool's shutdown, then connect.
            self._connected_here = await anyio.to_thread.run_sync(
                CONNECTION.join, ray, self.address
            )
        except (ConnectionError, RuntimeError, ValueError) as err:
            raise ConfigError(f"--ray {self.address}: cannot connect ({err})") from None
        self._nodes = ClusterNodes(ray, str(ray.get_runtime_context().gcs_address))
        self._dispatch.open()
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        try:
            await self._start_actors()
            if not self._actors.by_node:
                raise self._actors.none_started(self.address)
            self._tg.start_soon(
                self._recovery.watch,
                self._start_actors,
                lambda: bool(self._actors.live()),
                self._declare_gone,
            )
        except BaseException as exc:
            await self.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._tg is not None:
            # Lanes and the watcher end here (lanes queue their chunks again).
            self._tg.cancel_scope.cancel()
            await self._tg.__aexit__(None, None, None)
            self._tg = None
        with anyio.CancelScope(shield=True):
            actors = self._actors.live()
            self._actors.by_node.clear()
            if self._gone is None:  # else nobody is left to answer: skip the goodbyes
                async with anyio.create_task_group() as tg:
                    for actor in actors:
                        tg.start_soon(self._stop_actor, actor.handle)
            self._dispatch.close()
            if self._connected_here:
                # ~5 s when the cluster is gone; a thread keeps the loop free meanwhile.
                await anyio.to_thread.run_sync(CONNECTION.leave, self._calls.ray)
                self._connected_here = False

    async def _stop_actor(self, handle: Any) -> None:
        await self._actors.leave(handle, self._kill)

    async def _kill(self, handle: Any) -> None:
        await self._calls.kill(handle)

    async def worker_pids(self) -> dict[str, tuple[int, int, tuple[int, ...]]]:
        """Per node with a live actor: its process id, its parent's, its pool's workers."""
        return await self._actors.pids()

    async def _start_actors(self) -> None:
        """Join the actor of every alive node with CPUs that has none, and feed it lanes."""
        assert self._nodes is not None
        await self._actors.join_all(await self._nodes.with_cpus(), self._feed)
        self._size()

    def _feed(self, actor: Actor) -> None:
        assert self._tg is not None
        for _ in range(actor.lanes):
            self._tg.start_soon(self._dispatch.lane, actor)

    def _size(self) -> None:
        capacity = sum(a.lanes for a in self._actors.live()) * self._dispatch.chunk_size
        self.workers = max(1, capacity // 2)

    def _on_lost(self, actor: Actor) -> None:
        spawn = self._tg.start_soon if self._tg is not None else None
        if self._recovery.retire(actor, self._kill, spawn):
            self._size()

    def _declare_gone(self) -> None:
        self._gone = self._recovery.gone_error(self.address)
        self._dispatch.wake_all()

    async def _submit(
        self, request: tuple[Any, ...], on_start: Callable[[float], object] | None
    ) -> Any:
        if self._gone is not None:
            raise self._gone
        item = await self._dispatch.submit(request, on_start)
        if item.error is not None:
            raise item.error
        if item.result is None:
            raise self._gone or AevalError("the Ray verifier pool closed before this check ended")
        return item.result

    async def check(
        self,
        response_text: str | None,
        truth: str,
        constants: str,
        *,
        on_start: Callable[[float], object] | None = None,
        details: bool = True,
    ) -> CheckResult:
        """Verify one response on the cluster; see :meth:`VerifierPool.check`.

        ``on_start`` is called when the answer's chunk leaves for its node, with
        the moment its check is reckoned to begin there (after the answers ahead
        of it on that node). Cancelling the call drops the answer if it has not
        left yet; a check already on a node runs to its verdict or its hard
        budget there.

        :raises AevalError: the cluster is gone (see the module's docs).
        """
        request = (CHECK, response_text, truth, constants, details)
        return cast(CheckResult, await self._submit(request, on_start))

    async def check_published(
        self, response_text: str | None, truth: str, constants: str
    ) -> PublishedResult:
        """The published reading of one response, on the cluster; see
        :meth:`VerifierPool.check_published`."""
        result = await self._submit((PUBLISHED, response_text, truth, constants), None)
        if isinstance(result, CheckResult):
            return PublishedResult(False, f"{result.status.value}: {result.reason}")
        return cast(PublishedResult, result)

    async def check_both(
        self, response_text: str | None, truth: str, constants: str, *, details: bool = True
    ) -> tuple[CheckResult, PublishedResult]:
        """:meth:`check` then :meth:`check_published` (two requests on the cluster)."""
        check = await self.check(response_text, truth, constants, details=details)
        return check, await self.check_published(response_text, truth, constants)
