"""Synthetic benchmarks: worst-case path constraints from families this project defines.

A *family* is a parametric program path (a sorted array, pairwise-distinct
values, a loop counter…) whose path constraint is written out for each input
size N. A *problem* is one family with fixed parameters. A row shows a few
sizes of one problem as examples and asks for a larger one, in the question
format, nesting style and ``(declare-const x Int)`` declarations of the real
WARP benchmark.

One module per stage: :mod:`~aeval.synth.families` (the paths, in SMT-LIB and
in plain Python), :mod:`~aeval.synth.constraints` (one problem at one size,
checked by Z3), :mod:`~aeval.synth.rows` (the rows, planned and assembled in
polars) and :mod:`~aeval.synth.benchmark_files` (written atomically, chunk by chunk).
The names the CLI, the tests and the docs use are importable from here; the rest
from the module that defines them.
"""

from __future__ import annotations

from aeval.synth.benchmark_files import (
    DEMO_ROWS,
    output_format,
    write_benchmark,
    write_demo,
    write_synthetic,
)
from aeval.synth.constraints import (
    Constraint,
    constraint,
    render_constraint,
    tier_of,
    verify_constraints,
)
from aeval.synth.families import FAMILIES, Problem, problems
from aeval.synth.rows import (
    MAX_N,
    QUESTION_HEAD,
    generate,
)

__all__ = [
    "DEMO_ROWS",
    "FAMILIES",
    "MAX_N",
    "QUESTION_HEAD",
    "Constraint",
    "Problem",
    "constraint",
    "generate",
    "output_format",
    "problems",
    "render_constraint",
    "tier_of",
    "verify_constraints",
    "write_benchmark",
    "write_demo",
    "write_synthetic",
]
