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
from dataclasses import dataclass
from typing import Protocol

import anyio

from aeval.batch.providers.base import BatchProvider
from aeval.config import RunConfig
from aeval.engine.batch_driver import BatchDriver, open_provider
from aeval.errors import AevalError
from aeval.events import Event
from aeval.scoring.pipeline import Scoring
from aeval.store import RunStore, ShardRecord
from aeval.store.hold import Submit, wait_for_hold
from aeval.verdicts import Verdict

__all__ = ["Driver", "DriverContext", "open_driver", "watch_hold"]


@dataclass(frozen=True, kw_only=True, slots=True)
class DriverContext:
    """What a driver works with during a run, and how it reports back to the run.

    :param config: the run's configuration, pinned to its data.
    :param store: the run directory.
    :param scoring: where every answer goes (:meth:`Scoring.submit`), and the
        verdicts made without the verifier.
    :param emit: gives the run's subscribers an event.
    :param submit: the run's submit policy *now*: ``Submit.CREATE`` (create
        batches, send requests) or ``Submit.COLLECT`` (only collect what exists).
        Ask it at each decision: a live run's policy turns to ``COLLECT`` when
        ``cancel`` puts its directory on hold.
    :param stop: ends the whole run with an error no job can get past (a damaged
        run directory, an unreachable endpoint).
    :param job_failed: a job (model, trial) did not finish cleanly: why (one line).
    :param provisional: a verdict for this run's result only, never the store (a
        resume replaces it), with the shard it belongs to.
    """

    config: RunConfig
    store: RunStore
    scoring: Scoring[RunStore]
    emit: Callable[[Event], None]
    submit: Callable[[], Submit]
    stop: Callable[[AevalError], None]
    job_failed: Callable[[str, int, str], None]
    provisional: Callable[[Verdict, int], None]


class Driver(Protocol):
    """One way a run's answers arrive: every job's answers obtained and handed to
    ``ctx.scoring``. A driver serves one run; :func:`open_driver` makes it."""

    def announce(self, ctx: DriverContext, records: list[ShardRecord]) -> None:
        """Tell subscribers where the jobs stand before anything is awaited."""

    async def run_jobs(self, ctx: DriverContext, records: list[ShardRecord]) -> None:
        """Every job of ``records`` to its end, concurrently: each answer given to
        ``ctx.scoring``, each job's end emitted as a ``JobFinished`` (a failed one
        reported to ``ctx.job_failed`` first)."""

    async def on_hold(self, ctx: DriverContext) -> None:
        """The run directory was put on hold (``ctx.submit()`` already says
        ``COLLECT``): whatever else a hold asks of this driver. May run until
        cancelled (when the run ends)."""


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
