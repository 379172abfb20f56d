"""``python -m aeval view``'s arguments: light, so ``view --help`` builds without the
report's polars (:mod:`aeval.commands.view` writes the page)."""

from __future__ import annotations

import argparse
from pathlib import Path

from aeval.commands.options import add_output_argument


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run_dir", type=Path, metavar="RUN_DIR", help="a run or rescore output directory"
    )
    add_output_argument(parser, "where to write the page (default: RUN_DIR/samples.html)")
    parser.add_argument(
        "--open", action="store_true", help="open the page in the default web browser"
    )
    parser.add_argument(
        "--dataset",
        metavar="REF",
        help="take questions and ground truths from this benchmark (default: the one the "
        "run's config.json or the rescore's summary.json names)",
    )
    parser.add_argument(
        "--by",
        metavar="GROUPING",
        help="one more filter: by this grouping (as report --by: program, tier, distance, "
        "size, examples, target_n, or any column of the dataset)",
    )
    parser.add_argument(
        "--responses",
        nargs="+",
        type=Path,
        default=(),
        metavar="FILE",
        help="Batch API output/error files to show the responses of (default: a run's "
        "outputs/, or the files a rescore recorded it scored)",
    )
