"""``python -m aeval cancel``'s arguments: light, so ``cancel --help`` builds without
the engine (:mod:`aeval.commands.cancel` cancels)."""

from __future__ import annotations

import argparse
from pathlib import Path

from aeval.commands.drive import add_display_arguments, add_poll_arguments


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the run directory")
    parser.add_argument(
        "--no-collect",
        action="store_true",
        help="only cancel; do not wait for and verify the partial results",
    )
    parser.add_argument(
        "--delete-files",
        action="store_true",
        help="afterwards, delete the run's uploaded and result files from the API",
    )
    add_poll_arguments(parser)
    add_display_arguments(parser)
