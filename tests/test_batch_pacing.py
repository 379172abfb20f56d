"""The token-limit gate: a blocked model creates nothing until its batches are done."""

from __future__ import annotations

import anyio
import pytest

from aeval.batch.pacing import ModelGate


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_a_blocked_model_waits_for_its_batches_then_for_the_unblock(
    anyio_backend: str,
) -> None:
    gate = ModelGate()
    order: list[str] = []
    await gate.started()
    await gate.started()
    await gate.block()

    async def creator() -> None:
        await gate.wait_unblocked()
        order.append("created")

    async def refused() -> None:
        await gate.wait_idle()
        order.append("idle")
        await gate.unblock()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(creator)
            tg.start_soon(refused)
            await anyio.sleep(0.05)
            assert order == []  # two batches still in flight, the model blocked
            await gate.finished()
            await anyio.sleep(0.05)
            assert order == []
            await gate.finished()
    assert order == ["idle", "created"]
    assert gate.in_flight == 0 and not gate.blocked


@pytest.mark.anyio
async def test_a_cancelled_shard_still_takes_its_batch_back() -> None:
    gate = ModelGate()
    await gate.started()
    with anyio.CancelScope() as scope:
        scope.cancel()
        await gate.finished()  # shielded: the count must not leak
    assert gate.in_flight == 0
