"""The wrong answers of one model: which items, in which direction, and the
counterexample Z3 confirmed.
"""

from __future__ import annotations

import json

import polars as pl

from aeval.errors import ConfigError
from aeval.report.summary import INFRA_STATUS_VALUES
from aeval.report.tables import Grid
from aeval.verdicts import Status

__all__ = ["WRONG_COLUMNS", "wrong_answers", "wrong_grid"]

WRONG_COLUMNS = (
    "trial",
    "custom_id",
    "tier",
    "status",
    "direction",
    "counterexample",
    "repaired",
    "reason",
)


def wrong_answers(
    verdicts: pl.DataFrame, model: str, *, include_infra: bool = False
) -> pl.DataFrame:
    """Every verdict of ``model`` that is not ``equivalent`` (infrastructure failures
    only with ``include_infra``), ordered by trial and item.

    :raises ConfigError: the model has no verdicts here (the message lists those that do).
    """
    rows = verdicts.filter(pl.col("model") == model)
    if rows.is_empty():
        known = ", ".join(verdicts["model"].unique(maintain_order=True).to_list()) or "none"
        raise ConfigError(f"no verdicts for model {model!r} (models in this run: {known})")
    wrong = pl.col("status") != Status.EQUIVALENT.value
    if not include_infra:
        wrong &= ~pl.col("status").is_in(INFRA_STATUS_VALUES)
    return rows.filter(wrong).sort("trial", "custom_id").select(WRONG_COLUMNS)


def _counterexample(text: str | None, limit: int) -> str:
    if not text:
        return ""
    try:
        values = json.loads(text)
        shown = ", ".join(f"{k}={v}" for k, v in values.items())
    except (ValueError, AttributeError):
        shown = text
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def wrong_grid(wrong: pl.DataFrame, model: str, *, width: int = 60) -> Grid:
    """The listing as a table; long counterexamples and reasons cut to ``width``."""
    rows = tuple(
        (
            str(r["trial"]),
            r["custom_id"],
            r["tier"] or "",
            r["status"] + (f" ({r['repaired']})" if r["repaired"] else ""),
            r["direction"] or "",
            _counterexample(r["counterexample"], width),
            (r["reason"] or "")[:width],
        )
        for r in wrong.iter_rows(named=True)
    )
    return Grid(
        f"Wrong answers of {model} ({len(rows)})",
        ("Trial", "Item", "Tier", "Status", "Direction", "Counterexample", "Reason"),
        rows,
        right=frozenset({0}),
    )
