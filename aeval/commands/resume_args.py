"""``python -m aeval resume``'s arguments: light, so ``resume --help`` builds without
the engine (:mod:`aeval.commands.resume` resumes the run)."""

from __future__ import annotations

import argparse
from pathlib import Path

from aeval.commands.drive import add_cloud_arguments, add_display_arguments, add_poll_arguments
from aeval.commands.options import positive_float, positive_int


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "run_dir", type=Path, metavar="RUN_DIR", help="the run directory ('run' printed it)"
    )
    parser.add_argument(
        "--submit",
        action="store_true",
        help="create the batches of a --dry-run plan, or of a cancelled run's shards that "
        "never got one (without it, such a directory is only collected)",
    )
    parser.add_argument(
        "--max-connections",
        type=positive_int,
        metavar="N",
        help="direct mode: most requests in flight at once (default: as the run was started)",
    )
    parser.add_argument(
        "--request-timeout",
        type=positive_float,
        metavar="S",
        help="direct mode: seconds one request may take (default: as the run was started)",
    )
    add_poll_arguments(parser)
    add_cloud_arguments(parser)
    add_display_arguments(parser)
