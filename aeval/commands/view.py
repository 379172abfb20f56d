"""``python -m aeval view``: every answer of a run in one self-contained HTML page.

Works on a run directory (finished, going or interrupted: the responses are in
its ``outputs/``, the dataset is the one ``config.json`` names) and on a
``rescore`` output directory, which holds only verdicts and the paths of what
it scored: those are read again where they still are; else give the files with
``--responses`` and the benchmark with ``--dataset``.
"""

from __future__ import annotations

import argparse
import sys
import webbrowser
from pathlib import Path

from aeval.commands.options import add_output_argument
from aeval.errors import InputFileError
from aeval.store.layout import RunLayout


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


def main(args: argparse.Namespace) -> int:
    from aeval.report.samples import load_samples
    from aeval.report.viewer import VIEWER_FILTERS, viewer_html

    run_dir: Path = args.run_dir
    samples = load_samples(run_dir, dataset=args.dataset, responses=args.responses)
    for note in samples.notes:
        print(f"aeval: note: {note}", file=sys.stderr)
    partial = not RunLayout(run_dir).is_finished()
    title = (
        ("SYNTHETIC " if samples.synthetic else "")
        + f"aeval samples: {run_dir.resolve().name}"
        + (" (partial)" if partial else "")
    )
    by: str | None = args.by
    if by in VIEWER_FILTERS:
        # a second filter of the same column would only repeat the first one
        print(
            f"aeval: note: the viewer always filters by {by}; --by {by} adds nothing",
            file=sys.stderr,
        )
        by = None
    if by is not None:
        from aeval.report.by import with_grouping

        samples.verdicts = with_grouping(
            samples.verdicts, by, run_dir=run_dir, dataset=args.dataset
        )
    page = viewer_html(samples, title=title, by=by)
    target: Path = args.output or RunLayout(run_dir).samples_page
    try:
        target.write_text(page, encoding="utf-8")
    except OSError as err:
        raise InputFileError(f"{target}: cannot write the page ({err.strerror})") from err
    print(f"wrote {target} ({samples.verdicts.height} verdicts)", file=sys.stderr)
    if args.open:
        webbrowser.open(target.resolve().as_uri())
    return 0
