"""Responders: what a local "model" answers to one chat request.

A responder is a pure function of the request (and of the benchmark it was
given): the same request always gets the same reply, so a batch that is
re-run after a server restart, or a test that is replayed, sees identical
answers. Three kinds exist:

- :class:`ReferenceResponder` answers with the ground truth (a perfect model);
- :class:`ReplayResponder` re-serves answers recorded in a batch output file;
- :class:`SyntheticResponder` picks, per request, a seeded *intent* (correct,
  fenced, too strong, no answer, …) and writes an answer that realises it.

Requests are matched to benchmark rows by question text (:class:`QuestionIndex`);
a question that matches no row gets a plausible wrong answer, never an error.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal, Protocol

import polars as pl

from aeval.errors import ConfigError, DatasetError, InputFileError
from aeval.verdicts import Direction, Status

__all__ = [
    "EXPECTED_VERDICTS",
    "ChatRequest",
    "Completion",
    "Expected",
    "HttpFailure",
    "Intent",
    "QuestionIndex",
    "ReferenceResponder",
    "ReplayResponder",
    "Reply",
    "Responder",
    "Row",
    "SyntheticResponder",
    "answer_for",
    "default_failure_mix",
    "plausible_wrong_answer",
    "user_text",
]


@dataclass(frozen=True, slots=True)
class Row:
    """The parts of a benchmark row a responder needs."""

    id: str
    question: str
    answer: str
    constants: str
    tier: str | None = None


@dataclass(frozen=True, slots=True)
class ChatRequest:
    """One chat completion request, as a responder sees it."""

    model: str
    body: Mapping[str, Any]
    custom_id: str | None = None
    # Which trial of a run asked (from the batch's aeval_job metadata); None when
    # unknown (a direct chat request). Sampled answers differ between trials.
    trial: int | None = None

    @property
    def text(self) -> str:
        return user_text(self.body)


@dataclass(frozen=True, slots=True)
class Completion:
    """A successful reply: the assistant message and why it stopped."""

    content: str
    finish_reason: Literal["stop", "length"] = "stop"


@dataclass(frozen=True, slots=True)
class HttpFailure:
    """A reply that is an HTTP error (in a batch: a line of the error file)."""

    status_code: int
    message: str
    type: str = "server_error"
    code: str | None = None


Reply = Completion | HttpFailure


class Responder(Protocol):
    def respond(self, request: ChatRequest) -> Reply: ...


def user_text(body: Mapping[str, Any]) -> str:
    """The text of the last user message of a chat body ("" if there is none)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return ""
    for message in reversed(messages):
        if isinstance(message, Mapping) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):  # content parts: keep the text ones
                return "".join(
                    part.get("text", "")
                    for part in content
                    if isinstance(part, Mapping) and part.get("type") == "text"
                )
            return ""
    return ""


