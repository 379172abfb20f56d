"""Check a raw benchmark frame and bring it to the standard shape every source ends in."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import polars as pl

from aeval.dataset.source import row_only
from aeval.errors import DatasetError

__all__ = ["FRAME_COLUMNS", "REQUIRED_COLUMNS", "validate_frame"]

REQUIRED_COLUMNS = ("question", "answer", "constants")
FRAME_COLUMNS = ("id", *REQUIRED_COLUMNS, "tier")
_TEXT_TYPES = (pl.String, pl.Categorical, pl.Enum, pl.Null)
_MAX_LISTED = 5


def _listed(values: list[Any]) -> str:
    shown = ", ".join(str(v) for v in values[:_MAX_LISTED])
    more = len(values) - _MAX_LISTED
    return shown + (f" and {more} more" if more > 0 else "")


def _text_column(frame: pl.DataFrame, name: str, source: str) -> pl.Series:
    column = frame.get_column(name)
    if not isinstance(column.dtype, _TEXT_TYPES):
        raise DatasetError(
            f"dataset {source}: column {name!r} holds {column.dtype}, expected text (strings)"
        )
    return column.cast(pl.String)


def validate_frame(
    frame: pl.DataFrame,
    *,
    source: str = "<frame>",
    locate: Callable[[int], str] = row_only,
) -> pl.DataFrame:
    """Check a raw benchmark frame and bring it to the standard shape (see :func:`load_dataset`).

    :param source: names the dataset in error messages.
    :param locate: turns a 0-based row number into a place (``"row 3 (line 5)"``).
    :raises DatasetError: a required column is missing or not text, a question is
        null or empty, an id is null or duplicated, or there are no rows.
    """
    missing = [c for c in REQUIRED_COLUMNS if c not in frame.columns]
    if missing:
        raise DatasetError(
            f"dataset {source} lacks required column(s) {', '.join(missing)}; it has "
            f"{', '.join(frame.columns) or 'no columns'} (a benchmark needs "
            f"{', '.join(REQUIRED_COLUMNS)}; tier and id are optional)"
        )
    if frame.height == 0:
        raise DatasetError(f"dataset {source} has no rows")

    question = _text_column(frame, "question", source)
    # contains(r"\S") stops at the first visible character; no copy of the text is made.
    empty = (~question.str.contains(r"\S")).fill_null(True).arg_true().to_list()
    if empty:
        raise DatasetError(
            f"dataset {source}: {len(empty)} row(s) have a null or empty question, first at "
            f"{locate(empty[0])}; every row needs a question"
        )
    # A missing ground truth is the verifier's per-row bad_ground_truth, not a load failure.
    answer = _text_column(frame, "answer", source).fill_null("")
    constants = _text_column(frame, "constants", source).fill_null("")
    tier = (
        _text_column(frame, "tier", source)
        if "tier" in frame.columns
        else pl.Series("tier", [None] * frame.height, dtype=pl.String)
    )
    if "id" in frame.columns:
        raw_id = frame.get_column("id")
        if raw_id.dtype.is_nested() or raw_id.dtype == pl.Binary:
            raise DatasetError(
                f"dataset {source}: column 'id' holds {raw_id.dtype}, expected text or integers"
            )
        ids = raw_id.cast(pl.String)
        nulls = ids.is_null().arg_true().to_list()
        if nulls:
            raise DatasetError(
                f"dataset {source}: {len(nulls)} row(s) have a null id, first at "
                f"{locate(nulls[0])}; give every row an id or drop the id column"
            )
        dup_rows = ids.is_duplicated().arg_true().to_list()
        if dup_rows:
            dup_ids = list(dict.fromkeys(ids.gather(dup_rows).to_list()))
            raise DatasetError(
                f"dataset {source}: duplicate id(s) {_listed([repr(i) for i in dup_ids])}, "
                f"first at {locate(dup_rows[0])}; ids must be unique"
            )
    else:
        ids = pl.int_range(frame.height, eager=True).cast(pl.String)

    extras = [c for c in frame.columns if c not in FRAME_COLUMNS]
    return pl.DataFrame(
        [
            ids.alias("id"),
            question.alias("question"),
            answer.alias("answer"),
            constants.alias("constants"),
            tier.alias("tier"),
        ]
    ).hstack(frame.select(extras))
