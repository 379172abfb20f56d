"""The seam between a run and the way its answers arrive.

A run obtains its answers through one :class:`Driver`: the batch driver
(:class:`~aeval.engine.batch_driver.BatchDriver`: the batch API, shard by
shard) or the direct driver (:class:`~aeval.engine.direct.driver.DirectDriver`:
one request per answer to a completion route). :func:`open_driver` opens the
one ``RunConfig.api`` names, with the client it owns (the run's batch
providers, or the direct client and its concurrency limit), and closes that
client when the run ends. A driver is given the run's pieces in one
:class:`DriverContext` and reports back to the run through it; everything
else in a run is shared.

The one watch for a hold that ``cancel`` puts on a live run is
:func:`watch_hold`: it turns the run's submit policy to ``Submit.COLLECT``
(which every driver reads through :attr:`DriverContext.submit`), then asks the
driver for what else a hold means to it.

Direct mode's modules are imported only when used: they pull in the openai SDK,
the costliest import of all (the batch providers defer it the same way).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import anyio

from aeval.batch.providers.base import BatchProvider
from aeval.config import RunConfig
from aeval.engine.batch_driver import BatchDriver, open_provider
from aeval.engine.driver_context import Driver, DriverContext
from aeval.events import Event
from aeval.store.hold import wait_for_hold

__all__ = ["Driver", "DriverContext", "open_driver", "watch_hold"]


@asynccontextmanager
async def open_driver(
    config: RunConfig, *, provider: BatchProvider | None, emit: Callable[[Event], None]
) -> AsyncIterator[Driver]:
    """The driver ``config.api`` names, with its client open; the client is closed
    (shielded from cancellation) at the end.

    :param provider: the caller's batch provider for every model (never closed
        here), for batch mode; else each model's provider is opened.
    :param emit: where the client's own events go (a direct request's retries).
    :raises ConfigError: a needed API key is missing (before anything is written).
    """
    if config.api == "direct":
        # Direct mode only: the openai client it loads adds ~0.6 s to the engine's
        # ~1.0 s import (best of 7 at load 6), which a batch run never pays.
        from aeval.engine.direct.aimd import AimdLimiter
        from aeval.engine.direct.driver import DirectDriver, open_client

        client = open_client(config, AimdLimiter(config.max_connections), emit)
        try:
            yield DirectDriver(client)
        finally:
            with anyio.CancelScope(shield=True):
                await client.aclose()
        return
    providers = open_provider(config, provider)
    try:
        yield BatchDriver(providers)
    finally:
        if provider is None:
            with anyio.CancelScope(shield=True):
                await providers.aclose()


async def watch_hold(driver: Driver, ctx: DriverContext, on_hold: Callable[[], None]) -> None:
    """The one watch for a hold on a live run: once ``cancel`` (or a hold already
    there) holds the directory, ``on_hold`` turns the run's policy to
    ``Submit.COLLECT``, then the driver does what else the hold asks
    (:meth:`Driver.on_hold`). Runs until cancelled."""
    await wait_for_hold(ctx.store.run_dir)
    on_hold()
    await driver.on_hold(ctx)
