"""``python -m aeval report``'s arguments: light, so ``report --help`` builds without
polars and the report's modules (:mod:`aeval.commands.report` writes the report)."""

from __future__ import annotations

import argparse
from pathlib import Path

from aeval.commands.options import FORMATS, add_output_argument


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run_dirs",
        nargs="+",
        type=Path,
        metavar="RUN_DIR",
        help="a run or rescore output directory; give two to compare them (B against A)",
    )
    parser.add_argument(
        "--format",
        "-f",
        choices=FORMATS,
        default="table",
        help="table (terminal, default), md, csv, json, html (self-contained page with "
        "figures; written to RUN_DIR/report.html unless --out is given), or latex (booktabs "
        "tables and PDF/SVG figures for a paper, written into the directory RUN_DIR/paper, "
        "or --out DIR)",
    )
    parser.add_argument(
        "--wrong",
        metavar="MODEL",
        help="list MODEL's wrong answers (status, direction, counterexample) instead",
    )
    parser.add_argument(
        "--include-infra",
        action="store_true",
        help="with --wrong: also list infrastructure failures (api_error, missing, …)",
    )
    add_output_argument(
        parser,
        "where this command writes: FILE instead of stdout (with --format latex: a directory)",
    )
    parser.add_argument(
        "--by",
        metavar="GROUPING",
        help="accuracy per model and group instead: program, tier, distance (target N − "
        "largest example N), size (of the ground truth), examples, target_n, trial, or any "
        "column of the dataset; with two runs, B − A per group",
    )
    parser.add_argument(
        "--dataset",
        metavar="REF",
        help="with --by: the benchmark to read a dataset column from (default: the one the "
        "run records)",
    )
    parser.add_argument(
        "--allow-different-datasets",
        action="store_true",
        help="compare two runs even though they were scored on different data "
        "(the report then carries a warning banner)",
    )
