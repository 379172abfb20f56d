"""Verdicts: the closed set of statuses and the one-row-per-answer record.

This module is the contract between the verifier (which produces
:class:`CheckResult`), the engine and ``rescore`` (which add who/what/when and
produce :class:`Verdict`), the store (which appends them to ``verdicts.jsonl``)
and the reports (which read them back as a polars frame with
:func:`verdict_schema`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal

from aeval.json_values import JsonObject
from aeval.study_reasons import STUDY_CATEGORIES, study_category

if TYPE_CHECKING:
    import polars as pl

__all__ = [
    "INFRA_STATUSES",
    "CheckResult",
    "Direction",
    "Status",
    "Verdict",
    "verdict_schema",
    "verdicts_frame",
]


class Status(StrEnum):
    EQUIVALENT = "equivalent"
    NOT_EQUIVALENT = "not_equivalent"
    UNKNOWN = "unknown"
    TIMEOUT = "timeout"
    NO_ANSWER = "no_answer"
    PARSE_ERROR = "parse_error"
    UNKNOWN_SYMBOL = "unknown_symbol"
    FORBIDDEN_COMMAND = "forbidden_command"
    TOO_LARGE = "too_large"
    RESOURCE_LIMIT = "resource_limit"
    BAD_GROUND_TRUTH = "bad_ground_truth"
    API_ERROR = "api_error"
    MISSING = "missing"


# Failures of the infrastructure or the dataset, never of the model: reported
# apart so that an outage never reads as a weak model.
INFRA_STATUSES: frozenset[Status] = frozenset(
    {Status.API_ERROR, Status.MISSING, Status.BAD_GROUND_TRUTH}
)

# too_strong: truth ∧ ¬answer is sat (the answer rejects worst-case inputs);
# too_weak: answer ∧ ¬truth is sat (the answer admits other inputs).
Direction = Literal["too_strong", "too_weak", "both"]


@dataclass(frozen=True, slots=True)
class CheckResult:
    """What the verifier says about one answer, before anyone knows whose it was."""

    status: Status
    reason: str = ""
    repaired: str | None = None  # name of the lenient repair applied, None if strict
    direction: Direction | None = None
    counterexample: dict[str, str] | None = None
    elapsed_ms: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """One row per (model, trial, item), and with repair rounds one per round asked."""

    model: str
    trial: int
    custom_id: str  # the request's id: the item's id in round 1, ``ID_rR`` after (aeval.feedback)
    # The repair round this answer was given in (1-based; aeval.feedback): a run
    # without repair rounds has only round 1.
    round: int = 1
    status: Status
    reason: str = ""
    repaired: str | None = None
    direction: Direction | None = None
    counterexample: dict[str, str] | None = None
    tier: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None  # reasoning included, as billed
    # Of completion_tokens, the reasoning (thinking) tokens; None where the provider
    # does not say (aeval.scoring.responses reads them).
    reasoning_tokens: int | None = None
    elapsed_ms: float = 0.0
    # The published reading (the study's own evaluator, aeval.verify.published):
    # None when it was not asked for (``--no-published``) or a record lacks it.
    correct_published: bool | None = None
    published_reason: str | None = None
    # What the item is, from the dataset (aeval.dataset.truth.Truth.stamp): the
    # WARP program of its ground truth, and what its question shows and asks.
    program: str | None = None
    examples: int | None = None
    target_n: int | None = None
    distance: int | None = None
    answer_chars: int | None = None

    @property
    def correct(self) -> bool:
        return self.status is Status.EQUIVALENT

    @property
    def published_category(self) -> str | None:
        """The WARP study's category of the published reading (correct,
        error_semantics, error_syntax, error_output_formatting), None without one."""
        reason = self.published_reason
        return None if reason is None else STUDY_CATEGORIES.get(reason)

    @classmethod
    def from_check(
        cls,
        check: CheckResult,
        *,
        model: str,
        trial: int,
        custom_id: str,
        round: int = 1,
        tier: str | None = None,
        finish_reason: str | None = None,
        prompt_tokens: int | None = None,
        completion_tokens: int | None = None,
        reasoning_tokens: int | None = None,
    ) -> Verdict:
        """The verdict of ``check``, for this model, trial and item (and what the answer
        line said of its length and reason to stop)."""
        return cls(
            model=model,
            trial=trial,
            custom_id=custom_id,
            round=round,
            status=check.status,
            reason=check.reason,
            repaired=check.repaired,
            direction=check.direction,
            counterexample=check.counterexample,
            tier=tier,
            finish_reason=finish_reason,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            reasoning_tokens=reasoning_tokens,
            elapsed_ms=check.elapsed_ms,
        )

    def to_record(self) -> JsonObject:
        """A JSON-ready dict (the line format of ``verdicts.jsonl``).

        Built field by field rather than with ``dataclasses.asdict``, whose
        recursive deep copy was a measurable share of the engine's per-verdict
        work; the one mutable field, the counterexample, is copied.
        """
        rec = {name: getattr(self, name) for name in _VERDICT_FIELDS}
        rec["status"] = self.status.value
        if self.counterexample is not None:
            rec["counterexample"] = dict(self.counterexample)
        rec["correct"] = self.correct
        rec["published_category"] = self.published_category
        return rec

    @classmethod
    def from_record(cls, rec: Mapping[str, object]) -> Verdict:
        fields = {f.name for f in dataclasses.fields(cls)}
        kwargs: dict[str, Any] = {k: v for k, v in rec.items() if k in fields}
        kwargs["status"] = Status(kwargs["status"])
        return cls(**kwargs)


_VERDICT_FIELDS = tuple(f.name for f in dataclasses.fields(Verdict))


def verdict_schema() -> dict[str, pl.DataType]:
    """The columns of a verdict frame, a fresh dict each call (callers may edit it)."""
    # polars is imported on first use, not with this module: the verifier's
    # worker processes import this module for CheckResult/Status and would pay
    # ~200 ms of polars import each at start-up.
    import polars as pl

    return {
        "model": pl.String(),
        "trial": pl.Int64(),
        "custom_id": pl.String(),
        "round": pl.Int64(),  # 1-based repair round; 1 for every verdict of a one-round run
        "status": pl.String(),
        "correct": pl.Boolean(),
        "reason": pl.String(),
        "repaired": pl.String(),
        "direction": pl.String(),
        "counterexample": pl.String(),  # JSON object text, variable -> value
        "tier": pl.String(),
        "finish_reason": pl.String(),
        "prompt_tokens": pl.Int64(),
        "completion_tokens": pl.Int64(),
        "reasoning_tokens": pl.Int64(),
        "elapsed_ms": pl.Float64(),
        "correct_published": pl.Boolean(),
        "published_reason": pl.String(),
        "published_category": pl.String(),  # derived from published_reason (the study's)
        "program": pl.String(),
        "examples": pl.Int64(),
        "target_n": pl.Int64(),
        "distance": pl.Int64(),
        "answer_chars": pl.Int64(),
        # Filled after all trials are in, never by the verifier: the answer's
        # equivalence class among its item's answers (aeval.scoring.answer_classes).
        "answer_class": pl.Int64(),
    }


def verdicts_frame(verdicts: list[Verdict] | list[dict[str, Any]]) -> pl.DataFrame:
    """Build the canonical verdict frame from verdicts or their records."""
    import polars as pl  # deferred: verification workers import this module, never polars

    schema = verdict_schema()

    rows = []
    for v in verdicts:
        rec: dict[str, Any] = v.to_record() if isinstance(v, Verdict) else dict(v)
        ce = rec.get("counterexample")
        if ce is not None and not isinstance(ce, str):
            rec["counterexample"] = json.dumps(ce, sort_keys=True)
        if rec.get("round") is None:  # a record written before repair rounds existed
            rec["round"] = 1
        if "published_category" not in rec:  # a record written before the column existed
            rec["published_category"] = study_category(rec.get("published_reason"))
        rows.append({k: rec.get(k) for k in schema})
    return pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)
