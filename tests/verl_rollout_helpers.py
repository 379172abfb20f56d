"""verl 0.7.1's multi-turn rollout, run for real with only the LLM stood in.

Everything here is verl's own code but the model's answers:

- the trainer config is verl's ``ppo_trainer`` (``verl/trainer/config``), composed by
  Hydra with the multi-turn overrides of verl's interaction example
  (``examples/sglang_multiturn/run_qwen2.5-0.5b_gsm8k_multiturn_w_interaction.sh``);
- verl's ``HFModelConfig`` reads the model's tokenizer and config from a local folder (the
  hub is out of reach, and no weights are needed): a byte-level tokenizer without merges,
  built with ``tokenizers``, with Qwen2.5's ChatML template (its tool branches left out);
- the rows are a parquet file shaped as verl's
  ``examples/data_preprocess/gsm8k_multiturn_w_interaction.py`` writes them, read by
  verl's ``RLHFDataset`` and ``collate_fn`` into a ``DataProto``, as its trainer does;
- ``AgentLoopWorker.generate_sequences`` (``verl/experimental/agent_loop/agent_loop.py``)
  instantiates the ``tool_agent`` loop (``ToolAgentLoop``) per sample, which builds the
  interactions from the config YAML through verl's registry
  (``verl/interactions/utils/interaction_registry.py``) and drives them in its
  interacting state;
- the stand-in is the server manager, put where verl's worker leaves room for one
  (``AgentLoopWorker.__init__``: "for recipe to change"); it answers each ``generate``
  (``AsyncLLMServerManager.generate``'s signature) with the token ids of the next
  scripted answer for that sample.

verl 0.7.1 is the last release with interactions: verl-project/verl#6074 ("[BREAKING]
[env] refactor: deprecate verl/interactions", merged 2026-04-20) deleted
``verl/interactions`` and the loop's interacting state; 0.8.0, 0.9.0 and 0.9.1 ship
neither (checked in their wheels).

Imported only where verl is installed (``.ci/verl``), by the fixture in
``test_reward_verl_rollout.py``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import hydra
import polars as pl
import verl
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast, Qwen2Config
from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
from verl.protocol import DataProto
from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn
from verl.workers.rollout.replica import TokenOutput

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


def trainer_config(
    tmp_path: Path,
    model: Path,
    data: Path,
    interaction_config: Path,
    max_assistant_turns: int | None,
    extra: list[str],
) -> Any:
    """verl's ppo_trainer config with the multi-turn overrides of its interaction example
    (and ``extra`` ones)."""
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
                *extra,
            ],
        )


def parquet_rows(path: Path, items: list[dict[str, Any]], agent_name: str | None) -> None:
    """Rows as verl's gsm8k_multiturn_w_interaction preprocessing writes them, with the
    agent loop named per row (as its gsm8k_tool_agent_loop preprocessing does) or not."""
    rows = [
        {
            "data_source": "aeval",
            **({"agent_name": agent_name} if agent_name else {}),
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


def rollout(
    tmp_path: Path,
    items: list[dict[str, Any]],
    scripts: dict[str, list[str]],
    interaction_config: str,
    max_assistant_turns: int | None,
    *,
    agent_name: str | None = "tool_agent",
    overrides: tuple[str, ...] = (),
) -> tuple[PreTrainedTokenizerFast, ScriptedServers, Any]:
    """One ``generate_sequences`` of verl's worker over the items' rows; the model answers
    each question with its script, in order."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    interaction_path = tmp_path / "interaction_config.yaml"
    interaction_path.write_text(interaction_config)
    model = tmp_path / "model"
    tokenizer = model_folder(model)
    data = tmp_path / "rows.parquet"
    parquet_rows(data, items, agent_name)
    config = trainer_config(
        tmp_path, model, data, interaction_path, max_assistant_turns, list(overrides)
    )
    servers = ScriptedServers(tokenizer, scripts)
    worker = Worker(config, servers)
    dataset = RLHFDataset(str(data), worker.tokenizer, config.data, worker.processor)
    batch = DataProto.from_single_dict(collate_fn([dataset[i] for i in range(len(dataset))]))
    return tokenizer, servers, asyncio.run(worker.generate_sequences(batch))


def chat_turn(tokenizer: PreTrainedTokenizerFast, role: str, content: str) -> list[int]:
    """The tokens of one ChatML turn and the next assistant header, as the template makes them."""
    text = f"<|im_start|>{role}\n{content}{END}\n<|im_start|>assistant\n"
    return tokenizer.encode(text, add_special_tokens=False)
