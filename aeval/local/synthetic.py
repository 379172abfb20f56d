"""The synthetic responder: a seeded mix of the answers real models write.

Per request it picks an *intent* (correct, fenced, too strong, no answer, …)
from the model, the seed, the item and the trial alone, and writes an answer
that realises it; :data:`EXPECTED_VERDICTS` says what the verifier must make
of each, which is how the local server tests the verifier end to end. An HTTP
error is the one intent that does not stick to its request (see :data:`Failures`).
A repair round (a conversation: the question, the model's answer, feedback, …) is
answered by :meth:`SyntheticResponder.repair_intent`, per (model, seed, item, trial,
round).
"""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import itertools
import re
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from aeval.errors import ConfigError
from aeval.feedback import FEEDBACK_LEVELS, FeedbackLevel, Turn, classify_feedback, split_round
from aeval.local.chat import ChatRequest, Completion, HttpFailure, Reply, Row
from aeval.local.questions import QuestionIndex
from aeval.local.responders import plausible_wrong_answer, reasoning, tagged
from aeval.verdicts import Direction, Status

__all__ = ["EXPECTED_VERDICTS", "Expected", "Failures", "Intent", "SyntheticResponder",
           "answer_for", "default_failure_mix", "repair_rates"]  # fmt: skip

_DECLARED = re.compile(r"\(declare-const\s+([^\s()]+)\s+[^\s()]+\s*\)")


class Intent(StrEnum):
    """What a synthetic answer is meant to be (see :data:`EXPECTED_VERDICTS`)."""

    CORRECT = "correct"
    FENCED = "fenced"
    TOO_STRONG = "too_strong"
    TOO_WEAK = "too_weak"
    NO_ANSWER = "no_answer"
    UNBALANCED = "unbalanced"
    UNDECLARED_VAR = "undeclared_var"
    TRUNCATED = "truncated_length"
    HTTP_ERROR = "http_error"


@dataclass(frozen=True, slots=True)
class Expected:
    """The verdict the verifier should give an answer written for an intent."""

    status: Status
    repaired: str | None = None
    direction: Direction | None = None


EXPECTED_VERDICTS: Mapping[Intent, Expected] = {
    Intent.CORRECT: Expected(Status.EQUIVALENT),
    Intent.FENCED: Expected(Status.EQUIVALENT, repaired="code_fence"),
    Intent.TOO_STRONG: Expected(Status.NOT_EQUIVALENT, direction="too_strong"),
    Intent.TOO_WEAK: Expected(Status.NOT_EQUIVALENT, direction="too_weak"),
    Intent.NO_ANSWER: Expected(Status.NO_ANSWER),
    Intent.UNBALANCED: Expected(Status.PARSE_ERROR, repaired="closed_parens"),
    Intent.UNDECLARED_VAR: Expected(Status.UNKNOWN_SYMBOL),
    Intent.TRUNCATED: Expected(Status.PARSE_ERROR, repaired="unclosed_answer"),
    Intent.HTTP_ERROR: Expected(Status.API_ERROR),
}


def default_failure_mix() -> dict[Intent, float]:
    """Relative weights of the failure intents, roughly as real models spread them."""
    return {Intent.TOO_STRONG: 0.28, Intent.TOO_WEAK: 0.28, Intent.NO_ANSWER: 0.1,
            Intent.UNBALANCED: 0.1, Intent.UNDECLARED_VAR: 0.1, Intent.TRUNCATED: 0.1,
            Intent.HTTP_ERROR: 0.04}  # fmt: skip


# A repair round's chance to fix a wrong answer, by what the feedback told (retry, reason,
# counterexample), as a share of the model's accuracy: a stronger model repairs more, and
# every model more the more it is told (docs/repair.md).
_REPAIR_SHARES = (0.25, 0.5, 0.8)


