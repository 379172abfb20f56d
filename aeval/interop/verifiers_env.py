"""The repair loop as a ``verifiers`` multi-turn environment (issue #44, docs/repair.md).

A ``MultiTurnEnv`` whose environment response is aeval's feedback message: each model
turn is judged by the reward's judge (:class:`~aeval.reward.EquivalenceReward`); the
rollout stops at an ``equivalent`` answer, at an answer no feedback repairs, or after
``rounds`` turns (the env's ``max_turns``), as ``aeval run --rounds`` does. The reward
is the last answer's score; ``solved_round`` (0 when unsolved) is a metric.

Written against verifiers' classic environment API, which 0.3 keeps as
``verifiers.legacy`` (0.2 had it at the top level; ``envs/multiturn_env.py``: ``env_response``, the
``@vf.stop`` conditions, ``max_turns``; ``rubrics/rubric.py``: reward functions called
with the keywords they name, ``state`` among them; ``utils/env_utils.py``:
``load_environment(env_id, **env_args)`` imports the module named by the env id and
calls its ``load_environment``). verifiers 0.4 removed that API (its ``v1`` tasksets
replace it) and requires openai < 3, so the ``aeval[verifiers]`` extra asks for
``verifiers>=0.3.1,<0.4``. The installable environment is ``environments/aeval_repair``
(env id ``aeval-repair``), whose ``load_environment`` is this module's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aeval.dataset import DEFAULT_DATASET, demo_dataset_path, load_dataset
from aeval.errors import ConfigError
from aeval.prompts import PromptSettings, format_prompt
from aeval.reward.repair import DEFAULT_ROUNDS, RepairRounds, RepairStep
from aeval.reward.scores import completion_text

try:
    import verifiers.legacy as vf
    from datasets import Dataset
except ImportError as err:  # pragma: no cover - depends on the environment
    raise ImportError(
        "aeval's verifiers environment needs verifiers 0.3: pip install 'aeval[verifiers]'"
    ) from err

__all__ = ["RepairEnv", "load_environment", "repair_dataset"]


def _text(message: Any) -> str | None:
    """A message's text: a dict, or verifiers' own message models (dict-like ``get``)."""
    return completion_text({"role": "assistant", "content": message.get("content")})


def repair_dataset(
    dataset: str = DEFAULT_DATASET,
    *,
    tier: str | None = None,
    sample_ids: str | None = None,
    limit: int | None = None,
    protocol: str = "default",
    system: str | None = None,
) -> Dataset:
    """The benchmark rows as verifiers rows: ``prompt`` (the messages ``aeval run`` sends,
    question and instruction in the protocol's order), ``answer`` (the ground truth) and
    ``info`` (the declarations and the item id)."""
    settings = PromptSettings.for_protocol(protocol, system=system)
    source = str(demo_dataset_path()) if dataset == "demo" else dataset
    frame = load_dataset(source, tier=tier, ids=sample_ids, limit=limit)
    rows = []
    for row in frame.iter_rows(named=True):
        prompt = [] if settings.system is None else [{"role": "system", "content": settings.system}]
        prompt.append({"role": "user", "content": format_prompt(row["question"], settings)})
        rows.append(
            {
                "prompt": prompt,
                "answer": row["answer"],
                "info": {"constants": row["constants"], "id": str(row["id"])},
            }
        )
    return Dataset.from_list(rows)


class RepairEnv(vf.MultiTurnEnv):
    """aeval's repair rounds as a verifiers ``MultiTurnEnv`` (see the module docstring)."""

    def __init__(self, repair: RepairRounds, **kwargs: Any) -> None:
        self.repair = repair
        rubric = vf.Rubric(funcs=[self.equivalence], weights=[1.0])
        rubric.add_metric(self.solved_round)
        super().__init__(max_turns=repair.rounds, rubric=rubric, **kwargs)

    async def setup_state(self, state: Any) -> Any:
        state["aeval_rounds"] = []
        return state

    async def _judged(self, state: Any) -> RepairStep | None:
        """The step of the latest model turn, judged once."""
        steps: list[RepairStep] = state.setdefault("aeval_steps", [])
        trajectory = state["trajectory"]
        if len(steps) < len(trajectory):
            completion = trajectory[-1]["completion"]
            answer = _text(completion[-1]) if completion else None
            info = state.get("info") or {}
            step = await self.repair.judge(
                answer, str(state["answer"]), str(info.get("constants", "")), len(trajectory)
            )
            steps.append(step)
            state["aeval_rounds"].append(step.as_json())
        return steps[-1] if steps else None

    # Before the base class's max_turns_reached (priority 0), so the last answer is judged
    # too; after has_error (100).
    @vf.stop(priority=50)
    async def repair_finished(self, state: Any) -> bool:
        """Stop at an equivalent answer, an unrepairable one, or the last round."""
        step = await self._judged(state)
        return step is not None and step.done

    async def env_response(self, messages: Any, state: Any, **kwargs: Any) -> Any:
        """The feedback on the latest answer, as the next user message."""
        step = await self._judged(state)
        if step is None or step.feedback is None:  # the stop conditions end it first
            raise ConfigError("the repair environment was asked for feedback after the end")
        return [{"role": "user", "content": step.feedback}]

    async def equivalence(self, state: Any, **kwargs: Any) -> float:
        """The reward: the last answer's score by the judge (0 without an answer)."""
        step = await self._judged(state)  # judged already, unless the rollout ended otherwise
        return float(step.score) if step is not None else 0.0

    async def solved_round(self, state: Any, **kwargs: Any) -> float:
        """The round of the first equivalent answer, 0 if none."""
        steps = state.get("aeval_steps") or []
        return float(next((s.round for s in steps if s.solved), 0))


def load_environment(
    dataset: str = "demo",
    rounds: int = DEFAULT_ROUNDS,
    feedback: str = "counterexample",
    feedback_file: str | None = None,
    tier: str | None = None,
    sample_ids: str | None = None,
    limit: int | None = None,
    protocol: str = "default",
    system: str | None = None,
    reward: Mapping[str, Any] | None = None,
    **env_kwargs: Any,
) -> RepairEnv:
    """The environment verifiers loads by the env id ``aeval-repair``.

    :param dataset: a hub id, a file, or ``demo`` (the bundled synthetic benchmark).
    :param rounds: the most model turns (K), as ``aeval run --rounds``.
    :param feedback: ``retry``, ``reason`` or ``counterexample``.
    :param feedback_file: a feedback template, as ``aeval run --feedback-file``.
    :param reward: the judge's settings (:class:`~aeval.reward.EquivalenceReward`:
        ``reading``, ``workers`` …).
    :param env_kwargs: passed to ``MultiTurnEnv`` (``eval_dataset``, ``sampling_args`` …).
    """
    repair = RepairRounds(rounds, feedback, feedback_file=feedback_file, **dict(reward or {}))
    rows = repair_dataset(
        dataset, tier=tier, sample_ids=sample_ids, limit=limit, protocol=protocol, system=system
    )
    env_kwargs.setdefault("eval_dataset", rows)
    return RepairEnv(repair, dataset=rows, **env_kwargs)
