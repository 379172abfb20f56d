"""The repair interaction in a real verl multi-turn rollout, through verl's own code.

verl's multi-turn rollout drives a ``BaseInteraction`` from its ``ToolAgentLoop``
(``verl/experimental/agent_loop/tool_agent_loop.py``: ``_handle_interacting_state``),
which ``AgentLoopWorker.generate_sequences`` (``agent_loop.py``) instantiates per sample
from its agent-loop registry. verl 0.7.1 is the last release with interactions: PR
verl-project/verl#6074 ("[BREAKING] [env] refactor: deprecate verl/interactions",
merged 2026-04-20) deleted ``verl/interactions`` and the interacting state, so 0.8.0,
0.9.0 and 0.9.1 have no ``BaseInteraction`` to drive (checked in their wheels).

Here everything is verl 0.7.1's code but the LLM: the trainer config is verl's own
``ppo_trainer`` composed by Hydra with the overrides its multi-turn example uses
(``examples/sglang_multiturn/run_qwen2.5-0.5b_gsm8k_multiturn_w_interaction.sh``), the
interaction comes from the interaction config YAML through verl's registry
(``verl/interactions/utils/interaction_registry.py``), the rows go through verl's
``RLHFDataset`` and ``collate_fn`` from a parquet file shaped as
``examples/data_preprocess/gsm8k_multiturn_w_interaction.py`` writes it, the model's
tokenizer and config are read by verl's ``HFModelConfig`` from a local model folder, and
``AgentLoopWorker.generate_sequences`` runs the batch. The stand-in is the server
manager, set where verl's worker leaves room for one ("for recipe to change",
``AgentLoopWorker.__init__``): it answers each ``generate`` with the token ids of a
scripted answer. The tokenizer is built here (the hub is out of reach): byte-level, no
merges, ChatML, the template shape of Qwen2.5 (a default system turn).

It runs where verl is installed: ``.ci/verl`` builds that environment and runs this
file. Without verl it skips, except in CI (``AEVAL_CI``), where it fails.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from aeval.dataset import demo_dataset_path, load_dataset
from aeval.feedback import render_feedback
from aeval.reward import EquivalenceReward, verl_interaction
from aeval.verify import check_response

pytestmark = pytest.mark.verl

if os.environ.get("AEVAL_CI") or os.environ.get("CI"):
    # CI installs verl (.ci/verl): a missing verl there is a failure, not a skip.
    import verl
else:
    verl = pytest.importorskip("verl", reason="verl is not installed (.ci/verl installs it)")

import hydra  # noqa: E402  (verl's own dependencies, present wherever verl is)
from tokenizers import Tokenizer, decoders, models, pre_tokenizers  # noqa: E402
from transformers import PreTrainedTokenizerFast, Qwen2Config  # noqa: E402
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker  # noqa: E402
from verl.protocol import DataProto  # noqa: E402
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn  # noqa: E402
from verl.workers.rollout.replica import TokenOutput  # noqa: E402

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
# Qwen2.5's template, its tool branches left out: a default system turn, then ChatML.
CHATML = (
    "{%- if messages[0]['role'] != 'system' %}"
    "{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
END = "<|im_end|>"


def model_folder(path: Path) -> PreTrainedTokenizerFast:
    """A local model folder verl's HFModelConfig reads: a tokenizer and a config, no weights."""
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    core = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(alphabet)}, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token=END,
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"],
        chat_template=CHATML,
    )
    tokenizer.save_pretrained(path)
    Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        architectures=["Qwen2ForCausalLM"],
    ).save_pretrained(path)
    return tokenizer


