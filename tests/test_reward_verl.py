"""verl's reward loop, called as verl calls a custom reward function today.

Call shapes from volcengine/verl at b178a3cd56f58b2d502255daba591e92833930a7:

- ``verl/trainer/ppo/reward.py`` ``get_custom_reward_fn``: the function loaded by path and name
  is wrapped in a ``functools.partial`` that merges ``custom_reward_function.reward_kwargs``
  into the keywords (``_call_with_kwargs`` / ``_call_with_kwargs_async``);
- ``verl/experimental/reward_loop/reward_manager/naive.py`` (and ``dapo.py``, ``remote.py``):
  one call per sample with ``data_source=, solution_str=, ground_truth=, extra_info=`` and, when
  a reward-model router is configured, ``reward_router_address=`` and
  ``reward_model_tokenizer=``; a coroutine function is awaited on the worker's loop, a plain
  one runs in ``loop.run_in_executor(None, …)``; ``extra_info`` gains ``num_turns`` and
  ``rollout_reward_scores``;
- ``.../reward_manager/limited.py`` (``rate_limited``): each sample is
  ``asyncio.wait_for(compute_score(…), timeout=reward_model.timeout)`` under a semaphore of
  ``reward_model.max_concurrent``; it catches ``asyncio.TimeoutError`` (score 0, ``timeout``)
  and ``Exception`` (score 0, ``error``), not ``CancelledError``;
- ``verl/experimental/reward_loop/reward_loop.py`` ``RewardLoopWorker.compute_score_batch``:
  ``asyncio.create_task`` per sample, then ``asyncio.gather``.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from aeval.reward import compute_score, compute_score_async, compute_score_batch
from aeval.reward.verl import close_shared, shared_reward

TRUTH = "(assert (and (> x 1) (< y 10)))"
CONSTANTS = "(declare-const x Int)\n(declare-const y Int)\n(declare-const z Int)"
GOOD = f"<think>x above one, y below ten</think><answer>{TRUTH}</answer>"
WRONG = "<think>.</think><answer>(assert (> x 1))</answer>"
ROUTER = {"reward_router_address": "127.0.0.1:30000", "reward_model_tokenizer": object()}


@pytest.fixture(autouse=True)
def fresh_shared() -> Iterator[None]:
    close_shared()
    yield
    close_shared()


def loaded(raw: Callable[..., Any], **reward_kwargs: Any) -> Callable[..., Any]:
    """What ``get_custom_reward_fn`` hands the reward manager: ``raw`` with the config's kwargs."""
    if inspect.iscoroutinefunction(raw):

        async def call_async(raw: Any, extra: Any, *args: Any, **kwargs: Any) -> Any:
            return await raw(*args, **{**kwargs, **extra})

        return functools.partial(call_async, raw, reward_kwargs)

    def call(raw: Any, extra: Any, *args: Any, **kwargs: Any) -> Any:
        return raw(*args, **{**kwargs, **extra})

    return functools.partial(call, raw, reward_kwargs)


def sample(solution: str, k: int, router: bool) -> dict[str, Any]:
    """One sample's keywords, as the naive reward-loop manager builds them."""
    ground_truth: Any = {"answer": TRUTH, "constants": CONSTANTS}
    extra_info: dict[str, Any] = {"num_turns": None, "rollout_reward_scores": {}}
    if k % 2:  # the other ground-truth shape: the truth string, declarations in extra_info
        ground_truth, extra_info["constants"] = TRUTH, CONSTANTS
    return {
        "data_source": "warp",
        "solution_str": solution,
        "ground_truth": ground_truth,
        "extra_info": extra_info,
        **(ROUTER if router else {}),
    }


async def run_single(fn: Callable[..., Any], kwargs: dict[str, Any]) -> Any:
    """The naive manager's call: awaited if a coroutine function, else in the default executor."""
    if inspect.iscoroutinefunction(fn):
        return await fn(**kwargs)
    return await asyncio.get_running_loop().run_in_executor(None, lambda: fn(**kwargs))


