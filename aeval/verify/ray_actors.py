"""The driver's side of the node actors: joining (or starting) one per node, and leaving it."""

from __future__ import annotations

import contextlib
import hashlib
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from aeval.errors import AevalError
from aeval.verify.limits import VerifyLimits
from aeval.verify.pool import PIPELINE_DEPTH
from aeval.verify.ray_calls import RayCalls
from aeval.verify.ray_node_actor import NodeVerifier
from aeval.version import __version__

__all__ = ["Actor", "NodeActors", "actor_name"]

# What a check is taken to cost before any came back (a WARP row: ~2-5 ms).
_FIRST_CHECK_S = 0.005


@dataclass(eq=False)
class Actor:
    """One node's actor as this pool uses it."""

    node_id: str
    handle: Any
    workers: int
    lanes: int
    alive: bool = True
    scopes: list[anyio.CancelScope] = field(default_factory=list)  # one per lane
    on_node: int = 0  # answers sent to it whose verdicts have not come back
    check_s: float = _FIRST_CHECK_S  # recent seconds a check takes in its workers


def actor_name(node_id: str, settings: tuple[object, ...]) -> str:
    """The name of the node's actor for these settings, in the job's Ray namespace.

    Pools of one job with the same settings (limits, workers, readings) and the
    same aeval version share it; any difference gets an actor of its own.
    """
    digest = hashlib.sha256(repr((__version__, *settings)).encode()).hexdigest()[:16]
    return f"aeval-verifier-{node_id}-{digest}"


def one_line(err: BaseException) -> str:
    """What failed on a node, in one line: a task's own error rather than Ray's wrapper
    and traceback (RayTaskError.cause; an actor's failed creation ends its message)."""
    cause = getattr(err, "cause", None)
    text = str(cause if isinstance(cause, BaseException) else err).strip()
    return text.splitlines()[-1].strip() if text else type(err).__name__


class NodeActors:
    """This pool's actor on every node with CPUs, by node id.

    :param settings: what the node's :class:`NodeVerifier` is built with, but for
        its workers: (limits, published, published_binary).
    :param workers_per_node: worker processes per node; ``None``: the node's CPUs.
    :param chunk_size: answers per Ray call (sets how many lanes an actor gets).
    """

    def __init__(
        self,
        calls: RayCalls,
        limits: VerifyLimits,
        published: bool,
        published_binary: bool,
        workers_per_node: int | None,
        chunk_size: int,
    ) -> None:
        self._calls = calls
        self._settings = (limits, published, published_binary)
        self._workers_per_node = workers_per_node
        self._chunk_size = chunk_size
        self.by_node: dict[str, Actor] = {}
        self.start_failures: dict[str, str] = {}  # node id -> why its actor cannot start

    def live(self) -> list[Actor]:
        return [a for a in self.by_node.values() if a.alive]

    async def pids(self) -> dict[str, tuple[int, int, tuple[int, ...]]]:
        """Per node with a live actor: the actor's process id, its parent's (the
        node's Ray worker manager) and its pool's workers (diagnostics, tests)."""
        found: dict[str, tuple[int, int, tuple[int, ...]]] = {}
        for actor in self.live():
            found[actor.node_id] = await self._calls.resolve(actor.handle.pids.remote())
        return found

    def none_started(self, address: str) -> AevalError:
        """The error of a pool that started on no node: each node's reason, if any."""
        failed = "; ".join(f"node {n[:8]}: {why}" for n, why in self.start_failures.items())
        return AevalError(
            f"the verifier could not start on any node of the Ray cluster at {address} ({failed})"
            if failed
            else f"the Ray cluster at {address} has no node with CPUs to verify on"
        )

    async def join_all(self, nodes: dict[str, int], on_joined: Callable[[Actor], object]) -> None:
        """Join the actor of each of ``nodes`` (node id → CPUs) without a live one, at once."""
        fresh = {
            n: c for n, c in nodes.items() if n not in self.by_node or not self.by_node[n].alive
        }
        if fresh:
            async with anyio.create_task_group() as tg:
                for node, cpus in fresh.items():
                    tg.start_soon(self.join, node, cpus, on_joined)

    async def join(self, node: str, cpus: int, on_joined: Callable[[Actor], object]) -> None:
        """Join the actor of ``node``, starting it there unless another pool of this Ray
        job already has; ``on_joined`` gets it. A node it cannot start on is recorded
        in :attr:`start_failures` with the reason."""
        # Deferred: Ray is the optional heavy extra, imported only once --ray is used.
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        ray = self._calls.ray
        limits, published, published_binary = self._settings
        workers = self._workers_per_node or cpus
        settings = (limits, workers, published, published_binary)
        remote = ray.remote(NodeVerifier).options(
            name=actor_name(node, settings),
            get_if_exists=True,
            num_cpus=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
            max_restarts=0,
        )
        with anyio.move_on_after(60):
            while True:
                handle = remote.remote(*settings)
                try:
                    started = await self._calls.resolve(handle.attach.remote())
                except ray.exceptions.RayActorError as err:
                    if err.actor_init_failed:  # it cannot be built there: asking again won't help
                        self.start_failures[node] = one_line(err)
                        return
                    started = 0  # the last user ended it as we asked; its name is freed soon
                except ray.exceptions.RayError as err:
                    self.start_failures[node] = one_line(err)  # its pool cannot start there
                    await self._calls.kill(handle)
                    return
                if started:
                    break
                await anyio.sleep(0.05)  # an actor whose last user is leaving: ask again
            self.start_failures.pop(node, None)
            lanes = 1 + math.ceil(started * PIPELINE_DEPTH / self._chunk_size)
            actor = Actor(node, handle, started, lanes)
            self.by_node[node] = actor
            on_joined(actor)

    async def leave(self, handle: Any, kill: Callable[[Any], Awaitable[None]]) -> None:
        """Leave a node's actor; the last pool out has it kill its workers, then ``kill``s it."""
        try:
            ref = handle.release.remote()
        except Exception:
            # Ray no longer knows the actor (its node was lost): nothing to release or
            # to kill. Ray 2.20 raises a bare Exception here ("Failed to submit task to
            # actor … Can't find actor"), and its ray.kill of such a handle aborts the
            # whole process (a RAY_CHECK in ActorManager::GetActorHandle).
            return
        remaining = 0
        with anyio.move_on_after(10), contextlib.suppress(self._calls.errors.RayError):
            remaining = await self._calls.resolve(ref)
        if not remaining:
            await kill(handle)
