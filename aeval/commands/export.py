"""``python -m aeval export inspect RUN_DIR --out FILE.eval``: a run as an Inspect AI eval log.

The log is written by :mod:`aeval.interop.inspect_log` with Inspect's own writer
(needs ``pip install 'aeval[inspect]'``); ``inspect view`` shows it and
``inspect_ai.log.read_eval_log`` reads it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from aeval.errors import ConfigError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "format", choices=("inspect",), help="the format to write: inspect (an Inspect eval log)"
    )
    parser.add_argument(
        "run_dir", type=Path, metavar="RUN_DIR", help="a run or rescore output directory"
    )
    parser.add_argument(
        "--out",
        "-o",
        type=Path,
        required=True,
        metavar="FILE.eval",
        help="the log to write; with several models, one FILE-<model>.eval per model",
    )
    parser.add_argument("--model", metavar="NAME", help="export this model's verdicts only")


def main(args: argparse.Namespace) -> int:
    try:
        # inspect-ai is optional (aeval[inspect]): without it, one line saying how to install
        from aeval.interop.inspect_log import export_run
    except ImportError as err:
        raise ConfigError(str(err)) from None
    for model, path in export_run(args.run_dir, args.out, model=args.model):
        print(f"{model}: {path}")
    print(f"view them with: inspect view --log-dir {args.out.parent}")
    return 0
