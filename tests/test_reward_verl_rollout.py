"""The repair interaction in a real verl multi-turn rollout, through verl's own code.

verl's ``AgentLoopWorker.generate_sequences`` runs a batch of rows whose ``extra_info``
names aeval's interaction; its ``ToolAgentLoop`` drives the interaction configured by the
interaction config YAML, exactly as in training; only the LLM is stood in, by scripted
answers (first wrong, then right, or wrong throughout). What verl runs and at which
version: ``verl_rollout_helpers``. verl 0.7.1 is the last release with interactions.

These tests need verl and torch, which the main test environment does not have:
``.ci/verl`` builds an environment with them and runs ``-m verl``. The ``verl`` marker
keeps them out of the default run; selected without verl they skip, except in CI
(``AEVAL_CI`` or ``CI``), where they fail.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import polars as pl
import pytest
from repair_helpers import confirm_counterexample

from aeval.dataset import demo_dataset_path, load_dataset
from aeval.feedback import render_feedback
from aeval.reward import EquivalenceReward, verl_interaction
from aeval.verify import check_response

pytestmark = pytest.mark.verl

DEMO = load_dataset(str(demo_dataset_path()))
ROUNDS = 3
INTERACTION_CONFIG = f"""\
interaction:
  - name: aeval_repair
    class_name: aeval.reward.verl_interaction.RepairInteraction
    config:
      rounds: {ROUNDS}
      feedback: counterexample
      workers: 1
