"""Every recipe of docs/reward.md, run verbatim from the page, in the framework's own call shape.

The code blocks are read from the page itself, so a recipe that drifts from what works fails
here. The frameworks are not installed (they pull GPUs and torch); what runs a recipe is the
call its framework makes, from its current source:

- TRL (huggingface/trl f2cd57710ae345ea6428ae95363267fcf38a3dc8,
  ``trl/trainer/grpo_trainer.py`` ``_calculate_rewards``): the recipe's own ``from trl import
  GRPOConfig, GRPOTrainer`` gets a host that makes that call over its ``train_dataset``;
- verl (volcengine/verl b178a3cd56f58b2d502255daba591e92833930a7): the command's
  ``custom_reward_function.*`` overrides loaded as ``verl/trainer/ppo/reward.py``
  ``get_custom_reward_fn`` does (a file by path, then a name, ``reward_kwargs`` merged), called
  as ``verl/experimental/reward_loop/reward_manager/naive.py`` calls it on the rows the recipe
  wrote (``verl/workers/reward_manager/batch.py`` for the legacy ``batch`` manager);
- OpenRLHF (OpenRLHF/OpenRLHF 3c3be6234e0cb353e76bb8019947db9dfe99fca7,
  ``openrlhf/utils/agent.py``): the JSONL the recipe wrote, its prompt through a chat template,
  one request per sample to ``serve-reward`` with the command's settings.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import inspect
import json
import re
import sys
import threading
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import httpx
import polars as pl
import pytest

from aeval.reward.server import RewardServer
from aeval.reward.verl import close_shared

DOC = (Path(__file__).parent.parent / "docs" / "reward.md").read_text()
BLOCKS = re.findall(r"```(\w+)\n(.*?)```", DOC, re.S)
ROWS = 12


def blocks(lang: str, marker: str) -> list[str]:
    found = [code for kind, code in BLOCKS if kind == lang and marker in code]
    assert found, f"docs/reward.md has no {lang} block with {marker!r}"
    return found


def answer_for(truth: str, k: int) -> str:
    """A correct completion on even samples, a wrong one on odd samples."""
    return f"<think>.</think><answer>{truth if k % 2 == 0 else '(assert false)'}</answer>"


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory holding ``train.parquet`` (rows in the benchmark's format), as the recipes
    expect; the recipes' relative paths resolve there."""
    bench = pl.read_parquet(Path(__file__).parent / "data" / "warp-benchmark.parquet")
    bench.head(ROWS).write_parquet(tmp_path / "train.parquet")
    monkeypatch.chdir(tmp_path)
    return tmp_path


# -- TRL ------------------------------------------------------------------------------------


class _Trainer:
    """Hosts a recipe's ``GRPOTrainer(...)``: ``train()`` makes GRPOTrainer's reward call for
    one step of ``num_generations`` completions per prompt over the first rows."""

    made: ClassVar[list[_Trainer]] = []

    def __init__(self, model: str, reward_funcs: Any, args: Any, train_dataset: Any) -> None:
        self.funcs = reward_funcs if isinstance(reward_funcs, list) else [reward_funcs]
        self.generations = args.num_generations
        self.data = train_dataset
        self.rewards: list[list[float]] = []
        _Trainer.made.append(self)

    def train(self) -> None:
        rows = [self.data[i] for i in range(2)]
        prompts, completions, columns = [], [], {}
        for row in rows:
            for g in range(self.generations):
                prompts.append(row["prompt"])
                completions.append([{"role": "assistant", "content": answer_for(row["answer"], g)}])
        for key in self.data.column_names:
            if key != "prompt":
                columns[key] = [row[key] for row in rows for _ in range(self.generations)]
        kwargs = {
            **columns,
            "trainer_state": object(),
            "log_extra": lambda *a, **k: None,
            "log_metric": lambda *a, **k: None,
        }
        ids = [[1]] * len(completions)
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()
        try:
            for func in self.funcs:
                if inspect.iscoroutinefunction(func):
                    call = func(
                        prompts=prompts, completions=completions, completion_ids=ids, **kwargs
                    )
                    self.rewards.append(asyncio.run_coroutine_threadsafe(call, loop).result(120))
                else:
                    self.rewards.append(
                        func(prompts=prompts, completions=completions, completion_ids=ids, **kwargs)
                    )
        finally:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()


