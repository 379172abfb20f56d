"""verl's custom reward function contracts, on a shared :class:`EquivalenceReward`.

verl loads a module-level function by file path and name
(``custom_reward_function.path`` / ``.name``) and calls it per item,
``compute_score(data_source, solution_str, ground_truth, extra_info)`` (the
default ``naive`` reward manager), or per batch with plural keywords
(``reward_model.reward_manager=batch``), or, in verl's reward loop
(``reward_model.use_reward_loop=True``), awaits a coroutine function per
item from each reward worker's event loop (:func:`compute_score_async`, which
gathers those concurrent calls into chunks for the pool). Extra keywords come
from ``custom_reward_function.reward_kwargs``. A module-level function has nowhere
to keep a pool but the module: one :class:`EquivalenceReward` per distinct
setting is created on first use and reused by every later call (closed at
interpreter exit, or by :func:`close_shared`).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from aeval.errors import ConfigError
from aeval.reward.batcher import DEFAULT_MAX_BATCH, DEFAULT_MAX_WAIT_S
from aeval.reward.equivalence import EquivalenceReward
from aeval.reward.scores import RewardScores

__all__ = [
    "close_shared",
    "compute_score",
    "compute_score_async",
    "compute_score_batch",
    "shared_reward",
]

_SCORE_KEYS = ("equivalent", "wrong", "undecided", "format_credit", "repair_penalty")
# What verl's reward-loop managers (naive, dapo, rate_limited, remote) add to every
# call when a reward-model router is configured: the router's address and the
# reward model's tokenizer, for functions that query verl's own reward models.
# aeval's judge uses neither, and accepts them from every entry point.
# (volcengine/verl b178a3cd, verl/experimental/reward_loop/reward_manager/naive.py)
_VERL_LOOP_KEYS = ("reward_router_address", "reward_model_tokenizer")


def _settings(kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` less the keywords verl adds for its own reward models."""
    return {k: v for k, v in kwargs.items() if k not in _VERL_LOOP_KEYS}


_shared: dict[tuple[Any, ...], EquivalenceReward] = {}
_shared_lock = threading.Lock()


def shared_reward(
    reading: str = "strict", ray_address: str | None = None, **scores: float
) -> EquivalenceReward:
    """The process-wide reward for these settings (``reading``, ``ray_address`` and
    :class:`RewardScores` fields).

    :raises ConfigError: an unknown setting or an invalid value.
    """
    unknown = set(scores) - set(_SCORE_KEYS)
    if unknown:
        raise ConfigError(
            f"unknown reward setting(s) {', '.join(sorted(unknown))}; known: reading, "
            + ", ".join(("ray_address", *_SCORE_KEYS))
        )
    key = (reading, ray_address, *sorted(scores.items()))
    with _shared_lock:
        reward = _shared.get(key)
        if reward is None:
            reward = EquivalenceReward(
                reading=reading,  # type: ignore[arg-type]  # validated by the constructor
                scores=RewardScores(**scores),
                ray_address=ray_address,
                # verl runs a reward worker per agent-loop worker, each a process:
                # they all check in the machine's one pool.
                shared_pool=True,
            )
            _shared[key] = reward
        return reward


def close_shared() -> None:
    """Close every shared reward's pool (they restart on next use)."""
    with _shared_lock:
        rewards = list(_shared.values())
        _shared.clear()
    for reward in rewards:
        reward.close()


def _truth(ground_truth: object, extra_info: object) -> tuple[str, str]:
    """(truth, constants) from a verl ground truth and its row's ``extra_info``."""
    if isinstance(ground_truth, Mapping):
        truth, constants = ground_truth.get("answer"), ground_truth.get("constants")
        if constants is None and isinstance(extra_info, Mapping):
            constants = extra_info.get("constants")
    else:
        truth = ground_truth
        constants = extra_info.get("constants") if isinstance(extra_info, Mapping) else None
    if truth is None or constants is None:
        raise ConfigError(
            "aeval compute_score needs the ground truth and its declarations: "
            "ground_truth={'answer': …, 'constants': …}, or the truth string with "
            "extra_info={'constants': …}"
        )
    return str(truth), str(constants)


def compute_score(
    data_source: object,
    solution_str: str | None,
    ground_truth: object,
    extra_info: Mapping[str, object] | None = None,
    **kwargs: object,
) -> float:
    """verl's per-item reward: the score of ``solution_str`` against the row's truth.

    ``ground_truth`` is the truth string, with the declarations in
    ``extra_info["constants"]``, or a dict ``{"answer": …, "constants": …}``.
    ``kwargs`` (verl's ``custom_reward_function.reward_kwargs``) may set
    ``reading``, ``ray_address`` (verify on that Ray cluster, or ``"auto"``)
    and any :class:`RewardScores` field; anything else is a
    :class:`ConfigError`, so a misspelt setting is never silently ignored.
    ``data_source`` is not used.
    """
    truth, constants = _truth(ground_truth, extra_info)
    return shared_reward(**_settings(kwargs)).score_one(solution_str, truth, constants)


def compute_score_batch(
    data_sources: Sequence[object],
    solution_strs: Sequence[str | None],
    ground_truths: Sequence[object],
    extra_infos: Sequence[Mapping[str, object] | None] | None = None,
    **kwargs: object,
) -> list[float]:
    """verl's batch reward (``reward_model.reward_manager=batch``): one score per solution.

    The whole batch is one reward call, so its checks run concurrently under
    one deadline.
    """
    infos = list(extra_infos) if extra_infos is not None else [None] * len(solution_strs)
    if not len(solution_strs) == len(ground_truths) == len(infos):
        raise ConfigError(
            f"compute_score_batch got {len(solution_strs)} solutions, {len(ground_truths)} "
            f"ground truths and {len(infos)} extra_infos"
        )
    pairs = [_truth(g, e) for g, e in zip(ground_truths, infos, strict=True)]
    reward = shared_reward(**_settings(kwargs))
    return reward(
        completions=list(solution_strs),
        answer=[t for t, _ in pairs],
        constants=[c for _, c in pairs],
    )


async def compute_score_async(
    data_source: object,
    solution_str: str | None,
    ground_truth: object,
    extra_info: Mapping[str, object] | None = None,
    *,
    chunk_size: int = DEFAULT_MAX_BATCH,
    chunk_wait_s: float = DEFAULT_MAX_WAIT_S,
    **kwargs: object,
) -> float:
    """verl's reward loop: the score of one sample, scored in a chunk with its concurrent peers.

    verl awaits this once per sample, a step's samples concurrently in each
    reward worker's event loop (``custom_reward_function.name=compute_score_async``
    with ``reward_model.use_reward_loop=True``). The calls that arrive within
    ``chunk_wait_s`` of each other (up to ``chunk_size``) go to the pool as one
    reward call (:class:`~aeval.reward.batcher.MicroBatcher`), so a step costs
    a few pool calls, not one per sample. Arguments and ``reward_kwargs`` are
    :func:`compute_score`'s, plus ``chunk_size`` and ``chunk_wait_s``; the
    keywords verl adds for its own reward models (``reward_router_address``,
    ``reward_model_tokenizer``) are ignored.
    """
    truth, constants = _truth(ground_truth, extra_info)
    reward = shared_reward(**_settings(kwargs))
    [result] = await reward.batcher(chunk_size, chunk_wait_s).check(
        [(solution_str, truth, constants)]
    )
    return reward.score_of(result, solution_str)