class QuestionIndex:
    """Find the benchmark row a user message asks about.

    The engine sends ``question + "\\n" + instruction`` (or, under the
    ``warp-2025`` protocol, ``instruction + "\\n" + question``) and the
    instruction may be customised, so a message matches the row whose question
    is the message itself or the message with some trailing lines removed
    (longest first), else with some leading lines removed (shortest first).
    When several rows share a question, the one whose id is the request's
    ``custom_id`` wins (the engine uses row ids as custom ids), else the first.
    """

    def __init__(self, rows: Iterable[Row]) -> None:
        self._by_question: dict[str, Row] = {}
        self._by_id: dict[str, Row] = {}
        self._by_first_line: dict[str, list[Row]] = {}
        for row in rows:
            if row.question not in self._by_question:
                self._by_question[row.question] = row
                first = row.question.split("\n", 1)[0]
                self._by_first_line.setdefault(first, []).append(row)
            self._by_id.setdefault(row.id, row)

    @classmethod
    def from_frame(cls, frame: pl.DataFrame | None) -> QuestionIndex:
        if frame is None:
            return cls(())
        missing = [c for c in ("question", "answer", "constants") if c not in frame.columns]
        if missing:
            raise DatasetError(
                f"the local server's dataset lacks column(s) {', '.join(missing)}: it needs "
                "question, answer and constants (as aeval.dataset.load_dataset returns)"
            )
        ids = (
            frame["id"].cast(pl.String).to_list()
            if "id" in frame.columns
            else [str(i) for i in range(frame.height)]
        )
        tiers = frame["tier"].to_list() if "tier" in frame.columns else [None] * frame.height
        return cls(
            Row(id=i, question=q, answer=a, constants=c, tier=t)
            for i, q, a, c, t in zip(
                ids,
                frame["question"].to_list(),
                frame["answer"].to_list(),
                frame["constants"].to_list(),
                tiers,
                strict=True,
            )
        )

    def __len__(self) -> int:
        return len(self._by_question)

    def match(self, text: str, custom_id: str | None = None) -> Row | None:
        found = self._by_question.get(text)
        end = len(text)
        while found is None and end > 0:
            end = text.rfind("\n", 0, end)
            if end < 0:
                break
            found = self._by_question.get(text[:end])
        # An instruction placed before the question (``--protocol warp-2025``):
        # drop leading lines instead, shortest first.
        start = 0
        while found is None:
            start = text.find("\n", start) + 1
            if start <= 0:
                return None
            found = self._by_question.get(text[start:])
        if found is not None and custom_id is not None and found.id != custom_id:
            same = self._by_id.get(custom_id)
            if same is not None and same.question == found.question:
                return same
        return found

    def match_inside(self, text: str, custom_id: str | None = None) -> Row | None:
        """The row whose question sits anywhere in ``text`` on whole lines.

        For a base model's prompt, where a template wraps the question (and
        instruction) in lines of its own. The earliest question wins, the
        longest at that line; then ``custom_id`` as in :meth:`match`.
        """
        start = 0
        while start <= len(text):
            end = text.find("\n", start)
            line = text[start:] if end < 0 else text[start:end]
            found: Row | None = None
            for row in self._by_first_line.get(line, ()):
                stop = start + len(row.question)
                if (
                    text.startswith(row.question, start)
                    and (stop == len(text) or text[stop] == "\n")
                    and (found is None or len(row.question) > len(found.question))
                ):
                    found = row
            if found is not None:
                return self._prefer(found, custom_id)
            if end < 0:
                return None
            start = end + 1
        return None

    def _prefer(self, found: Row, custom_id: str | None) -> Row:
        if custom_id is not None and found.id != custom_id:
            same = self._by_id.get(custom_id)
            if same is not None and same.question == found.question:
                return same
        return found


_EXAMPLE = re.compile(r"^N=\d+: (\(assert .*\))\s*$", re.MULTILINE)
_DECLARED = re.compile(r"\(declare-const\s+([^\s()]+)\s+[^\s()]+\s*\)")


def plausible_wrong_answer(text: str) -> str:
    """What a model would write for a question we do not know: the last example.

    The question lists the constraint for smaller sizes; repeating the largest
    of them is the classic wrong answer (it ignores the new size).
    """
    examples = _EXAMPLE.findall(text)
    body = examples[-1] if examples else "(assert (and (>= in 0) (< in 10)))"
    return _tagged(_think(text), body)


def _think(text: str) -> str:
    size = re.findall(r"N=(\d+)\?", text)
    target = f"N={size[-1]}" if size else "the requested size"
    return (
        "The examples grow with the input size; I extend the pattern of the largest "
        f"example to {target}, keeping every constraint the worst-case path needs."
    )


def _tagged(think: str, answer: str) -> str:
    return f"<think>{think}</think><answer>{answer}</answer>"


class ReferenceResponder:
    """A perfect model: every known question gets its ground truth."""

    def __init__(self, index: QuestionIndex) -> None:
        self._index = index

    def respond(self, request: ChatRequest) -> Reply:
        text = request.text
        row = self._index.match(text, request.custom_id)
        if row is None:
            return Completion(plausible_wrong_answer(text))
        return Completion(_tagged(_think(text), row.answer))


