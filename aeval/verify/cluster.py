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
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import math
import os
import pickle
import socket
import threading
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import sniffio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from aeval.errors import AevalError, ConfigError
from aeval.verdicts import CheckResult, Status
from aeval.verify.limits import DEFAULT_LIMITS, VerifyLimits
from aeval.verify.pool import PIPELINE_DEPTH, VerifierPool
from aeval.verify.published import PublishedResult
from aeval.verify.ray_extra import import_ray
from aeval.verify.worker import CHECK, PUBLISHED
from aeval.version import __version__

__all__ = ["DEFAULT_CHUNK_SIZE", "NodeVerifier", "RayVerifierPool", "resolve_address"]

# Answers per Ray call. A call costs ~1-2 ms of driver and actor time on this
# machine and a cheap check ~5 ms: 16 make the call overhead a few per cent
# of the chunk's work while a node's pipe still holds several chunks
# (bench/ray_rescore.py measures other sizes; docs/ray.md).
DEFAULT_CHUNK_SIZE = 16
# An answer whose chunk was lost with this many actors gets a verdict of its own
# instead of a fourth trip: it is most likely what kills them.
_MAX_LOSSES = 3
# How often the driver looks for nodes that joined (and after every loss).
_RESCAN_S = 10.0
# What a check is taken to cost before any came back (a WARP row: ~2-5 ms).
_FIRST_CHECK_S = 0.005
_GCS_CALL_TIMEOUT_S = 10.0
# Tests only (tests/test_verify_cluster.py), unset everywhere else: a file path in a
# node's environment. While that file exists, the node's actor holds every chunk it
# is sent (after creating ``<path>.held``), so a test can remove the node with a chunk
# on it whatever the machine's load. Unset, an actor reads it once and never looks again.
HOLD_CHUNKS_ENV = "AEVAL_TEST_HOLD_CHUNKS_WHILE"


class _AevalConnection:
    """The Ray connection aeval itself opened, shared by every pool of the process.

    Ray's connection is process-wide (``ray.init`` once per process), so whether to
    end it is too: the pool that opened it must not ``ray.shutdown()`` while another
    pool of the process (a reward in another thread, a second run) still uses it.
    A connection the application made itself is never ended here.

    Joining and leaving both hold the lock for their whole Ray call, so a pool
    that joins while the last one leaves waits for the shutdown to end and then
    connects anew, rather than adopting a connection that is closing. Both calls
    block (a shutdown takes ~5 s when the cluster is gone): call them off the
    event loop.
    """

    def __init__(self, lock: AbstractContextManager[object] | None = None) -> None:
        self._lock = lock if lock is not None else threading.Lock()
        self._users = 0  # pools using the connection aeval opened

    def join(self, ray: Any, address: str) -> bool:
        """Connect to ``address`` unless this process is connected (decided under the
        lock, so two pools entering at once connect once); True: call :meth:`leave`.

        :raises ConfigError: an unusable address (see :func:`resolve_address`).
        """
        with self._lock:
            target = resolve_address(address, connected=ray.is_initialized())
            if target is not None:
                _check_reachable(target)
                # "auto" goes to Ray as it is: its own lookup, and what it enables
                # for a cluster found that way (a local cluster's auth token).
                ray.init(
                    address="auto" if address.strip() == "auto" else target,
                    logging_level=logging.WARNING,
                    log_to_driver=False,
                )
                self._users = 1
                return True
            if self._users:  # aeval's own connection, opened by another pool
                self._users += 1
                return True
            return False

    def leave(self, ray: Any) -> None:
        """One pool fewer; the last one out ends the connection, still under the lock."""
        with self._lock:
            self._users -= 1
            if self._users == 0:
                ray.shutdown()


_CONNECTION = _AevalConnection()


def _ray_auto_address() -> str | None:
    """Where Ray's own ``address="auto"`` connects when ``RAY_ADDRESS`` is unset.

    That is the cluster the last ``ray start`` on this machine recorded
    (``ray_current_cluster`` in Ray's temp directory, ``RAY_TMPDIR`` or
    ``/tmp/ray``), else a cluster whose processes run on this machine; ``None``:
    none. It is asked of Ray itself (``canonicalize_bootstrap_address``, which
    ``ray.init`` calls: ray/_private/services.py, Ray 2.60.0) because Ray has no
    public call that only looks, and ``ray.init`` waits minutes on an address
    nobody answers before it says so.
    """
    from ray._private import services

    forget = getattr(services.find_gcs_addresses, "cache_clear", None)
    if forget is not None:  # as ray.init does: look again, not at what an earlier call saw
        forget()
    try:
        found: str | None = services.canonicalize_bootstrap_address("auto")
    except ConnectionError:  # Ray found nothing
        return None
    return found


