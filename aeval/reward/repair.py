"""The repair loop's rules for training: judge an answer, stop, or say what was wrong.

``aeval run --rounds K --feedback LEVEL`` asks an item again, with feedback, while its
answer is wrong in a way the model could repair, for at most K answers (issue #44,
docs/repair.md). :class:`RepairRounds` holds those rules for the RL environments built
on the same loop (the verifiers environment, :mod:`aeval.interop.verifiers_env`, and
verl's interaction, :mod:`aeval.reward.verl_interaction`): each answer is checked by the
reward's judge (:class:`~aeval.reward.EquivalenceReward`: the evaluation's verifier,
pool and limits), and the feedback text is :func:`aeval.feedback.render_feedback`'s,
byte for byte the message ``run`` sends.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aeval.errors import ConfigError
from aeval.feedback import (
    DEFAULT_FEEDBACK_TEMPLATE,
    FEEDBACK_LEVELS,
    FeedbackLevel,
    check_template,
    is_repairable,
    render_feedback,
)
from aeval.reward.equivalence import EquivalenceReward
from aeval.verdicts import CheckResult, Status
from aeval.verify.checker import Checker

__all__ = ["DEFAULT_ROUNDS", "RepairRounds", "RepairStep", "truth_and_constants"]

DEFAULT_ROUNDS = 3


@dataclass(frozen=True, slots=True)
class RepairStep:
    """One judged answer of a repair conversation."""

    round: int  # 1-based
    check: CheckResult
    score: float  # the reward of this answer (EquivalenceReward.score_of)
    done: bool  # equivalent, not repairable, or the last round
    feedback: str | None  # the next round's user message; None when done

    @property
    def solved(self) -> bool:
        return self.check.status is Status.EQUIVALENT

    def as_json(self) -> dict[str, Any]:
        """What an environment records of the step (its state, metrics)."""
        return {
            "round": self.round,
            "status": self.check.status.value,
            "reason": self.check.reason,
            "direction": self.check.direction,
            "counterexample": self.check.counterexample,
            "score": self.score,
        }


class RepairRounds:
    """The rules of one repair protocol: K rounds, a feedback level and template, a judge.

    :param rounds: the most answers a conversation gets (K ≥ 1).
    :param feedback: ``retry``, ``reason`` or ``counterexample`` (what ``run --feedback``
        takes).
    :param template: the feedback template (default aeval's), or ``feedback_file``.
    :param reward: the judge; default: an :class:`EquivalenceReward` with ``reward_settings``
        (``reading``, ``workers``, ``limits`` …).
    :raises ConfigError: a bad setting, naming it.
    """

    def __init__(
        self,
        rounds: int = DEFAULT_ROUNDS,
        feedback: str = "counterexample",
        *,
        template: str | None = None,
        feedback_file: str | Path | None = None,
        reward: EquivalenceReward | None = None,
        **reward_settings: Any,
    ) -> None:
        if not isinstance(rounds, int) or rounds < 1:
            raise ConfigError(f"rounds must be a whole number of at least 1, got {rounds!r}")
        if feedback not in FEEDBACK_LEVELS:
            raise ConfigError(
                f"unknown feedback {feedback!r}: expected one of {', '.join(FEEDBACK_LEVELS)}"
            )
        if feedback_file is not None:
            try:
                template = Path(feedback_file).read_text(encoding="utf-8")
            except OSError as err:
                raise ConfigError(f"feedback_file {feedback_file}: cannot read it ({err})") from err
        where = "the feedback template" if feedback_file is None else f"{feedback_file}"
        self.rounds = rounds
        self.feedback: FeedbackLevel = feedback
        self.template = check_template(template or DEFAULT_FEEDBACK_TEMPLATE, where)
        self.reward = reward if reward is not None else EquivalenceReward(**reward_settings)

    async def judge(self, answer: str | None, truth: str, constants: str, round: int) -> RepairStep:
        """Judge round ``round``'s answer and say whether the conversation goes on."""

        async def detailed(pool: object) -> CheckResult | None:
            # With direction and counterexample, which the feedback tells and a reward
            # call leaves out; the evaluation's limits hold as in every check.
            if isinstance(pool, Checker):
                return await pool.check(answer, truth, constants, details=True)
            return None

        check = await self.reward.run_in_pool(detailed)
        if check is None:  # the machine's shared pool takes whole reward calls only
            [check] = await self.reward.check_many_async([(answer, truth, constants)])
        last = round >= self.rounds or check.status is Status.EQUIVALENT
        done = last or not is_repairable(check.status)
        message = (
            None
            if done
            else render_feedback(
                self.feedback,
                status=check.status,
                reason=check.reason,
                direction=check.direction,
                counterexample=check.counterexample,
                template=self.template,
            )
        )
        return RepairStep(round, check, self.reward.score_of(check, answer), done, message)

    def close(self) -> None:
        """Stop the judge's worker processes (they start again on the next answer)."""
        self.reward.close()


def truth_and_constants(ground_truth: object, constants: object = None) -> tuple[str, str]:
    """A row's truth and declarations from either shape the RL datasets use: a mapping
    with ``answer`` and ``constants``, or the truth string with the declarations apart.

    :raises ConfigError: no truth, or no declarations.
    """
    if isinstance(ground_truth, Mapping):
        truth, constants = ground_truth.get("answer"), ground_truth.get("constants", constants)
    else:
        truth = ground_truth
    if not isinstance(truth, str) or not truth.strip():
        raise ConfigError("the repair loop needs the row's ground truth (an SMT-LIB assertion)")
    if not isinstance(constants, str):
        raise ConfigError("the repair loop needs the row's constants (its declarations)")
    return truth, constants
