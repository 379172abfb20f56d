"""Inspect's repair loop agrees with ``aeval run --rounds K`` on the same answers (issue
#44, item 7: "It agrees with ``aeval run`` on the same answers").

One side is the engine: a three-round run in batch mode against the local server's
synthetic model, over real HTTP. Its run directory is the recorded answer set: the
requests it sent (``requests/``), the answers it got (``outputs/``), its verdicts
(``verdicts.jsonl``) and ``accuracy_by_round`` (``summary.json``), read with ``json``
by the helpers of the engine's own round tests (tests/rounds_checks.py).

The other side is Inspect's own ``eval()`` of the ``warp`` task with ``rounds=3``, its
model a ``mockllm/model`` that answers each (item, round) it is asked with the answer
the engine received for that (item, round), and records the conversation it was sent.

The two must agree on everything that is not the model: which (item, round) is asked,
the whole conversation of each ask (so the feedback texts, byte for byte, and the
answers carried as assistant turns), the verdict of each (item, round), and the
accuracy by round.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from engine_helpers import benchmark_slice, fast_config
from inspect_ai import eval as inspect_eval
from inspect_ai.model import ChatMessage, ModelOutput, ModelUsage, get_model
from rounds_checks import (
    NO_500,
    answers,
    check_counterexample,
    request_lines,
    split,
    verdict_rounds,
)

from aeval.engine import Run
from aeval.interop.inspect_task import warp
from aeval.local import LocalBatchServer
from aeval.local.chat import content_text

ROUNDS = 3
# the values of a feedback message's counterexample (aeval.feedback's wording)
_POINT = re.compile(r"with (.*?), (?=the correct constraint holds|yours holds)")
MODEL = "model-c"  # the weakest synthetic model (accuracy 0.2): most items go to round 2 or 3


def engine_run(data: Path, frame: Any, out: Path, feedback: str) -> Path:
    async def go() -> Path:
        async with LocalBatchServer(dataset=frame, models={MODEL: NO_500[MODEL]}) as server:
            config = fast_config(
                data, out, server.base_url, models=(MODEL,), rounds=ROUNDS, feedback=feedback
            )
            result = await Run(config).run()
        assert result.outcome == "finished", result.message
        return result.run_dir

    return anyio.run(go)


def cut_off(run_dir: Path) -> set[tuple[str, int]]:
    """The (item, round) whose answer the server ended with finish_reason "length"."""
    out = set()
    for path in (run_dir / "outputs").glob("*.jsonl"):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            body = (record.get("response") or {}).get("body") or {}
            if any(c.get("finish_reason") == "length" for c in body.get("choices", [])):
                out.add(split(record["custom_id"]))
    return out


def said(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(m["role"], content_text(m["content"])) for m in messages]


class Replay:
    """A mockllm output function: the engine's answer for the (item, round) asked (the
    item read from the question, the round from the assistant turns before it), and a
    record of every conversation Inspect sent."""

    def __init__(
        self,
        by_question: dict[str, str],
        replies: dict[tuple[str, int], str],
        cut_off: set[tuple[str, int]],
    ) -> None:
        self.by_question, self.replies, self.cut_off = by_question, replies, cut_off
        self.sent: dict[tuple[str, int], list[tuple[str, str]]] = {}

    def __call__(self, input: list[ChatMessage], *_: object) -> ModelOutput:
        question = next(m for m in input if m.role == "user").text
        item = self.by_question[question]
        round_ = 1 + sum(m.role == "assistant" for m in input)
        self.sent[(item, round_)] = [(m.role, m.text) for m in input]
        # an ask the engine never made gets no answer (and fails the comparison below)
        output = ModelOutput.from_content(
            model="mockllm/model",
            content=self.replies.get((item, round_), ""),
            # an answer the server cut off (finish_reason "length"), as Inspect's openai
            # provider reports it
            stop_reason="max_tokens" if (item, round_) in self.cut_off else "stop",
        )
        # with usage given, Inspect counts no tokens itself (its tokenizer's encoding
        # would be fetched from the network)
        output.usage = ModelUsage(input_tokens=100, output_tokens=20, total_tokens=120)
        return output


def sans_counterexample(conversation: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The conversation with each counterexample's values left out (its side kept)."""
    return [(role, _POINT.sub("with …,", text)) for role, text in conversation]