"""


@pytest.fixture
def verl_run() -> ModuleType:
    """The rollout helpers, which import verl."""
    try:
        return importlib.import_module("verl_rollout_helpers")
    except ImportError as err:
        if os.environ.get("AEVAL_CI") or os.environ.get("CI"):
            pytest.fail(f"verl cannot be imported ({err}); .ci/verl installs it")
        pytest.skip(f"verl cannot be imported ({err}); .ci/verl installs it")


def demo_row(cid: str) -> dict[str, Any]:
    return DEMO.filter(pl.col("id") == cid).row(0, named=True)


def too_strong(truth: str) -> str:
    """A wrong answer: the truth and a contradiction."""
    return f"<answer>(assert (and {truth.strip()[8:-1]} (= 1 2)))</answer>"


def expected_feedback(answer: str, truth: str, constants: str) -> str:
    """What ``aeval run --rounds --feedback counterexample`` sends after ``answer``."""
    check = check_response(answer, truth, constants)
    return render_feedback(
        "counterexample",
        status=check.status,
        reason=check.reason,
        direction=check.direction,
        counterexample=check.counterexample,
    )


def pool_pids() -> set[int]:
    return {
        pid for repair in verl_interaction._shared.values() for pid in repair.reward.worker_pids
    }


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_a_verl_rollout_repairs_with_aevals_feedback(tmp_path: Path, verl_run: ModuleType) -> None:
    fixed, stuck = demo_row("2"), demo_row("3")
    wrong = too_strong(fixed["answer"])
    right = f"<think>ok</think><answer>{fixed['answer']}</answer>"
    never = too_strong(stuck["answer"])
    scripts = {fixed["question"]: [wrong, right], stuck["question"]: [never] * 6}
    pids: set[int] = set()
    try:
        tokenizer, servers, output = verl_run.rollout(
            tmp_path, [fixed, stuck], scripts, INTERACTION_CONFIG, None
        )

        # The repaired sample: two answers; between them the feedback `run` sends, as a
        # user turn in the token ids verl gave the model.
        first, second = servers.prompts[fixed["question"]]
        answer_ids = servers.answers[fixed["question"]][0]
        feedback = expected_feedback(wrong, fixed["answer"], fixed["constants"])
        assert "A counterexample: with " in feedback
        confirm_counterexample(
            check_response(wrong, fixed["answer"], fixed["constants"]).counterexample,
            "too_strong",
            wrong,
            fixed["answer"],
            fixed["constants"],
        )
        assert second == first + answer_ids + verl_run.chat_turn(tokenizer, "user", feedback)
        # The stuck sample: stopped by the interaction after ROUNDS answers (verl's own
        # limit is unset), though the script had more.
        assert len(servers.prompts[stuck["question"]]) == ROUNDS
        stuck_prompts = servers.prompts[stuck["question"]]
        for r in range(1, ROUNDS):
            assert tokenizer.decode(stuck_prompts[r]).endswith(
                f"<|im_start|>user\n{expected_feedback(never, stuck['answer'], stuck['constants'])}"
                f"{verl_run.END}\n<|im_start|>assistant\n"
            )

        # verl's output batch, in the rows' order: the turn scores are aeval's judge's.
        rows = [e["index"] for e in output.non_tensor_batch["extra_info"]]
        assert rows == [0, 1]
        with EquivalenceReward(workers=1) as judge:
            expected = [
                [judge.score_one(a, fixed["answer"], fixed["constants"]) for a in (wrong, right)],
                [judge.score_one(never, stuck["answer"], stuck["constants"])] * ROUNDS,
            ]
        assert expected == [[0.0, 1.0], [0.0, 0.0, 0.0]]
        assert [list(t) for t in output.non_tensor_batch["turn_scores"]] == expected
        # user + assistant turns + 1, verl's count
        assert list(output.non_tensor_batch["__num_turns__"]) == [5, 7]
        # the model's tokens are trained on, the feedback's are not
        masks = output.batch["response_mask"].sum(dim=1).tolist()
        assert masks == [
            sum(len(ids) for ids in servers.answers[q])
            for q in (fixed["question"], stuck["question"])
        ]
        # The sequence verl trains on: answer, feedback turn, answer, and after the solving
        # answer the interaction's (empty) closing message, which verl still appends as a
        # user turn before it stops (``_handle_interacting_state``); only answers count.
        width = output.batch["prompts"].shape[1]
        length = int(output.batch["attention_mask"][0][width:].sum())
        [answer_1, answer_2] = servers.answers[fixed["question"]]
        assert output.batch["responses"][0][:length].tolist() == (
            answer_1
            + verl_run.chat_turn(tokenizer, "user", feedback)
            + answer_2
            + verl_run.chat_turn(tokenizer, "user", "")
        )

        # verl built an interaction per sample; they shared one judge with one worker
        # (``workers: 1``), which outlives the rollout and serves the next batch.
        pids = pool_pids()
        assert len(verl_interaction._shared) == 1 and len(pids) == 1
        assert all(alive(pid) for pid in pids)
        _, again, _ = verl_run.rollout(
            tmp_path / "again", [fixed], {fixed["question"]: [right]}, INTERACTION_CONFIG, None
        )
        assert len(again.prompts[fixed["question"]]) == 1
        assert pool_pids() == pids
    finally:
        verl_interaction.close_shared()
    assert not any(alive(pid) for pid in pids)


def test_verl_stops_before_judging_the_answer_at_max_assistant_turns(
    tmp_path: Path, verl_run: ModuleType
) -> None:
    """verl checks ``max_assistant_turns`` right after a generation, before the interaction
    (``ToolAgentLoop._handle_generating_state``): with it equal to ``rounds`` the last
    answer is never judged, so docs/repair.md asks for more turns than rounds. The rows
    name no agent loop here; verl's default (``single_turn_agent``) would never call the
    interaction, ``rollout.agent.default_agent_loop=tool_agent`` does."""
    stuck = demo_row("3")
    never = too_strong(stuck["answer"])
    try:
        _, servers, output = verl_run.rollout(
            tmp_path,
            [stuck],
            {stuck["question"]: [never] * 6},
            INTERACTION_CONFIG,
            ROUNDS,
            agent_name=None,
            overrides=("actor_rollout_ref.rollout.agent.default_agent_loop=tool_agent",),
        )
    finally:
        verl_interaction.close_shared()
    assert len(servers.prompts[stuck["question"]]) == ROUNDS
    assert list(output.non_tensor_batch["turn_scores"][0]) == [0.0] * (ROUNDS - 1)


def test_without_the_tool_agent_loop_verl_never_calls_the_interaction(
    tmp_path: Path, verl_run: ModuleType
) -> None:
    """verl's default agent loop is ``single_turn_agent`` (``rollout.yaml``): rows that name
    none get one answer and no feedback, whatever the interaction config (verl-project/verl
    issue 4441). docs/repair.md says to name ``tool_agent``."""
    fixed = demo_row("2")
    try:
        _, servers, output = verl_run.rollout(
            tmp_path,
            [fixed],
            {fixed["question"]: [too_strong(fixed["answer"])] * 3},
            INTERACTION_CONFIG,
            None,
            agent_name=None,
        )
    finally:
        verl_interaction.close_shared()
    assert len(servers.prompts[fixed["question"]]) == 1
    assert list(output.non_tensor_batch["turn_scores"][0]) == []  # never judged
    assert list(output.non_tensor_batch["__num_turns__"]) == [2]
