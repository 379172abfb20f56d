"""The repair loop as a verifiers 0.4 env, rolled out by verifiers' own eval runner.

verifiers 0.4.0 has only the ``verifiers.v1`` stack (its wheel holds no
``verifiers.legacy``); a multi-turn env is an ``Env`` whose ``run`` holds an agent's
rollout open turn by turn (``verifiers/v1/agent.py``: ``Interaction.turn``). The test
goes through ``verifiers.v1.cli.eval.runner.run_eval`` (what ``vf-eval`` runs):
``vf.load_environment`` resolves the taskset id ``aeval-repair`` to the
``environments/aeval_repair`` package (``utils/loaders.py``), ``Env.serving`` brings up
verifiers' interception server, and each episode runs our ``RepairEnv.run``, whose
turns run verifiers' ``null`` harness: its chat program (``harnesses/utils/core.py``,
the openai SDK with ``stream=True``) in a uv-built environment in a subprocess
(``runtimes/base.py``: ``prepare_uv_script``), through the interception server
(``clients/eval.py``: the request relayed upstream as sent) to aeval's local server.

The model is a synthetic model whose every first answer is too strong and which repairs
only when told a counterexample (``repair=0/0/1``), so the rollout's length shows which
feedback the environment sent.

This file needs verifiers 0.4, which requires openai < 3: the main test environment
(openai 3, verifiers 0.3.1) skips it, saying why, and ``.ci/verifiers`` runs it in its
own environment (docs/repair.md, "verifiers"). There ``AEVAL_VERIFIERS_CI`` is set, and
a missing verifiers 0.4 or uv is a failure, not a skip.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from aeval.dataset import demo_dataset_path, load_dataset
from aeval.feedback import classify_feedback, render_feedback
from aeval.local import Intent, LocalBatchServer, ModelSpec
from aeval.verdicts import Status

ENVIRONMENTS = Path(__file__).parent.parent / "environments" / "aeval_repair"


def _needs(reason: str) -> None:
    if os.environ.get("AEVAL_VERIFIERS_CI"):
        pytest.fail(f"{reason} (.ci/verifiers installs it)", pytrace=False)
    pytest.skip(reason, allow_module_level=True)


try:
    from importlib.metadata import version

    import verifiers.v1 as vf
    from verifiers.v1.cli.eval.runner import run_eval
    from verifiers.v1.configs.cli.eval import EvalConfig
except ImportError:
    _needs("verifiers 0.4 is not installed (pip install 'aeval[verifiers]')")
if tuple(int(p) for p in version("verifiers").split(".")[:2]) < (0, 4):
    _needs(f"verifiers {version('verifiers')} is installed; this file is for 0.4")
if shutil.which("uv") is None:
    _needs("verifiers 0.4's chat harness builds its program's environment with uv")

from repair_helpers import confirm_counterexample  # noqa: E402

DEMO = load_dataset(str(demo_dataset_path()))
ROWS = {str(r["id"]): r for r in DEMO.iter_rows(named=True)}
MODELS = {
    "*": ModelSpec(
        "synthetic",
        seed=3,
        accuracy=0.0,
        fenced_share=0.0,
        failure_mix={Intent.TOO_STRONG: 1.0},
        repair=(0.0, 0.0, 1.0),
    )
}


def evaluate(feedback: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Five episodes of the ``aeval-repair`` env, as ``vf-eval aeval-repair`` runs them."""
    monkeypatch.syspath_prepend(str(ENVIRONMENTS))  # as `pip install -e` of the package would
    from aeval_repair import RepairEnv

    from aeval.interop.verifiers_taskset import env_config

    config = env_config(
        dataset="demo", sample_ids="1-5", rounds=3, feedback=feedback, reward={"workers": 1}
    )

    async def run() -> list[Any]:
        async with LocalBatchServer(dataset=DEMO, models=MODELS) as server:
            eval_config = EvalConfig(
                env=config,
                model="synthetic-model",
                client=vf.EvalClientConfig(base_url=server.base_url, api_key_var="AEVAL_NO_KEY"),
                output_dir=tmp_path / "vf-eval",
                rich=None,
                push=False,
            )
            return await run_eval(eval_config)

    assert vf.load_environment(config).__class__ is RepairEnv  # the package's own env
    return asyncio.run(run())


def text_of(message: Any) -> str:
    content = message.content
    return content if isinstance(content, str) else "".join(p.text for p in content)


def conversation(trace: Any) -> list[tuple[str, str]]:
    return [(m.role, text_of(m)) for m in trace.messages]


def test_a_counterexample_episode_repairs_in_round_two(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    episodes = evaluate("counterexample", tmp_path, monkeypatch)
    assert len(episodes) == 5
    for episode in episodes:
        assert episode.ok, episode.errors
        (trace,) = episode.traces
        rounds = trace.info["aeval_rounds"]
        assert [r["status"] for r in rounds] == ["not_equivalent", "equivalent"]
        assert trace.reward == 1.0 and trace.metrics["solved_round"] == 2.0
        said = conversation(trace)
        roles = [role for role, _ in said]
        assert roles == ["user", "assistant", "user", "assistant"]
        row = ROWS[str(episode.task.data.id)]
        assert said[0][1].startswith(row["question"])
        first = rounds[0]
        feedback = said[2][1]
        assert feedback == render_feedback(
            "counterexample",
            status=Status(first["status"]),
            reason=first["reason"],
            direction=first["direction"],
            counterexample=first["counterexample"],
        )
        assert classify_feedback(feedback) == "counterexample"
        confirm_counterexample(
            first["counterexample"], first["direction"], said[1][1], row["answer"], row["constants"]
        )


def test_a_retry_episode_runs_out_of_rounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    episodes = evaluate("retry", tmp_path, monkeypatch)
    assert len(episodes) == 5
    for episode in episodes:
        assert episode.ok, episode.errors
        (trace,) = episode.traces
        assert [r["status"] for r in trace.info["aeval_rounds"]] == ["not_equivalent"] * 3
        assert trace.reward == 0.0 and trace.metrics["solved_round"] == 0.0
        said = conversation(trace)
        assert [role for role, _ in said] == ["user", "assistant"] * 3
        assert said[2][1].splitlines()[0] == "Your answer is not correct."
        assert classify_feedback(said[2][1]) == "retry"
        answers = [text for role, text in said if role == "assistant"]
        assert answers[0] != answers[1] != answers[2]  # each other than the one before