class ScriptedServers:
    """Stands in for verl's AsyncLLMServerManager: each request's next scripted answer.

    ``generate``'s signature is ``AsyncLLMServerManager.generate``'s (verl 0.7.1,
    ``agent_loop.py``); a sample is told apart by its question in the first prompt.
    """

    def __init__(self, tokenizer: PreTrainedTokenizerFast, scripts: dict[str, list[str]]):
        self.tokenizer = tokenizer
        self.scripts = scripts
        self.prompts: dict[str, list[list[int]]] = {}  # question -> prompt ids of each call
        self.answers: dict[str, list[list[int]]] = {}  # question -> answer ids of each call
        self._question_of: dict[str, str] = {}

    async def generate(
        self,
        request_id: str,
        *,
        prompt_ids: list[int],
        sampling_params: dict[str, Any],
        image_data: list[Any] | None = None,
        video_data: list[Any] | None = None,
    ) -> TokenOutput:
        if request_id not in self._question_of:
            text = self.tokenizer.decode(prompt_ids)
            [question] = [q for q in self.scripts if q in text]
            self._question_of[request_id] = question
        question = self._question_of[request_id]
        calls = self.prompts.setdefault(question, [])
        calls.append(list(prompt_ids))
        answer = self.scripts[question][len(calls) - 1]
        ids = self.tokenizer.encode(answer + END, add_special_tokens=False)
        self.answers.setdefault(question, []).append(ids)
        return TokenOutput(token_ids=ids, log_probs=[0.0] * len(ids), stop_reason="completed")


class Worker(AgentLoopWorker):
    """verl's worker with the stand-in servers in the slot verl leaves for them."""

    def __init__(self, config: Any, servers: ScriptedServers) -> None:
        self.server_manager = servers
        super().__init__(config, servers=[], load_balancer_handle=None)


def trainer_config(tmp_path: Path, model: Path, data: Path, max_assistant_turns: int | None):
    interaction_config = tmp_path / "interaction_config.yaml"
    interaction_config.write_text(INTERACTION_CONFIG)
    config_dir = Path(verl.__file__).parent / "trainer" / "config"
    turns = "null" if max_assistant_turns is None else str(max_assistant_turns)
    with hydra.initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return hydra.compose(
            config_name="ppo_trainer",
            overrides=[
                f"actor_rollout_ref.model.path={model}",
                "actor_rollout_ref.rollout.name=vllm",
                "actor_rollout_ref.rollout.mode=async",
                "actor_rollout_ref.rollout.prompt_length=8192",
                "actor_rollout_ref.rollout.response_length=8192",
                "actor_rollout_ref.rollout.multi_turn.enable=True",
                f"actor_rollout_ref.rollout.multi_turn.max_assistant_turns={turns}",
                f"actor_rollout_ref.rollout.multi_turn.interaction_config_path={interaction_config}",
                f"data.train_files={data}",
                f"data.val_files={data}",
                "data.max_prompt_length=8192",
                "data.return_raw_chat=True",
                f"+data.cache_dir={tmp_path / 'cache'}",
            ],
        )


def demo_row(cid: str) -> dict[str, Any]:
    return DEMO.filter(pl.col("id") == cid).row(0, named=True)


def parquet_rows(path: Path, items: list[dict[str, Any]]) -> None:
    """Rows as verl's gsm8k_multiturn_w_interaction preprocessing writes them."""
    rows = [
        {
            "data_source": "aeval",
            "agent_name": "tool_agent",
            "prompt": [{"role": "user", "content": item["question"]}],
            "ability": "smt",
            "reward_model": {"style": "rule", "ground_truth": item["answer"]},
            "extra_info": {
                "index": i,
                "interaction_kwargs": {
                    "name": "aeval_repair",
                    "ground_truth": item["answer"],
                    "constants": item["constants"],
                },
            },
        }
        for i, item in enumerate(items)
    ]
    pl.DataFrame(rows).write_parquet(path)


def too_strong(truth: str) -> str:
    """A wrong answer: the truth and a contradiction."""
    return f"<answer>(assert (and {truth.strip()[8:-1]} (= 1 2)))</answer>"


