"""``python -m aeval view``: every answer of a run in one self-contained HTML page.

Works on a run directory (finished, going or interrupted: the responses are in
its ``outputs/``, the dataset is the one ``config.json`` names) and on a
``rescore`` output directory, which holds only verdicts and the paths of what
it scored: those are read again where they still are; else give the files with
``--responses`` and the benchmark with ``--dataset``.

Its arguments are in :mod:`aeval.commands.view_args`, which ``--help`` loads
without the report's polars.
"""

from __future__ import annotations

import argparse
import sys
import webbrowser
from pathlib import Path

from aeval.errors import InputFileError
from aeval.report.by import with_grouping
from aeval.report.samples import load_samples
from aeval.report.viewer import VIEWER_FILTERS, viewer_html
from aeval.store.atomic_files import atomic_write_text
from aeval.store.layout import RunLayout


def main(args: argparse.Namespace) -> int:
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
        samples.verdicts = with_grouping(
            samples.verdicts, by, run_dir=run_dir, dataset=args.dataset
        )
    page = viewer_html(samples, title=title, by=by)
    target: Path = args.output or RunLayout(run_dir).samples_page
    try:
        atomic_write_text(target, page)  # never through a link already there
    except OSError as err:
        raise InputFileError(f"{target}: cannot write the page ({err.strerror})") from err
    print(f"wrote {target} ({samples.verdicts.height} verdicts)", file=sys.stderr)
    if args.open:
        webbrowser.open(target.resolve().as_uri())
    return 0
