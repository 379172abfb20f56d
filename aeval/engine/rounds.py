"""Repair rounds (``--rounds K``): which items a round asks again, and with what.

Round r + 1 of a job (model, trial) asks the items whose round-r verdict is
repairable (:func:`aeval.feedback.is_repairable`), each with the conversation so
far: the original messages, then for every earlier round k its answer as received
(the visible text of the output line, thinking left out) and the feedback rendered
from its verdict. Everything is rebuilt from what the run directory already holds
(the verdicts in ``verdicts.jsonl``, the answers in ``outputs/``), so a round's
requests are a function of the directory alone: a resume killed anywhere between
one round's verdicts and the next round's upload writes the same requests again
and sends nothing twice (the batch lifecycle's intents cover the rest).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from aeval.config import RunConfig
from aeval.errors import InputFileError
from aeval.feedback import (
    DEFAULT_FEEDBACK_TEMPLATE,
    Turn,
    is_repairable,
    render_feedback,
    split_round,
)
from aeval.json_values import JsonObject
from aeval.scoring.responses import parse_batch_line
from aeval.verdicts import Status, Verdict

__all__ = [
    "Conversations",
    "QuestionLookup",
    "add_answers",
    "feedback_of",
    "job_conversations",
    "slim_record",
    "verdict_feedback",
]


class QuestionLookup:
    """The question of a row by id, kept in the frame's own column (no dict of strings)."""

    def __init__(self, questions: pl.DataFrame) -> None:
        ids = questions.get_column("id").cast(pl.String).to_list()
        self._index = {cid: i for i, cid in enumerate(ids)}
        self._order = ids
        self._questions = questions.get_column("question").cast(pl.String)

    def __getitem__(self, cid: str) -> str:
        return str(self._questions[self._index[cid]])

    def ids(self) -> list[str]:
        """Every row id, in the dataset's order (the first round's)."""
        return self._order


def feedback_of(config: RunConfig, record: Mapping[str, Any]) -> str:
    """The feedback message after a verdict record (``verdicts.jsonl``'s shape), at the
    run's level and with its template."""
    counterexample = record.get("counterexample")
    if isinstance(counterexample, str):  # the frame's JSON text of it
        counterexample = json.loads(counterexample)
    direction = record.get("direction")
    return render_feedback(
        config.feedback or "counterexample",
        status=str(record["status"]),
        reason=str(record.get("reason") or ""),
        direction=direction if direction in ("too_strong", "too_weak", "both") else None,
        counterexample=counterexample if isinstance(counterexample, dict) else None,
        template=config.feedback_template or DEFAULT_FEEDBACK_TEMPLATE,
    )


@dataclass(slots=True)
class Conversations:
    """One job's items to ask in round ``round``, each with its earlier turns."""

    round: int
    # item id -> the feedback of rounds 1 .. round-1 (answers are added by add_answer)
    feedback: dict[str, list[str]] = field(default_factory=dict)
    # item id -> the answers of rounds 1 .. round-1, as received
    answers: dict[str, dict[int, str]] = field(default_factory=dict)

    def wants(self, request_id: str) -> bool:
        """Whether the answer under ``request_id`` is one of these conversations' turns."""
        item, rnd = split_round(request_id)
        return item in self.feedback and rnd < self.round

    def add_answer(self, request_id: str, content: str | None) -> None:
        """The answer (first one only) given under ``request_id``."""
        item, rnd = split_round(request_id)
        if item in self.feedback and rnd < self.round:
            self.answers.setdefault(item, {}).setdefault(rnd, content or "")

    def turns(self, item: str) -> list[Turn]:
        """``item``'s earlier turns, in round order.

        :raises KeyError: an earlier round's answer was not found (the run
            directory lost an output file).
        """
        answers = self.answers.get(item, {})
        return [Turn(answers[k], text) for k, text in enumerate(self.feedback[item], start=1)]

    def items(self, order: Iterable[str]) -> Iterator[str]:
        """The items asked, in ``order`` (the dataset's)."""
        return (cid for cid in order if cid in self.feedback)


def job_conversations(
    config: RunConfig, records: Iterable[JsonObject], model: str, trial: int, round: int
) -> Conversations:
    """Which items of (``model``, ``trial``) round ``round`` asks (round ≥ 2), from the
    run's verdict ``records``, with the feedback of each earlier round; the answers
    are added afterwards from the output files (:meth:`Conversations.add_answer`).

    An item is asked when it has a repairable verdict in round ``round - 1`` (a
    verdict of an earlier round was repairable too, or the item would not have got
    that far).
    """
    by_item: dict[str, dict[int, dict[str, Any]]] = {}
    ended: set[str] = set()  # a verdict that is not repairable (equivalent, infra…)
    for rec in records:
        if rec.get("model") != model or rec.get("trial") != trial:
            continue
        rnd = rec.get("round", 1)
        if not isinstance(rnd, int) or rnd >= round:
            continue
        item, _ = split_round(str(rec["custom_id"]))
        if is_repairable(Status(str(rec["status"]))):
            by_item.setdefault(item, {})[rnd] = slim_record(rec)
        else:
            ended.add(item)
    conversations = Conversations(round)
    for item, verdicts in by_item.items():
        if item in ended or any(k not in verdicts for k in range(1, round)):
            continue
        conversations.feedback[item] = [feedback_of(config, verdicts[k]) for k in range(1, round)]
    return conversations


def add_answers(conversations: Conversations, path: Path) -> None:
    """Add the answers of an output file (batch output, or direct mode's answer file) that
    are turns of ``conversations``: the first line per request, as scoring read it; a
    line that is no answer line is passed over, as scoring passed it over."""
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if not raw.endswith(b"\n"):
                break  # torn by a crash: never scored
            try:
                response = parse_batch_line(raw, source=str(path), lineno=lineno)
            except InputFileError:
                continue
            if not response.is_error and conversations.wants(response.custom_id):
                conversations.add_answer(response.custom_id, response.content)


def verdict_feedback(config: RunConfig, verdict: Verdict) -> str:
    """:func:`feedback_of` a verdict object (direct mode has it in hand)."""
    return feedback_of(
        config,
        {
            "status": verdict.status.value,
            "reason": verdict.reason,
            "direction": verdict.direction,
            "counterexample": verdict.counterexample,
        },
    )


def slim_record(rec: JsonObject) -> dict[str, Any]:
    """The fields a feedback message is made of (the record's others are let go)."""
    return {k: rec.get(k) for k in ("status", "reason", "direction", "counterexample")}