class ReplayResponder:
    """Re-serves a recorded batch output file, line by line, by ``custom_id``.

    Successful lines are replayed with their content and ``finish_reason``;
    recorded HTTP errors are replayed as errors. A ``custom_id`` the recording
    does not have gets a plausible wrong answer.
    """

    def __init__(self, replies: Mapping[str, Reply]) -> None:
        self._replies = dict(replies)

    @classmethod
    def from_files(cls, paths: Iterable[Path]) -> ReplayResponder:
        replies: dict[str, Reply] = {}
        for path in paths:
            try:
                handle = path.open(encoding="utf-8")
            except OSError as err:
                raise InputFileError(f"replay file {path}: cannot read it ({err})") from err
            with handle:
                for number, line in enumerate(handle, start=1):
                    if line.strip():
                        custom_id, reply = _recorded_reply(line, path, number)
                        replies[custom_id] = reply
        return cls(replies)

    def __len__(self) -> int:
        return len(self._replies)

    def respond(self, request: ChatRequest) -> Reply:
        reply = self._replies.get(request.custom_id or "")
        return reply if reply is not None else Completion(plausible_wrong_answer(request.text))


def _recorded_reply(line: str, path: Path, number: int) -> tuple[str, Reply]:
    where = f"replay file {path}, line {number}"
    try:
        record = json.loads(line)
        custom_id = str(record["custom_id"])
        response = record.get("response") or {}
        status = int(response.get("status_code", 0))
        body = response.get("body") or {}
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        raise InputFileError(f"{where}: not a batch output line ({err})") from err
    if status == 200:
        try:
            choice = body["choices"][0]
            content = choice["message"]["content"] or ""
            finish = "length" if choice.get("finish_reason") == "length" else "stop"
        except (KeyError, IndexError, TypeError) as err:
            raise InputFileError(f"{where}: response body has no choices[0].message") from err
        return custom_id, Completion(content, finish)
    error = (body.get("error") if isinstance(body, Mapping) else None) or record.get("error") or {}
    return custom_id, HttpFailure(
        status_code=status or 500,
        message=str(error.get("message", "recorded error")),
        type=str(error.get("type", "server_error")),
        code=error.get("code"),
    )


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
    return {
        Intent.TOO_STRONG: 0.28,
        Intent.TOO_WEAK: 0.28,
        Intent.NO_ANSWER: 0.1,
        Intent.UNBALANCED: 0.1,
        Intent.UNDECLARED_VAR: 0.1,
        Intent.TRUNCATED: 0.1,
        Intent.HTTP_ERROR: 0.04,
    }


