"""What a verdict is worth as a reward: the reading, the scores, the format credit.

Pure functions of a :class:`~aeval.verdicts.CheckResult` and the completion
text, so that the reward and ``aeval rescore`` cannot disagree: an answer
scores ``equivalent`` exactly when the evaluation's reading counts it correct
(lenient: status ``equivalent``; strict: ``equivalent`` and no repair).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from aeval.errors import ConfigError
from aeval.verdicts import CheckResult, Status
from aeval.verify.extract import extract_answer

__all__ = ["UNDECIDED", "Reading", "RewardScores", "completion_text", "is_correct", "well_formed"]

Reading = Literal["strict", "lenient"]

# Z3 could not decide: never correct, and never worth more than a wrong answer,
# so a policy gains nothing by making the judge give up.
UNDECIDED: frozenset[Status] = frozenset({Status.UNKNOWN, Status.TIMEOUT, Status.RESOURCE_LIMIT})


def is_correct(check: CheckResult, reading: Reading) -> bool:
    """The evaluation's reading: lenient counts every ``equivalent``; strict, unrepaired ones."""
    return check.status is Status.EQUIVALENT and (reading == "lenient" or check.repaired is None)


@dataclass(frozen=True, slots=True)
class RewardScores:
    """The score of each outcome. Defaults: 1.0 for a correct answer, 0.0 for anything else.

    :param equivalent: a correct answer under the reward's reading.
    :param wrong: not equivalent, malformed, missing, forbidden, too large, or
        (strict reading) equivalent only after a repair.
    :param undecided: ``unknown``, ``timeout`` or ``resource_limit`` (Z3 or the
        budget gave up, or the call's deadline passed). Must not exceed ``wrong``.
    :param format_credit: added to any answer that is not correct but whose
        response is well formed (one ``<think>`` block closed before exactly
        one ``<answer>`` block, nothing after it; see :func:`well_formed`).
    :param repair_penalty: lenient reading only: taken from ``equivalent`` when
        the answer needed a named repair.

    Every score of an answer that is not correct stays below the score of a
    correct one, whatever the settings: checked here.
    """

    equivalent: float = 1.0
    wrong: float = 0.0
    undecided: float = 0.0
    format_credit: float = 0.0
    repair_penalty: float = 0.0

    def __post_init__(self) -> None:
        for name in ("equivalent", "wrong", "undecided", "format_credit", "repair_penalty"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(f"RewardScores.{name} must be a number, got {value!r}")
            if not math.isfinite(value):
                raise ConfigError(f"RewardScores.{name} must be finite, got {value!r}")
        if self.format_credit < 0 or self.repair_penalty < 0:
            raise ConfigError(
                "RewardScores.format_credit and repair_penalty must be >= 0, got "
                f"{self.format_credit!r} and {self.repair_penalty!r}"
            )
        if self.undecided > self.wrong:
            raise ConfigError(
                f"RewardScores.undecided ({self.undecided!r}) must not exceed wrong "
                f"({self.wrong!r}): a policy would learn to make Z3 give up"
            )
        best_wrong = self.wrong + self.format_credit
        worst_right = self.equivalent - self.repair_penalty
        if best_wrong >= worst_right:
            raise ConfigError(
                f"RewardScores: a wrong answer can score {best_wrong!r} (wrong + format_credit), "
                f"not less than a repaired correct one ({worst_right!r}, equivalent - "
                "repair_penalty); lower format_credit or repair_penalty"
            )

    def score(self, check: CheckResult, reading: Reading, formatted: bool = False) -> float:
        """The reward of one verdict; ``formatted``: :func:`well_formed` of the response."""
        if is_correct(check, reading):
            if check.repaired is not None:  # only possible under the lenient reading
                return float(self.equivalent - self.repair_penalty)
            return float(self.equivalent)
        base = self.undecided if check.status in UNDECIDED else self.wrong
        return float(base + (self.format_credit if formatted else 0.0))


def well_formed(response: str | None) -> bool:
    """One ``<think>`` block (its opening tag may sit in the prompt), then one ``<answer>`` block.

    The answer must be taken strictly (no repair), and nothing but whitespace
    may follow ``</answer>``. Linear in the length of the response.
    """
    if response is None:
        return False
    extraction = extract_answer(response)
    if extraction.text is None or extraction.repairs:
        return False
    low = response.lower()
    close_think = low.find("</think>")
    return (
        close_think >= 0
        and low.count("</think>") == 1
        and low.count("<think>") <= 1
        and low.count("<answer>") == 1
        and low.find("<answer>") > close_think
        and low.rstrip().endswith("</answer>")
    )


def _message_text(message: Mapping[str, Any]) -> str | None:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: the text ones, in order
        texts = [p.get("text") for p in content if isinstance(p, Mapping)]
        return "".join(t for t in texts if isinstance(t, str))
    return None


def completion_text(completion: object) -> str | None:
    """The text to score of a completion: a string, or a chat message list (TRL conversational).

    From a message list, the last ``assistant`` message is taken (the final
    word of a multi-turn completion); ``None`` when there is none.
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        return _message_text(completion)
    if isinstance(completion, list | tuple):
        for message in reversed(completion):
            if isinstance(message, Mapping) and message.get("role") == "assistant":
                return _message_text(message)
    return None
