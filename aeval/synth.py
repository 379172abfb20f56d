"""Synthetic benchmarks: worst-case path constraints from families this project defines.

A *family* is a parametric program path (a sorted array, pairwise-distinct
values, a loop counter…) whose path constraint is written out for each input
size N. A *problem* is one family with fixed parameters. A row shows a few
sizes of one problem as examples and asks for a larger one, in the question
format, nesting style and ``(declare-const x Int)`` declarations of the real
WARP benchmark.

Speed comes from the shape of the data: a benchmark of any size uses at most
(problems × 30) distinct constraints. Each is rendered once, checked with Z3
once (it must be satisfiable), and rows are assembled from them with polars.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import operator
import os
import random
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Literal

import polars as pl

from aeval.errors import ConfigError, InputFileError

__all__ = [
    "DEMO_ROWS",
    "DEMO_SEED",
    "FAMILIES",
    "MAX_N",
    "Constraint",
    "Family",
    "Problem",
    "SynthStats",
    "generate",
    "problems",
    "render_constraint",
    "tier_of",
    "verify_constraints",
    "write_benchmark",
    "write_demo",
    "write_synthetic",
]

MAX_N = 30
MIN_EXAMPLES = 3
MAX_EXAMPLES = 10
# Questions stop growing once their example lines reach this many characters
# (the real benchmark's longest question is about 8,100); at least
# MIN_EXAMPLES lines are always kept.
QUESTION_BUDGET = 8_000
# Tier by the size of the ground truth, in characters.
SMALL_MAX_CHARS = 1_000
MEDIUM_MAX_CHARS = 4_000
# Per-constraint Z3 budget: these are easy linear problems (milliseconds each);
# hitting it means a family is broken, not that the machine is slow.
Z3_TIMEOUT_MS = 60_000

# Rows assembled per polars pass (bounds the memory of intermediate frames).
ASSEMBLY_CHUNK = 16_384
_STRIDE = MAX_N + 1  # dense (problem, n) key: problem * _STRIDE + n

DEMO_ROWS = 120
DEMO_SEED = 2026

QUESTION_HEAD = "Given the following examples of constraints for increasing input sizes:\n"

Tier = Literal["small", "medium", "large"]
OutputFormat = Literal["parquet", "jsonl", "csv"]
_FORMATS: Mapping[str, OutputFormat] = MappingProxyType(
    {".parquet": "parquet", ".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv"}
)


# --------------------------------------------------------------------------- rendering
# The real benchmark was printed by a symbolic executor with its own spacing:
# comparisons carry a leading space and two spaces after the operator, a
# negated equality has none, and conjunctions nest to the left. Copying it
# keeps synthetic questions looking like the real ones.


def _cmp(op: str, a: object, b: object) -> str:
    return f" ( {op}  {a} {b})"


def _ne(a: object, b: object) -> str:
    return f"(not ( = {a} {b}))"


def _arith(op: str, a: object, b: object) -> str:
    return f"( {op}  {a} {b})"


def render_constraint(atoms: Sequence[str]) -> str:
    """``(assert (and (and a b) c))``: the left-nested conjunction of ``atoms``."""
    if not atoms:
        raise ValueError("a constraint needs at least one atom")
    # Linear-time form of acc = f"(and {acc} {atom})" repeated.
    body = "(and " * (len(atoms) - 1) + atoms[0] + "".join(f" {a})" for a in atoms[1:])
    return f"(assert {body})"


# --------------------------------------------------------------------------- families

Params = tuple[tuple[str, int | str], ...]
Build = Callable[[int, dict[str, int | str]], list[str]]
# holds(n, params, values): does this assignment take the family's path? Plain
# Python, written apart from the SMT-LIB rendering so the two can check each other.
Holds = Callable[[int, dict[str, int | str], dict[str, int]], bool]


@dataclass(frozen=True)
class Family:
    """A parametric worst-case path.

    ``build(n, params)`` gives the path's atoms for size n; ``holds(n, params,
    values)`` says, independently, whether an input assignment takes that path.
    """

    name: str
    summary: str
    n_min: int
    variants: tuple[Params, ...]
    build: Build
    holds: Holds


def _sorted(n: int, p: dict[str, int | str]) -> list[str]:
    return [_cmp(p["op"], f"in{i}", f"in{i + 1}") for i in range(n - 1)]


def _distinct(n: int, p: dict[str, int | str]) -> list[str]:
    lo = int(p["lo"])
    hi = lo + n + int(p["slack"])  # values in [lo, hi): room for n distinct ones
    atoms: list[str] = []
    for i in range(n):
        atoms += [_cmp(">=", f"in{i}", lo), _cmp("<", f"in{i}", hi)]
    atoms += [_ne(f"in{j}", f"in{i}") for i in range(n) for j in range(i + 1, n)]
    return atoms


def _bounded(n: int, p: dict[str, int | str]) -> list[str]:
    var = p["var"]
    atoms: list[str] = []
    for i in range(n):
        atoms += [_cmp(">=", f"{var}{i}", p["lo"]), _cmp("<=", f"{var}{i}", p["hi"])]
    return atoms


def _prefix_sum(n: int, p: dict[str, int | str]) -> list[str]:
    atoms: list[str] = []
    for i in range(n):
        atoms += [_cmp(">=", f"in{i}", p["lo"]), _cmp("<=", f"in{i}", p["hi"])]
    atoms += [_cmp(">=", "t", p["tlo"]), _cmp("<=", "t", p["thi"])]
    total = "in0"
    for i in range(n):
        if i:
            total = _arith("+", f"in{i}", total)
        atoms.append(_ne(total, "t"))
    return atoms


def _loop_counter(n: int, p: dict[str, int | str]) -> list[str]:
    # for (c = start; c < b; c += step): exactly n iterations, then the exit.
    atoms = [_cmp("=", "c0", p["start"])]
    for k in range(n):
        atoms += [_cmp("<", f"c{k}", "b"), _cmp("=", f"c{k + 1}", _arith("+", f"c{k}", p["step"]))]
    atoms.append(_cmp(">=", f"c{n}", "b"))
    return atoms


def _mod_filter(n: int, p: dict[str, int | str]) -> list[str]:
    atoms: list[str] = []
    for i in range(n):
        atoms += [_cmp(">", f"in{i}", 0), _ne(_arith("mod", f"in{i}", p["m"]), p["r"])]
    return atoms


def _running_max(n: int, p: dict[str, int | str]) -> list[str]:
    atoms: list[str] = []
    for k in range(1, n):
        for j in range(k):
            if p["both"]:
                atoms.append(_cmp(">=", f"in{k}", f"in{j}"))
            atoms.append(_cmp(">", f"in{k}", f"in{j}"))
    return atoms


def _fixed_guard(n: int, p: dict[str, int | str]) -> list[str]:
    # The path does not depend on N at all: a model must notice that.
    return [_cmp(">=", "n", p["lo"]), _cmp("<=", "n", p["hi"]), _cmp("=", "n", p["v"])]


_COMPARE: Mapping[str, Callable[[int, int], bool]] = MappingProxyType(
    {"<=": operator.le, "<": operator.lt, ">=": operator.ge, ">": operator.gt}
)


def _inputs(values: dict[str, int], n: int, var: object = "in") -> list[int]:
    return [values[f"{var}{i}"] for i in range(n)]


def _sorted_holds(n: int, p: dict[str, int | str], values: dict[str, int]) -> bool:
    xs = _inputs(values, n)
    return all(_COMPARE[str(p["op"])](a, b) for a, b in itertools.pairwise(xs))


def _distinct_holds(n: int, p: dict[str, int | str], values: dict[str, int]) -> bool:
    xs, lo = _inputs(values, n), int(p["lo"])
    return len(set(xs)) == n and all(lo <= x < lo + n + int(p["slack"]) for x in xs)


def _bounded_holds(n: int, p: dict[str, int | str], values: dict[str, int]) -> bool:
    return all(int(p["lo"]) <= x <= int(p["hi"]) for x in _inputs(values, n, p["var"]))


def _prefix_sum_holds(n: int, p: dict[str, int | str], values: dict[str, int]) -> bool:
    xs, t = _inputs(values, n), values["t"]
    if not (int(p["tlo"]) <= t <= int(p["thi"])):
        return False
    if not all(int(p["lo"]) <= x <= int(p["hi"]) for x in xs):
        return False
    total = 0
    for x in xs:
        total += x
        if total == t:
            return False
    return True


def _loop_counter_holds(n: int, p: dict[str, int | str], values: dict[str, int]) -> bool:
    # Run the loop: it must iterate exactly n times, through the recorded counter values.
    c, bound, step, iterations = int(p["start"]), values["b"], int(p["step"]), 0
    while c < bound:
        if iterations > n or values.get(f"c{iterations}") != c:
            return False
        c += step
        iterations += 1
    return iterations == n and values[f"c{n}"] == c


def _mod_filter_holds(n: int, p: dict[str, int | str], values: dict[str, int]) -> bool:
    # Python's % and SMT-LIB's mod agree for a positive divisor (result in [0, m)).
    return all(x > 0 and x % int(p["m"]) != int(p["r"]) for x in _inputs(values, n))


def _running_max_holds(n: int, p: dict[str, int | str], values: dict[str, int]) -> bool:
    xs = _inputs(values, n)
    return all(xs[k] > max(xs[:k]) for k in range(1, n))


def _fixed_guard_holds(n: int, p: dict[str, int | str], values: dict[str, int]) -> bool:
    return int(p["lo"]) <= values["n"] <= int(p["hi"]) and values["n"] == int(p["v"])


def _v(**params: int | str) -> Params:
    return tuple(params.items())


FAMILIES: tuple[Family, ...] = (
    Family(
        "sorted",
        "an array of N integers that passes an is-sorted check (every step takes the in-order "
        "branch)",
        2,
        (_v(op="<="), _v(op="<"), _v(op=">="), _v(op=">")),
        _sorted,
        _sorted_holds,
    ),
    Family(
        "distinct",
        "N pairwise-distinct integers in a window just wide enough for them",
        2,
        (_v(lo=0, slack=0), _v(lo=1, slack=0), _v(lo=0, slack=3), _v(lo=-5, slack=10)),
        _distinct,
        _distinct_holds,
    ),
    Family(
        "bounded",
        "every one of N inputs inside a fixed range (characters, digits, bytes, small ints)",
        1,
        (
            _v(var="ch", lo=65, hi=90),
            _v(var="ch", lo=97, hi=122),
            _v(var="d", lo=48, hi=57),
            _v(var="in", lo=-10, hi=10),
            _v(var="b", lo=0, hi=255),
        ),
        _bounded,
        _bounded_holds,
    ),
    Family(
        "prefix_sum",
        "bounded inputs whose running sum never hits a target t",
        1,
        (
            _v(lo=-10, hi=10, tlo=-100, thi=100),
            _v(lo=0, hi=9, tlo=1, thi=50),
            _v(lo=1, hi=5, tlo=0, thi=20),
        ),
        _prefix_sum,
        _prefix_sum_holds,
    ),
    Family(
        "loop_counter",
        "a counter that stays below a bound b for exactly N iterations, then exits",
        1,
        (_v(start=0, step=1), _v(start=0, step=2), _v(start=1, step=3), _v(start=5, step=4)),
        _loop_counter,
        _loop_counter_holds,
    ),
    Family(
        "mod_filter",
        "N positive inputs that all pass a modulus filter",
        1,
        (_v(m=2, r=0), _v(m=3, r=0), _v(m=5, r=1), _v(m=7, r=3)),
        _mod_filter,
        _mod_filter_holds,
    ),
    Family(
        "running_max",
        "every input is a new maximum (the worst case of a linear max scan)",
        2,
        (_v(both=0), _v(both=1)),
        _running_max,
        _running_max_holds,
    ),
    Family(
        "fixed_guard",
        "a guard on a single variable that does not change with N",
        1,
        (_v(lo=1, hi=5, v=1), _v(lo=0, hi=10, v=3), _v(lo=2, hi=8, v=8)),
        _fixed_guard,
        _fixed_guard_holds,
    ),
)


@dataclass(frozen=True)
class Problem:
    """One family with fixed parameters; ``name`` is ``family:k`` (k-th variant)."""

    family: Family
    variant: int

    @property
    def name(self) -> str:
        return f"{self.family.name}:{self.variant}"

    @property
    def params(self) -> dict[str, int | str]:
        return dict(self.family.variants[self.variant])


def problems(selection: Iterable[str] | None = None) -> tuple[Problem, ...]:
    """The problems named by ``selection`` (family names or ``family:k``); all when ``None``.

    :raises ConfigError: a name matches no family or variant.
    """
    by_name = {f.name: f for f in FAMILIES}
    everything = [Problem(f, k) for f in FAMILIES for k in range(len(f.variants))]
    if selection is None:
        return tuple(everything)
    chosen: dict[str, Problem] = {}
    for raw in selection:
        name = raw.strip()
        if not name:
            continue
        family_name, _, variant = name.partition(":")
        family = by_name.get(family_name)
        if family is None:
            raise ConfigError(
                f"unknown synthetic problem {name!r}; families are {', '.join(by_name)}"
            )
        if not variant:
            for k in range(len(family.variants)):
                chosen.setdefault(f"{family.name}:{k}", Problem(family, k))
            continue
        if not variant.isdigit() or int(variant) >= len(family.variants):
            raise ConfigError(
                f"unknown variant in {name!r}; {family.name} has variants "
                f"0..{len(family.variants) - 1}"
            )
        chosen.setdefault(name, Problem(family, int(variant)))
    if not chosen:
        raise ConfigError("no synthetic problems selected")
    return tuple(chosen.values())


# --------------------------------------------------------------------------- constraints


@dataclass(frozen=True)
class Constraint:
    """One problem at one size: the assertion and the declarations it needs."""

    problem: str
    n: int
    assertion: str
    constants: str


_OPERATORS = frozenset({"and", "not", "mod", "div"})


def _declarations(atoms: Sequence[str]) -> str:
    # Declared in order of first use, one ``(declare-const x Int)`` per line, like the real data.
    names: dict[str, None] = {}
    for atom in atoms:
        for token in atom.replace("(", " ").replace(")", " ").split():
            if token[0].isalpha() and token not in _OPERATORS:
                names.setdefault(token)
    return "\n".join(f"(declare-const {name} Int)" for name in names)


def constraint(problem: Problem, n: int) -> Constraint:
    """Render ``problem`` at size ``n``."""
    atoms = problem.family.build(n, problem.params)
    return Constraint(problem.name, n, render_constraint(atoms), _declarations(atoms))


def verify_constraints(constraints: Sequence[Constraint]) -> None:
    """Check every constraint with Z3 against its declarations and its family's meaning.

    Each must parse, be satisfiable, and Z3's model must take the family's path
    according to the family's plain-Python ``holds`` (so the SMT-LIB says what
    the family says, not merely something satisfiable).

    :raises RuntimeError: one fails (a bug in a family, never the user's input).
    """
    import z3  # deferred: Z3 costs ~0.2 s to import, paid only when synthesising

    by_name = {p.name: p for p in problems()}
    ctx = z3.Context()
    for c in constraints:
        solver = z3.Solver(ctx=ctx)
        solver.set("timeout", Z3_TIMEOUT_MS)
        try:
            solver.from_string(f"{c.constants}\n{c.assertion}")
        except z3.Z3Exception as err:
            raise RuntimeError(f"synthetic {c.problem} N={c.n} does not parse: {err}") from err
        result = solver.check()
        if result != z3.sat:
            raise RuntimeError(f"synthetic {c.problem} N={c.n} is {result}, not satisfiable")
        model = solver.model()
        values = {
            name: model.eval(z3.Int(name, ctx), model_completion=True).as_long()
            for name in _declared_names(c.constants)
        }
        problem = by_name[c.problem]
        if not problem.family.holds(c.n, problem.params, values):
            raise RuntimeError(
                f"synthetic {c.problem} N={c.n}: Z3's model {values} does not take the "
                f"{problem.family.name} path"
            )


def _declared_names(constants: str) -> list[str]:
    return [line.split()[1] for line in constants.splitlines()]


def tier_of(answer_chars: int) -> Tier:
    """The tier of a ground truth by its length in characters."""
    if answer_chars <= SMALL_MAX_CHARS:
        return "small"
    if answer_chars <= MEDIUM_MAX_CHARS:
        return "medium"
    return "large"


# --------------------------------------------------------------------------- rows


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
class _Prepared:
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


def _prepare(rows: int, seed: int, selection: Iterable[str] | None, verify: bool) -> _Prepared:
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
    return _Prepared(
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


def _counted_chunks(prepared: _Prepared, tiers: dict[str, int]) -> Iterator[pl.DataFrame]:
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
    """A synthetic benchmark of ``rows`` rows, in memory (see :func:`write_synthetic` for files).

    Columns: ``question``, ``answer``, ``constants``, ``tier`` (as in the real
    benchmark), then ``family``, ``problem`` and ``n`` (the asked size). The
    same arguments give the same frame.

    :param selection: family names or ``family:k`` problems; all when ``None``.
    :param verify: check every distinct constraint with Z3 (turn off only to
        measure rendering alone).
    :raises ConfigError: ``rows`` is not positive, ``seed`` not an integer, or a
        problem name is unknown.
    """
    prepared = _prepare(rows, seed, selection, verify)
    started = time.perf_counter()
    tiers: dict[str, int] = {}
    frame = pl.concat(list(_counted_chunks(prepared, tiers)), rechunk=False)
    return frame, prepared.stats(time.perf_counter() - started, tiers)


def write_synthetic(
    path: str | os.PathLike[str],
    rows: int,
    *,
    seed: int = 0,
    selection: Iterable[str] | None = None,
) -> SynthStats:
    """Generate a benchmark straight into ``path`` (.parquet, .jsonl or .csv), chunk by chunk.

    Memory stays bounded by one chunk of rows whatever ``rows`` is; the file
    appears atomically when complete. Same content as :func:`generate`.

    :raises ConfigError: a bad file name, ``rows``, ``seed`` or problem name.
    """
    fmt = output_format(path)
    prepared = _prepare(rows, seed, selection, verify=True)
    started = time.perf_counter()
    tiers: dict[str, int] = {}
    _write_chunks(_counted_chunks(prepared, tiers), Path(path), fmt)
    return prepared.stats(time.perf_counter() - started, tiers)


def _chunks(prepared: _Prepared) -> Iterator[pl.DataFrame]:
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


# --------------------------------------------------------------------------- files


def output_format(path: str | os.PathLike[str]) -> OutputFormat:
    """The file format for ``path``, from its extension.

    :raises ConfigError: the extension is not .parquet, .jsonl/.ndjson or .csv.
    """
    suffix = Path(path).suffix.lower()
    if suffix not in _FORMATS:
        raise ConfigError(
            f"cannot write a benchmark to {os.fspath(path)!r}: use a .parquet, .jsonl or .csv name"
        )
    return _FORMATS[suffix]


@contextlib.contextmanager
def _atomic(target: Path) -> Iterator[Path]:
    """A temporary path beside ``target`` that replaces it only if the block succeeds.

    :raises InputFileError: the file or its directory cannot be written.
    """
    # Same directory (so the rename is atomic), ordinary permissions (unlike mkstemp's 0600).
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        yield tmp
        os.replace(tmp, target)
    except OSError as err:
        raise InputFileError(f"cannot write {target}: {err.strerror or err}") from err
    finally:
        with contextlib.suppress(OSError):  # best effort: there may be nothing to remove
            tmp.unlink()


def _write_chunks(chunks: Iterable[pl.DataFrame], target: Path, fmt: OutputFormat) -> None:
    with _atomic(target) as tmp:
        if fmt == "parquet":
            import pyarrow.parquet as pq  # deferred, as polars (only for a parquet target)

            writer: pq.ParquetWriter | None = None
            try:
                for chunk in chunks:
                    table = chunk.to_arrow()
                    if writer is None:
                        writer = pq.ParquetWriter(tmp, table.schema, compression="zstd")
                    writer.write_table(table)
            finally:
                if writer is not None:
                    writer.close()
            return
        with tmp.open("wb") as fh:
            for index, chunk in enumerate(chunks):
                if fmt == "jsonl":
                    chunk.write_ndjson(fh)
                else:
                    chunk.write_csv(fh, include_header=index == 0)


def write_benchmark(frame: pl.DataFrame, path: str | os.PathLike[str]) -> Path:
    """Write ``frame`` to ``path`` atomically (temp file, then rename); format by extension."""
    target = Path(path)
    fmt = output_format(target)
    if fmt != "parquet":
        _write_chunks([frame], target, fmt)
        return target
    with _atomic(target) as tmp:
        frame.write_parquet(tmp)  # polars' own writer: smaller files than one pyarrow row group
    return target


def write_demo(path: str | os.PathLike[str]) -> Path:
    """Regenerate the bundled demo benchmark (``aeval/data/demo-benchmark.jsonl``) at ``path``."""
    frame, _ = generate(DEMO_ROWS, seed=DEMO_SEED)
    return write_benchmark(frame, path)
