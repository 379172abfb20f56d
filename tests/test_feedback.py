"""The repair rounds' feedback messages and round ids (aeval.feedback)."""

from __future__ import annotations

import pytest

from aeval.errors import ConfigError
from aeval.feedback import (
    DEFAULT_FEEDBACK_TEMPLATE,
    FEEDBACK_LEVELS,
    check_template,
    classify_feedback,
    counterexample_holds,
    is_repairable,
    render_feedback,
    round_custom_id,
    split_round,
)
from aeval.verdicts import Status

STRONG = {
    "status": Status.NOT_EQUIVALENT,
    "reason": "too strong: the answer rejects this input, which the ground truth admits",
    "direction": "too_strong",
    "counterexample": {"in1": "3", "in0": "-2"},
}


def test_each_level_reveals_more_than_the_one_before() -> None:
    texts = [render_feedback(level, **STRONG) for level in FEEDBACK_LEVELS]  # type: ignore[arg-type]
    retry, reason, counterexample = texts
    assert retry.splitlines()[0] == "Your answer is not correct."
    assert len(retry.splitlines()) == 2
    assert "too strong" not in retry and "in0" not in retry
    assert "too strong" in reason and "in0" not in reason
    assert "in0 = -2, in1 = 3" in counterexample
    assert "the correct constraint holds there and yours does not" in counterexample
    assert [classify_feedback(t) for t in texts] == list(FEEDBACK_LEVELS)


def test_a_weak_answer_holds_at_its_counterexample() -> None:
    text = render_feedback(
        "counterexample",
        status="not_equivalent",
        reason="too weak: the answer admits this input, which the ground truth rejects",
        direction="too_weak",
        counterexample={"x": "0"},
    )
    assert "with x = 0, yours holds there and the correct constraint does not" in text


@pytest.mark.parametrize(
    ("direction", "reason", "side"),
    [
        ("too_strong", "", "truth"),
        ("too_weak", "", "answer"),
        ("both", "too strong: ... (and it is also too weak)", "truth"),
        ("both", "too weak: ... (and it is also too strong)", "answer"),
    ],
)
def test_which_side_holds_at_the_counterexample(direction: str, reason: str, side: str) -> None:
    assert counterexample_holds(direction, reason) == side  # type: ignore[arg-type]


def test_an_unconfirmed_counterexample_is_not_given() -> None:
    reason = STRONG["reason"] + "; the counterexample did not evaluate as expected"
    text = render_feedback("counterexample", **{**STRONG, "reason": reason})  # type: ignore[arg-type]
    assert "in0" not in text
    assert classify_feedback(text) == "reason"


def test_a_parse_error_carries_the_solvers_message() -> None:
    text = render_feedback(
        "counterexample", status=Status.PARSE_ERROR, reason="Z3 says: unknown constant foo"
    )
    assert "could not parse" in text and "Z3 says: unknown constant foo" in text
    assert "A counterexample" not in text


def test_a_users_template_is_checked_and_filled() -> None:
    template = check_template("WRONG{reason}{counterexample} -- {verdict}")
    text = render_feedback("counterexample", template=template, **STRONG)  # type: ignore[arg-type]
    assert text.startswith("WRONG\nWhat the solver found:")
    assert text.endswith(" -- Your answer is not correct.")
    with pytest.raises(ConfigError, match=r"\{answer\}"):
        check_template("{answer}")
    with pytest.raises(ConfigError, match="twice"):
        check_template("{reason}{reason}")
    with pytest.raises(ConfigError, match="empty"):
        check_template("  \n")
    with pytest.raises(ConfigError, match="brace"):
        check_template("{ unclosed")
    assert check_template(DEFAULT_FEEDBACK_TEMPLATE) == DEFAULT_FEEDBACK_TEMPLATE


def test_only_the_models_own_failures_are_asked_again() -> None:
    assert is_repairable("not_equivalent") and is_repairable(Status.NO_ANSWER)
    for status in ("equivalent", "api_error", "missing", "bad_ground_truth", "timeout"):
        assert not is_repairable(status)


@pytest.mark.parametrize("item", ["17", "item-3", "a_r", "x_r1", "warp_r0"])
def test_round_ids_round_trip(item: str) -> None:
    assert round_custom_id(item, 1) == item
    assert split_round(item) == (item, 1)
    for r in (2, 3, 12):
        assert split_round(round_custom_id(item, r)) == (item, r)


def test_round_ids_fit_anthropics_custom_id() -> None:
    import re

    assert re.fullmatch(r"[A-Za-z0-9_-]{1,64}", round_custom_id("item-17", 3))
    with pytest.raises(ValueError):
        round_custom_id("1", 0)
