"""The repair loop as a verl ``Interaction``, called as verl's multi-turn rollout calls it.

These run in the main environment, without verl (which needs torch); the calls follow
its source at volcengine/verl b178a3cd56f58b2d502255daba591e92833930a7 (the interaction
calls are unchanged in the 0.7.1 release). ``test_reward_verl_rollout.py`` runs it in
verl 0.7.1's own rollout (``.ci/verl``). The calls:

- ``verl/interactions/utils/interaction_registry.py`` ``initialize_interactions_from_config``:
  the YAML (``OmegaConf.load``) lists ``interaction`` entries; each ``class_name`` is split at
  its last dot, the module imported and the class taken from it; the entry's ``config``
  becomes a plain dict with ``name`` put in (the entry's ``name``, else the class name less
  ``Interaction``, lower-cased), and the class is built as ``cls(config=config)``;
- ``verl/experimental/agent_loop/tool_agent_loop.py``: per sample, ``interaction_kwargs =
  extra_info["interaction_kwargs"]`` (which must have ``name``), ``await
  interaction.start_interaction(request_id, **interaction_kwargs)``; after each generated
  turn the decoded text is appended as ``{"role": "assistant", "content": …}`` and
  ``_handle_interacting_state`` awaits ``generate_response(request_id, messages,
  **interaction_kwargs)``, appends ``{"role": "user", "content": response}``, keeps the
  reward in ``turn_scores`` and stops when told to; ``max_assistant_turns`` and
  ``max_user_turns`` stop it too;
- ``examples/sglang_multiturn/config/interaction_config/gsm8k_interaction_config.yaml``
  and ``examples/data_preprocess/gsm8k_multiturn_w_interaction.py`` (the dataset's
  ``extra_info.interaction_kwargs``: ``name`` and the row's ``ground_truth``).
"""

from __future__ import annotations

import asyncio
import importlib
from pathlib import Path
from typing import Any
from uuid import uuid4

import polars as pl
import pytest
import yaml
from repair_helpers import confirm_counterexample

from aeval.dataset import demo_dataset_path, load_dataset
from aeval.errors import ConfigError
from aeval.feedback import render_feedback
from aeval.reward.repair import RepairStep
from aeval.reward.verl_interaction import RepairInteraction, close_shared
from aeval.verdicts import Status
from aeval.verify import check_response

DEMO = load_dataset(str(demo_dataset_path()))
CONFIG = """\
interaction:
  - name: aeval_repair
    class_name: aeval.reward.verl_interaction.RepairInteraction
    config:
      rounds: 3
      feedback: counterexample
      workers: 1
"""


def interactions_from(path: Path) -> dict[str, Any]:
    """What verl's registry builds from an interaction config file (steps in the docstring)."""
    built: dict[str, Any] = {}
    for entry in yaml.safe_load(path.read_text())["interaction"]:
        module_name, class_name = entry["class_name"].rsplit(".", 1)
        cls = getattr(importlib.import_module(module_name), class_name)
        name = entry.get("name") or class_name.removesuffix("Interaction").lower()
        config = dict(entry.get("config") or {})
        config["name"] = name
        built[name] = cls(config=config)
    return built


async def rollout(
    interaction: Any, kwargs: dict[str, Any], question: str, answers: list[str], max_turns: int
) -> tuple[list[dict[str, Any]], list[float], list[RepairStep]]:
    """The agent loop's turns for one sample: scripted answers stand in for the model."""
    request_id = uuid4().hex
    await interaction.start_interaction(request_id, **kwargs)
    messages: list[dict[str, Any]] = [{"role": "user", "content": question}]
    scores: list[float] = []
    for turn, answer in enumerate(answers, start=1):
        messages.append({"role": "assistant", "content": answer})
        if turn >= max_turns:
            break
        done, response, reward, _ = await interaction.generate_response(
            request_id, messages, **kwargs
        )
        messages.append({"role": "user", "content": response})
        if reward is not None:
            scores.append(reward)
        if done:
            break
    steps = interaction.steps(request_id)
    await interaction.finalize_interaction(request_id)
    return messages, scores, steps


def row(cid: str) -> dict[str, Any]:
    return DEMO.filter(pl.col("id") == cid).row(0, named=True)