@pytest.fixture
def trl(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[_Trainer]]:
    module = types.ModuleType("trl")
    module.GRPOTrainer = _Trainer  # type: ignore[attr-defined]
    module.GRPOConfig = lambda output_dir, num_generations, **kw: types.SimpleNamespace(  # type: ignore[attr-defined]
        num_generations=num_generations
    )
    monkeypatch.setitem(sys.modules, "trl", module)
    _Trainer.made = []
    yield _Trainer.made
    for trainer in _Trainer.made:
        for func in trainer.funcs:
            target = func.args[0] if isinstance(func, functools.partial) else func
            if hasattr(target, "close"):
                target.close()


def test_trl_recipes(workdir: Path, trl: list[_Trainer]) -> None:
    sync_recipe = blocks("python", "reward_funcs=reward,")[0]
    namespace: dict[str, Any] = {}
    exec(sync_recipe, namespace)  # trains one step and closes the reward
    expected = [1.0 if g % 2 == 0 else 0.0 for _ in range(2) for g in range(16)]
    assert trl[0].rewards == [expected]

    async def other_async_reward(**kwargs: Any) -> list[float]:
        return [0.5] * len(kwargs["completions"])

    async_recipe = blocks("python", "reward.as_async(), other_async_reward")[0]
    namespace.update(other_async_reward=other_async_reward)
    exec(async_recipe, namespace)
    namespace["trainer"].train()
    assert trl[1].rewards == [expected, [0.5] * 32]

    stats_recipe = blocks("python", "RewardScores(format_credit=0.1, repair_penalty=0.2)")[0]
    exec(stats_recipe, namespace)
    with namespace["reward"] as reward:
        fenced = "<think>.</think><answer>```smt2\n(assert (> x 1))\n```</answer>"
        scores = reward(
            completions=[fenced, "<think>.</think><answer>(assert (> x 2))</answer>"],
            answer=["(assert (> x 1))"] * 2,
            constants=["(declare-const x Int)"] * 2,
        )
    assert scores == [0.8, 0.1]  # repaired: less the penalty; wrong but well formed: the credit


# -- verl -----------------------------------------------------------------------------------


def overrides(command: str) -> dict[str, str]:
    """The ``key=value`` overrides of a ``verl.trainer.main_ppo`` command (comments dropped)."""
    lines = [line.split("#")[0] for line in command.splitlines()]
    return dict(re.findall(r"(\+?[\w.]+)=(\S+)", " ".join(line.rstrip("\\ ") for line in lines)))


