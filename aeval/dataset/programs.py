"""The WARP program each ground truth comes from: row metadata that ships with aeval.

The WARP benchmark's constraints come from symbolic execution of 20 Java
programs (MazeSolver, BinarySearch, TowerOfHanoi, …). The benchmark does not
say which; the study's own aggregation finds it by looking each ground truth
up, verbatim, in the programs' symbolic-execution output. ``data/warp-programs.csv``
holds the result of that lookup as a table of facts: the sha256 of a ground
truth (the ``answer`` column's UTF-8 text) and its program, one line per
distinct ground truth.

Rows are matched by their ground truth, never by position, so the mapping holds
for the hub dataset, a local copy, a sample, or rows in another order. A
benchmark whose ground truths are not all known simply gets no program.
"""

from __future__ import annotations

import hashlib
from functools import cache
from importlib import resources

import polars as pl

__all__ = ["PROGRAM_COLUMN", "known_programs", "program_series", "with_programs"]

PROGRAM_COLUMN = "program"


@cache
def known_programs() -> dict[str, str]:
    """sha256 of a ground truth (hex) → its WARP program."""
    text = resources.files("aeval").joinpath("data", "warp-programs.csv").read_text("utf-8")
    out: dict[str, str] = {}
    for line in text.splitlines():
        if not line or line.startswith("#") or line.startswith("answer_sha256,"):
            continue
        digest, _, program = line.partition(",")
        out[digest] = program
    return out


def program_series(answers: pl.Series) -> pl.Series | None:
    """The program of each ground truth in ``answers``, or None unless every one is
    known (not the WARP benchmark, or not only: a synthetic benchmark may repeat a
    few WARP constraints by construction, and that makes none of its rows WARP's).

    Each distinct ground truth is hashed once: a benchmark repeats its constraints
    (671 WARP rows hold 246; a synthetic one, at most a few hundred).
    """
    table = known_programs()
    distinct = answers.cast(pl.String).unique().drop_nulls().to_list()
    found = {
        text: program
        for text in distinct
        if (program := table.get(hashlib.sha256(text.encode("utf-8")).hexdigest())) is not None
    }
    if not found or len(found) < len(distinct) or answers.null_count():
        return None
    return (
        answers.cast(pl.String)
        .replace_strict(found, default=None, return_dtype=pl.String)
        .alias(PROGRAM_COLUMN)
    )


def with_programs(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with a ``program`` column when every ground truth in it is a known
    WARP one; unchanged when it has one already or some is not known."""
    if PROGRAM_COLUMN in frame.columns or "answer" not in frame.columns:
        return frame
    programs = program_series(frame.get_column("answer"))
    return frame if programs is None else frame.with_columns(programs)
