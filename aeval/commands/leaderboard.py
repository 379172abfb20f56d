"""``python -m aeval leaderboard``: every run of a study in one table, with paired
comparisons and accuracy against cost.

    python -m aeval leaderboard results/                      # every run found under it
    python -m aeval leaderboard results/a results/b -f latex -o paper/

Each argument is a run directory, a ``rescore`` output, or a folder searched for
them. Only comparable runs are combined (:mod:`aeval.report.comparable`); the
numbers are :mod:`aeval.report.leaderboard`'s.

Its arguments are in :mod:`aeval.commands.leaderboard_args`, which ``--help``
loads without polars and the report's modules.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from aeval.commands.options import Format
from aeval.commands.report_output import emit, emit_paper
from aeval.errors import ConfigError, InputFileError
from aeval.report import figures
from aeval.report.by import by_csv, with_grouping
from aeval.report.comparable import check_same_data, check_same_settings, read_sources
from aeval.report.figures import group_figure
from aeval.report.group_tables import BY_LABELS, by_grid
from aeval.report.html import figure_html, html_leaderboard, html_table_page
from aeval.report.leaderboard import (
    combine_runs,
    leaderboard,
    leaderboard_csv,
    leaderboard_grid,
    paired_grid,
    pairs_grid,
    provenance_grid,
    rounds_grids,
)
from aeval.report.provenance import provenance_markdown
from aeval.report.text import to_json
from aeval.store.layout import find_result_dirs
from aeval.store.provenance import synthetic_label
from aeval.summary.aggregate import grouped_by
from aeval.summary.tables import grid_markdown


def _result_dirs(paths: list[Path]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        if not path.is_dir():
            raise InputFileError(f"{path}: not a directory (a run, a rescore output or a folder)")
        dirs = find_result_dirs(path)
        if not dirs:
            raise InputFileError(
                f"{path}: no run or rescore output under it (none holds verdicts.parquet or "
                "verdicts.jsonl)"
            )
        found += [d for d in dirs if d.resolve() not in {f.resolve() for f in found}]
    return found


def main(args: argparse.Namespace) -> int:
    fmt: Format = args.format
    if fmt == "latex" and args.output is None:
        raise ConfigError("--format latex writes a directory of tables and figures: give --out DIR")
    if args.by is not None and fmt == "latex":
        raise ConfigError(
            "--format latex writes the leaderboard and its figures: give it without --by"
        )
    if args.dataset is not None and args.by is None:
        raise ConfigError("--dataset is read by --by only: give --by GROUPING with it")
    sources = read_sources(_result_dirs(args.paths))
    check = check_same_data(
        [s.label for s in sources],
        [s.provenance for s in sources],
        allow=args.allow_different_datasets,
        verb="combine",
    )
    notes = check_same_settings(sources)
    if check.unchecked:
        notes.append(
            f"{', '.join(check.unchecked)} recorded no dataset fingerprint: cannot check that "
            "it used the same data"
        )
    if check.banner:
        print(f"aeval: {check.banner}", file=sys.stderr)
    combined = combine_runs(sources)
    label = next((synthetic_label(s.provenance) for s in sources if s.provenance), "")
    if args.by is not None:
        return _by(args, fmt, sources, combined.frame, label)
    board = leaderboard(combined)
    board["notes"] = notes + board["notes"]
    board["banner"] = check.banner
    board["runs"] = [{"run": s.label, "path": str(s.path), "api": s.api} for s in sources]
    for note in board["notes"]:
        print(f"aeval: note: {note}", file=sys.stderr)
    title = f"{label}aeval leaderboard: {len(board['rows'])} models from {len(sources)} runs"
    # the repair rounds' tables after the leaderboard, when a row had rounds
    rounds = rounds_grids(board)
    grids = [
        leaderboard_grid(board),
        *rounds,
        paired_grid(board),
        pairs_grid(board),
        provenance_grid(board),
    ]
    first = sources[0].provenance
    head = f"> **{check.banner}**\n\n" if check.banner else ""
    notes_md = "".join(f"- {n}\n" for n in board["notes"]) + ("\n" if board["notes"] else "")
    text = {
        "md": lambda: (
            f"# {title}\n\n{head}"
            + provenance_markdown(first)
            + notes_md
            + "\n".join(grid_markdown(g) for g in grids)
        ),
        "csv": lambda: leaderboard_csv(board),
        "json": lambda: to_json(board),
        "html": lambda: _html(board, grids, title, first),
    }
    if fmt == "latex":
        return emit_paper(
            args.output,
            [
                ("leaderboard", grids[0], False),
                *(
                    (f"leaderboard-rounds{'-vs-trials' * i}", g, i == 1)
                    for i, g in enumerate(rounds)
                ),
                ("leaderboard-paired", paired_grid(board), False),
            ],
            figures.leaderboard_figures(board),
        )
    if fmt == "html" and not figures.available():
        print(f"aeval: note: {figures.PLOTS_HINT}", file=sys.stderr)
    brief = [leaderboard_grid(board, brief=True), *rounds, provenance_grid(board)]
    shown = brief if fmt == "table" else grids
    return emit(args, fmt, text, shown, None)


def _html(board: dict[str, Any], grids: list[Any], title: str, provenance: Any) -> str:

    return html_leaderboard(
        board, grids, title=title, provenance=provenance, banner=board.get("banner")
    )


def _by(args: argparse.Namespace, fmt: Format, sources: Any, frame: Any, label: str) -> int:
    """``--by``: accuracy per row and group, across the runs."""

    by: str = args.by
    frame = with_grouping(frame, by, run_dir=sources[0].path, dataset=args.dataset)
    groups = grouped_by(frame, by, conform=True)
    grid = by_grid(groups, by)
    title = f"{label}aeval leaderboard by {by}: {len(sources)} runs"
    chart = [{**g, by: g["group"]} for g in groups]
    text = {
        "md": lambda: f"# {title}\n\n" + grid_markdown(grid),
        "csv": lambda: by_csv(groups, by),
        "json": lambda: to_json({"by": by, "groups": groups}),
        "html": lambda: html_table_page(
            grid,
            title=title,
            header=figure_html(
                "chart-by",
                f"Accuracy by {by}",
                lambda: group_figure(chart, by, label=BY_LABELS.get(by, by)),
            ),
        ),
    }
    return emit(args, fmt, text, [grid], None)
