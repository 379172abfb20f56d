"""The Inspect task's repair rounds (issue #44, item 7), through Inspect's own ``eval()``.

A ``mockllm/model`` with scripted answers per item and round (the round read from the
conversation it is sent): each repair round must carry the model's previous answer as
the assistant turn and, as the next user message, exactly the feedback aeval builds
(:func:`aeval.feedback.render_feedback`) from aeval's own verdict of that answer
(:func:`aeval.verify.check_response`, computed here apart from the task's solver); the
score records the round of the scored answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from inspect_ai import eval as inspect_eval
from inspect_ai.model import ChatMessage, ModelOutput, ModelUsage, get_model
from repair_helpers import confirm_counterexample

from aeval.dataset import demo_dataset_path, load_dataset
from aeval.errors import ConfigError
from aeval.feedback import FeedbackLevel, is_repairable, render_feedback
from aeval.interop.inspect_task import warp
from aeval.verdicts import Status
from aeval.verify import check_response

DEMO = load_dataset(str(demo_dataset_path()))
ROW = {str(r["id"]): r for r in DEMO.iter_rows(named=True)}


def truth(cid: str) -> str:
    return str(ROW[cid]["answer"])


def body(cid: str) -> str:
    text = truth(cid).strip()
    return text[len("(assert ") : -1]


def script() -> dict[str, list[str]]:
    """Each item's answers, round by round."""
    return {
        "1": [f"<answer>{truth('1')}</answer>"],
        "2": [
            f"<answer>(assert (and {body('2')} (= 1 2)))</answer>",
            f"<think>fixed</think><answer>{truth('2')}</answer>",
        ],
        "3": [
            "I cannot tell.",
            "<answer>(assert (> nobody 0))</answer>",
            f"<answer>{truth('3')}</answer>",
        ],
        "4": [f"<answer>(assert (or {body('4')} (= 0 0)))</answer>"] * 3,
        "5": [
            "<answer>(assert (> undeclared_name 0))</answer>",
            f"<answer>{truth('5')}</answer>",
        ],
    }


class Scripted:
    """A mockllm output function: the answer for the item and round it is asked, and a
    record of every conversation it was sent."""

    def __init__(self) -> None:
        self.script = script()
        self.sent: dict[tuple[str, int], list[ChatMessage]] = {}

    def __call__(self, input: list[ChatMessage], *_: object) -> ModelOutput:
        question = next(m for m in input if m.role == "user").text
        cid = next(c for c in self.script if question.startswith(str(ROW[c]["question"])))
        round_ = 1 + sum(m.role == "assistant" for m in input)
        self.sent[(cid, round_)] = list(input)
        answers = self.script[cid]
        output = ModelOutput.from_content(
            model="mockllm/model", content=answers[min(round_, len(answers)) - 1]
        )
        output.usage = ModelUsage(input_tokens=100, output_tokens=20, total_tokens=120)
        return output


def expected_rounds(cid: str, rounds: int) -> list[Status]:
    """aeval's verdicts of an item's answers, up to its first answer not asked again."""
    statuses = []
    for answer in script()[cid][:rounds]:
        statuses.append(check_response(answer, truth(cid), str(ROW[cid]["constants"])).status)
        if not is_repairable(statuses[-1]):
            break
    return statuses


def run(tmp_path: Path, level: FeedbackLevel, **options: Any) -> tuple[Any, Scripted]:
    scripted = Scripted()
    task = warp(dataset="demo", sample_ids="1-5", rounds=3, feedback=level, workers=1, **options)
    model = get_model("mockllm/model", custom_outputs=scripted)
    [log] = inspect_eval(task, model=model, log_dir=str(tmp_path), display="none")
    assert log.status == "success", log.error
    for part in (task.solver, task.scorer[0]):  # kill the pools' workers now
        pool = getattr(part, "aeval_pool", None)
        if pool is not None:
            pool.close()
    return log, scripted


@pytest.mark.parametrize("level", ["counterexample", "reason", "retry"])
def test_each_round_carries_aevals_feedback_on_aevals_verdict(
    tmp_path: Path, level: FeedbackLevel
) -> None:
    log, scripted = run(tmp_path, level)
    assert log.samples is not None and len(log.samples) == 5
    for sample in log.samples:
        cid = str(sample.id)
        statuses = expected_rounds(cid, 3)
        assert sample.scores is not None
        score = sample.scores["equivalence"]
        meta = score.metadata or {}
        assert meta["round"] == len(statuses)
        assert [r["status"] for r in meta["rounds"]] == [s.value for s in statuses]
        assert score.value["lenient"] == ("C" if statuses[-1] is Status.EQUIVALENT else "I")  # type: ignore[index]
        asked = sorted(r for c, r in scripted.sent if c == cid)
        assert asked == list(range(1, len(statuses) + 1))
        for round_ in asked[1:]:
            conversation = scripted.sent[(cid, round_)]
            previous = script()[cid][round_ - 2]
            assert conversation[-2].role == "assistant" and conversation[-2].text == previous
            said = conversation[-1]
            assert said.role == "user"
            recorded = meta["rounds"][round_ - 2]
            verdict = {k: recorded[k] for k in ("status", "reason", "direction", "counterexample")}
            assert said.text == render_feedback(level, **verdict)
            # aeval's own verdict of the same answer, apart from the task's solver (Z3 may
            # find another counterexample: the point given is checked below instead)
            check = check_response(previous, truth(cid), str(ROW[cid]["constants"]))
            assert (check.status.value, check.direction) == (
                verdict["status"],
                verdict["direction"],
            )
            if "A counterexample: with " in said.text:
                confirm_counterexample(
                    verdict["counterexample"],
                    verdict["direction"],
                    previous,
                    truth(cid),
                    str(ROW[cid]["constants"]),
                )
            else:
                assert said.text == render_feedback(
                    level, status=check.status, reason=check.reason, direction=check.direction
                )
            if level == "counterexample" and check.status is Status.NOT_EQUIVALENT:
                assert "A counterexample: with " in said.text
    solved = {
        str(s.id): (s.scores or {})["equivalence"].metadata["round"]
        for s in log.samples  # type: ignore[index]
        if (s.scores or {})["equivalence"].value["lenient"] == "C"
    }  # type: ignore[index]
    assert solved == {"1": 1, "2": 2, "3": 3, "5": 2}


def test_a_feedback_file_replaces_the_template(tmp_path: Path) -> None:
    template = tmp_path / "feedback.txt"
    template.write_text("WRONG.{reason}{counterexample}\nAgain: {verdict}", encoding="utf-8")
    _, scripted = run(tmp_path, "reason", feedback_file=str(template))
    assert scripted.sent[("2", 2)][-1].text.startswith("WRONG.\nWhat the solver found: ")
    assert scripted.sent[("2", 2)][-1].text.endswith("\nAgain: Your answer is not correct.")


def test_bad_repair_options_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="feedback"):
        warp(dataset="demo", limit=1, rounds=2, feedback="hint")
    with pytest.raises(ConfigError, match="rounds"):
        warp(dataset="demo", limit=1, rounds=0)
    bad = tmp_path / "bad.txt"
    bad.write_text("{answer}", encoding="utf-8")
    with pytest.raises(ConfigError, match="answer"):
        warp(dataset="demo", limit=1, rounds=2, feedback_file=str(bad))


def test_one_round_is_todays_task() -> None:
    task = warp(dataset="demo", limit=1)
    assert "rounds" not in (task.metadata or {})
    assert getattr(task.solver, "aeval_pool", None) is None  # Inspect's own generate()