def load_custom_reward_fn(path: Path, settings: dict[str, str]) -> Any:
    """The function verl loads by path and name, with ``reward_kwargs`` merged into each call."""
    spec = importlib.util.spec_from_file_location("custom_module", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    raw = getattr(module, settings["custom_reward_function.name"])
    prefix = "+custom_reward_function.reward_kwargs."
    reward_kwargs = {k.removeprefix(prefix): v for k, v in settings.items() if k.startswith(prefix)}
    if inspect.iscoroutinefunction(raw):

        async def merged_async(*args: Any, **kwargs: Any) -> Any:
            return await raw(*args, **{**kwargs, **reward_kwargs})

        return merged_async
    return lambda *args, **kwargs: raw(*args, **{**kwargs, **reward_kwargs})


def naive_manager_calls(fn: Any, rows: list[dict[str, Any]]) -> list[Any]:
    """One call per sample, as the reward loop's naive manager makes them, gathered."""

    async def one(k: int, row: dict[str, Any]) -> Any:
        extra_info = dict(row["extra_info"] or {})
        extra_info.update(num_turns=None, rollout_reward_scores={})
        kwargs = {
            "data_source": row["data_source"],
            "solution_str": answer_for(_truth(row), k),
            "ground_truth": row["reward_model"]["ground_truth"],
            "extra_info": extra_info,
        }
        if inspect.iscoroutinefunction(fn):
            return await fn(**kwargs)
        return await asyncio.get_running_loop().run_in_executor(None, lambda: fn(**kwargs))

    async def step() -> list[Any]:
        return list(await asyncio.gather(*(one(k, row) for k, row in enumerate(rows))))

    return asyncio.run(step())


def _truth(row: dict[str, Any]) -> str:
    truth = row["reward_model"]["ground_truth"]
    return truth["answer"] if isinstance(truth, dict) else truth


def test_verl_recipes(workdir: Path) -> None:
    exec(blocks("python", 'write_parquet("warp_train.parquet")')[0], {})
    rows = pl.read_parquet("warp_train.parquet").to_dicts()
    assert len(rows) == ROWS
    expected = [1.0 if k % 2 == 0 else 0.0 for k in range(ROWS)]
    files = blocks("python", "# warp_reward.py")
    commands = blocks("bash", "verl.trainer.main_ppo")
    assert len(files) == len(commands) == 2
    try:
        for file, command in zip(files, commands, strict=True):
            settings = overrides(command)
            assert settings["reward_model.reward_manager"] in ("naive", "dapo", "rate_limited")
            Path(settings["custom_reward_function.path"]).write_text(file)
            fn = load_custom_reward_fn(Path(settings["custom_reward_function.path"]), settings)
            assert naive_manager_calls(fn, rows) == expected
        # The legacy batch manager named in the first command's comment: plural keywords.
        legacy = re.search(
            r"reward_manager=batch.*?custom_reward_function\.name=(\w+)", commands[0], re.S
        )
        assert legacy is not None
        batch_fn = load_custom_reward_fn(
            Path("warp_reward.py"),
            {
                "custom_reward_function.name": legacy.group(1),
                "+custom_reward_function.reward_kwargs.reading": "strict",
            },
        )
        scores = batch_fn(
            data_sources=[r["data_source"] for r in rows],
            solution_strs=[answer_for(_truth(r), k) for k, r in enumerate(rows)],
            ground_truths=[r["reward_model"]["ground_truth"] for r in rows],
            extra_infos=[r["extra_info"] for r in rows],
        )
        assert scores == expected
    finally:
        close_shared()


# -- OpenRLHF -------------------------------------------------------------------------------


def test_openrlhf_recipe(workdir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exec(blocks("python", 'open("warp_train.jsonl", "w")')[0], {})
    lines = [json.loads(line) for line in Path("warp_train.jsonl").read_text().splitlines()]
    assert len(lines) == ROWS
    recipe = blocks("bash", "aeval serve-reward")[0]
    command = next(line for line in recipe.splitlines() if "aeval serve-reward" in line)
    workers = int(re.search(r"--workers (\d+)", command).group(1))  # type: ignore[union-attr]
    assert "export AEVAL_REWARD_TOKEN=" in recipe and "aeval.reward.client" in recipe
    from aeval.reward import EquivalenceReward
    from aeval.reward.client import reward_func

    # The command's reward (its --workers capped to this machine's test budget), served
    # with the recipe's token, which OpenRLHF's reward_func sends from the same variable.
    monkeypatch.setenv("AEVAL_REWARD_TOKEN", "recipe-token")
    with (
        EquivalenceReward(workers=min(workers, 2)) as reward,
        RewardServer(reward, token="recipe-token") as server,
        httpx.Client(timeout=60) as client,
    ):
        monkeypatch.setenv("AEVAL_REWARD_URL", server.url)
        assert client.post(server.url, json={"query": [], "labels": []}).status_code == 401
        rewards = []
        for k, line in enumerate(lines):
            # --data.apply_chat_template: the prompt through the model's template (ChatML).
            prompt = "".join(
                f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in line["prompt"]
            )
            prompt += "<|im_start|>assistant\n"
            truth = json.loads(line["label"])["answer"]
            query = prompt + answer_for(truth, k) + "<|im_end|>"
            reply = reward_func([query], [prompt], [line["label"]])
            rewards.append(reply["rewards"][0])
    assert rewards == [1.0 if k % 2 == 0 else 0.0 for k in range(ROWS)]
