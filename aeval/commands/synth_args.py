"""``python -m aeval synth``'s arguments: light, so ``synth --help`` builds without
polars and Z3 (:mod:`aeval.commands.synth` writes the benchmark)."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        metavar="FILE",
        help="where to write the benchmark: a .parquet, .jsonl or .csv file (replaced atomically)",
    )
    parser.add_argument(
        "--problems",
        action="append",
        metavar="NAMES",
        help="comma-separated families (e.g. sorted,distinct) or single problems "
        "(family:k); repeatable; default: all (see --list)",
    )
    parser.add_argument("--rows", type=int, default=1000, help="number of rows (default 1000)")
    parser.add_argument(
        "--seed", type=int, default=0, help="seed: the same seed writes the same file (default 0)"
    )
    parser.add_argument(
        "--list",
        action="store_true",
        help="list the problem families and their variants, then exit",
    )