def test_a_rollout_repairs_with_aevals_feedback(tmp_path: Path) -> None:
    config = tmp_path / "interaction_config.yaml"
    config.write_text(CONFIG)
    [(name, interaction)] = interactions_from(config).items()
    assert name == "aeval_repair" and interaction.name == "aeval_repair"
    item = row("2")
    truth, constants = item["answer"], item["constants"]
    wrong = f"<answer>(assert (and {truth.strip()[8:-1]} (= 1 2)))</answer>"
    no_tag = "I am not sure."
    right = f"<think>ok</think><answer>{truth}</answer>"
    kwargs = {"name": name, "ground_truth": truth, "constants": constants}

    messages, scores, steps = asyncio.run(
        rollout(interaction, kwargs, item["question"], [wrong, no_tag, right, right], 8)
    )
    roles = [m["role"] for m in messages]
    assert roles == ["user", "assistant", "user", "assistant", "user", "assistant", "user"]
    for answer, feedback, step in ((wrong, messages[2], steps[0]), (no_tag, messages[4], steps[1])):
        judged = step.check
        assert feedback["content"] == render_feedback(
            "counterexample",
            status=judged.status,
            reason=judged.reason,
            direction=judged.direction,
            counterexample=judged.counterexample,
        )
        # aeval's verdict of the same answer, apart from the interaction's judge
        check = check_response(answer, truth, constants)
        assert (judged.status, judged.direction) == (check.status, check.direction)
    assert steps[0].check.counterexample
    assert "A counterexample: with " in messages[2]["content"]
    confirm_counterexample(steps[0].check.counterexample, "too_strong", wrong, truth, constants)
    assert [s.check.status for s in steps] == [
        Status.NOT_EQUIVALENT,
        Status.NO_ANSWER,
        Status.EQUIVALENT,
    ]
    assert messages[-1]["content"] == ""  # the end: nothing more to say
    assert scores == [0.0, 0.0, 1.0]
    close_shared()


def test_a_rollout_ends_after_the_rounds_and_at_an_unrepairable_answer() -> None:
    interaction = RepairInteraction({"name": "r", "rounds": 2, "feedback": "retry", "workers": 1})
    item = row("3")
    truth = {"answer": item["answer"], "constants": item["constants"]}  # the mapping shape
    kwargs = {"name": "r", "ground_truth": truth}
    wrong = "<answer>(assert (> nobody 0))</answer>"
    messages, scores, _ = asyncio.run(rollout(interaction, kwargs, "q", [wrong] * 5, 8))
    assert [m["role"] for m in messages].count("assistant") == 2
    assert messages[2]["content"].splitlines()[0] == "Your answer is not correct."
    assert scores == [0.0, 0.0]

    async def scored() -> tuple[float, list[Status]]:
        await interaction.start_interaction("x", ground_truth=truth)
        await interaction.generate_response("x", [{"role": "assistant", "content": wrong}])
        statuses = [s.check.status for s in interaction.steps("x")]
        return await interaction.calculate_score("x"), statuses

    score, statuses = asyncio.run(scored())
    assert score == 0.0 and statuses == [Status.UNKNOWN_SYMBOL]
    close_shared()


def test_bad_settings_and_rows_are_refused() -> None:
    with pytest.raises(ConfigError, match="feedback"):
        RepairInteraction({"feedback": "hint"})
    with pytest.raises(ConfigError, match="rounds"):
        RepairInteraction({"rounds": 0})
    interaction = RepairInteraction({"workers": 1})
    with pytest.raises(ConfigError, match="constants"):
        asyncio.run(interaction.start_interaction("a", ground_truth="(assert true)"))
    with pytest.raises(ConfigError, match="start_interaction"):
        asyncio.run(interaction.generate_response("nope", []))


def test_interactions_with_the_same_settings_share_one_judge(tmp_path: Path) -> None:
    """verl builds the interactions anew for every sample (its AgentLoopWorker makes a
    ToolAgentLoop per sample, whose __init__ reads the config again): their judge, and
    its worker pool, is the process's one for those settings, whatever the name."""
    config = tmp_path / "interaction_config.yaml"
    config.write_text(CONFIG)
    try:
        [first] = interactions_from(config).values()
        [second] = interactions_from(config).values()
        assert first is not second and first.repair is second.repair
        renamed = RepairInteraction(
            {"name": "other", "rounds": 3, "feedback": "counterexample", "workers": 1}
        )
        assert renamed.repair is first.repair
        other = RepairInteraction({"rounds": 2, "feedback": "counterexample", "workers": 1})
        assert other.repair is not first.repair and other.repair.rounds == 2
        item = row("2")
        kwargs = {
            "name": "aeval_repair",
            "ground_truth": item["answer"],
            "constants": item["constants"],
        }
        right = f"<answer>{item['answer']}</answer>"
        asyncio.run(rollout(first, kwargs, item["question"], [right], 8))
        pids = first.repair.reward.worker_pids
        assert len(pids) == 1
        asyncio.run(rollout(second, kwargs, item["question"], [right], 8))
        assert second.repair.reward.worker_pids == pids  # the same worker, not a new pool
    finally:
        close_shared()
    assert first.repair.reward.worker_pids == ()