def repair_rates(accuracy: float, given: tuple[float, ...] | None = None
                 ) -> dict[FeedbackLevel, float]:  # fmt: skip
    """The repair probability at each feedback level: ``given`` (the ``repair=`` knob:
    one number, the counterexample level's, the others in the defaults' ratios; or three,
    retry/reason/counterexample), else :data:`_REPAIR_SHARES` of ``accuracy``."""
    if given is None:
        rates = tuple(accuracy * share for share in _REPAIR_SHARES)
    elif len(given) == 1:
        rates = tuple(given[0] * share / _REPAIR_SHARES[-1] for share in _REPAIR_SHARES)
    else:
        rates = given
    if len(rates) != 3 or not all(0.0 <= rate <= 1.0 for rate in rates):
        raise ConfigError("model spec: repair= takes one probability or three (retry/reason/"
                          f"counterexample), each between 0 and 1; got {given}")  # fmt: skip
    return dict(zip(FEEDBACK_LEVELS, rates, strict=True))


def _unit(*parts: str) -> float:
    """A uniform number in [0, 1) that depends only on ``parts``."""
    digest = hashlib.blake2b("\x1f".join(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


# The share of trials in which an item gets a fresh draw instead of its usual intent.
TRIAL_VARIATION = 0.3

# An HTTP error sent again: "transient", as a real 500 is (OpenAI's error codes guide: "Retry
# your request after a brief wait", https://platform.openai.com/docs/guides/error-codes): the
# first attempt is the intent's, each later one a fresh seeded draw from the whole mix, failing
# at the same rate or answered. "deterministic": every attempt fails (for tests).
Failures = Literal["transient", "deterministic"]


class SyntheticResponder:
    """A seeded mix of the answers real models write.

    ``accuracy`` is the share of answers meant to be equivalent (of which ``fenced_share`` are
    wrapped in a code fence the verifier must strip); the rest is split by ``failure_mix``. The
    intent of a request depends only on (model, seed, custom_id or, without one, the question, and
    the trial): see :meth:`intent`. Like a model sampled at a temperature, an item keeps its usual
    answer in most trials and gets a fresh draw in :data:`TRIAL_VARIATION` of them, so trials
    differ but stay correlated by item. An HTTP error recurs on a retry as ``failures`` says
    (:data:`Failures`); the attempts are counted per responder, that is per server run.
    """

    def __init__(
        self,
        index: QuestionIndex,
        *,
        seed: int = 0,
        accuracy: float = 0.7,
        fenced_share: float = 0.15,
        failure_mix: Mapping[Intent, float] | None = None,
        failures: Failures = "transient",
        repair: tuple[float, ...] | None = None,
    ) -> None:
        self._index, self._seed, self._failures = index, seed, failures
        self._repair, self._fenced = repair_rates(accuracy, repair), fenced_share
        self._attempts: Counter[tuple[str, str, int | None, int]] = Counter()
        self._lock = threading.Lock()  # the batch path answers from worker threads
        mix = default_failure_mix() if failure_mix is None else failure_mix
        total = sum(mix.values())
        weights = [
            (Intent.CORRECT, accuracy * (1 - fenced_share)),
            (Intent.FENCED, accuracy * fenced_share),
            *((Intent(i), (1 - accuracy) * w / total) for i, w in mix.items() if w > 0),
        ]
        weights = [(intent, weight) for intent, weight in weights if weight > 0]
        if not weights:
            raise ConfigError(
                "synthetic responder: accuracy is 0 and every failure weight is 0, "
                "so there is nothing to answer with"
            )
        self._intents = [intent for intent, _ in weights]
        self._bounds = list(itertools.accumulate(weight for _, weight in weights))
        self._wrong = [(i, w) for i, w in weights if i not in (Intent.CORRECT, Intent.FENCED)]

    def intent(
        self, model: str, custom_id: str | None, question: str = "", trial: int | None = None
    ) -> Intent:
        """The intent for one request: a pure function of model, seed, key and trial.

        Without a trial, the item's usual intent; in a trial, a fresh draw with
        probability :data:`TRIAL_VARIATION`, else the usual one.
        """
        key = custom_id if custom_id is not None else question
        seed = str(self._seed)
        unit = _unit(seed, model, key)
        if trial is not None and _unit(seed, model, key, "resample", str(trial)) < TRIAL_VARIATION:
            unit = _unit(seed, model, key, "trial", str(trial))
        return self._drawn(unit)

    def _drawn(self, unit: float) -> Intent:
        draw = bisect.bisect_right(self._bounds, unit * self._bounds[-1])
        return self._intents[min(draw, len(self._intents) - 1)]

    def repair_intent(self, model: str, key: str, trial: int | None, turns: list[Turn],
                      attempt: int = 1) -> Intent:  # fmt: skip
        """The intent of a repair round (after ``turns``): repaired with the probability
        of what the last feedback tells (:func:`repair_rates`), the same draw for every
        level (so more told never repairs fewer), else a fresh failure of the mix."""
        parts = (str(self._seed), model, key, f"round{len(turns) + 1}", str(trial))
        if _unit(*parts, "repair") < self._repair[classify_feedback(turns[-1].feedback)]:
            fenced = _unit(*parts, "fence") < self._fenced
            return Intent.FENCED if fenced else Intent.CORRECT
        if not self._wrong:
            return Intent.TOO_WEAK
        bounds = list(itertools.accumulate(w for _, w in self._wrong))
        draw = bisect.bisect_right(bounds, _unit(*parts, str(attempt)) * bounds[-1])
        return self._wrong[min(draw, len(bounds) - 1)][0]

    def respond(self, request: ChatRequest) -> Reply:
        text, turns = request.text, request.turns
        # A repair round's request id is ID_rR (aeval.feedback); its row is the item's.
        item = None if request.custom_id is None else split_round(request.custom_id)[0]
        row = self._index.match(text, item)
        if row is None:
            return Completion(plausible_wrong_answer(text))
        model, trial = request.model, request.trial
        key = item if item is not None else row.question

        def chosen(attempt: int) -> Intent:
            if turns:
                return self.repair_intent(model, key, trial, turns, attempt)
            if attempt == 1:
                return self.intent(model, item, row.question, trial)
            return self._drawn(_unit(str(self._seed), model, key, f"{trial}/{attempt}"))

        intent = chosen(1)
        if intent is Intent.HTTP_ERROR and self._failures == "transient":
            with self._lock:
                self._attempts[(model, key, trial, len(turns))] += 1
                attempt = self._attempts[(model, key, trial, len(turns))]
            intent = chosen(attempt) if attempt > 1 else intent
        reply = answer_for(intent, row, text)
        if turns and isinstance(reply, Completion) and reply.content == turns[-1].answer:
            reply = self._another_wrong(intent, row, text, turns[-1].answer)
        spent = thinking_tokens(request.body, _unit(str(self._seed), row.id))
        if spent and isinstance(reply, Completion):
            return dataclasses.replace(reply, reasoning_tokens=spent)
        return reply

    def _another_wrong(self, intent: Intent, row: Row, text: str, last: str) -> Reply:
        """A wrong answer other than ``last``: the next failure intent of the mix after
        ``intent`` whose answer differs (a model told it is wrong rarely says it again),
        else of the other failure intents."""
        # the mix's failures first, then the others
        wrong = [i for i in dict.fromkeys((*(i for i, _ in self._wrong), *Intent))
                 if i not in _NOT_WRONG]  # fmt: skip
        start = wrong.index(intent) + 1 if intent in wrong else 0
        for other in (wrong[(start + k) % len(wrong)] for k in range(len(wrong))):
            reply = answer_for(other, row, text)
            if not isinstance(reply, Completion) or reply.content != last:
                return reply
        return answer_for(intent, row, text)


_NOT_WRONG = (Intent.CORRECT, Intent.FENCED, Intent.HTTP_ERROR)


# Tokens a synthetic model thinks at each level (OpenAI's vocabulary, aeval.reasoning),
# growing with the effort so an offline comparison of variants shows it.
_THOUGHT = {"none": 0, "minimal": 60, "low": 250, "medium": 900, "high": 2800,
            "xhigh": 5200, "max": 9000}  # fmt: skip


def thinking_tokens(body: Mapping[str, object], unit: float) -> int:
    """The reasoning tokens of one answer: by its level (chat's ``reasoning_effort``, where
    the codecs put each provider's, or the Responses API's ``reasoning.effort``), or about
    half its ``thinking_budget``, ±30 % by item (``unit`` in [0, 1)); else 0."""
    budget, nested = body.get("thinking_budget"), body.get("reasoning")
    effort = nested.get("effort") if isinstance(nested, Mapping) else body.get("reasoning_effort")
    base = budget // 2 if isinstance(budget, int) else _THOUGHT.get(str(effort), 0)
    return round(base * (0.7 + 0.6 * unit))


def answer_for(intent: Intent, row: Row, text: str) -> Reply:
    """Write the reply that realises ``intent`` for ``row``."""
    think = reasoning(text)
    truth = row.answer.strip()
    if intent is Intent.HTTP_ERROR:
        return HttpFailure(500, "The server had an error while processing your request.")
    if intent is Intent.CORRECT:
        return Completion(tagged(think, truth))
    if intent is Intent.FENCED:
        return Completion(tagged(think, f"\n```smt2\n{truth}\n```\n"))
    if intent is Intent.NO_ANSWER:
        return Completion(
            f"<think>{think}</think>The constraint follows the pattern of the examples, "
            "one clause per array cell."
        )
    if intent is Intent.TRUNCATED:
        full = tagged(think, truth)
        cut = len(think) + len("<think></think><answer>") + max(1, len(truth) // 2)
        return Completion(full[:cut], finish_reason="length")
    body = _assert_body(truth)
    var = _first_declared(row.constants)
    if intent is Intent.TOO_STRONG:
        return Completion(tagged(think, f"(assert (and {body} (= {var} 7919)))"))
    if intent is Intent.TOO_WEAK:
        return Completion(tagged(think, f"(assert {_drop_last_conjunct(body)})"))
    if intent is Intent.UNDECLARED_VAR:
        return Completion(tagged(think, f"(assert (and {body} (>= n_undeclared 0)))"))
    # UNBALANCED: one "(" too many after "(assert". The lenient reading closes it at
    # the end (docs/verify.md), and Z3 rejects the "((and …))" that results.
    return Completion(tagged(think, truth.replace("(assert (", "(assert ((", 1)))


def _assert_body(truth: str) -> str:
    if truth.startswith("(assert ") and truth.endswith(")"):
        return truth[len("(assert ") : -1].strip()
    return truth


def _first_declared(constants: str) -> str:
    found = _DECLARED.search(constants)
    return found.group(1) if found else "in"


def _top_level_terms(expr: str) -> list[str]:
    """Split ``(op a b c)`` into ``[op, a, b, c]`` at parenthesis depth one."""
    inner, terms, depth, start = expr.strip()[1:-1], [], 0, 0
    for token in re.finditer(r"[()]|[^\s()]+", inner):
        if depth == 0:
            start = token.start()
        depth += {"(": 1, ")": -1}.get(token.group(), 0)
        if depth == 0:
            terms.append(inner[start : token.end()])
    return terms


def _drop_last_conjunct(body: str) -> str:
    """A weaker formula: the ``and`` without its last conjunct.

    Not an ``and`` (or a single conjunct): a disjunction with a fresh case,
    which admits more inputs.
    """
    conjuncts = _top_level_terms(body)[1:] if body.startswith("(and ") else []
    if len(conjuncts) > 2:
        return "(and " + " ".join(conjuncts[:-1]) + ")"
    return conjuncts[0] if len(conjuncts) == 2 else f"(or {body} (= 0 0))"
