"""The repair loop as a verl multi-turn ``Interaction`` (issue #44, docs/repair.md).

verl's multi-turn rollout (``actor_rollout_ref.rollout.multi_turn``) loads the
interactions an ``interaction_config_path`` YAML names::

    interaction:
      - name: aeval_repair
        class_name: aeval.reward.verl_interaction.RepairInteraction
        config: {rounds: 3, feedback: counterexample}

and, for each sample whose ``extra_info.interaction_kwargs`` names one (here
``{"name": "aeval_repair", "ground_truth": …, "constants": …}``), calls
``start_interaction(request_id, **interaction_kwargs)``, then after each model turn
``generate_response(request_id, messages, **interaction_kwargs)``, which returns
``(should_terminate_sequence, response_content, turn_score, metrics)``; the content
becomes the next user message. Call shapes from volcengine/verl at
b178a3cd56f58b2d502255daba591e92833930a7: ``verl/interactions/base.py``
(``BaseInteraction``), ``verl/interactions/utils/interaction_registry.py`` (the class
imported by ``class_name`` and built as ``cls(config=config)`` with ``name`` put in
the config) and ``verl/experimental/agent_loop/tool_agent_loop.py``
(``_handle_interacting_state``). The class has ``BaseInteraction``'s methods and
signatures without importing verl (which needs torch): neither the registry nor the
loop checks the type. ``tests/test_reward_verl_rollout.py`` runs it in verl 0.7.1's own
``AgentLoopWorker`` and ``ToolAgentLoop`` (``.ci/verl``); 0.7.1 is the last verl release
with interactions (verl-project/verl#6074 deleted them before 0.8.0).

verl builds the interactions anew for every sample: ``AgentLoopWorker`` instantiates a
``ToolAgentLoop`` per sample, whose ``__init__`` reads the interaction config again. So
the judge (its worker pool) is not the instance's own: the interactions of one process
with the same settings share one :class:`~aeval.reward.repair.RepairRounds`, started on
first use and kept until :func:`close_shared` or interpreter exit. Otherwise each sample
would start a pool of its own, concurrently with every other sample of the batch.

The feedback is :func:`aeval.feedback.render_feedback`'s, the judge the reward's
(:class:`~aeval.reward.EquivalenceReward`), the rounds ``aeval run --rounds``':
the conversation ends at an ``equivalent`` answer, an answer the model could not
repair (no feedback would help: an infrastructure status, a timeout), or the
``rounds``-th answer. Set verl's ``max_assistant_turns`` to at least ``rounds``.
"""

from __future__ import annotations

import json
import threading
from typing import Any
from uuid import uuid4

from aeval.errors import ConfigError
from aeval.reward.repair import DEFAULT_ROUNDS, RepairRounds, RepairStep, truth_and_constants
from aeval.reward.scores import completion_text

__all__ = ["RepairInteraction", "close_shared"]

# Settings of the interaction's ``config`` that are not the judge's.
_OWN = ("name", "rounds", "feedback", "feedback_file", "template")

_shared: dict[str, RepairRounds] = {}
_shared_lock = threading.Lock()


def _shared_rounds(config: dict[str, Any]) -> RepairRounds:
    """The process's repair rules and judge for these settings (the name aside)."""
    settings = {k: v for k, v in config.items() if k != "name"}
    # The YAML's config is plain data (OmegaConf.to_container); repr covers the rest.
    key = json.dumps(settings, sort_keys=True, default=repr)
    with _shared_lock:
        repair = _shared.get(key)
        if repair is None:
            judge = {k: v for k, v in settings.items() if k not in _OWN}
            repair = RepairRounds(
                int(settings.get("rounds", DEFAULT_ROUNDS)),
                str(settings.get("feedback", "counterexample")),
                template=settings.get("template"),
                feedback_file=settings.get("feedback_file"),
                **judge,
            )
            _shared[key] = repair
        return repair


def close_shared() -> None:
    """Stop the shared judges' worker pools (they start again on the next answer)."""
    with _shared_lock:
        rounds = list(_shared.values())
        _shared.clear()
    for repair in rounds:
        repair.close()


class RepairInteraction:
    """aeval's repair loop with verl's ``BaseInteraction`` methods.

    ``config`` (the YAML's ``config``): ``rounds`` (default 3), ``feedback`` (``retry``,
    ``reason``, ``counterexample``), ``feedback_file``, and the judge's settings
    (:class:`~aeval.reward.EquivalenceReward`: ``reading``, ``workers`` …).
    """

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        self.name: str = config.get("name", "aeval_repair")
        self.repair = _shared_rounds(config)
        self._instances: dict[str, dict[str, Any]] = {}

    async def start_interaction(
        self,
        instance_id: str | None = None,
        ground_truth: object = None,
        constants: object = None,
        **kwargs: Any,
    ) -> str:
        """Open one conversation for the row whose truth (and declarations) are given."""
        instance_id = instance_id if instance_id is not None else str(uuid4())
        truth, declared = truth_and_constants(ground_truth, constants)
        self._instances[instance_id] = {"truth": truth, "constants": declared, "steps": []}
        return instance_id

    async def generate_response(
        self, instance_id: str, messages: list[dict[str, Any]], **kwargs: Any
    ) -> tuple[bool, str, float, dict[str, Any]]:
        """Judge the last assistant message; the feedback to send, or the end."""
        instance = self._own(instance_id)
        answer = completion_text(messages)  # the last assistant message's text
        steps: list[RepairStep] = instance["steps"]
        step = await self.repair.judge(
            answer, instance["truth"], instance["constants"], len(steps) + 1
        )
        steps.append(step)
        metrics = {"round": step.round, "status": step.check.status.value, "solved": step.solved}
        return step.done, step.feedback or "", step.score, metrics

    async def calculate_score(self, instance_id: str, **kwargs: Any) -> float:
        """The reward of the conversation's latest answer (0 before any)."""
        steps = self._own(instance_id)["steps"]
        return steps[-1].score if steps else 0.0

    async def finalize_interaction(self, instance_id: str, **kwargs: Any) -> None:
        """Forget the conversation."""
        self._instances.pop(instance_id, None)

    def steps(self, instance_id: str) -> list[RepairStep]:
        """The conversation's judged answers so far."""
        return list(self._own(instance_id)["steps"])

    def _own(self, instance_id: str) -> dict[str, Any]:
        instance = self._instances.get(instance_id)
        if instance is None:
            raise ConfigError(f"no interaction {instance_id!r}: call start_interaction first")
        return instance
