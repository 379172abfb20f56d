"""Parsing each question once: the N of each example, the target N, the distance."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from aeval.dataset import TruthTable, demo_dataset_path, item_facts, load_dataset, parse_question
from aeval.summary.groups import size_bin
from aeval.synth.rows import generate


def by_lines(question: str) -> tuple[list[int], int]:
    """An independent reading, line by line, of the WARP question format."""
    lines = question.splitlines()
    examples = [int(line.split(":", 1)[0][2:]) for line in lines if line.startswith("N=")]
    last = lines[-1]
    assert last.startswith("What is the constraint for N=") and last.endswith("?")
    return examples, int(last[len("What is the constraint for N=") : -1])


def check_every_row(frame: pl.DataFrame) -> pl.DataFrame:
    facts = item_facts(frame)
    for question, answer, row in zip(
        frame["question"], frame["answer"], facts.iter_rows(named=True), strict=True
    ):
        examples, target = by_lines(question)
        shape = parse_question(question)
        assert shape is not None
        assert shape.example_ns == tuple(examples) and shape.target_n == target
        assert row == {
            "examples": len(examples),
            "target_n": target,
            "distance": target - max(examples),
            "answer_chars": len(answer),
        }
    return facts


def test_every_row_of_the_real_benchmark(benchmark_path: Path) -> None:
    frame = load_dataset(benchmark_path)
    facts = check_every_row(frame)
    assert facts.null_count().row(0) == (0, 0, 0, 0)
    # the benchmark always asks beyond its examples, with 3 to 18 of them
    assert facts["distance"].min() >= 1 and facts["distance"].max() == 19
    assert (facts["examples"].min(), facts["examples"].max()) == (3, 18)
    # the truth table parses the same, once, and stamps it on verdicts
    truth = TruthTable(frame)
    first = truth["0"]
    assert (first.examples, first.target_n, first.distance) == (15, 28, 1)


def test_every_synthetic_row(tmp_path: Path) -> None:
    # rendering only: which rows Z3 would accept does not change how questions read
    frame, _ = generate(1500, seed=11, verify=False)
    facts = check_every_row(frame)
    assert facts["target_n"].to_list() == frame["n"].to_list()  # the size synth asked for
    demo = load_dataset(demo_dataset_path())
    assert check_every_row(demo)["target_n"].to_list() == demo["n"].to_list()


@pytest.mark.parametrize(
    "question",
    [
        None,
        "",
        "What is the invariant?",  # another benchmark's question
        "N=3: (assert true)\nWhat is it?",  # no target
        "Examples:\nWhat is the constraint for N=5?",  # no example line
        "N=12345678901234567890: x\nWhat is the constraint for N=5?",  # not a size
    ],
)
def test_questions_of_another_shape_have_no_facts(question: str | None) -> None:
    assert parse_question(question) is None
    frame = pl.DataFrame({"question": [question], "answer": ["(assert true)"]})
    assert item_facts(frame).row(0) == (None, None, None, 13)


def test_a_frame_without_questions_still_has_answer_sizes() -> None:
    facts = item_facts(pl.DataFrame({"answer": ["ab", None]}))
    assert facts.to_dicts() == [
        {"examples": None, "target_n": None, "distance": None, "answer_chars": 2},
        {"examples": None, "target_n": None, "distance": None, "answer_chars": None},
    ]


def test_answer_sizes_fall_in_doubling_bins() -> None:
    assert [size_bin(n) for n in (0, 249, 250, 999, 1000, 7999, 8000, 10**6)] == [
        "<250", "<250", "250–499", "500–999", "1,000–1,999", "4,000–7,999", "≥8,000", "≥8,000"
    ]  # fmt: skip
    assert size_bin(None) is None
