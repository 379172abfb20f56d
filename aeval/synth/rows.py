"""Synthetic benchmark rows: which problem, size and examples each row gets, assembled in polars.

Speed comes from the shape of the data: a benchmark of any size uses at most
(problems × 30) distinct constraints. Each is rendered once, checked with Z3
once (it must be satisfiable), and rows are assembled from them with polars.
"""

from __future__ import annotations

import bisect
import random
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import polars as pl

from aeval.errors import ConfigError
from aeval.synth.constraints import (
    MEDIUM_MAX_CHARS,
    SMALL_MAX_CHARS,
    Constraint,
    constraint,
    verify_constraints,
)
from aeval.synth.families import Problem, problems

__all__ = [
    "ASSEMBLY_CHUNK",
    "MAX_N",
    "QUESTION_HEAD",
    "Prepared",
    "SynthStats",
    "counted_chunks",
    "generate",
    "prepare",
]

MAX_N = 30
MIN_EXAMPLES = 3
MAX_EXAMPLES = 10
# Questions stop growing once their example lines reach this many characters
# (the real benchmark's longest question is about 8,100); at least
# MIN_EXAMPLES lines are always kept.
QUESTION_BUDGET = 8_000


# Rows assembled per polars pass (bounds the memory of intermediate frames).
ASSEMBLY_CHUNK = 16_384
_STRIDE = MAX_N + 1  # dense (problem, n) key: problem * _STRIDE + n

QUESTION_HEAD = "Given the following examples of constraints for increasing input sizes:\n"


@dataclass(frozen=True)
class SynthStats:
    """What a generation did, for the CLI and the bench."""

    rows: int
    problems: int
    constraints_verified: int
    seconds_render: float
    seconds_verify: float
    seconds_assemble: float
    tiers: tuple[tuple[str, int], ...] = ()  # (tier, rows), most rows first


def _plan(
    chosen: Sequence[Problem], rows: int, seed: int, lengths: dict[tuple[int, int], int]
) -> tuple[list[int], list[int], list[int], list[int]]:
    """Pick each row's problem, target size and example sizes (plain ``random``: reproducible).

    Returns flat lists: per row (problem index, target n), and per example line
    (row, n), example lines in increasing n within a row.
    """
    rng = random.Random(seed)
    row_problem: list[int] = []
    row_target: list[int] = []
    line_row: list[int] = []
    line_n: list[int] = []
    for row in range(rows):
        p = rng.randrange(len(chosen))
        n_min = chosen[p].family.n_min
        target = rng.randint(n_min + MIN_EXAMPLES, MAX_N)
        below = range(n_min, target)
        k = rng.randint(MIN_EXAMPLES, min(MAX_EXAMPLES, len(below)))
        examples = sorted(rng.sample(below, k))
        # Drop the largest examples while the question is over budget.
        size = sum(lengths[p, n] for n in examples)
        while size > QUESTION_BUDGET and len(examples) > MIN_EXAMPLES:
            size -= lengths[p, examples.pop()]
        if size > QUESTION_BUDGET:
            examples = list(below[:MIN_EXAMPLES])  # still too long: the smallest sizes
        row_problem.append(p)
        row_target.append(target)
        line_row += [row] * len(examples)
        line_n += examples
    return row_problem, row_target, line_row, line_n


@dataclass(frozen=True)
class Prepared:
    """Everything decided before rows are assembled: the plan and the checked constraints."""

    chosen: tuple[Problem, ...]
    table: dict[tuple[int, int], Constraint]
    used: list[tuple[int, int]]
    row_problem: list[int]
    row_target: list[int]
    line_row: list[int]
    line_n: list[int]
    verified: int
    seconds_render: float
    seconds_verify: float

    def stats(self, seconds_assemble: float, tiers: dict[str, int]) -> SynthStats:
        return SynthStats(
            rows=len(self.row_problem),
            problems=len(self.chosen),
            constraints_verified=self.verified,
            seconds_render=self.seconds_render,
            seconds_verify=self.seconds_verify,
            seconds_assemble=seconds_assemble,
            tiers=tuple(sorted(tiers.items(), key=lambda kv: (-kv[1], kv[0]))),
        )


