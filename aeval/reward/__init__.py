"""The evaluation's Z3 judge as a reward for RL fine-tuning (TRL GRPOTrainer, verl).

``EquivalenceReward`` follows TRL's reward-function contract (sync, or async
with ``as_async()``); ``compute_score``, ``compute_score_batch`` and
``compute_score_async`` follow verl's custom reward function contracts;
``aeval serve-reward`` (:mod:`aeval.reward.service`) speaks OpenRLHF's remote
reward protocol over HTTP. All score through the same killable worker pool,
with the evaluation's limits, and agree with ``aeval rescore`` on every
answer. See docs/reward.md.
"""

from __future__ import annotations

from aeval.reward.equivalence import EquivalenceReward, RewardStats
from aeval.reward.scores import Reading, RewardScores, completion_text, well_formed
from aeval.reward.verl import compute_score, compute_score_async, compute_score_batch

__all__ = [
    "EquivalenceReward",
    "Reading",
    "RewardScores",
    "RewardStats",
    "completion_text",
    "compute_score",
    "compute_score_async",
    "compute_score_batch",
    "well_formed",
]
