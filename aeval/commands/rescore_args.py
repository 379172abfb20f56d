"""``python -m aeval rescore``'s arguments: light, so ``rescore --help`` builds without
the verifier and polars (:mod:`aeval.commands.rescore` rescores)."""

from __future__ import annotations

import argparse
from pathlib import Path

from aeval.commands.drive import add_ray_argument
from aeval.commands.options import at_least, positive_float
from aeval.verify.limits import DEFAULT_LIMITS


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "files",
        nargs="+",
        type=Path,
        metavar="FILE",
        help="Batch API output or error files (JSONL), lm-evaluation-harness logged "
        "samples (samples_*.jsonl) or Inspect AI eval logs (.eval), of any models; trials are "
        "numbered "
        "per model in the order given (see --trials)",
    )
    parser.add_argument(
        "--dataset",
        metavar="REF",
        help="the benchmark the requests were made from: a hub id, a .parquet, .jsonl or "
        ".csv file or a saved dataset directory (default: the one the run recorded when "
        "every FILE is in one aeval run's outputs/, at its pinned revision; else the WARP "
        "benchmark from the hub, as run's default)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        metavar="DIR",
        help="where this command writes: verdicts.parquet and summary.json go in DIR "
        "(default: a new directory results/rescore-<id>, named on stderr)",
    )
    parser.add_argument(
        "--trials",
        metavar="N,N,…",
        help="trial of each FILE, comma-separated (e.g. 1,1,2,2); default: from an aeval "
        "run's file names, else 1,2,3,… per model in the order given, an error file "
        "sharing the trial of its paired output file (…error… ↔ …output…)",
    )
    parser.add_argument(
        "--model",
        metavar="NAME[,NAME…]",
        help="the model of every line of the FILEs: one name for all, or one per FILE "
        "(empty: work it out); default: the model each response names, else that of its "
        "request (an aeval run's request file, or the paired output file)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="verifier processes (default: CPU count); with --ray, per node",
    )
    add_ray_argument(parser)
    parser.add_argument(
        "--check-timeout",
        dest="timeout",
        type=positive_float,
        default=DEFAULT_LIMITS.timeout_s,
        metavar="S",
        help="hard wall-clock budget per answer, in seconds",
    )
    parser.add_argument(
        "--memory-mb",
        type=at_least(256),
        default=DEFAULT_LIMITS.memory_mb,
        metavar="MB",
        help="address-space cap per verifier process",
    )
    parser.add_argument(
        "--no-published",
        dest="published",
        action="store_false",
        help="skip the published reading (the study's own evaluator): the "
        "correct_published column stays empty",
    )
    parser.add_argument(
        "--published-binary",
        action="store_true",
        help="give every published reading from the z3 binary, one process per answer, "
        "as the study ran it (an audit; by default answers whose outcome is provably "
        "the binary's are read in the verifier)",
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="check every answer again, neither reading nor writing the verdict cache in "
        "DIR (the verdicts of distinct answers already checked into the same --out)",
    )
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
