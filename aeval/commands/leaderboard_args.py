"""``python -m aeval leaderboard``'s arguments: light, so ``leaderboard --help`` builds
without polars and the report's modules (:mod:`aeval.commands.leaderboard` writes it)."""

from __future__ import annotations

import argparse
from pathlib import Path

from aeval.commands.options import FORMATS, add_output_argument


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="+",
        type=Path,
        metavar="RUN_OR_FOLDER",
        help="a run directory, a rescore output, or a folder searched for them (recursively)",
    )
    parser.add_argument(
        "--format",
        "-f",
        choices=FORMATS,
        default="table",
        help="table (terminal, default), md, csv, json, html (a self-contained page with the "
        "figures), or latex (booktabs tables and PDF/SVG figures, written into --out DIR)",
    )
    add_output_argument(
        parser, "where this command writes: FILE instead of stdout (with --format latex: a DIR)"
    )
    parser.add_argument(
        "--by",
        metavar="GROUPING",
        help="accuracy per model and group instead: program, tier, distance, size, examples, "
        "target_n, trial, or any column of the dataset",
    )
    parser.add_argument(
        "--dataset",
        metavar="REF",
        help="with --by: the benchmark to read a dataset column from (default: the one the "
        "first run records)",
    )
    parser.add_argument(
        "--allow-different-datasets",
        action="store_true",
        help="combine runs scored on different data anyway (under a warning banner; only the "
        "item ids the runs share are read)",
    )
