"""The synthetic responder: a seeded mix of the answers real models write.

Per request it picks an *intent* (correct, fenced, too strong, no answer, …)
from the model, the seed, the item and the trial alone, and writes an answer
that realises it; :data:`EXPECTED_VERDICTS` says what the verifier must make
of each, which is how the local server tests the verifier end to end. An HTTP
error is the one intent that does not stick to its request (see :data:`Failures`).
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
from aeval.local.chat import ChatRequest, Completion, HttpFailure, Reply, Row
from aeval.local.questions import QuestionIndex
from aeval.local.responders import plausible_wrong_answer, reasoning, tagged
from aeval.verdicts import Direction, Status

__all__ = ["EXPECTED_VERDICTS", "Expected", "Failures", "Intent", "SyntheticResponder",
           "answer_for", "default_failure_mix"]  # fmt: skip

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
    ) -> None:
        self._index, self._seed, self._failures = index, seed, failures
        self._attempts: Counter[tuple[str, str, int | None]] = Counter()
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

    def respond(self, request: ChatRequest) -> Reply:
        text = request.text
        row = self._index.match(text, request.custom_id)
        if row is None:
            return Completion(plausible_wrong_answer(text))
        model, trial = request.model, request.trial
        intent = self.intent(model, request.custom_id, row.question, trial)
        if intent is Intent.HTTP_ERROR and self._failures == "transient":
            key = request.custom_id if request.custom_id is not None else row.question
            with self._lock:
                self._attempts[(model, key, trial)] += 1
                attempt = self._attempts[(model, key, trial)]
            if attempt > 1:
                intent = self._drawn(_unit(str(self._seed), model, key, f"{trial}/{attempt}"))
        reply = answer_for(intent, row, text)
        spent = thinking_tokens(request.body, _unit(str(self._seed), row.id))
        if spent and isinstance(reply, Completion):
            return dataclasses.replace(reply, reasoning_tokens=spent)
        return reply


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
