"""Repair rounds' vocabulary: what the model is told after a wrong answer, and how a
round is named.

A repair round asks an item again with the conversation so far: the original
messages, the model's previous answer as the assistant turn, then one user message
of *feedback* built here from the previous verdict. Three levels, each revealing
more of what the verifier found:

- ``retry``: only that the answer is not correct (the control condition);
- ``reason``: also what the verdict found (too strong, too weak, does not parse with
  the solver's message, an undeclared variable, no ``<answer>`` tag ...);
- ``counterexample``: also, where the verdict has a confirmed one, an input on which
  the two formulas disagree and which side holds there. This leaks part of the
  ground truth (docs/repair.md says how much).

The text is a template (:data:`DEFAULT_FEEDBACK_TEMPLATE`, or the user's
``--feedback-file``) with three fields, ``{verdict}``, ``{reason}`` and
``{counterexample}``; a field the level does not reveal is empty. Every consumer
(the engine's rounds, the Inspect solver loop, the verifiers environment, the verl
interaction, the local server's synthetic models) builds the message here, so one
run's feedback is byte for byte the same wherever it is asked.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, get_args

from aeval.errors import ConfigError
from aeval.verdicts import Direction, Status

__all__ = [
    "DEFAULT_FEEDBACK_TEMPLATE",
    "FEEDBACK_FIELDS",
    "FEEDBACK_LEVELS",
    "FeedbackLevel",
    "Turn",
    "check_template",
    "classify_feedback",
    "counterexample_holds",
    "is_repairable",
    "render_feedback",
    "round_custom_id",
    "split_round",
]

FeedbackLevel = Literal["retry", "reason", "counterexample"]
FEEDBACK_LEVELS: tuple[FeedbackLevel, ...] = get_args(FeedbackLevel)

FEEDBACK_FIELDS: tuple[str, ...] = ("verdict", "reason", "counterexample")

# The default message. Its first line always says the answer is wrong; {reason} and
# {counterexample} each start with a line break when the level fills them, so the
# retry level is exactly two lines.
DEFAULT_FEEDBACK_TEMPLATE = (
    "{verdict}{reason}{counterexample}\n"
    "Try again. Structure your response as before: your thought process between "
    "<think></think> tags and your corrected constraint between <answer></answer> tags."
)

_VERDICT_TEXT = "Your answer is not correct."
# Markers the default texts carry, so the local server's synthetic models can tell the
# level of a default-template message (classify_feedback); a user's own template is
# read as the level its fields show.
_REASON_MARK = "What the solver found: "
_COUNTEREXAMPLE_MARK = "A counterexample: "

# Statuses that are the model's doing: an item whose answer got one of these is asked
# again. Infrastructure failures (api_error, missing, bad_ground_truth) have no answer
# to talk about, and undecided checks (timeout, unknown, resource_limit) are not
# known to be wrong: neither goes to another round.
_REPAIRABLE: frozenset[Status] = frozenset(
    {
        Status.NOT_EQUIVALENT,
        Status.NO_ANSWER,
        Status.PARSE_ERROR,
        Status.UNKNOWN_SYMBOL,
        Status.FORBIDDEN_COMMAND,
        Status.TOO_LARGE,
    }
)


@dataclass(frozen=True, slots=True)
class Turn:
    """One earlier round of a conversation: the model's answer as received (its
    visible text, thinking left out) and the feedback message that followed it."""

    answer: str
    feedback: str


def is_repairable(status: Status | str) -> bool:
    """Whether an answer with this status is asked again in the next round."""
    return Status(status) in _REPAIRABLE


def check_template(template: str, where: str = "the feedback template") -> str:
    """``template``, checked to name only :data:`FEEDBACK_FIELDS` (each at most once,
    no format spec) and to say something besides them.

    :raises ConfigError: naming the unknown field or the problem, and ``where``.
    """
    if not isinstance(template, str) or not template.strip():
        raise ConfigError(f"{where} is empty")
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as err:
        raise ConfigError(f"{where}: {err} (write a literal brace as {{{{ or }}}})") from err
    seen: set[str] = set()
    for _, field, spec, conversion in parsed:
        if field is None:
            continue
        if field not in FEEDBACK_FIELDS:
            raise ConfigError(
                f"{where} names {{{field}}}; the fields are "
                + ", ".join("{" + f + "}" for f in FEEDBACK_FIELDS)
            )
        if spec or conversion:
            raise ConfigError(f"{where}: {{{field}}} takes no format spec or conversion")
        if field in seen:
            raise ConfigError(f"{where} names {{{field}}} twice")
        seen.add(field)
    return template


def counterexample_holds(direction: Direction | None, reason: str) -> Literal["truth", "answer"]:
    """Which formula is true at the verdict's counterexample.

    ``too_strong``: the ground truth holds there and the answer does not;
    ``too_weak``: the answer holds and the truth does not. For ``both`` the
    counterexample witnesses the direction the verifier's reason names first.
    """
    if direction == "too_strong":
        return "truth"
    if direction == "too_weak":
        return "answer"
    return "truth" if reason.startswith("too strong") else "answer"


def _reason_text(status: Status, reason: str, direction: Direction | None) -> str:
    if status is Status.NOT_EQUIVALENT:
        if direction == "too_strong":
            what = (
                "your constraint is too strong: it rejects inputs that the correct "
                "constraint admits"
            )
        elif direction == "too_weak":
            what = (
                "your constraint is too weak: it admits inputs that the correct constraint rejects"
            )
        elif direction == "both":
            what = (
                "your constraint is both too strong and too weak: it rejects some inputs "
                "the correct constraint admits and admits some it rejects"
            )
        else:
            what = "your constraint is not logically equivalent to the correct one"
    elif status is Status.PARSE_ERROR:
        what = f"the solver could not parse your answer ({reason})"
    elif status is Status.UNKNOWN_SYMBOL:
        what = f"your answer uses a variable that is not declared ({reason})"
    elif status is Status.NO_ANSWER:
        what = f"no SMT-LIB assertion was found between <answer></answer> tags ({reason})"
    elif status is Status.FORBIDDEN_COMMAND:
        what = f"your answer holds a command other than (assert ...) ({reason})"
    elif status is Status.TOO_LARGE:
        what = f"your answer is too large ({reason})"
    else:
        what = f"{status.value} ({reason})" if reason else status.value
    return f"\n{_REASON_MARK}{what}."


def _counterexample_text(
    counterexample: Mapping[str, str], direction: Direction | None, reason: str
) -> str:
    values = ", ".join(f"{name} = {value}" for name, value in sorted(counterexample.items()))
    if counterexample_holds(direction, reason) == "truth":
        sides = "the correct constraint holds there and yours does not"
    else:
        sides = "yours holds there and the correct constraint does not"
    return f"\n{_COUNTEREXAMPLE_MARK}with {values}, {sides}."


def render_feedback(
    level: FeedbackLevel,
    *,
    status: Status | str,
    reason: str = "",
    direction: Direction | None = None,
    counterexample: Mapping[str, str] | None = None,
    template: str = DEFAULT_FEEDBACK_TEMPLATE,
) -> str:
    """The feedback message after a wrong answer with this verdict, at ``level``.

    The counterexample is given only at the ``counterexample`` level, only for a
    ``not_equivalent`` verdict, and only when the verifier confirmed it against both
    formulas (a reason that says it did not evaluate as expected gets none).

    :raises ConfigError: ``level`` is unknown.
    """
    if level not in FEEDBACK_LEVELS:
        raise ConfigError(
            f"unknown feedback {level!r}: expected one of {', '.join(FEEDBACK_LEVELS)}"
        )
    status = Status(status)
    fields = {"verdict": _VERDICT_TEXT, "reason": "", "counterexample": ""}
    if level in ("reason", "counterexample"):
        fields["reason"] = _reason_text(status, reason, direction)
    if (
        level == "counterexample"
        and status is Status.NOT_EQUIVALENT
        and counterexample
        and "did not evaluate as expected" not in reason
    ):
        fields["counterexample"] = _counterexample_text(counterexample, direction, reason)
    return template.format_map(fields)


def classify_feedback(text: str) -> FeedbackLevel:
    """The level of a feedback message built from the default texts: the most it
    reveals. A message with neither marker reads as ``retry``."""
    if _COUNTEREXAMPLE_MARK in text:
        return "counterexample"
    if _REASON_MARK in text:
        return "reason"
    return "retry"


# Round r ≥ 2 of item ID is sent as ID_rR: characters every provider's request id
# takes (Anthropic's custom_id is [A-Za-z0-9_-]{1,64}), and round 1 keeps the item's
# own id, so a one-round run's files are unchanged.
_ROUND_ID = re.compile(r"^(.+)_r([1-9][0-9]*)$")


def round_custom_id(custom_id: str, round: int) -> str:
    """The request id of ``custom_id``'s ``round`` (1-based; round 1 is the id itself).

    :raises ValueError: ``round`` is below 1.
    """
    if round < 1:
        raise ValueError(f"rounds start at 1, got {round}")
    return custom_id if round == 1 else f"{custom_id}_r{round}"


def split_round(request_id: str) -> tuple[str, int]:
    """The item id and round of a request id (the inverse of :func:`round_custom_id`).

    Only a suffix ``_rR`` with R ≥ 2 marks a round; an id ending ``_r1`` is an item's
    own id. Planning refuses a dataset whose ids would read as round ids.
    """
    match = _ROUND_ID.match(request_id)
    if match is None or int(match[2]) < 2:
        return request_id, 1
    return match[1], int(match[2])
