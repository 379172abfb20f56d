"""Responders: question matching, reference/replay/synthetic answers, and the intent →
verdict mapping, checked against the real verifier."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import polars as pl
import pytest

from aeval.errors import DatasetError, InputFileError
from aeval.local import EXPECTED_VERDICTS, Intent
from aeval.local.chat import ChatRequest, Completion, HttpFailure, Row
from aeval.local.questions import QuestionIndex
from aeval.local.responders import ReferenceResponder, ReplayResponder
from aeval.local.synthetic import SyntheticResponder, answer_for
from aeval.verdicts import Status
from aeval.verify import check_response

INSTRUCTION = "Put the answer in <answer></answer>.\nLike this: <answer>(assert true)</answer>"


@pytest.fixture(scope="module")
def index(dataset: pl.DataFrame) -> QuestionIndex:
    return QuestionIndex.from_frame(dataset)


def chat(question: str, model: str = "m", custom_id: str | None = None, system: bool = True):  # type: ignore[no-untyped-def]
    messages = [{"role": "user", "content": question}]
    if system:
        messages.insert(0, {"role": "system", "content": "Be precise."})
    return ChatRequest(model, {"model": model, "messages": messages}, custom_id)


def test_questions_match_with_any_instruction_after_them(
    dataset: pl.DataFrame, index: QuestionIndex
) -> None:
    for i in (0, 100, 670):
        question = dataset["question"][i]
        for text in (
            question,
            question + "\n" + INSTRUCTION,
            question + "\n\nanother\nthree\nlines",
        ):
            row = index.match(text)
            assert row is not None and row.answer == dataset["answer"][i]
    assert index.match("What is the constraint for N=3?") is None
    assert index.match("") is None


def test_reference_answers_truth_and_guesses_unknown_questions(
    dataset: pl.DataFrame, index: QuestionIndex
) -> None:
    reference = ReferenceResponder(index)
    reply = reference.respond(chat(dataset["question"][3] + "\n" + INSTRUCTION))
    assert isinstance(reply, Completion)
    checked = check_response(reply.content, dataset["answer"][3], dataset["constants"][3])
    assert checked.status is Status.EQUIVALENT and checked.repaired is None
    # content parts instead of a string work too
    parts = ChatRequest(
        "m",
        {
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": dataset["question"][3]}]}
            ]
        },
    )
    assert reference.respond(parts) == reply
    unknown = (
        "Given the following examples:\nN=1: (assert (> x 0))\nN=2: (assert (> x 1))\n"
        "What is the constraint for N=5?"
    )
    guess = reference.respond(chat(unknown))
    assert isinstance(guess, Completion)
    assert "<answer>(assert (> x 1))</answer>" in guess.content


def test_every_intent_gets_the_verdict_it_promises(index: QuestionIndex) -> None:
    """The documented intent → verdict mapping, against the real verifier, on a spread of rows
    (the whole benchmark is checked by the slow variant below)."""
    rows = list(index._by_question.values())[::23]
    for row in rows:
        for intent, expected in EXPECTED_VERDICTS.items():
            reply = answer_for(intent, row, row.question)
            if intent is Intent.HTTP_ERROR:
                assert isinstance(reply, HttpFailure) and reply.status_code == 500
                continue
            assert isinstance(reply, Completion)
            assert reply.finish_reason == ("length" if intent is Intent.TRUNCATED else "stop")
            got = check_response(reply.content, row.answer, row.constants)
            assert (got.status, got.repaired, got.direction) == (
                expected.status,
                expected.repaired,
                expected.direction,
            ), (intent, row.id, got.reason)


@pytest.mark.slow
def test_every_intent_on_the_whole_benchmark(index: QuestionIndex) -> None:
    for row in index._by_question.values():
        for intent, expected in EXPECTED_VERDICTS.items():
            reply = answer_for(intent, row, row.question)
            if isinstance(reply, Completion):
                got = check_response(reply.content, row.answer, row.constants)
                assert (got.status, got.repaired, got.direction) == (
                    expected.status,
                    expected.repaired,
                    expected.direction,
                ), (intent, row.id)


def test_synthetic_intent_is_a_pure_function_with_the_configured_spread(
    dataset: pl.DataFrame, index: QuestionIndex
) -> None:
    a = SyntheticResponder(index, seed=1, accuracy=0.6)
    b = SyntheticResponder(index, seed=1, accuracy=0.6)
    other_seed = SyntheticResponder(index, seed=2, accuracy=0.6)
    ids = [f"gpt-x/0/{i}" for i in range(4000)]
    intents = [a.intent("gpt-x", cid) for cid in ids]
    assert intents == [b.intent("gpt-x", cid) for cid in ids]
    assert intents != [other_seed.intent("gpt-x", cid) for cid in ids]
    assert intents != [a.intent("gpt-y", cid) for cid in ids]
    counts = Counter(intents)
    good = counts[Intent.CORRECT] + counts[Intent.FENCED]
    assert abs(good / len(ids) - 0.6) < 0.03
    assert set(counts) == set(Intent)  # every failure mode shows up in a demo-sized run
    # the reply realises the intent the function announced
    q = dataset["question"][7] + "\n" + INSTRUCTION
    for cid in ids[:40]:
        reply = a.respond(chat(q, "gpt-x", cid))
        row = index.match(q)
        assert row is not None
        assert reply == answer_for(a.intent("gpt-x", cid, row.question), row, q)


def test_each_trial_samples_afresh_like_a_model_at_a_temperature(
    dataset: pl.DataFrame, index: QuestionIndex
) -> None:
    from aeval.local.simulated_batch import trial_of

    responder = SyntheticResponder(index, seed=1, accuracy=0.6)
    ids = [f"row-{i}" for i in range(4000)]
    t1 = [responder.intent("gpt-x", cid, trial=1) for cid in ids]
    t2 = [responder.intent("gpt-x", cid, trial=2) for cid in ids]
    assert t1 == [responder.intent("gpt-x", cid, trial=1) for cid in ids]  # still pure
    changed = sum(a != b for a, b in zip(t1, t2, strict=True)) / len(ids)
    # An item is redrawn in ~30% of trials: trials differ, yet stay correlated by item.
    assert 0.2 < changed < 0.5, changed
    for trial in (t1, t2):  # each trial keeps the configured accuracy
        good = sum(i in (Intent.CORRECT, Intent.FENCED) for i in trial) / len(ids)
        assert abs(good - 0.6) < 0.03
    # The server learns the trial from the batch's aeval_shard metadata.
    assert trial_of({"aeval_shard": "org/m|x|t3|s1"}) == 3
    assert trial_of({"aeval_shard": "no trial here"}) is None and trial_of(None) is None
    q = dataset["question"][7] + "\n" + INSTRUCTION
    row = index.match(q)
    assert row is not None
    for cid in ids[:40]:
        reply = responder.respond(ChatRequest("gpt-x", chat(q, "gpt-x", cid).body, cid, trial=2))
        assert reply == answer_for(responder.intent("gpt-x", cid, row.question, 2), row, q)


def test_replay_serves_recorded_lines_by_custom_id(tmp_path: Path, index: QuestionIndex) -> None:
    recorded = tmp_path / "out.jsonl"
    ok = {
        "id": "batch_req_1",
        "custom_id": "a",
        "response": {
            "status_code": 200,
            "request_id": "r",
            "body": {
                "choices": [
                    {"message": {"content": "<answer>x</answer>"}, "finish_reason": "length"}
                ]
            },
        },
        "error": None,
    }
    err = {
        "id": "batch_req_2",
        "custom_id": "b",
        "response": {
            "status_code": 429,
            "request_id": "r",
            "body": {
                "error": {"message": "slow down", "type": "requests", "code": "rate_limit_exceeded"}
            },
        },
        "error": None,
    }
    recorded.write_text(json.dumps(ok) + "\n\n" + json.dumps(err) + "\n")
    replay = ReplayResponder.from_files([recorded])
    assert replay.respond(chat("q", custom_id="a")) == Completion("<answer>x</answer>", "length")
    failure = replay.respond(chat("q", custom_id="b"))
    assert failure == HttpFailure(429, "slow down", "requests", "rate_limit_exceeded")
    assert isinstance(replay.respond(chat("N=1: (assert (> x 0))", custom_id="c")), Completion)
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps(ok) + "\nnot json\n")
    with pytest.raises(InputFileError, match=r"broken.jsonl, line 2"):
        ReplayResponder.from_files([broken])


def test_a_dataset_without_the_needed_columns_is_a_clear_error(dataset: pl.DataFrame) -> None:
    with pytest.raises(DatasetError, match="constants"):
        QuestionIndex.from_frame(dataset.drop("constants"))


def test_duplicate_questions_are_told_apart_by_custom_id() -> None:
    rows = [Row("a", "Q?", "(assert (= x 1))", ""), Row("b", "Q?", "(assert (= x 2))", "")]
    index = QuestionIndex(rows)
    assert index.match("Q?\ninstruction") == rows[0]
    assert index.match("Q?\ninstruction", "b") == rows[1]
    assert index.match("Q?", "zzz") == rows[0]
    reply = ReferenceResponder(index).respond(chat("Q?\nok", custom_id="b"))
    assert isinstance(reply, Completion) and reply.content.endswith(
        "<answer>(assert (= x 2))</answer>"
    )


def test_replay_serves_a_responses_api_output_file(tmp_path: Path) -> None:
    """A recorded /v1/responses output line is replayed with its message's output_text (not
    its reasoning) and its cut (incomplete at max_output_tokens: length)."""
    body = {
        "id": "resp_1", "object": "response", "created_at": 1, "model": "gpt-5",
        "status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"},
        "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
        "output": [
            {"id": "rs_1", "type": "reasoning",
             "summary": [{"type": "summary_text", "text": "thinking"}]},
            {"id": "msg_1", "type": "message", "role": "assistant", "status": "incomplete",
             "content": [{"type": "output_text", "text": "<answer>(assert", "annotations": []}]},
        ],
    }  # fmt: skip
    line = {"id": "b", "custom_id": "a", "error": None,
            "response": {"status_code": 200, "request_id": "r", "body": body}}  # fmt: skip
    recorded = tmp_path / "responses.jsonl"
    recorded.write_text(json.dumps(line) + "\n")
    replay = ReplayResponder.from_files([recorded])
    assert replay.respond(chat("q", custom_id="a")) == Completion("<answer>(assert", "length")
