"""The seam between a run and its drivers: open_driver, watch_hold and DriverContext."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from fake_provider import FakeBatchProvider

from aeval.config import RunConfig
from aeval.engine.batch_driver import BatchDriver
from aeval.engine.driver_context import DriverContext
from aeval.engine.drivers import open_driver, watch_hold
from aeval.errors import AevalError, ConfigError
from aeval.store import RunStore
from aeval.store.hold import Submit, hold_submissions


class Closing(FakeBatchProvider):
    closed = 0

    async def aclose(self) -> None:
        self.closed += 1


@pytest.mark.anyio
async def test_open_driver_gives_the_batch_driver_over_the_callers_provider_left_open() -> None:
    provider = Closing(lambda cid, body, asked: None)
    config = RunConfig(models=("gpt-4o",))
    async with open_driver(config, provider=provider, emit=lambda e: None) as driver:
        assert isinstance(driver, BatchDriver)
        assert driver.providers.for_model("gpt-4o") is provider
    assert provider.closed == 0  # the caller's: the caller closes it


@pytest.mark.anyio
async def test_open_driver_in_direct_mode_without_a_key_is_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_KEY", "AZURE_OPENAI_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    config = RunConfig(models=("m",), api="direct")
    with pytest.raises(ConfigError, match="no API key"):
        async with open_driver(config, provider=None, emit=lambda e: None):
            pass


class HoldRecorder:
    """A driver that only records what a hold asks of it."""

    def __init__(self) -> None:
        self.held: list[DriverContext] = []

    def announce(self, ctx: DriverContext, records: list[Any]) -> None:
        return None

    async def run_jobs(self, ctx: DriverContext, records: list[Any]) -> None:
        return None

    async def on_hold(self, ctx: DriverContext) -> None:
        self.held.append(ctx)


@pytest.mark.anyio
async def test_watch_hold_turns_the_policy_to_collect_then_tells_the_driver(
    tmp_path: Path,
) -> None:
    store = RunStore.create(tmp_path, "r", {})
    policy = [Submit.CREATE]
    stopped: list[AevalError] = []
    ctx = DriverContext(
        config=RunConfig(models=("gpt-4o",)),
        store=store,
        scoring=None,  # type: ignore[arg-type]  # not a part of the hold's work
        emit=lambda e: None,
        submit=lambda: policy[-1],
        stop=stopped.append,
        job_failed=lambda m, t, why: None,
        provisional=lambda v, s: None,
    )
    driver = HoldRecorder()
    try:
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch_hold, driver, ctx, lambda: policy.append(Submit.COLLECT))
                await anyio.sleep(0.05)
                assert driver.held == [] and ctx.submit() is Submit.CREATE  # no hold yet
                hold_submissions(store.run_dir, "cancelled")
                while not driver.held:
                    await anyio.sleep(0.05)
                tg.cancel_scope.cancel()
    finally:
        store.close()
    assert ctx.submit() is Submit.COLLECT and driver.held == [ctx] and stopped == []