def rollout(tmp_path: Path, scripts: dict[str, list[str]], max_assistant_turns: int | None):
    """One ``generate_sequences`` of verl's worker over the scripted questions' rows."""
    items = [DEMO.filter(pl.col("question") == q).row(0, named=True) for q in scripts]
    model = tmp_path / "model"
    tokenizer = model_folder(model)
    data = tmp_path / "rows.parquet"
    parquet_rows(data, items)
    config = trainer_config(tmp_path, model, data, max_assistant_turns)
    servers = ScriptedServers(tokenizer, scripts)
    worker = Worker(config, servers)
    dataset = RLHFDataset(str(data), worker.tokenizer, config.data, worker.processor)
    batch = DataProto.from_single_dict(collate_fn([dataset[i] for i in range(len(dataset))]))
    return tokenizer, servers, asyncio.run(worker.generate_sequences(batch))


def chat_turn(tokenizer: PreTrainedTokenizerFast, role: str, content: str) -> list[int]:
    """The tokens of one ChatML turn and the next assistant header, as the template makes them."""
    text = f"<|im_start|>{role}\n{content}{END}\n<|im_start|>assistant\n"
    return tokenizer.encode(text, add_special_tokens=False)


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


def test_a_verl_rollout_repairs_with_aevals_feedback(tmp_path: Path) -> None:
    fixed, stuck = demo_row("2"), demo_row("3")
    wrong, right = (
        too_strong(fixed["answer"]),
        f"<think>ok</think><answer>{fixed['answer']}</answer>",
    )
    never = too_strong(stuck["answer"])
    scripts = {fixed["question"]: [wrong, right], stuck["question"]: [never] * 6}
    try:
        tokenizer, servers, output = rollout(tmp_path, scripts, None)

        # The repaired sample: two answers; between them the feedback `run` sends, as a
        # user turn in the token ids verl gave the model.
        first, second = servers.prompts[fixed["question"]]
        answer_ids = servers.answers[fixed["question"]][0]
        feedback = expected_feedback(wrong, fixed["answer"], fixed["constants"])
        assert "A counterexample: with " in feedback
        assert second == first + answer_ids + chat_turn(tokenizer, "user", feedback)
        # The stuck sample: stopped by the interaction after ROUNDS answers (verl's own
        # limit is unset), though the script had more.
        assert len(servers.prompts[stuck["question"]]) == ROUNDS
        stuck_prompts = servers.prompts[stuck["question"]]
        for r in range(1, ROUNDS):
            assert tokenizer.decode(stuck_prompts[r]).endswith(
                f"<|im_start|>user\n{expected_feedback(never, stuck['answer'], stuck['constants'])}"
                f"{END}\n<|im_start|>assistant\n"
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
        response = tokenizer.decode(
            output.batch["responses"][0][output.batch["response_mask"][0] == 0]
        )
        assert feedback in response

        # verl built an interaction per sample; they shared one judge with one worker
        # (``workers: 1``), which outlives the rollout and serves the next batch.
        pids = pool_pids()
        assert len(verl_interaction._shared) == 1 and len(pids) == 1
        assert all(alive(pid) for pid in pids)
        _, again, _ = rollout(tmp_path / "again", {fixed["question"]: [right]}, None)
        assert len(again.prompts[fixed["question"]]) == 1
        assert pool_pids() == pids
    finally:
        verl_interaction.close_shared()
    assert not any(alive(pid) for pid in pids)


def test_verl_stops_before_judging_the_answer_at_max_assistant_turns(tmp_path: Path) -> None:
    """verl checks ``max_assistant_turns`` right after a generation, before the interaction
    (``ToolAgentLoop._handle_generating_state``): with it equal to ``rounds`` the last
    answer is never judged, so docs/repair.md asks for more turns than rounds."""
    stuck = demo_row("3")
    never = too_strong(stuck["answer"])
    try:
        _, servers, output = rollout(tmp_path, {stuck["question"]: [never] * 6}, ROUNDS)
    finally:
        verl_interaction.close_shared()
    assert len(servers.prompts[stuck["question"]]) == ROUNDS
    assert list(output.non_tensor_batch["turn_scores"][0]) == [0.0] * (ROUNDS - 1)
