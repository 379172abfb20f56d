"""Pacing: the token-limit gate (a blocked model creates nothing until its batches are
done) and the poll schedule (backoff, brought forward by the batch's own pace)."""

from __future__ import annotations

from random import Random

import anyio
import pytest

from aeval.batch.pacing import ModelGate, PollSchedule
from aeval.batch.providers.base import RemoteBatch
from aeval.config import PollSettings


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


# -- the poll schedule and the batch's pace -----------------------------------------------


def _batch(done: int, total: int = 100, status: str = "in_progress") -> RemoteBatch:
    return RemoteBatch(id="b", status=status, completed=done, total=total)


def _schedule(waited: int = 0) -> PollSchedule:
    """Backoff from 2 s, doubling to 60 s, after ``waited`` waits (2, 4, 8, 16, 32, 60 s…)."""
    # No jitter: the waits below are exact.
    schedule = PollSchedule(
        PollSettings(initial_s=2.0, factor=2.0, max_s=60.0, jitter=0.0), Random(0)
    )
    for _ in range(waited):
        schedule.next_delay()
    return schedule


def test_the_backoff_alone_when_the_counts_say_nothing() -> None:
    schedule = _schedule()
    schedule.observe(_batch(0, status="validating"), 0.0)
    assert [schedule.next_delay(0.0) for _ in range(4)] == [2.0, 4.0, 8.0, 16.0]


def test_a_poll_is_brought_forward_to_when_the_pace_says_the_batch_is_done() -> None:
    schedule = _schedule(waited=4)  # the backoff has grown to 32 s
    schedule.observe(_batch(10), 0.0)
    schedule.observe(_batch(30), 10.0)  # 2 a second: 70 left is 35 s
    assert schedule.next_delay(10.0) == 32.0  # the backoff's wait comes first anyway
    schedule.observe(_batch(94), 42.0)  # 6 left: 3 s
    assert schedule.done_in(42.0) == pytest.approx(3.0)
    assert schedule.next_delay(42.0) == pytest.approx(3.0)  # not 60 s


def test_a_pace_is_never_trusted_below_the_first_interval() -> None:
    schedule = _schedule(waited=2)
    schedule.observe(_batch(0), 0.0)
    schedule.observe(_batch(99), 10.0)  # 0.1 s left
    assert schedule.next_delay(10.0) == 2.0


def test_counts_complete_while_in_progress_mean_the_batch_finalizes_next() -> None:
    schedule = _schedule(waited=5)
    schedule.observe(_batch(100), 0.0)
    assert schedule.done_in(0.0) == 0.0
    assert schedule.next_delay(0.0) == 2.0


def test_a_stalled_pace_predicts_nothing() -> None:
    schedule = _schedule(waited=4)
    schedule.observe(_batch(0), 0.0)
    schedule.observe(_batch(50), 10.0)  # 5 a second: done at 20 s
    assert schedule.done_in(30.0) is None  # 20 s past, counts stuck short of the total
    assert schedule.next_delay(30.0) == 32.0


def test_at_most_three_polls_of_a_batch_are_brought_forward() -> None:
    schedule = _schedule(waited=5)  # the backoff has reached its 60 s cap
    schedule.observe(_batch(0), 0.0)
    delays = []
    # A pace that keeps promising an end about a second away, and never gets there.
    for now, done in [(10.0, 90), (12.0, 92), (14.0, 94), (16.0, 96), (18.0, 97)]:
        schedule.observe(_batch(done), now)
        assert schedule.done_in(now) is not None and schedule.done_in(now) < 2.0
        delays.append(schedule.next_delay(now))
    assert delays == [2.0, 2.0, 2.0, 60.0, 60.0]
