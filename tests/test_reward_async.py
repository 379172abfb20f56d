"""The async rewards: TRL's concurrent async reward functions on one pool, and verl's reward loop
(one ``compute_score_async`` await per sample) batched into shared chunks."""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import Iterator
from typing import Any

import anyio
import anyio.to_thread
import pytest

from aeval.errors import AevalError, ConfigError
from aeval.reward import EquivalenceReward, compute_score, compute_score_async
from aeval.reward.batcher import MicroBatcher
from aeval.reward.verl import close_shared, shared_reward

TRUTH = "(assert (and (> x 1) (< y 10)))"
CONSTANTS = "(declare-const x Int)\n(declare-const y Int)\n(declare-const z Int)"
GOOD = f"<think>x above one, y below ten</think><answer>{TRUTH}</answer>"
WRONG = "<think>.</think><answer>(assert (> x 1))</answer>"
FENCED = f"<think>.</think><answer>```smt2\n{TRUTH}\n```</answer>"  # correct only leniently
# Sum of three cubes = 33: Z3 cannot decide it; the check runs to the reward's deadline.
HARD = (
    "<answer>(assert (or (and (> x 1) (< y 10)) (= (+ (* x x x) (* y y y) (* z z z)) 33)))</answer>"
)


def columns(n: int) -> dict[str, list[str]]:
    return {"answer": [TRUTH] * n, "constants": [CONSTANTS] * n}


@pytest.fixture(scope="module")
def reward() -> Iterator[EquivalenceReward]:
    with EquivalenceReward(workers=2, deadline_s=0.6, first_budget_s=0.2) as r:
        yield r


def in_trl_loop(coro_fn: Any) -> Any:
    """Run ``coro_fn()`` as TRL runs async rewards: in an event loop on a daemon thread."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        return asyncio.run_coroutine_threadsafe(coro_fn(), loop).result(timeout=120)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.close()


# -- TRL: async reward functions, gathered in one loop ----------------------------------------


def test_concurrent_async_calls_do_not_wait_for_each_others_threads(
    reward: EquivalenceReward,
) -> None:
    func = reward.as_async()
    reward(completions=[GOOD], **columns(1))  # pool warm
    finished: list[str] = []

    async def call(name: str, completions: list[str]) -> list[float]:
        scores = await func(
            prompts=None, completions=completions, trainer_state=None, **columns(len(completions))
        )
        finished.append(name)
        return scores

    async def step() -> list[list[float]]:
        # One worker thread for the whole loop: a call that held a thread while its
        # checks ran would make every other call wait behind the stuck one.
        anyio.to_thread.current_default_thread_limiter().total_tokens = 1
        stuck = asyncio.ensure_future(call("stuck", [HARD]))
        await asyncio.sleep(0)
        quick = [call(f"quick{k}", [GOOD, WRONG][k % 2 :] + [GOOD] * (k % 3)) for k in range(40)]
        return [*(await asyncio.gather(*quick)), await stuck]

    results = in_trl_loop(step)
    assert finished[-1] == "stuck" and len(finished) == 41
    for k, scores in enumerate(results[:-1]):
        expected = [1.0, 0.0][k % 2 :] + [1.0] * (k % 3)
        assert scores == expected, k
    assert results[-1] == [0.0]  # undecided at the deadline


def test_async_calls_from_two_loops_at_once_share_one_pool(reward: EquivalenceReward) -> None:
    reward(completions=[GOOD], **columns(1))
    pids = reward.worker_pids
    out: dict[int, list[float]] = {}

    def run(k: int) -> None:
        out[k] = asyncio.run(reward.as_async()(completions=[WRONG, GOOD] * 8, **columns(16)))

    threads = [threading.Thread(target=run, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert out == {k: [0.0, 1.0] * 8 for k in range(3)}
    assert reward.worker_pids == pids


# -- verl's reward loop: one await per sample, batched in aeval ------------------------------


def verl_item(solution: str, k: int) -> dict[str, Any]:
    """What verl's naive reward-loop manager passes for one sample (both ground-truth shapes)."""
    if k % 2:
        return {
            "data_source": "warp",
            "solution_str": solution,
            "ground_truth": TRUTH,
            "extra_info": {"constants": CONSTANTS, "num_turns": None, "rollout_reward_scores": {}},
        }
    return {
        "data_source": "warp",
        "solution_str": solution,
        "ground_truth": {"answer": TRUTH, "constants": CONSTANTS},
        "extra_info": {},
        "reward_router_address": None,  # passed when verl has reward models of its own
        "reward_model_tokenizer": None,
    }


