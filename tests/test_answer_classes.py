"""Equivalence classes of answers with real Z3 in the verifier pool, on real benchmark truths."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from answer_corpus import assert_bodies
from engine_helpers import SPECS, benchmark_slice, fast_config

from aeval.engine import Run
from aeval.local import LocalBatchServer
from aeval.report import load_run, summarize
from aeval.rescoring.rescore import rescore_files, write_outputs
from aeval.scoring.answer_classes import (
    NO_VOTE,
    TRUTH_CLASS,
    answer_classes,
    canonical_answer,
    keys_needing_text,
    with_answer_classes,
)
from aeval.verdicts import verdicts_frame
from aeval.verify import VerifierPool


def spellings(truth: str) -> dict[str, str]:
    """Answers to one row: three spellings of the truth, three of one wrong formula,
    and another wrong one."""
    bodies = assert_bodies(truth)
    b = bodies[0] if len(bodies) == 1 else "(and " + " ".join(bodies) + ")"
    return {
        "right": truth,
        "right2": f"(assert (not (not {b})))",
        "right3": f"(assert (and {b} true))",
        "wrong": f"(assert (not {b}))",
        "wrong2": f"(assert (not (not (not {b}))))",
        "wrong3": f"(assert (or (not {b}) false))",
        "other": "(assert false)",
    }


def _line(cid: str, answer: str | None, model: str = "m") -> str:
    if answer is None:
        return json.dumps({"custom_id": cid, "error": {"code": "server_error", "message": "x"}})
    content = "I cannot tell." if answer == "" else f"<answer>{answer}</answer>"
    body = {
        "model": model,
        "choices": [{"message": {"content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    }
    return json.dumps({"custom_id": cid, "response": {"status_code": 200, "body": body}})


@pytest.fixture
def rows(dataset: pl.DataFrame) -> pl.DataFrame:
    """Four real rows whose truths are satisfiable and not valid (so ¬truth ≠ truth ≠ false)."""
    return dataset.filter(pl.col("tier") == "small").head(4)


# per item (row position), the answer of each trial: None = an API error line,
# "" = a response with no answer
PLAN: dict[str, list[str | None]] = {
    # right 3 times in 3 spellings, wrong twice with the same text: majority right
    "0": ["right", "wrong", "right2", "wrong", "right3"],
    # right twice with the same text, wrong 3 times in 3 spellings: majority wrong
    "1": ["right", "wrong", "wrong2", "right", "wrong3"],
    # a tie between the truth and a wrong class; non-answers do not vote
    "2": ["right", "", "wrong", "", ""],
    # all wrong, two classes tied; an infrastructure failure neither votes nor counts
    "3": ["wrong", "other", "wrong2", None, "other"],
}


def _write_trials(rows: pl.DataFrame, tmp_path: Path) -> list[Path]:
    truths = rows["answer"].to_list()
    files = []
    for trial in range(5):
        path = tmp_path / f"trial{trial + 1}_output.jsonl"
        lines = []
        for cid, plan in PLAN.items():
            choice = plan[trial]
            text = (
                None
                if choice is None
                else ""
                if choice == ""
                else spellings(truths[int(cid)])[choice]
            )
            lines.append(_line(cid, text))
        path.write_text("\n".join(lines) + "\n")
        files.append(path)
    return files


@pytest.mark.anyio
async def test_rescore_votes_by_equivalence_class(rows: pl.DataFrame, tmp_path: Path) -> None:
    files = _write_trials(rows, tmp_path)
    result = await rescore_files(files, rows, trials=[1, 2, 3, 4, 5], workers=2, published=False)
    statuses = {(v.trial, v.custom_id): v.status.value for v in result.verdicts}
    # the spellings are what they claim to be, by the verifier's own verdicts
    assert [statuses[(t, "0")] for t in range(1, 6)] == ["equivalent", "not_equivalent"] * 2 + [
        "equivalent"
    ]
    assert statuses[(4, "3")] == "api_error" and statuses[(2, "2")] == "no_answer"
    classes = result.answer_classes
    assert classes is not None
    # only what a check decided is named; 0 and -1 follow from the status
    assert classes and all(k >= 1 for k in classes.values())
    labelled = with_answer_classes(verdicts_frame(list(result.verdicts)), classes)
    by_key = {(t, c): k for t, c, k in labelled.select("trial", "custom_id", "answer_class").rows()}
    got = {cid: [by_key[(t, cid)] for t in range(1, 6)] for cid in PLAN}
    assert got == {
        "0": [0, 1, 0, 1, 0],
        "1": [0, 1, 1, 0, 1],  # three spellings of one wrong formula vote together
        "2": [0, NO_VOTE, 1, NO_VOTE, NO_VOTE],
        "3": [1, 2, 1, NO_VOTE, 2],
    }
    summary = write_outputs(result, tmp_path / "out")
    maj = summary["models"][0]["majority"]
    assert maj["value"] == pytest.approx((1 + 0 + 0.5 + 0) / 4)
    # ties: item 2 (truth against one wrong class), item 3 (two wrong classes, 2 votes each)
    assert (maj["ties"], maj["no_votes"], maj["items"], maj["n"]) == (2, 0, 4, 5)
    # a textual vote would have got items 0 and 1 the other way round
    passk = summary["models"][0]["pass_at_k"]
    assert passk[0]["value"] == pytest.approx((3 / 5 + 2 / 5 + 1 / 5 + 0) / 4)
    assert passk[4]["items"] == 3  # item 3 has 4 scored answers
    # the classes are stored with the verdicts, and the report reads them back
    stored = load_run(tmp_path / "out")
    assert stored["answer_class"].null_count() == 0
    assert summarize(stored)["models"][0]["majority"] == maj


@pytest.mark.anyio
async def test_checks_stay_far_below_all_pairs(rows: pl.DataFrame) -> None:
    truth = rows["answer"][0]
    s = spellings(truth)
    names = ["wrong", "wrong2", "wrong3", "wrong", "other", "other", "right", "wrong2"]
    frame = verdicts_frame(
        [
            {
                "model": "m",
                "trial": t,
                "custom_id": "0",
                "status": "equivalent" if name == "right" else "not_equivalent",
            }
            for t, name in enumerate(names, start=1)
        ]
    )
    keys = keys_needing_text(frame)
    assert keys == {("m", t, "0") for t, name in enumerate(names, start=1) if name != "right"}
    texts = {key: canonical_answer(f"<answer>{s[names[key[1] - 1]]}</answer>") for key in keys}
    constants = rows["constants"][0]
    async with VerifierPool(workers=1) as pool:
        found = await answer_classes(frame, pool, texts, lambda cid: constants)
    assert ("m", 7, "0") not in found.classes  # the right answer is class 0 by its status
    # 7 wrong answers: 21 pairs at most; repeated texts and one representative per
    # class leave 3 (wrong2 and wrong3 against wrong, other against wrong)
    assert found.bound == 21 and found.checks == 3 and found.undecided == 0
    labelled = with_answer_classes(frame, found.classes)
    assert labelled["answer_class"].to_list() == [1, 1, 1, 1, 2, 2, TRUTH_CLASS, 1]
    assert labelled["trial"].to_list() == list(range(1, 9))


@pytest.mark.anyio
async def test_a_pair_z3_cannot_decide_stays_apart(rows: pl.DataFrame) -> None:
    """An answer whose check against a representative is not decided keeps its own class."""
    frame = verdicts_frame(
        [{"model": "m", "trial": t, "custom_id": "0", "status": "not_equivalent"} for t in (1, 2)]
    )
    # a representative that uses an undeclared name: the check is not a decision
    texts = {("m", 1, "0"): "(assert (> undeclared_name 0))", ("m", 2, "0"): "(assert false)"}
    constants = rows["constants"][0]
    async with VerifierPool(workers=1) as pool:
        found = await answer_classes(frame, pool, texts, lambda cid: constants)
    assert [found.classes[("m", t, "0")] for t in (1, 2)] == [1, 2]
    assert found.checks == 1 and found.undecided == 1


@pytest.mark.anyio
async def test_a_run_with_several_trials_stores_classes_and_majority(
    benchmark_path: Path, tmp_path: Path
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=8)
    async with LocalBatchServer(dataset=frame, models=dict(SPECS)) as server:
        config = fast_config(data, tmp_path / "results", server.base_url, trials=2)
        result = await Run(config).run()
    assert result.outcome == "finished", result.message
    verdicts = pl.read_parquet(result.run_dir / "verdicts.parquet")
    assert verdicts["answer_class"].null_count() == 0
    eq = verdicts.filter(pl.col("status") == "equivalent")
    assert set(eq["answer_class"].to_list()) <= {TRUTH_CLASS}
    summary = json.loads((result.run_dir / "summary.json").read_text())
    voting = verdicts.filter(pl.col("status").is_in(["not_equivalent", "unknown", "timeout"]))
    assert (voting["answer_class"] >= 1).all()
    silent = verdicts.filter(pl.col("status").is_in(["no_answer", "parse_error", "api_error"]))
    assert (silent["answer_class"] == NO_VOTE).all()
    for m in summary["models"]:
        majority, passk = m["majority"], m["pass_at_k"]
        assert majority is not None and majority["n"] == 2
        assert majority["items"] == passk[0]["items"]
        # with two answers: both right 1, one right against a wrong class ½ (tie), one
        # right and one silent 1, none right 0; so pass@1 ≤ maj@2 ≤ pass@2
        assert passk[0]["value"] - 1e-12 <= majority["value"] <= passk[1]["value"] + 1e-12
    # the report of the finished run reads the stored classes back
    assert summarize(load_run(result.run_dir))["models"] == summary["models"]


def test_classes_follow_from_status_once_found_and_not_before() -> None:
    frame = verdicts_frame(
        [
            {"model": "m", "trial": t, "custom_id": "0", "status": status}
            for t, status in enumerate(["equivalent", "not_equivalent", "no_answer", "timeout"], 1)
        ]
    )
    assert with_answer_classes(frame, None)["answer_class"].null_count() == 4  # not found yet
    # found, and no check needed (nothing named): 0 and -1 by status; a wrong answer
    # the classes do not name keeps what it had
    assert with_answer_classes(frame, {})["answer_class"].to_list() == [0, None, -1, None]
    named = with_answer_classes(frame, {("m", 2, "0"): 1, ("m", 4, "0"): 2})
    assert named["answer_class"].to_list() == [0, 1, -1, 2]
    assert named.drop("answer_class").equals(frame.drop("answer_class"))
