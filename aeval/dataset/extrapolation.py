"""What each question asks: the sizes of its examples, the size it asks for, how far apart.

A WARP question gives the constraint for a few small input sizes and asks for
a larger one::

    Given the following examples of constraints for increasing input sizes:
    N=1: (assert …)
    N=3: (assert …)
    What is the constraint for N=28?

Each question is parsed once, when the truth table is built: the ``N`` of each
example line, the target ``N``, the *extrapolation distance* (target ``N``
minus the largest example ``N``), the number of examples, and the size of the
answer expected (the ground truth's length in characters). A question that is
not of this shape (another benchmark) has none of these, only the size.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import polars as pl

__all__ = [
    "ITEM_FACT_COLUMNS",
    "QuestionShape",
    "item_facts",
    "parse_question",
]

# An example line starts with "N=<n>:"; the question ends asking for "N=<n>?".
_EXAMPLE = r"(?m)^[ \t]*N[ \t]*=[ \t]*(\d+)[ \t]*:"
_TARGET = r"N[ \t]*=[ \t]*(\d+)[ \t]*\?\s*$"
_EXAMPLE_RE = re.compile(_EXAMPLE)
_TARGET_RE = re.compile(_TARGET)
_MAX_DIGITS = 9  # an N beyond this is not a size: the row is not of this shape

# The facts each verdict carries, in verdict-column order.
ITEM_FACT_COLUMNS = ("examples", "target_n", "distance", "answer_chars")


@dataclass(frozen=True, slots=True)
class QuestionShape:
    """The sizes a question shows and asks for."""

    example_ns: tuple[int, ...]
    target_n: int

    @property
    def distance(self) -> int:
        """Target N minus the largest example N."""
        return self.target_n - max(self.example_ns)


def parse_question(question: str | None) -> QuestionShape | None:
    """The example sizes and the target size of one question; None when it shows no
    ``N=<n>:`` example line or asks for no ``N=<n>?``."""
    if not question:
        return None
    examples = [m for m in _EXAMPLE_RE.findall(question) if len(m) <= _MAX_DIGITS]
    target = _TARGET_RE.search(question)
    if not examples or target is None or len(target[1]) > _MAX_DIGITS:
        return None
    return QuestionShape(tuple(int(n) for n in examples), int(target[1]))


def item_facts(frame: pl.DataFrame) -> pl.DataFrame:
    """One row per row of ``frame``: ``examples``, ``target_n``, ``distance`` (null
    where the question is not of the WARP shape) and ``answer_chars`` (Int64).

    Vectorised (polars' regex engine), so 50,000 synthetic rows parse in a
    fraction of a second; agrees with :func:`parse_question` on every row.
    """
    if "answer" in frame.columns:
        chars = frame.get_column("answer").cast(pl.String).str.len_chars().cast(pl.Int64)
    else:
        chars = pl.Series([None] * frame.height, dtype=pl.Int64)
    if "question" not in frame.columns:
        nulls = pl.Series([None] * frame.height, dtype=pl.Int64)
        return pl.DataFrame(
            {"examples": nulls, "target_n": nulls, "distance": nulls, "answer_chars": chars}
        )
    q = pl.col("question").cast(pl.String)
    ns = (
        q.str.extract_all(_EXAMPLE)
        .list.eval(pl.element().str.extract(r"(\d+)", 1))
        .list.eval(pl.element().filter(pl.element().str.len_chars() <= _MAX_DIGITS))
        .list.eval(pl.element().cast(pl.Int64))
    )
    target_text = q.str.extract(_TARGET, 1)
    target = (
        pl.when(target_text.str.len_chars() <= _MAX_DIGITS)
        .then(target_text.cast(pl.Int64, strict=False))
        .otherwise(None)
    )
    shaped = frame.select(ns.alias("_ns"), target.alias("target_n"))
    count = pl.col("_ns").list.len()
    ok = (count > 0) & pl.col("target_n").is_not_null()
    return shaped.select(
        pl.when(ok).then(count.cast(pl.Int64)).alias("examples"),
        pl.when(ok).then(pl.col("target_n")).alias("target_n"),
        pl.when(ok).then(pl.col("target_n") - pl.col("_ns").list.max()).alias("distance"),
    ).with_columns(chars.alias("answer_chars"))
