from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console
from viewer_helpers import Answer, E, W, answer_text, make_run, truth

from aeval.cli import main
from aeval.report import load_run
from aeval.report.samples import load_samples
from aeval.report.wrong import (
    normalise_smt,
    shorten_at_difference,
    with_answers,
    wrong_answers,
    wrong_blocks,
)


def test_items_are_listed_in_numeric_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(tmp_path / "run")
    assert main(["report", str(run), "--wrong", "alpha", "-f", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(r["trial"], r["custom_id"]) for r in rows] == [
        (1, "3"), (1, "6"), (1, "9"), (1, "12"), (2, "3"), (2, "6")
    ]  # fmt: skip
    # csv and json carry the answer and the truth in full.
    assert rows[0]["answer"] == truth("99") and rows[0]["truth"] == truth("3")


def test_spacing_is_not_a_difference() -> None:
    assert normalise_smt("( assert  (>  x\n 0 ) )") == "(assert (> x 0))"
    answer, truth_, column = shorten_at_difference("(assert (> x 0))", "( assert (>= x 0))", 40)
    assert (answer, truth_) == ("(assert (> x 0))", "(assert (>= x 0))")
    assert answer[:column] == truth_[:column] == "(assert (>" and column == 10
    assert shorten_at_difference("(a  b)", "(a b)", 40)[2] == -1


def test_long_texts_are_shortened_around_the_first_difference() -> None:
    common = " ".join(f"(> in{i} 0)" for i in range(200))
    answer, truth_, column = shorten_at_difference(
        f"(assert (and {common} (< x 5)))", f"(assert (and {common} (<= x 5)))", 60
    )
    assert answer.startswith("…") and truth_.startswith("…")
    assert len(answer) <= 60 and len(truth_) <= 60
    assert answer[column:].startswith(" x 5)") and truth_[column:].startswith("= x 5)")
    assert answer[:column] == truth_[:column]


def test_the_terminal_listing_wraps_reasons_and_marks_the_difference(tmp_path: Path) -> None:
    reason = "too weak: " + " ".join(f"word{i}" for i in range(60))
    answers = {("m", 1): [Answer("7", W, answer_text(truth("8")), reason=reason)]}
    run = make_run(tmp_path / "run", answers)
    wrong = with_answers(wrong_answers(load_run(run), "m"), load_samples(run), "m")
    console = Console(width=80, record=True, color_system=None)
    console.print(wrong_blocks(wrong, "m", width=80))
    lines = console.export_text().splitlines()
    assert max(len(line.rstrip()) for line in lines) <= 80
    assert " ".join(" ".join(lines).split()).count(reason) == 1  # every word, in order
    answer_line = next(line for line in lines if line.lstrip().startswith("answer"))
    truth_line = next(line for line in lines if line.lstrip().startswith("truth"))
    caret = next(line for line in lines if "^ first difference" in line).index("^")
    value = len("  counterexample  ")  # where the value column starts
    assert answer_line[value:caret] == truth_line[value:caret] != ""
    assert (answer_line[caret], truth_line[caret]) == ("8", "7")


def test_an_answer_missing_or_a_dataset_gone_is_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from aeval.verdicts import Status

    answers = {("m", 1): [Answer("1", Status.NO_ANSWER, "no tags"), Answer("2", E, "x")]}
    run = make_run(tmp_path / "run", answers)
    (tmp_path / "bench.jsonl").unlink()
    out = tmp_path / "wrong.txt"
    assert main(["report", str(run), "--wrong", "m", "-o", str(out)]) == 0
    assert "questions and ground truths not shown" in capsys.readouterr().err
    text = out.read_text()
    assert "item 1" in text and "item 2" not in text
    assert "— (dataset not loaded)" in text


def test_markdown_shows_answer_and_truth_around_their_difference(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    long_truth = "(assert (and " + " ".join(f"(> in{i} 0)" for i in range(100)) + "))"
    wrong_answer = long_truth.replace("(> in70 0)", "(>= in70 0)")
    dataset = tmp_path / "bench.jsonl"
    row = {"id": "1", "question": "q", "answer": long_truth, "constants": "", "tier": "small"}
    dataset.write_text(json.dumps(row) + "\n")
    answers = {("m", 1): [Answer("1", W, answer_text(wrong_answer))]}
    run = make_run(tmp_path / "run", answers, dataset=dataset)
    assert main(["report", str(run), "--wrong", "m", "-f", "md"]) == 0
    row_line = next(line for line in capsys.readouterr().out.splitlines() if "| 1 |" in line)
    cells = [c.strip() for c in row_line.strip("|").split("|")]
    answer, truth_ = cells[-2], cells[-1]
    assert answer.startswith("…") and "(>= in70 0)" in answer and len(answer) <= 120
    assert truth_.startswith("…") and "(> in70 0)" in truth_ and len(truth_) <= 120
