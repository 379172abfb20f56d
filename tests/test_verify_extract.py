from __future__ import annotations

import pytest

from aeval.verify.extract import Repair, extract_answer

A = "(assert (> x 1))"


@pytest.mark.parametrize(
    ("response", "repairs"),
    [
        pytest.param(f"reasoning… <answer>{A}</answer> done", (), id="one_block_is_strict"),
        pytest.param(
            f"<think>maybe <answer>(assert false)</answer></think><answer>{A}</answer>",
            (),
            id="think_block_is_ignored_even_with_answer_tags_inside",
        ),
        pytest.param(
            f"draft <answer>(assert false)</answer></think>\n<answer>{A}</answer>",
            (),
            id="text_before_a_lone_closing_think_is_draft",
        ),
        pytest.param(
            f"<answer>{A}</answer> again: <answer>\n{A}\n</answer>",
            (),
            id="identical_repeated_blocks_are_strict",
        ),
        pytest.param(
            f"<answer>(assert false)</answer> wait, no: <answer>{A}</answer>",
            (Repair.LAST_OF_SEVERAL,),
            id="last_of_several_different_blocks_wins_as_a_repair",
        ),
        pytest.param(
            f"<answer>\n```lisp\n{A}\n```\n</answer>",
            (Repair.CODE_FENCE,),
            id="code_fence_inside_answer_is_a_repair",
        ),
        pytest.param(
            f"<answer>\n{A}\n", (Repair.UNCLOSED_ANSWER,), id="unclosed_answer_takes_the_rest"
        ),
        pytest.param(
            f"The constraint is:\n{A}", (Repair.UNTAGGED_ANSWER,), id="untagged_assert_is_a_repair"
        ),
        pytest.param(
            f"<answer>draft, then <answer>{A}</answer>",
            (),
            id="a_closing_tag_pairs_with_the_latest_opening_tag",
        ),
        pytest.param(
            f"<answer>{A}</answer>\n<think>why did I say that</think>",
            (),
            id="an_answer_before_a_think_block_is_kept",
        ),
    ],
)
def test_the_answer_is_found_with_the_repairs_it_took(
    response: str, repairs: tuple[Repair, ...]
) -> None:
    got = extract_answer(response)
    assert (got.text, got.repairs) == (A, repairs)


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


def test_repeated_tags_are_linear_not_quadratic() -> None:
    # A non-greedy regex takes minutes on these; the tag scan takes milliseconds.
    for text in [
        "<answer>" * 500_000,
        "<think>" * 500_000 + "</answer>",
        "</think><think>" * 300_000,
    ]:
        assert extract_answer(text).text is None


def test_an_answer_left_inside_think_is_taken_as_a_named_repair() -> None:
    got = extract_answer(f"<think>so the answer is <answer>{A}</answer></think>\nDone.")
    assert (got.text, got.repairs) == (A, (Repair.ANSWER_IN_THINK,))
    # Before a lone "</think>" (a template opened <think> in the prompt) alike.
    got = extract_answer(f"so <answer>{A}</answer></think> That is all.")
    assert (got.text, got.repairs) == (A, (Repair.ANSWER_IN_THINK,))


def test_the_last_different_block_inside_think_wins_and_says_so() -> None:
    got = extract_answer(f"<think><answer>(assert false)</answer> no, <answer>{A}</answer></think>")
    assert (got.text, got.repairs) == (A, (Repair.ANSWER_IN_THINK, Repair.LAST_OF_SEVERAL))
    got = extract_answer(f"<think><answer>{A}</answer></think><think><answer>{A}</answer></think>")
    assert (got.text, got.repairs) == (A, (Repair.ANSWER_IN_THINK,))


@pytest.mark.parametrize(
    ("outside", "text", "repairs"),
    [
        (f"<answer>{A}</answer>", A, ()),
        (f"<answer>{A}", A, (Repair.UNCLOSED_ANSWER,)),
        (f"Final: {A}", A, (Repair.UNTAGGED_ANSWER,)),
    ],
)
def test_anything_outside_think_wins_over_a_block_inside(
    outside: str, text: str, repairs: tuple[str, ...]
) -> None:
    got = extract_answer(f"<think><answer>(assert false)</answer></think>{outside}")
    assert (got.text, got.repairs) == (text, repairs)


def test_no_answer_reasons_say_what_is_really_missing() -> None:
    assert (
        extract_answer("<think>hmm</think> no idea").reason == "no <answer> block in the response"
    )
    got = extract_answer(f"<think>hmm <answer>{A}</think> and nothing else")
    assert got.text is None
    assert got.reason == "no <answer> block outside <think>, and none closed inside it"
    # Tags are paired within one think block, never across two.
    got = extract_answer(f"<think><answer>{A}</think> x <think></answer></think>")
    assert got.text is None
    got = extract_answer("<think><answer> </answer></think>")
    assert (got.text, got.repairs) == (None, (Repair.ANSWER_IN_THINK,))
    assert got.reason == "the <answer> block is empty"


def test_an_answer_may_be_cut_only_when_it_runs_to_the_end_of_the_response() -> None:
    assert extract_answer(f"<answer>{A}").may_be_cut
    assert extract_answer(f"so: {A}").may_be_cut
    assert not extract_answer(f"<answer>{A}</answer>").may_be_cut
    assert not extract_answer(f"<think><answer>{A}</answer></think>").may_be_cut


def test_answer_tags_inside_many_think_blocks_stay_linear() -> None:
    got = extract_answer("<think><answer>(assert x)</answer></think>" * 50_000)
    assert (got.text, got.repairs) == ("(assert x)", (Repair.ANSWER_IN_THINK,))