@pytest.mark.parametrize("raw", [compute_score, compute_score_async], ids=["sync", "async"])
@pytest.mark.parametrize("router", [False, True], ids=["no-router", "router"])
def test_the_reward_loop_calls_both_functions_with_its_keywords(
    raw: Callable[..., Any], router: bool
) -> None:
    fn = loaded(raw, reading="strict")
    assert inspect.iscoroutinefunction(fn) == (raw is compute_score_async)

    async def step() -> list[Any]:
        solutions = [GOOD, WRONG, GOOD, "no answer"]
        tasks = [
            asyncio.create_task(run_single(fn, sample(s, k, router)))
            for k, s in enumerate(solutions)
        ]
        return await asyncio.gather(*tasks)

    assert asyncio.run(step()) == [1.0, 0.0, 1.0, 0.0]


def test_the_legacy_batch_manager_keywords_are_accepted() -> None:
    # verl/workers/reward_manager/batch.py (the legacy, non-loop path): plural keywords.
    fn = loaded(compute_score_batch, reading="strict")
    scores = fn(
        data_sources=["warp", "warp"],
        solution_strs=[GOOD, WRONG],
        ground_truths=[TRUTH, TRUTH],
        extra_infos=[{"constants": CONSTANTS}, {"constants": CONSTANTS}],
    )
    assert scores == [1.0, 0.0]


async def rate_limited(
    fn: Callable[..., Awaitable[float]], kwargs: dict[str, Any], timeout: float
) -> Any:
    """The ``rate_limited`` manager's handling of one sample (its semaphore left out)."""
    try:
        return await asyncio.wait_for(fn(**kwargs), timeout=timeout)
    except TimeoutError:
        return "timeout"
    except Exception as err:  # what the manager catches, to score 0
        return f"error: {err}"


@pytest.mark.parametrize("who", [0, 5], ids=["opener", "peer"])
def test_a_timed_out_sample_never_fails_its_peers(who: int) -> None:
    # A long chunk wait keeps every sample in one open chunk while the one wait_for expires.
    fn = loaded(compute_score_async, reading="strict", chunk_wait_s=0.6)
    reward = shared_reward(reading="strict")
    reward(completions=[GOOD], answer=[TRUTH], constants=[CONSTANTS])  # the pool warm

    async def step() -> list[Any]:
        tasks = []
        for k in range(8):
            kwargs = sample([GOOD, WRONG][k % 2], k, router=True)
            timeout = 0.1 if k == who else 60.0
            tasks.append(asyncio.create_task(rate_limited(fn, kwargs, timeout)))
            await asyncio.sleep(0)  # in order: the first task opens the chunk
        return await asyncio.gather(*tasks)

    results = asyncio.run(step())
    expected: list[Any] = [[1.0, 0.0][k % 2] for k in range(8)]
    expected[who] = "timeout"
    assert results == expected
    # The chunk the timed-out sample was part of was still scored, once, for all eight.
    batcher = reward.batcher(1024, 0.6)
    assert (batcher.chunks_sent, batcher.checks_sent) == (1, 8)


@pytest.mark.parametrize("who", [0, 5], ids=["opener", "peer"])
def test_a_cancelled_sample_never_fails_its_peers(who: int) -> None:
    # Task.cancel, as Ray cancels an async actor call or a trainer tears a step down.
    fn = loaded(compute_score_async, reading="strict", chunk_wait_s=0.6)
    shared_reward(reading="strict")(completions=[GOOD], answer=[TRUTH], constants=[CONSTANTS])

    async def step() -> list[Any]:
        tasks = []
        for k in range(8):
            tasks.append(asyncio.create_task(fn(**sample([GOOD, WRONG][k % 2], k, router=False))))
            await asyncio.sleep(0)
        await asyncio.sleep(0.1)
        tasks[who].cancel()
        return await asyncio.gather(*tasks, return_exceptions=True)

    results = asyncio.run(step())
    assert isinstance(results[who], asyncio.CancelledError)
    assert [r for k, r in enumerate(results) if k != who] == [
        [1.0, 0.0][k % 2] for k in range(8) if k != who
    ]
