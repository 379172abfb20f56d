"""Lost nodes: retiring their actor, starting actors on nodes that (re)join, and
declaring the cluster gone when no node with CPUs answers for a while."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from aeval.errors import AevalError
from aeval.verify.ray_actors import Actor

__all__ = ["Recovery"]

# How often the driver looks for nodes that joined (and after every loss).
_RESCAN_S = 10.0


class Recovery:
    """Watches the pool's actors: a loss wakes it at once, else it looks every ``_RESCAN_S``.

    :param gone_after_s: how long no node may answer before the cluster counts as gone.
    """

    def __init__(self, gone_after_s: float) -> None:
        self.gone_after_s = gone_after_s
        self._lost = anyio.Event()

    def gone_error(self, address: str) -> AevalError:
        """What every waiting and later check raises once the cluster is gone."""
        return AevalError(
            f"the Ray cluster at {address} is gone: no node with CPUs answered for "
            f"{self.gone_after_s:g} s (verdicts stored so far are kept; resume the run, "
            "locally or with --ray on a live cluster)"
        )

    def retire(
        self,
        actor: Actor,
        kill: Callable[[Any], Awaitable[None]],
        spawn: Callable[..., object] | None,
    ) -> bool:
        """Stop using ``actor`` (its lanes end, it is killed in the background by
        ``spawn``, when given) and wake the watcher; False: it was retired already."""
        if not actor.alive:
            return False
        actor.alive = False
        for scope in actor.scopes:
            scope.cancel()
        if spawn is not None:
            spawn(kill, actor.handle)
        self._lost.set()
        return True

    async def watch(
        self,
        rescan: Callable[[], Awaitable[None]],
        any_alive: Callable[[], bool],
        declare_gone: Callable[[], None],
    ) -> None:
        """Start actors on nodes that join (``rescan``); after a loss, replace it, or
        ``declare_gone`` when no actor came back within ``gone_after_s``."""
        while True:
            with anyio.move_on_after(_RESCAN_S):
                await self._lost.wait()
            self._lost = anyio.Event()
            await rescan()
            if any_alive():
                continue
            with anyio.move_on_after(self.gone_after_s):
                while not any_alive():
                    await anyio.sleep(1.0)
                    await rescan()
            if not any_alive():
                declare_gone()
                return
