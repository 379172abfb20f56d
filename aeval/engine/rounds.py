"""Repair rounds (``--rounds K``): which items a round asks again, and with what.

Round r + 1 of a job (model, trial) asks the items whose round-r verdict is
repairable (:func:`aeval.feedback.is_repairable`), each with the conversation so
far: its round-r request (the original messages and every earlier turn), then its
round-r answer as received (the visible text of the output line, thinking left out)
and the feedback rendered from its round-r verdict, appended in the provider's own
shape (:attr:`aeval.batch.providers.spec.ProviderSpec.continue_body`). Everything is
read from what the run directory already holds (the requests in ``requests/``, the
verdicts in ``verdicts.jsonl``, the answers in ``outputs/``), so a round's requests
are a function of the directory alone: a resume killed anywhere between one round's
verdicts and the next round's upload writes the same requests again and sends
nothing twice (the batch lifecycle's intents cover the rest). The questions
themselves are never held (143 MB for 50,000 synthetic rows): they are in the
requests.
"""

from __future__ import annotations

import json
from collections.abc import Container, Iterable, Mapping
from pathlib import Path
from typing import Any

from aeval.config import RunConfig
from aeval.errors import InputFileError
from aeval.feedback import (
    DEFAULT_FEEDBACK_TEMPLATE,
    is_repairable,
    render_feedback,
    split_round,
)
from aeval.json_values import JsonObject
from aeval.scoring.responses import parse_batch_line
from aeval.verdicts import Status, Verdict

__all__ = [
    "add_answers",
    "feedback_of",
    "round_feedback",
    "slim_record",
    "verdict_feedback",
]


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


def round_feedback(
    config: RunConfig, records: Iterable[JsonObject], model: str, trial: int, round: int
) -> dict[str, str]:
    """The items of (``model``, ``trial``) whose round-``round`` verdict is repairable,
    each with the feedback message after it: whom round ``round + 1`` asks, from the
    run's verdict ``records`` (an item got to round ``round`` only by being wrong in
    every round before)."""
    out: dict[str, str] = {}
    for rec in records:
        if rec.get("model") != model or rec.get("trial") != trial:
            continue
        if rec.get("round", 1) != round or not is_repairable(Status(str(rec["status"]))):
            continue
        out[split_round(str(rec["custom_id"]))[0]] = feedback_of(config, slim_record(rec))
    return out


def add_answers(answers: dict[str, str], wanted: Container[str], path: Path) -> None:
    """Add to ``answers`` the answers in an output file (batch output, or direct mode's
    answer file) under the request ids in ``wanted``: the first line per request, as
    scoring read it; a line that is no answer line is passed over, as scoring passed
    it over."""
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if not raw.endswith(b"\n"):
                break  # torn by a crash: never scored
            try:
                response = parse_batch_line(raw, source=str(path), lineno=lineno)
            except InputFileError:
                continue
            cid = response.custom_id
            if not response.is_error and cid in wanted and cid not in answers:
                answers[cid] = response.content or ""


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
