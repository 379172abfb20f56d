from __future__ import annotations

import pytest

from aeval.verify.extract import Repair, extract_answer

A = "(assert (> x 1))"


def test_one_block_is_strict() -> None:
    got = extract_answer(f"reasoning… <answer>{A}</answer> done")
    assert (got.text, got.repairs) == (A, ())


def test_think_block_is_ignored_even_with_answer_tags_inside() -> None:
    got = extract_answer(
        f"<think>maybe <answer>(assert false)</answer></think><answer>{A}</answer>"
    )
    assert (got.text, got.repairs) == (A, ())


def test_text_before_a_lone_closing_think_is_draft() -> None:
    got = extract_answer(f"draft <answer>(assert false)</answer></think>\n<answer>{A}</answer>")
    assert (got.text, got.repairs) == (A, ())


def test_identical_repeated_blocks_are_strict() -> None:
    got = extract_answer(f"<answer>{A}</answer> again: <answer>\n{A}\n</answer>")
    assert got.repairs == ()


def test_last_of_several_different_blocks_wins_as_a_repair() -> None:
    got = extract_answer(f"<answer>(assert false)</answer> wait, no: <answer>{A}</answer>")
    assert got.text == A
    assert got.repairs == (Repair.LAST_OF_SEVERAL,)


def test_code_fence_inside_answer_is_a_repair() -> None:
    got = extract_answer(f"<answer>\n```lisp\n{A}\n```\n</answer>")
    assert got.text == A
    assert got.repairs == (Repair.CODE_FENCE,)


def test_unclosed_answer_takes_the_rest() -> None:
    got = extract_answer(f"<answer>\n{A}\n")
    assert got.text == A
    assert got.repairs == (Repair.UNCLOSED_ANSWER,)


def test_untagged_assert_is_a_repair() -> None:
    got = extract_answer(f"The constraint is:\n{A}")
    assert got.text == A
    assert got.repairs == (Repair.UNTAGGED_ANSWER,)


@pytest.mark.parametrize(
    "text", [None, "", "   ", "I do not know.", "<answer>   </answer>", "<answer>```\n```</answer>"]
)
def test_no_answer(text: str | None) -> None:
    got = extract_answer(text)
    assert got.text is None
    assert got.reason


def test_hostile_text_never_raises() -> None:
    for text in [
        "\x00" * 1000,
        "<answer>" * 10_000,
        "\udcff<answer>\ud800</answer>",
        "<" * 100_000,
    ]:
        extract_answer(text)


def test_a_closing_tag_pairs_with_the_latest_opening_tag() -> None:
    got = extract_answer(f"<answer>draft, then <answer>{A}</answer>")
    assert (got.text, got.repairs) == (A, ())


def test_an_answer_before_a_think_block_is_kept() -> None:
    got = extract_answer(f"<answer>{A}</answer>\n<think>why did I say that</think>")
    assert (got.text, got.repairs) == (A, ())


def test_repeated_tags_are_linear_not_quadratic() -> None:
    # A non-greedy regex takes minutes on these; the tag scan takes milliseconds.
    for text in [
        "<answer>" * 500_000,
        "<think>" * 500_000 + "</answer>",
        "</think><think>" * 300_000,
    ]:
        assert extract_answer(text).text is None
