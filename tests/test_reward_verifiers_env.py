"""The repair loop as a verifiers environment, rolled out by verifiers' own code.

verifiers 0.3.1 is installed (the test extra); its classic API lives in
``verifiers.legacy``: ``load_environment(env_id, **env_args)`` imports the module the env
id names (``utils/env_utils.py``), ``Environment.evaluate`` runs each rollout through
``MultiTurnEnv.rollout`` (``envs/multiturn_env.py``: model turn, stop conditions,
``env_response``) with an ``OpenAIChatCompletionsClient`` around ``openai.AsyncOpenAI``
(``clients/openai_chat_completions_client.py``), and the rubric scores the states.

The model is aeval's local server in direct mode: a synthetic model whose every first
answer is too strong and which repairs only when told a counterexample (``repair=0/0/1``),
so the rollout's length shows which feedback the environment sent.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import openai
import pytest
import verifiers.legacy as vf
from repair_helpers import confirm_counterexample

from aeval.dataset import demo_dataset_path, load_dataset
from aeval.feedback import classify_feedback, render_feedback
from aeval.local import Intent, LocalBatchServer, ModelSpec
from aeval.verdicts import Status

ENVIRONMENTS = Path(__file__).parent.parent / "environments" / "aeval_repair"
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


def evaluate(feedback: str, monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Five rollouts of the ``aeval-repair`` environment, as ``vf-eval`` runs them."""
    monkeypatch.syspath_prepend(str(ENVIRONMENTS))  # as `pip install -e` of the package would
    env = vf.load_environment(
        "aeval-repair",
        dataset="demo",
        sample_ids="1-5",
        rounds=3,
        feedback=feedback,
        reward={"workers": 1},
    )

    async def run() -> list[dict[str, Any]]:
        async with LocalBatchServer(dataset=DEMO, models=MODELS) as server:
            client = vf.OpenAIChatCompletionsClient(
                openai.AsyncOpenAI(api_key="k", base_url=server.base_url)
            )
            results = await env.evaluate(
                client,
                "synthetic-model",
                num_examples=5,
                rollouts_per_example=1,
                state_columns=["aeval_rounds"],
                on_progress=[],
            )
            await client.close()
            return list(results["outputs"])

    try:
        return asyncio.run(run())
    finally:
        env.repair.close()


def text_of(message: Any) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else "".join(p["text"] for p in content)


def test_a_counterexample_rollout_repairs_in_round_two(monkeypatch: pytest.MonkeyPatch) -> None:
    outputs = evaluate("counterexample", monkeypatch)
    assert len(outputs) == 5
    for output in outputs:
        rounds = output["aeval_rounds"]
        assert [r["status"] for r in rounds] == ["not_equivalent", "equivalent"]
        assert output["reward"] == 1.0 and output["metrics"]["solved_round"] == 2.0
        completion = output["completion"]
        assert [m["role"] for m in completion] == ["assistant", "user", "assistant"]
        row = ROWS[output["info"]["id"]]
        first = rounds[0]
        feedback = text_of(completion[1])
        assert feedback == render_feedback(
            "counterexample",
            status=Status(first["status"]),
            reason=first["reason"],
            direction=first["direction"],
            counterexample=first["counterexample"],
        )
        assert classify_feedback(feedback) == "counterexample"
        confirm_counterexample(
            first["counterexample"],
            first["direction"],
            text_of(completion[0]),
            row["answer"],
            row["constants"],
        )
        assert output["prompt"][-1]["content"].startswith(row["question"])


def test_a_retry_rollout_runs_out_of_rounds(monkeypatch: pytest.MonkeyPatch) -> None:
    outputs = evaluate("retry", monkeypatch)
    for output in outputs:
        assert [r["status"] for r in output["aeval_rounds"]] == ["not_equivalent"] * 3
        assert output["reward"] == 0.0 and output["metrics"]["solved_round"] == 0.0
        roles = [m["role"] for m in output["completion"]]
        assert roles == ["assistant", "user", "assistant", "user", "assistant"]
        feedback = text_of(output["completion"][1])
        assert feedback.splitlines()[0] == "Your answer is not correct."
        assert classify_feedback(feedback) == "retry"
        answers = [text_of(m) for m in output["completion"] if m["role"] == "assistant"]
        assert answers[0] != answers[1] != answers[2]  # each other than the one before