def _unit(*parts: str) -> float:
    """A uniform number in [0, 1) that depends only on ``parts``."""
    digest = hashlib.blake2b("\x1f".join(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


class SyntheticResponder:
    """A seeded mix of the answers real models write.

    ``accuracy`` is the share of answers meant to be equivalent (of which
    ``fenced_share`` are wrapped in a code fence the verifier must strip);
    the rest is split by ``failure_mix``. The intent of a request depends only
    on (model, seed, custom_id or, without one, the question, and the trial):
    see :meth:`intent`. Like a model sampled at a temperature, an item keeps
    its usual answer in most trials and gets a fresh draw in a share
    ``trial_variation`` of them, so trials differ but stay correlated by item.
    """

    def __init__(
        self,
        index: QuestionIndex,
        *,
        seed: int = 0,
        accuracy: float = 0.7,
        fenced_share: float = 0.15,
        failure_mix: Mapping[Intent, float] | None = None,
        trial_variation: float = 0.3,
    ) -> None:
        if not 0 <= trial_variation <= 1:
            raise ConfigError(f"trial_variation must be in [0, 1], got {trial_variation}")
        self._trial_variation = trial_variation
        mix = {
            Intent(intent): weight  # plain strings are accepted for intents
            for intent, weight in (
                default_failure_mix() if failure_mix is None else failure_mix
            ).items()
        }
        total = sum(mix.values())
        weights: list[tuple[Intent, float]] = [
            (Intent.CORRECT, accuracy * (1 - fenced_share)),
            (Intent.FENCED, accuracy * fenced_share),
        ]
        if total > 0:
            weights += [(i, (1 - accuracy) * w / total) for i, w in mix.items() if w > 0]
        self._index = index
        self._seed = seed
        self._cumulative: list[tuple[float, Intent]] = []
        acc = 0.0
        for intent, weight in weights:
            if weight > 0:
                acc += weight
                self._cumulative.append((acc, intent))
        if not self._cumulative:
            raise ConfigError(
                "synthetic responder: accuracy is 0 and every failure weight is 0, "
                "so there is nothing to answer with"
            )

    def intent(
        self, model: str, custom_id: str | None, question: str = "", trial: int | None = None
    ) -> Intent:
        """The intent for one request: a pure function of model, seed, key and trial.

        Without a trial, the item's usual intent; in a trial, a fresh draw with
        probability ``trial_variation``, else the usual one.
        """
        key = custom_id if custom_id is not None else question
        seed = str(self._seed)
        unit = _unit(seed, model, key)
        if trial is not None and _unit(seed, model, key, "resample", str(trial)) < (
            self._trial_variation
        ):
            unit = _unit(seed, model, key, "trial", str(trial))
        draw = unit * self._cumulative[-1][0]
        for bound, intent in self._cumulative:
            if draw < bound:
                return intent
        return self._cumulative[-1][1]

    def respond(self, request: ChatRequest) -> Reply:
        text = request.text
        row = self._index.match(text, request.custom_id)
        if row is None:
            return Completion(plausible_wrong_answer(text))
        intent = self.intent(request.model, request.custom_id, row.question, request.trial)
        return answer_for(intent, row, text)


def answer_for(intent: Intent, row: Row, text: str) -> Reply:
    """Write the reply that realises ``intent`` for ``row``."""
    think = _think(text)
    truth = row.answer.strip()
    if intent is Intent.HTTP_ERROR:
        return HttpFailure(500, "The server had an error while processing your request.")
    if intent is Intent.CORRECT:
        return Completion(_tagged(think, truth))
    if intent is Intent.FENCED:
        return Completion(_tagged(think, f"\n```smt2\n{truth}\n```\n"))
    if intent is Intent.NO_ANSWER:
        return Completion(
            f"<think>{think}</think>The constraint follows the pattern of the examples, "
            "one clause per array cell."
        )
    if intent is Intent.TRUNCATED:
        full = _tagged(think, truth)
        cut = len(think) + len("<think></think><answer>") + max(1, len(truth) // 2)
        return Completion(full[:cut], finish_reason="length")
    body = _assert_body(truth)
    var = _first_declared(row.constants)
    if intent is Intent.TOO_STRONG:
        return Completion(_tagged(think, f"(assert (and {body} (= {var} 7919)))"))
    if intent is Intent.TOO_WEAK:
        return Completion(_tagged(think, f"(assert {_drop_last_conjunct(body)})"))
    if intent is Intent.UNDECLARED_VAR:
        return Completion(_tagged(think, f"(assert (and {body} (>= n_undeclared 0)))"))
    # UNBALANCED: one "(" too many after "(assert". The lenient reading closes it at
    # the end (docs/verify.md), and Z3 rejects the "((and …))" that results.
    return Completion(_tagged(think, truth.replace("(assert (", "(assert ((", 1)))


def _assert_body(truth: str) -> str:
    if truth.startswith("(assert ") and truth.endswith(")"):
        return truth[len("(assert ") : -1].strip()
    return truth


def _first_declared(constants: str) -> str:
    found = _DECLARED.search(constants)
    return found.group(1) if found else "in"


def _top_level_terms(expr: str) -> list[str]:
    """Split ``(op a b c)`` into ``[op, a, b, c]`` at parenthesis depth one."""
    inner = expr.strip()[1:-1]
    terms: list[str] = []
    depth = 0
    start: int | None = None
    for i, ch in enumerate(inner):
        if ch == "(":
            if depth == 0 and start is None:
                start = i
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0 and start is not None:
                terms.append(inner[start : i + 1])
                start = None
        elif ch.isspace():
            if depth == 0 and start is not None:
                terms.append(inner[start:i])
                start = None
        elif start is None:
            start = i
    if start is not None:
        terms.append(inner[start:])
    return terms


def _drop_last_conjunct(body: str) -> str:
    """A weaker formula: the ``and`` without its last conjunct.

    Not an ``and`` (or a single conjunct): a disjunction with a fresh case,
    which admits more inputs.
    """
    if body.startswith("(and "):
        terms = _top_level_terms(body)
        conjuncts = terms[1:]
        if len(conjuncts) > 2:
            return "(and " + " ".join(conjuncts[:-1]) + ")"
        if len(conjuncts) == 2:
            return conjuncts[0]
    return f"(or {body} (= 0 0))"
