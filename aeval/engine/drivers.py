"""Which way a run's answers arrive: the one choice between batch and direct mode.

:func:`open_source` opens what the answers come from (a batch provider, or the
direct client with its AIMD limiter) for the run's life; :func:`make_driver`
builds the driver that uses it (:class:`~aeval.engine.batch_driver.BatchDriver` or
:class:`~aeval.engine.direct.driver.DirectDriver`). Everything else in a run is shared.
Direct mode's modules are imported only when used: they pull in the openai SDK,
the costliest import of all (``open_provider`` defers it the same way).
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import anyio

from aeval.batch.lifecycle import ShardLifecycle
from aeval.batch.providers.base import BatchProvider
from aeval.batch.providers.registry import ProviderSet
from aeval.config import RunConfig
from aeval.engine.batch_driver import BatchDriver, open_provider, retry_event, shard_event
from aeval.engine.scoring import Scoring
from aeval.errors import AevalError
from aeval.events import Event
from aeval.store import RunStore

if TYPE_CHECKING:
    from aeval.engine.direct.client import DirectClient
    from aeval.engine.direct.driver import DirectDriver

__all__ = ["make_driver", "open_source"]


@asynccontextmanager
async def open_source(
    config: RunConfig, provider: BatchProvider | None, emit: Callable[[Event], None]
) -> AsyncIterator[ProviderSet | DirectClient]:
    """What the run's answers come from, closed (shielded from cancellation) at the end.

    :param provider: the caller's batch provider for every model (never closed here),
        for batch mode; else each model's provider is opened.
    :raises ConfigError: a needed API key is missing.
    """
    if config.api == "direct":
        from aeval.engine.direct.aimd import AimdLimiter
        from aeval.engine.direct.driver import open_client

        client = open_client(config, AimdLimiter(config.max_connections), emit)
        try:
            yield client
        finally:
            with anyio.CancelScope(shield=True):
                await client.aclose()
        return
    own = open_provider(config, provider)
    try:
        yield own
    finally:
        if provider is None:
            with anyio.CancelScope(shield=True):
                await own.aclose()


def make_driver(
    source: ProviderSet | DirectClient,
    store: RunStore,
    scoring: Scoring,
    *,
    config: RunConfig,
    emit: Callable[[Event], None],
    stop: Callable[[AevalError], None],
    failed_jobs: dict[tuple[str, int], str],
    submit: bool,
    rng: random.Random,
) -> BatchDriver | DirectDriver:
    """The driver that obtains the run's answers from ``source`` and gives them to ``scoring``."""
    if config.api == "direct":
        from aeval.engine.direct.driver import DirectDriver

        return DirectDriver(
            source,  # type: ignore[arg-type]  # config.api == "direct": a DirectClient
            scoring,
            config=config,
            emit=emit,
            stop=stop,
            failed_jobs=failed_jobs,
            submit=submit,
        )
    lifecycle = ShardLifecycle(
        providers=source,  # type: ignore[arg-type]  # a batch run's source: a ProviderSet
        store=store,
        poll=config.poll,
        retry=config.retry,
        rng=rng,
        on_change=lambda rec: emit(shard_event(rec, next_poll_at=lifecycle.next_poll.get(rec.key))),
        on_retry=lambda rec, notice: emit(retry_event(rec, notice)),
        submit=submit,
    )
    return BatchDriver(
        lifecycle, scoring, config=config, emit=emit, stop=stop, failed_jobs=failed_jobs
    )