def resolve_address(address: str, *, connected: bool) -> str | None:
    """The address to connect to; ``None``: use the connection this process already has.

    ``"auto"`` is the cluster this process is connected to, else what Ray's own
    ``address="auto"`` finds: the cluster named by ``RAY_ADDRESS``, else the
    one the last ``ray start`` on this machine recorded (see
    :func:`_ray_auto_address`).

    :raises ConfigError: ``"auto"`` finding nothing, or an empty address.
    """
    address = address.strip()
    if not address:
        raise ConfigError("--ray needs a cluster address (HOST:PORT, ray://HOST:PORT or 'auto')")
    if address != "auto":
        return None if connected else address
    if connected:
        return None
    named = os.environ.get("RAY_ADDRESS", "").strip()
    if named:
        return named
    found = _ray_auto_address()
    if found:
        return found
    raise ConfigError(
        "--ray auto: no Ray cluster found (RAY_ADDRESS is not set, no 'ray start' on this "
        "machine recorded one, and this process is not connected to one); give the "
        "cluster's address (HOST:PORT of its head)"
    )


def _check_reachable(address: str) -> None:
    """Fail fast on a plain HOST:PORT nobody listens on (Ray itself retries for a minute)."""
    if "://" in address or ":" not in address:
        return
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=5.0):
            pass
    except (OSError, ValueError) as err:
        raise ConfigError(
            f"--ray {address}: no Ray cluster answers there ({err}); start one with "
            "'ray start --head' or give its head's HOST:PORT"
        ) from None


class NodeVerifier:
    """The Ray actor on one node: a :class:`VerifierPool` there, fed a chunk at a time.

    One actor per node and setting serves every :class:`RayVerifierPool` of a
    Ray job (it is named, see :func:`_actor_name`): a trainer's reward workers
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
        self._hold = os.environ.get(HOLD_CHUNKS_ENV) or None  # tests only, see HOLD_CHUNKS_ENV

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
        """One verdict per request, in order (see :meth:`RayVerifierPool.check`); a
        request whose check raised gets a :class:`_Raised` in its place, so its peers
        keep their verdicts."""
        if self._hold is not None:
            await _hold_while(Path(self._hold))
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
                results[index] = _Raised.of(exc)

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


async def _hold_while(gate: Path) -> None:
    """Tests only (see ``HOLD_CHUNKS_ENV``): say a chunk is held, wait while ``gate`` exists."""
    if gate.exists():
        gate.with_name(gate.name + ".held").touch()
    while gate.exists():
        await asyncio.sleep(0.05)


class _Raised:
    """A check's own error, carried back from its node in place of its verdict."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error

    @classmethod
    def of(cls, exc: BaseException) -> _Raised:
        try:  # Ray pickles the results: an error it cannot carry becomes its text
            pickle.dumps(exc)
        except Exception:
            return cls(AevalError(f"{type(exc).__name__}: {exc}"))
        return cls(exc)


def _one_line(err: BaseException) -> str:
    """What failed on a node, in one line: a task's own error rather than Ray's wrapper
    and traceback (RayTaskError.cause; an actor's failed creation ends its message)."""
    cause = getattr(err, "cause", None)
    text = str(cause if isinstance(cause, BaseException) else err).strip()
    return text.splitlines()[-1].strip() if text else type(err).__name__


def _actor_name(node_id: str, settings: tuple[object, ...]) -> str:
    """The name of the node's actor for these settings, in the job's Ray namespace.

    Pools of one job with the same settings (limits, workers, readings) and the
    same aeval version share it; any difference gets an actor of its own.
    """
    digest = hashlib.sha256(repr((__version__, *settings)).encode()).hexdigest()[:16]
    return f"aeval-verifier-{node_id}-{digest}"


class _Item:
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


@dataclass(eq=False)
class _Actor:
    node_id: str
    handle: Any
    workers: int
    lanes: int
    alive: bool = True
    scopes: list[anyio.CancelScope] = field(default_factory=list)  # one per lane
    on_node: int = 0  # answers sent to it whose verdicts have not come back
    check_s: float = _FIRST_CHECK_S  # recent seconds a check takes in its workers


