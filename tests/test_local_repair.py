"""The local server's synthetic models in repair rounds (issue #44, item 6).

A repair round is a conversation: the question, the model's earlier answer as the
assistant turn, a feedback message (aeval.feedback), possibly repeated. The synthetic
model finds the row from the first user message, reads the level of the last feedback
and repairs with a probability that grows with what it was told.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl
import pytest

from aeval.errors import ConfigError
from aeval.feedback import FEEDBACK_LEVELS, FeedbackLevel, Turn, render_feedback
from aeval.local import EXPECTED_VERDICTS, Intent, ModelSpec, parse_models
from aeval.local.chat import ChatRequest, Completion
from aeval.local.models import describe_models
from aeval.local.questions import QuestionIndex
from aeval.local.synthetic import SyntheticResponder, answer_for, repair_rates
from aeval.verdicts import Status
from aeval.verify import check_response

INSTRUCTION = "Put the answer in <answer></answer>."


@pytest.fixture(scope="module")
def index(dataset: pl.DataFrame) -> QuestionIndex:
    return QuestionIndex.from_frame(dataset)


def feedback(level: FeedbackLevel, intent: Intent = Intent.TOO_STRONG) -> str:
    """The default feedback after an answer written for ``intent``."""
    expected = EXPECTED_VERDICTS[intent]
    return render_feedback(
        level,
        status=expected.status,
        reason="too strong: …" if expected.direction == "too_strong" else "found",
        direction=expected.direction,
        counterexample={"in0": "3"} if expected.status is Status.NOT_EQUIVALENT else None,
    )


def conversation(question: str, turns: list[Turn]) -> list[dict[str, str]]:
    messages = [{"role": "system", "content": "Be precise."}, {"role": "user", "content": question}]
    for turn in turns:
        messages += [
            {"role": "assistant", "content": turn.answer},
            {"role": "user", "content": turn.feedback},
        ]
    return messages


def ask(responder: SyntheticResponder, body: Mapping[str, Any], custom_id: str | None) -> str:
    reply = responder.respond(ChatRequest("m", body, custom_id))
    assert isinstance(reply, Completion), reply
    return reply.content


def correct_texts(index: QuestionIndex, text: str) -> set[str]:
    row = index.match(text)
    assert row is not None
    return {
        answer.content
        for intent in (Intent.CORRECT, Intent.FENCED)
        if isinstance(answer := answer_for(intent, row, text), Completion)
    }


def test_the_turns_of_a_conversation_are_read_after_the_first_user_message() -> None:
    body = {"messages": conversation("Q", [Turn("A1", "F1"), Turn("A2", "F2")])}
    request = ChatRequest("m", body)
    assert request.text == "Q"
    assert request.turns == [Turn("A1", "F1"), Turn("A2", "F2")]
    assert ChatRequest("m", {"messages": conversation("Q", [])}).turns == []
    assert ChatRequest("m", {"input": "Q"}).turns == []


def test_a_model_repairs_more_the_more_the_feedback_tells_it(
    dataset: pl.DataFrame, index: QuestionIndex
) -> None:
    """Over 600 items, with fixed seeds: the repairs under retry < reason < counterexample,
    each near its rate, and an item repaired when told less is repaired when told more
    (one draw per item and round, compared with each level's rate)."""
    responder = SyntheticResponder(index, seed=5, accuracy=0.5)
    rates = repair_rates(0.5)
    assert rates == {"retry": 0.125, "reason": 0.25, "counterexample": 0.4}
    repaired: dict[FeedbackLevel, set[str]] = {level: set() for level in FEEDBACK_LEVELS}
    wrong = 0
    for row_id, question in (
        dataset.with_row_index("id").select("id", "question").head(600).iter_rows()
    ):
        text = f"{question}\n{INSTRUCTION}"
        first = responder.intent("m", str(row_id), question)
        if first in (Intent.CORRECT, Intent.FENCED, Intent.HTTP_ERROR):
            continue
        wrong += 1
        answer = ask(responder, {"messages": conversation(text, [])}, str(row_id))
        good = correct_texts(index, text)
        assert answer not in good
        for level in FEEDBACK_LEVELS:
            turns = [Turn(answer, feedback(level, first))]
            again = responder.respond(ChatRequest("m", {"messages": conversation(text, turns)},
                                                  f"{row_id}_r2"))  # fmt: skip
            if isinstance(again, Completion) and again.content in good:
                repaired[level].add(str(row_id))
    assert wrong > 250
    counts = [len(repaired[level]) for level in FEEDBACK_LEVELS]
    assert counts[0] < counts[1] < counts[2], counts
    for level, count in zip(FEEDBACK_LEVELS, counts, strict=True):
        expected = wrong * rates[level]
        spread = 4 * (wrong * rates[level] * (1 - rates[level])) ** 0.5
        assert abs(count - expected) < spread, (level, count, expected)
    assert repaired["retry"] <= repaired["reason"] <= repaired["counterexample"]


def test_a_round_is_a_pure_function_of_model_seed_item_and_round(
    dataset: pl.DataFrame, index: QuestionIndex
) -> None:
    mix = {Intent.TOO_STRONG: 1.0, Intent.TOO_WEAK: 1.0, Intent.NO_ANSWER: 1.0}
    responder, again, other_seed = (
        SyntheticResponder(index, seed=seed, accuracy=0.0, repair=(0.5,), failure_mix=mix)
        for seed in (2, 2, 3)
    )
    differs = set()
    for row_id, question in (
        dataset.with_row_index("id").select("id", "question").head(40).iter_rows()
    ):
        turns = [Turn("<answer>(assert false)</answer>", feedback("counterexample"))]
        body = {"messages": conversation(question, turns)}
        second = ask(responder, body, f"{row_id}_r2")
        assert second == ask(again, body, f"{row_id}_r2")
        third = conversation(question, [*turns, Turn(second, feedback("counterexample"))])
        assert ask(responder, {"messages": third}, f"{row_id}_r3") == ask(
            again, {"messages": third}, f"{row_id}_r3"
        )
        differs.add(second != ask(other_seed, body, f"{row_id}_r2"))
        differs.add(ask(responder, {"messages": third}, f"{row_id}_r3") != second)
    assert differs == {True, False}


def test_an_answer_that_is_not_repaired_is_still_wrong_and_not_the_last_one(
    dataset: pl.DataFrame, index: QuestionIndex
) -> None:
    """With repair=0 nothing is repaired: each later answer is checked wrong by the real
    verifier, and differs from the answer it was told was wrong."""
    stubborn = SyntheticResponder(index, seed=1, accuracy=0.0, repair=(0.0,),
                                  failure_mix={Intent.TOO_STRONG: 1.0})  # fmt: skip
    for row_id, question, truth, constants in (
        dataset.with_row_index("id")
        .select("id", "question", "answer", "constants")
        .head(8)
        .iter_rows()
    ):
        first = ask(stubborn, {"messages": conversation(question, [])}, str(row_id))
        turns = [Turn(first, feedback("counterexample"))]
        second = ask(stubborn, {"messages": conversation(question, turns)}, f"{row_id}_r2")
        assert second != first
        assert check_response(second, truth, constants).status is not Status.EQUIVALENT


def test_a_repair_always_model_gives_the_truth_in_round_two(
    dataset: pl.DataFrame, index: QuestionIndex
) -> None:
    eager = SyntheticResponder(index, seed=1, accuracy=0.0, repair=(1.0,), fenced_share=0.0)
    row_id, question, truth, constants = (
        dataset.with_row_index("id").select("id", "question", "answer", "constants").row(7)
    )
    turns = [Turn("<answer>(assert false)</answer>", feedback("counterexample"))]
    second = ask(eager, {"messages": conversation(question, turns)}, f"{row_id}_r2")
    assert check_response(second, truth, constants).status is Status.EQUIVALENT
    # retry and reason, at 5/16 and 5/8 of the counterexample's rate: 0.3125 and 0.625
    assert repair_rates(0.0, (1.0,)) == {"retry": 0.3125, "reason": 0.625, "counterexample": 1}


@pytest.mark.parametrize(
    ("option", "rates"),
    [
        ("repair=0.1/0.3/0.6", (0.1, 0.3, 0.6)),
        ("repair=0.8", (0.25, 0.5, 0.8)),
        ("accuracy=0.4", (0.1, 0.2, 0.32)),
    ],
)
def test_the_repair_knob_in_a_model_spec(option: str, rates: tuple[float, ...]) -> None:
    spec = parse_models([f"m*=synthetic:seed=1,{option}"])["m*"]
    got = repair_rates(spec.accuracy, spec.repair)
    assert tuple(got.values()) == pytest.approx(rates)


def test_the_knob_is_in_the_servers_provenance_line() -> None:
    models = parse_models(["a*=synthetic:seed=2,repair=0.1/0.2/0.3", "b*=synthetic:seed=2"])
    line = describe_models(models)
    assert "a*=synthetic seed=2 accuracy=0.7 repair=0.1/0.2/0.3" in line
    assert line.endswith("; b*=synthetic seed=2 accuracy=0.7")


@pytest.mark.parametrize("bad", ["repair=0.1/0.2", "repair=1.5", "repair=a/b/c", "repair=-0.1"])
def test_a_bad_repair_knob_is_refused_naming_it(bad: str) -> None:
    with pytest.raises(ConfigError, match="repair"):
        parse_models([f"m*=synthetic:{bad}"])


def test_the_model_spec_passes_its_knob_to_the_responder(
    dataset: pl.DataFrame, index: QuestionIndex
) -> None:
    row_id, question, truth, constants = (
        dataset.with_row_index("id").select("id", "question", "answer", "constants").row(3)
    )
    turns = [Turn("<answer>(assert false)</answer>", feedback("retry"))]
    body = {"messages": conversation(question, turns)}
    for repair, status in (((1.0, 1.0, 1.0), Status.EQUIVALENT), ((0.0, 0.0, 0.0), None)):
        spec = ModelSpec("synthetic", seed=4, accuracy=0.0, fenced_share=0.0, repair=repair,
                         failure_mix={Intent.TOO_WEAK: 1.0})  # fmt: skip
        responder = spec.build(index)
        assert isinstance(responder, SyntheticResponder)
        checked = check_response(ask(responder, body, f"{row_id}_r2"), truth, constants)
        assert (checked.status is Status.EQUIVALENT) == (status is Status.EQUIVALENT)
