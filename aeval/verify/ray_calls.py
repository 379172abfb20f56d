"""The driver's calls into Ray that wait, made without blocking the event loop."""

from __future__ import annotations

import asyncio
import contextlib
from types import ModuleType
from typing import Any

import anyio
import sniffio

__all__ = ["RayCalls"]


class RayCalls:
    """Awaiting a Ray object ref and killing an actor, off the event loop.

    :param ray: the ``ray`` module (imported by the caller: Ray is an optional extra).
    """

    def __init__(self, ray: ModuleType) -> None:
        self.ray = ray
        self._limiter = anyio.CapacityLimiter(64)

    @property
    def errors(self) -> Any:
        """``ray.exceptions``."""
        return self.ray.exceptions

    async def resolve(self, ref: Any) -> Any:
        """The value of a Ray object ref, awaited without blocking the event loop."""
        if sniffio.current_async_library() == "asyncio":
            return await asyncio.wrap_future(ref.future())
        return await anyio.to_thread.run_sync(
            self.ray.get, ref, abandon_on_cancel=True, limiter=self._limiter
        )

    async def kill(self, handle: Any) -> None:
        """Kill an actor, best effort.

        ray.kill waits on the cluster's control store: off the event loop, and given
        up on when it does not answer. Its node (or the whole cluster) may be gone
        already: nothing is left to kill then.
        """
        with anyio.move_on_after(5), contextlib.suppress(Exception):
            await anyio.to_thread.run_sync(self.ray.kill, handle, abandon_on_cancel=True)