def counterexamples_hold(conversation: list[tuple[str, str]], truth: str, constants: str) -> int:
    """Check with Z3 each counterexample the conversation's feedback names against the
    answer before it (rounds_checks.check_counterexample); how many there were."""
    return sum(
        check_counterexample(feedback, truth, constants, answer)
        for (_, answer), (_, feedback) in zip(conversation[1::2], conversation[2::2], strict=False)
    )


def agree(benchmark_path: Path, tmp_path: Path, feedback: str, rows: int) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=rows)
    run_dir = engine_run(data, frame, tmp_path / "run", feedback)

    # the engine's side, from its run directory
    verdicts = {item: by_round for (_, _, item), by_round in verdict_rounds(run_dir).items()}
    bodies = request_lines(run_dir)
    got = answers(run_dir)
    asked = {(item, rnd) for item, by_round in verdicts.items() for rnd in by_round}
    sent = {split(cid): said(body["messages"]) for (_, cid), body in bodies.items()}
    assert set(sent) == asked
    assert len({job for job, _ in got}) == 1  # one model, one trial: one job
    replies = {split(cid): text for (_, cid), text in got.items()}
    by_question = {
        next(text for role, text in conversation if role == "user"): item
        for (item, rnd), conversation in sent.items()
        if rnd == 1
    }
    summary = json.loads((run_dir / "summary.json").read_text())
    (model_summary,) = summary["models"]
    engine_accuracy = model_summary["rounds"]["accuracy_by_round"]
    # the comparison means something: some items used every round, and with a
    # counterexample told repairs happened (retry, the control, may repair none)
    if feedback == "counterexample":
        assert engine_accuracy[0] < engine_accuracy[-1]
    assert any(len(by_round) == ROUNDS for by_round in verdicts.values())

    # Inspect's side: the same task settings, the engine's answers
    replay = Replay(by_question, replies, cut_off(run_dir))
    task = warp(dataset=str(data), rounds=ROUNDS, feedback=feedback, workers=1, timeout=20.0)
    model = get_model("mockllm/model", custom_outputs=replay)
    [log] = inspect_eval(task, model=model, log_dir=str(tmp_path / "logs"), display="none")
    for part in (task.solver, task.scorer[0]):  # stop the verifier pools' workers now
        pool = getattr(part, "aeval_pool", None)
        if pool is not None:
            pool.close()
    assert log.status == "success", log.error
    assert log.samples is not None and len(log.samples) == len(verdicts)

    # the same asks, each with the same conversation: the same feedback texts, byte for
    # byte, but for a counterexample's values: Z3 may give each side another point where
    # the two formulas disagree (a satisfying assignment is not unique), so each side's
    # point is checked with Z3 instead
    assert set(replay.sent) == asked
    truths = {
        str(r["id"]): (str(r["answer"]), str(r["constants"])) for r in frame.iter_rows(named=True)
    }
    named = 0
    for key in sorted(asked):
        assert sans_counterexample(replay.sent[key]) == sans_counterexample(sent[key]), key
        if feedback != "counterexample":
            assert replay.sent[key] == sent[key], key
        named += counterexamples_hold(replay.sent[key], *truths[key[0]])
        counterexamples_hold(sent[key], *truths[key[0]])
    assert (named > 0) == (feedback == "counterexample")

    # the same verdict per (item, round)
    solved_in: dict[str, int | None] = {}
    for sample in log.samples:
        item = str(sample.id)
        score = (sample.scores or {})["equivalence"]
        rounds = (score.metadata or {})["rounds"]
        assert [r["round"] for r in rounds] == sorted(verdicts[item]), item
        for record in rounds:
            engine = verdicts[item][record["round"]]
            for field in ("status", "reason", "direction"):
                assert record[field] == engine[field], (item, record["round"], field)
        solved_in[item] = next((r["round"] for r in rounds if r["status"] == "equivalent"), None)

    # the same accuracy by round
    inspect_accuracy = [
        sum(1 for s in solved_in.values() if s is not None and s <= k) / len(solved_in)
        for k in range(1, ROUNDS + 1)
    ]
    assert inspect_accuracy == pytest.approx(engine_accuracy)


def test_inspects_rounds_agree_with_aeval_run_on_the_same_answers(
    benchmark_path: Path, tmp_path: Path
) -> None:
    agree(benchmark_path, tmp_path, "counterexample", rows=4)


@pytest.mark.slow
@pytest.mark.parametrize("feedback", ["counterexample", "reason", "retry"])
def test_inspects_rounds_agree_with_aeval_run_on_more_items_and_every_level(
    benchmark_path: Path, tmp_path: Path, feedback: str
) -> None:
    agree(benchmark_path, tmp_path, feedback, rows=12)