class RayVerifierPool:
    """An async context manager that verifies answers in aeval's pools on a Ray cluster.

    The same interface as :class:`~aeval.verify.pool.VerifierPool` (see
    :class:`~aeval.verify.checker.Checker`); pick one with
    :func:`~aeval.verify.checker.open_checker`.

    :param address: the cluster (``HOST:PORT``, ``ray://…``, or ``"auto"``: the
        cluster this process is connected to, else what Ray's own ``"auto"``
        finds; see :func:`resolve_address`).
    :param workers_per_node: worker processes per node; default: the node's CPUs.
    :param chunk_size: answers per Ray call.
    :param gone_after_s: how long no node may answer before the cluster counts as gone.

    ``workers`` is set on entering: the checks callers should keep in flight
    (half of what the lanes hold, as callers keep twice their pool's workers
    busy). Entering connects to the cluster unless this process already is
    (and leaving disconnects only then), and joins the actor of every node with
    CPUs, starting it unless another pool of the Ray job with the same settings has.
    A check raises what it raised on its node (an :class:`AevalError` naming the
    node and the cause), as a local check would.
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
        self._ray = import_ray()
        self.address = address
        self.limits = limits
        self.published = published
        self.published_binary = published_binary
        self.workers_per_node = workers_per_node
        self.chunk_size = chunk_size
        self.gone_after_s = gone_after_s
        self.workers = 0
        self.chunks_sent = 0
        self.chunks_lost = 0  # chunks sent again because their actor died
        self.chunks_by_node: Counter[str] = Counter()  # chunks that came back, per node
        self._actors: dict[str, _Actor] = {}
        self._start_failures: dict[str, str] = {}  # node id -> why its actor cannot start
        self._connected_here = False
        self._tg: TaskGroup | None = None
        self._queue: MemoryObjectSendStream[_Item] | None = None
        self._recv: MemoryObjectReceiveStream[_Item] | None = None
        self._gone: AevalError | None = None
        self._gcs_address = ""
        self._lost = anyio.Event()
        self._limiter = anyio.CapacityLimiter(64)

    # -- lifecycle ----------------------------------------------------------------

    @property
    def nodes(self) -> tuple[str, ...]:
        """Ids of the nodes with a live actor."""
        return tuple(sorted(a.node_id for a in self._actors.values() if a.alive))

    async def __aenter__(self) -> RayVerifierPool:
        ray = self._ray
        try:
            # Off the event loop: it may wait for another pool's shutdown, then connect.
            self._connected_here = await anyio.to_thread.run_sync(
                _CONNECTION.join, ray, self.address
            )
        except (ConnectionError, RuntimeError, ValueError) as err:
            raise ConfigError(f"--ray {self.address}: cannot connect ({err})") from None
        self._gcs_address = str(ray.get_runtime_context().gcs_address)
        self._queue, self._recv = anyio.create_memory_object_stream[_Item](math.inf)
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        try:
            await self._start_actors()
            if not self._actors:
                failures = self._start_failures.items()
                failed = "; ".join(f"node {n[:8]}: {why}" for n, why in failures)
                raise AevalError(
                    f"the verifier could not start on any node of the Ray cluster at "
                    f"{self.address} ({failed})"
                    if failed
                    else f"the Ray cluster at {self.address} has no node with CPUs to verify on"
                )
            self._tg.start_soon(self._watch)
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
            actors = [a for a in self._actors.values() if a.alive]
            self._actors.clear()
            if self._gone is None:  # else nobody is left to answer: skip the goodbyes
                async with anyio.create_task_group() as tg:
                    for actor in actors:
                        tg.start_soon(self._stop_actor, actor.handle)
            for stream in (self._queue, self._recv):
                if stream is not None:
                    stream.close()
            if self._connected_here:
                # ~5 s when the cluster is gone; a thread keeps the loop free meanwhile.
                await anyio.to_thread.run_sync(_CONNECTION.leave, self._ray)
                self._connected_here = False
        return None

    async def _stop_actor(self, handle: Any) -> None:
        """Leave the node's actor; the last pool out has it kill its workers, then ends it."""
        try:
            ref = handle.release.remote()
        except Exception:
            # Ray no longer knows the actor (its node was lost): nothing to release or
            # to kill. Ray 2.20 raises a bare Exception here ("Failed to submit task to
            # actor … Can't find actor"), and its ray.kill of such a handle aborts the
            # whole process (a RAY_CHECK in ActorManager::GetActorHandle).
            return
        remaining = 0
        with anyio.move_on_after(10), contextlib.suppress(self._ray.exceptions.RayError):
            remaining = await self._resolve(ref)
        if not remaining:
            await self._kill(handle)

    async def _kill(self, handle: Any) -> None:
        # ray.kill waits on the cluster's control store: off the event loop, and given
        # up on when it does not answer. Its node (or the whole cluster) may be gone
        # already: nothing is left to kill then.
        with anyio.move_on_after(5), contextlib.suppress(Exception):
            await anyio.to_thread.run_sync(self._ray.kill, handle, abandon_on_cancel=True)

    async def worker_pids(self) -> dict[str, tuple[int, int, tuple[int, ...]]]:
        """Per node with a live actor: the actor's process id, its parent's (the
        node's Ray worker manager) and its pool's workers (diagnostics, tests)."""
        found: dict[str, tuple[int, int, tuple[int, ...]]] = {}
        for actor in [a for a in self._actors.values() if a.alive]:
            found[actor.node_id] = await self._resolve(actor.handle.pids.remote())
        return found

    async def _resolve(self, ref: Any) -> Any:
        """The value of a Ray object ref, awaited without blocking the event loop."""
        if sniffio.current_async_library() == "asyncio":
            return await asyncio.wrap_future(ref.future())
        return await anyio.to_thread.run_sync(
            self._ray.get, ref, abandon_on_cancel=True, limiter=self._limiter
        )

    async def _gcs_answers(self) -> bool:
        """Whether the cluster's control store accepts connections.

        Asked before any call that needs it: with the store gone, Ray's own calls
        wait a minute, and a driver with such a call pending cannot disconnect.
        """
        host, _, port = self._gcs_address.rpartition(":")
        try:
            with anyio.fail_after(2.0):
                stream = await anyio.connect_tcp(host, int(port))
        except (OSError, TimeoutError, ValueError):
            return False
        await stream.aclose()
        return True

    async def _cpu_nodes(self) -> dict[str, int]:
        """Alive nodes with CPUs: node id → CPU count. Empty when the cluster does not answer."""

        def nodes() -> list[dict[str, Any]]:
            found: list[dict[str, Any]] = self._ray.nodes()
            return found

        if not await self._gcs_answers():
            return {}
        try:
            with anyio.fail_after(_GCS_CALL_TIMEOUT_S):
                found = await anyio.to_thread.run_sync(nodes, abandon_on_cancel=True)
        except Exception:
            return {}
        return {
            n["NodeID"]: int(n.get("Resources", {}).get("CPU", 0))
            for n in found
            if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) >= 1
        }

    async def _start_actors(self) -> None:
        """Join the actor of every alive node with CPUs that has none, starting it there
        unless another pool of this Ray job already has (see :class:`NodeVerifier`)."""
        fresh = {
            node: cpus
            for node, cpus in (await self._cpu_nodes()).items()
            if node not in self._actors or not self._actors[node].alive
        }
        if fresh:
            async with anyio.create_task_group() as tg:
                for node, cpus in fresh.items():
                    tg.start_soon(self._join_actor, node, cpus)
        self._size()

    async def _join_actor(self, node: str, cpus: int) -> None:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        ray = self._ray
        workers = self.workers_per_node or cpus
        settings = (self.limits, workers, self.published, self.published_binary)
        remote = ray.remote(NodeVerifier).options(
            name=_actor_name(node, settings),
            get_if_exists=True,
            num_cpus=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
            max_restarts=0,
        )
        with anyio.move_on_after(60):
            while True:
                handle = remote.remote(*settings)
                try:
                    started = await self._resolve(handle.attach.remote())
                except ray.exceptions.RayActorError as err:
                    if err.actor_init_failed:  # it cannot be built there: asking again won't help
                        self._start_failures[node] = _one_line(err)
                        return
                    started = 0  # the last user ended it as we asked; its name is freed soon
                except ray.exceptions.RayError as err:
                    self._start_failures[node] = _one_line(err)  # its pool cannot start there
                    await self._kill(handle)
                    return
                if started:
                    break
                await anyio.sleep(0.05)  # an actor whose last user is leaving: ask again
            self._start_failures.pop(node, None)
            lanes = 1 + math.ceil(started * PIPELINE_DEPTH / self.chunk_size)
            actor = _Actor(node, handle, started, lanes)
            self._actors[node] = actor
            assert self._tg is not None
            for _ in range(lanes):
                self._tg.start_soon(self._lane, actor)

    def _size(self) -> None:
        live = [a for a in self._actors.values() if a.alive]
        self.workers = max(1, sum(a.lanes * self.chunk_size for a in live) // 2)

    async def _watch(self) -> None:
        """Start actors on nodes that join; after a loss, replace it or declare the cluster gone."""
        while True:
            with anyio.move_on_after(_RESCAN_S):
                await self._lost.wait()
            self._lost = anyio.Event()
            await self._start_actors()
            if any(a.alive for a in self._actors.values()):
                continue
            with anyio.move_on_after(self.gone_after_s):
                while not any(a.alive for a in self._actors.values()):
                    await anyio.sleep(1.0)
                    await self._start_actors()
            if not any(a.alive for a in self._actors.values()):
                self._declare_gone()
                return

    def _declare_gone(self) -> None:
        self._gone = AevalError(
            f"the Ray cluster at {self.address} is gone: no node with CPUs answered for "
            f"{self.gone_after_s:g} s (verdicts stored so far are kept; resume the run, "
            "locally or with --ray on a live cluster)"
        )
        assert self._recv is not None
        while True:  # wake every caller still waiting
            try:
                item = self._recv.receive_nowait()
            except (anyio.WouldBlock, anyio.EndOfStream, anyio.ClosedResourceError):
                break
            item.done.set()

    # -- dispatch -----------------------------------------------------------------

    async def _take(self) -> list[_Item]:
        """Up to ``chunk_size`` queued answers (waiting for the first)."""
        assert self._recv is not None
        chunk: list[_Item] = []
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

    async def _lane(self, actor: _Actor) -> None:
        """Keep one chunk at a time in flight to ``actor`` until it dies."""
        scope = anyio.CancelScope()
        actor.scopes.append(scope)
        with scope:
            while actor.alive:
                await self._send(actor, await self._take())

    async def _send(self, actor: _Actor, chunk: list[_Item]) -> None:
        """Send ``chunk`` to ``actor`` and hand each verdict (or error) to its caller.

        Ray's errors are told apart. The actor or its node lost (the actor died or
        cannot be reached, the node or the result's object is gone): the actor is
        retired and the chunk queued again for the others. An error of the call
        itself (``RayTaskError``: a request the node could not read, a bug): the
        actor is fine, so a chunk of one gets that error as its result, and a
        larger one is sent again one answer a call, so that only the answer at
        fault gets it. Any other error of Ray's is the chunk's result too.
        """
        errors = self._ray.exceptions
        settled = False
        try:
            self._started(actor, chunk)
            actor.on_node += len(chunk)
            self.chunks_sent += 1
            try:
                ref = actor.handle.check_chunk.remote([item.request for item in chunk])
                results = await self._resolve(ref)
            finally:
                actor.on_node -= len(chunk)
            for item, result in zip(chunk, results, strict=True):
                if isinstance(result, _Raised):
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
            self._retire(actor)
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
                self._requeue(chunk)

    def _as_result(self, actor: _Actor, err: BaseException) -> BaseException:
        """What the caller of a check that failed on ``actor`` gets raised: the check's
        own error when it is aeval's, else an :class:`AevalError` naming it."""
        cause: BaseException = err
        if isinstance(err, self._ray.exceptions.RayTaskError):
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

    @staticmethod
    def _started(actor: _Actor, chunk: list[_Item]) -> None:
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

    def _retire(self, actor: _Actor) -> None:
        if not actor.alive:
            return
        actor.alive = False
        for scope in actor.scopes:
            scope.cancel()
        if self._tg is not None:
            self._tg.start_soon(self._kill, actor.handle)
        self._size()
        self._lost.set()

    def _requeue(self, chunk: list[_Item]) -> None:
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

    async def _submit(
        self, request: tuple[Any, ...], on_start: Callable[[float], object] | None
    ) -> Any:
        if self._queue is None:
            raise AevalError(
                "RayVerifierPool.check() needs 'async with RayVerifierPool(...) as pool'"
            )
        if self._gone is not None:
            raise self._gone
        item = _Item(request, on_start)
        self._queue.send_nowait(item)
        try:
            await item.done.wait()
        except BaseException:
            item.wanted = False
            raise
        if item.error is not None:
            raise item.error
        if item.result is None:
            raise self._gone or AevalError("the Ray verifier pool closed before this check ended")
        return item.result

    # -- checks -------------------------------------------------------------------

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
        result: CheckResult = await self._submit(
            (CHECK, response_text, truth, constants, details), on_start
        )
        return result

    async def check_published(
        self, response_text: str | None, truth: str, constants: str
    ) -> PublishedResult:
        """The published reading of one response, on the cluster; see
        :meth:`VerifierPool.check_published`."""
        result = await self._submit((PUBLISHED, response_text, truth, constants), None)
        if isinstance(result, CheckResult):
            return PublishedResult(False, f"{result.status.value}: {result.reason}")
        published: PublishedResult = result
        return published

    async def check_both(
        self, response_text: str | None, truth: str, constants: str, *, details: bool = True
    ) -> tuple[CheckResult, PublishedResult]:
        """:meth:`check` then :meth:`check_published` (two requests on the cluster)."""
        check = await self.check(response_text, truth, constants, details=details)
        return check, await self.check_published(response_text, truth, constants)