def prepare(rows: int, seed: int, selection: Iterable[str] | None, verify: bool) -> Prepared:
    """Check the arguments, render every constraint a row could use, plan the rows, and
    Z3-check the constraints they use (``verify``)."""
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
        raise ConfigError(f"--rows must be a positive integer, got {rows!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"--seed must be an integer, got {seed!r}")
    chosen = problems(selection)

    t0 = time.perf_counter()
    # Every (problem, n) a row could use.
    table: dict[tuple[int, int], Constraint] = {
        (p, n): constraint(problem, n)
        for p, problem in enumerate(chosen)
        for n in range(problem.family.n_min, MAX_N + 1)
    }
    lengths = {key: len(c.assertion) + 8 for key, c in table.items()}  # + "N=..: " and "\n"
    row_problem, row_target, line_row, line_n = _plan(chosen, rows, seed, lengths)
    t1 = time.perf_counter()

    # Each distinct (problem, n) any row asks for or shows as an example.
    used = sorted(
        {*zip(row_problem, row_target, strict=True)}
        | {(row_problem[r], n) for r, n in zip(line_row, line_n, strict=True)}
    )
    if verify:
        verify_constraints([table[key] for key in used])
    t2 = time.perf_counter()
    return Prepared(
        chosen=chosen,
        table=table,
        used=used,
        row_problem=row_problem,
        row_target=row_target,
        line_row=line_row,
        line_n=line_n,
        verified=len(used) if verify else 0,
        seconds_render=t1 - t0,
        seconds_verify=t2 - t1,
    )


def counted_chunks(prepared: Prepared, tiers: dict[str, int]) -> Iterator[pl.DataFrame]:
    """The chunks of :func:`_chunks`, adding each one's rows per tier to ``tiers``."""
    for chunk in _chunks(prepared):
        for tier, count in chunk.get_column("tier").value_counts().iter_rows():
            tiers[tier] = tiers.get(tier, 0) + count
        yield chunk


def generate(
    rows: int,
    *,
    seed: int = 0,
    selection: Iterable[str] | None = None,
    verify: bool = True,
) -> tuple[pl.DataFrame, SynthStats]:
    """A synthetic benchmark of ``rows`` rows, in memory (to a file:
    :mod:`aeval.synth.benchmark_files`).

    Columns: ``question``, ``answer``, ``constants``, ``tier`` (as in the real
    benchmark), then ``family``, ``problem`` and ``n`` (the asked size). The
    same arguments give the same frame.

    :param selection: family names or ``family:k`` problems; all when ``None``.
    :param verify: check every distinct constraint with Z3 (turn off only to
        measure rendering alone).
    :raises ConfigError: ``rows`` is not positive, ``seed`` not an integer, or a
        problem name is unknown.
    """
    prepared = prepare(rows, seed, selection, verify)
    started = time.perf_counter()
    tiers: dict[str, int] = {}
    frame = pl.concat(list(counted_chunks(prepared, tiers)), rechunk=False)
    return frame, prepared.stats(time.perf_counter() - started, tiers)


def _chunks(prepared: Prepared) -> Iterator[pl.DataFrame]:
    """Build the rows with polars: join distinct constraints onto rows, join example lines.

    Rows come ASSEMBLY_CHUNK at a time so that the intermediate frames (every
    example line, before it is joined into its question) exist for one chunk only.
    """
    chosen, table, used = prepared.chosen, prepared.table, prepared.used
    constraints = pl.DataFrame(
        {
            "key": [p * _STRIDE + n for p, n in used],
            "assertion": [table[k].assertion for k in used],
            "constants": [table[k].constants for k in used],
            "family": [chosen[p].family.name for p, _ in used],
            "problem": [chosen[p].name for p, _ in used],
        },
        schema_overrides={"key": pl.UInt32},
    ).with_columns(
        line=pl.format("N={}: {}", pl.col("key") % _STRIDE, pl.col("assertion")),
    )
    line_row = prepared.line_row
    for first in range(0, len(prepared.row_problem), ASSEMBLY_CHUNK):
        last = min(first + ASSEMBLY_CHUNK, len(prepared.row_problem))
        # Example lines are in row order: the chunk's lines are one slice.
        lo, hi = bisect.bisect_left(line_row, first), bisect.bisect_left(line_row, last)
        yield _assemble_chunk(
            constraints,
            range(first, last),
            prepared.row_problem,
            prepared.row_target[first:last],
            line_row[lo:hi],
            prepared.line_n[lo:hi],
        )


def _assemble_chunk(
    constraints: pl.DataFrame,
    rows_in_chunk: range,
    row_problem: list[int],
    row_target: list[int],
    line_row: list[int],
    line_n: list[int],
) -> pl.DataFrame:
    lines = (
        pl.DataFrame(
            {"row": line_row, "p": [row_problem[r] for r in line_row], "n": line_n},
            schema={"row": pl.UInt32, "p": pl.UInt32, "n": pl.UInt32},
        )
        .with_columns(key=pl.col("p") * _STRIDE + pl.col("n"))
        .join(constraints.select("key", "line"), on="key", how="left", maintain_order="left")
        .group_by("row", maintain_order=True)
        .agg(pl.col("line").str.join("\n").alias("examples"))
    )
    rows = pl.DataFrame(
        {
            "row": rows_in_chunk,
            "p": [row_problem[r] for r in rows_in_chunk],
            "n": row_target,
        },
        schema={"row": pl.UInt32, "p": pl.UInt32, "n": pl.UInt32},
    ).with_columns(key=pl.col("p") * _STRIDE + pl.col("n"))
    return (
        rows.join(lines, on="row", how="left", maintain_order="left")
        .join(
            constraints.select("key", "assertion", "constants", "family", "problem"),
            on="key",
            how="left",
            maintain_order="left",
        )
        .select(
            question=pl.concat_str(
                pl.lit(QUESTION_HEAD),
                pl.col("examples"),
                pl.lit("\nWhat is the constraint for N="),
                pl.col("n").cast(pl.String),
                pl.lit("?"),
            ),
            answer=pl.col("assertion"),
            constants=pl.col("constants"),
            tier=pl.when(pl.col("assertion").str.len_chars() <= SMALL_MAX_CHARS)
            .then(pl.lit("small"))
            .when(pl.col("assertion").str.len_chars() <= MEDIUM_MAX_CHARS)
            .then(pl.lit("medium"))
            .otherwise(pl.lit("large")),
            family=pl.col("family"),
            problem=pl.col("problem"),
            n=pl.col("n").cast(pl.Int32),
        )
    )
