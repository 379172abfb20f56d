"""TRL's trainers, calling the reward as their current source does.

huggingface/trl at f2cd57710ae345ea6428ae95363267fcf38a3dc8:

- ``trl/trainer/grpo_trainer.py`` (``GRPOTrainer._calculate_rewards``): a plain reward is called
  ``reward_func(prompts=, completions=, completion_ids=, **reward_kwargs)`` where
  ``reward_kwargs`` holds the dataset's other columns plus ``trainer_state``, ``log_extra`` and
  ``log_metric``; one that ``inspect.iscoroutinefunction`` recognises is awaited with the same
  keywords in an event loop on a daemon thread (``asyncio.run_coroutine_threadsafe``).
  The reward is logged under ``trl/trainer/utils.py`` ``get_callable_name``.
- ``trl/experimental/async_grpo/async_rollout_worker.py``: ``AsyncRolloutWorker.start`` checks
  ``pickle.dumps`` of the reward functions, then starts a ``spawn`` child that unpickles them;
  ``_score_group`` awaits a coroutine function, or runs a plain one with
  ``asyncio.to_thread(reward_func, **kwargs)``, with ``completions=, prompts=, completion_ids=``
  and the group's dataset columns.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import multiprocessing as mp
import pickle
from typing import Any

from aeval.reward import EquivalenceReward

TRUTH = "(assert (and (> x 1) (< y 10)))"
CONSTANTS = "(declare-const x Int)\n(declare-const y Int)\n(declare-const z Int)"
GOOD = f"<think>x above one</think><answer>{TRUTH}</answer>"
WRONG = "<think>.</think><answer>(assert (> x 1))</answer>"
COMPLETIONS = [GOOD, WRONG, [{"role": "assistant", "content": GOOD}]]


def callable_name(func: Any) -> str:
    """What TRL logs a reward under (``get_callable_name``'s rule)."""
    while isinstance(func, functools.partial):
        func = func.func
    return getattr(func, "__name__", type(func).__name__)


def group_kwargs() -> dict[str, Any]:
    return {
        "completions": COMPLETIONS,
        "prompts": ["p"] * 3,
        "completion_ids": [[1], [2], [3]],
        "answer": [TRUTH] * 3,
        "constants": [CONSTANTS] * 3,
    }


async def score_group(reward_funcs: list[Any]) -> list[Any]:
    """``_score_group``'s calls: async ones awaited, plain ones in a thread, all gathered."""
    kwargs = group_kwargs()
    return list(
        await asyncio.gather(
            *[
                f(**kwargs) if inspect.iscoroutinefunction(f) else asyncio.to_thread(f, **kwargs)
                for f in reward_funcs
            ]
        )
    )


def rollout_child(payload: bytes, out: Any) -> None:
    """The spawned rollout process: unpickle the reward functions and score a group with them."""
    funcs = pickle.loads(payload)
    try:
        out.put(
            (
                [inspect.iscoroutinefunction(f) for f in funcs],
                [callable_name(f) for f in funcs],
                asyncio.run(score_group(funcs)),
            )
        )
    finally:
        funcs[0].close()  # the child's own pool (both functions share the one reward)


def test_the_sync_and_async_rewards_pickle_and_score_in_a_spawned_process() -> None:
    reward = EquivalenceReward(workers=1)
    funcs = [reward, reward.as_async()]
    payload = pickle.dumps(funcs)  # what AsyncRolloutWorker.start checks up front
    assert not reward.worker_pids  # pickling starts nothing
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    child = ctx.Process(target=rollout_child, args=(payload, out), daemon=True)
    child.start()
    try:
        kinds, names, scores = out.get(timeout=120)
        child.join(30)
    finally:
        if child.is_alive():
            child.kill()
            child.join()
    assert kinds == [False, True]
    assert names == ["aeval_equivalence", "aeval_equivalence"]
    assert scores == [[1.0, 0.0, 1.0], [1.0, 0.0, 1.0]]
    assert child.exitcode == 0
    assert not reward.worker_pids  # the parent's reward never started a pool
    # A copy keeps the settings, not the pool.
    copy = pickle.loads(pickle.dumps(EquivalenceReward(reading="lenient", workers=1)))
    assert copy.reading == "lenient" and not copy.worker_pids


def test_grpo_trainer_calls_sync_and_async_rewards_with_its_keywords() -> None:
    with EquivalenceReward(workers=1) as reward:
        kwargs = {
            **group_kwargs(),
            "trainer_state": object(),
            "log_extra": lambda *a, **k: None,
            "log_metric": lambda *a, **k: None,
        }
        assert reward(**kwargs) == [1.0, 0.0, 1.0]
        async_reward = reward.as_async()
        assert inspect.iscoroutinefunction(async_reward)
        loop = asyncio.new_event_loop()
        try:
            got = loop.run_until_complete(async_reward(**kwargs))
        finally:
            loop.close()
        assert got == [1.0, 0.0, 1.0]