@pytest.mark.anyio
async def test_verl_per_sample_awaits_share_chunks() -> None:
    close_shared()
    try:
        # verl wraps the function with its reward_kwargs: it must still be a coroutine function.
        # A chunk closes when full or when its window ends; the window is long here so
        # that the count below does not depend on how fast a loaded machine schedules
        # the 64 awaits (with the default 20 ms they may take several windows).
        loaded = functools.partial(
            compute_score_async, reading="strict", chunk_size=64, chunk_wait_s=60.0
        )
        assert inspect.iscoroutinefunction(loaded)
        solutions = [[GOOD, WRONG, FENCED, "no answer"][k % 4] for k in range(64)]
        scores = await asyncio.gather(*(loaded(**verl_item(s, k)) for k, s in enumerate(solutions)))
        assert scores == [[1.0, 0.0, 0.0, 0.0][k % 4] for k in range(64)]
        reward = shared_reward(reading="strict")
        batcher = reward.batcher(64, 60.0)
        # All 64 awaits went to the pool as one reward call of 64 checks.
        assert (batcher.chunks_sent, batcher.checks_sent) == (1, 64)
        assert reward.last_stats is not None and reward.last_stats.completions == 64
        # ... and give what the per-item compute_score gives, item for item.
        one_by_one = [compute_score(**verl_item(s, 1)) for s in solutions[:8]]
        assert scores[:8] == one_by_one

        # A chunk size: 64 awaits in chunks of 16 (the same reward, so the same pool).
        sized = functools.partial(
            compute_score_async, reading="strict", chunk_size=16, chunk_wait_s=60.0
        )
        scores = await asyncio.gather(*(sized(**verl_item(s, k)) for k, s in enumerate(solutions)))
        assert scores == [[1.0, 0.0, 0.0, 0.0][k % 4] for k in range(64)]
        batcher = reward.batcher(16, 60.0)
        assert (batcher.chunks_sent, batcher.checks_sent) == (4, 64)
        assert reward.last_stats is not None and reward.last_stats.completions == 16
    finally:
        close_shared()


@pytest.mark.anyio
async def test_verl_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="unknown reward setting"):
        await compute_score_async("warp", GOOD, TRUTH, {"constants": CONSTANTS}, readng="strict")
    with pytest.raises(ConfigError, match="declarations"):
        await compute_score_async("warp", GOOD, TRUTH, {})


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_batcher_chunks_are_bounded_and_every_caller_gets_its_own_verdicts(
    reward: EquivalenceReward,
) -> None:
    batcher = MicroBatcher(reward, max_batch=5, max_wait_s=0.05)
    got: dict[int, list[str]] = {}

    async def submit(k: int) -> None:
        texts = [GOOD, WRONG, FENCED][: 1 + k % 3]
        results = await batcher.check([(t, TRUTH, CONSTANTS) for t in texts])
        got[k] = [r.status.value for r in results]

    async with anyio.create_task_group() as tg:
        for k in range(9):
            tg.start_soon(submit, k)
    expected = {1: ["equivalent"], 2: ["equivalent", "not_equivalent"]}
    expected[3] = [*expected[2], "equivalent"]
    assert got == {k: expected[1 + k % 3] for k in range(9)}
    # 18 checks in chunks that close at 5 or more: fewer calls than submissions.
    assert batcher.checks_sent == 18 and 2 <= batcher.chunks_sent < 9


@pytest.mark.anyio
async def test_a_cancelled_caller_does_not_take_the_chunk_with_it(
    reward: EquivalenceReward,
) -> None:
    # The chunk closes when its second check arrives, never by the (long) wait.
    batcher = MicroBatcher(reward, max_batch=2, max_wait_s=60)
    opener = anyio.CancelScope()
    out: list[str] = []

    async def first() -> None:  # opens the chunk, and is cancelled before it is sent
        with opener:
            await batcher.check([(WRONG, TRUTH, CONSTANTS)])
        out.append("first cancelled" if opener.cancelled_caught else "first finished")

    async def second() -> None:
        [result] = await batcher.check([(GOOD, TRUTH, CONSTANTS)])
        out.append(result.status.value)

    async with anyio.create_task_group() as tg:
        tg.start_soon(first)
        await anyio.sleep(0.01)
        opener.cancel()
        await anyio.sleep(0.01)
        tg.start_soon(second)
    assert sorted(out) == ["equivalent", "first cancelled"]
    assert (batcher.chunks_sent, batcher.checks_sent) == (1, 2)


@pytest.mark.anyio
async def test_a_pool_that_cannot_start_fails_every_caller_of_the_chunk(
    reward: EquivalenceReward,
) -> None:
    class Broken(EquivalenceReward):
        async def verdicts_in_pool(self, pool: Any, checks: Any) -> Any:
            raise AevalError("no Z3 verifier worker is available")

    batcher = MicroBatcher(Broken(workers=1), max_wait_s=0.01)
    errors: list[str] = []

    async def submit() -> None:
        try:
            await batcher.check([(GOOD, TRUTH, CONSTANTS)])
        except AevalError as err:
            errors.append(str(err))

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(submit)
    assert errors == ["no Z3 verifier worker is available"] * 3
    assert batcher.chunks_sent == 1
