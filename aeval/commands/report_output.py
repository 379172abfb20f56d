"""Where a report goes: the terminal, a file, or a directory of LaTeX tables and figures.

Shared by ``report`` and ``leaderboard``: each builds its grids and texts, and
hands them here to be printed or written.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from rich.console import Console

from aeval.commands.options import Format
from aeval.display import PIPED_WIDTH, stdout_console
from aeval.errors import InputFileError
from aeval.report import figures
from aeval.report.figures import PaperFigure
from aeval.report.latex import grid_latex
from aeval.summary.tables import Grid, grid_rich

__all__ = ["emit", "emit_paper", "open_output", "print_grids", "write_bytes"]


def emit_paper(
    out_dir: Path, tables: Sequence[tuple[str, Grid, bool]], figs: Sequence[PaperFigure]
) -> int:
    """``--format latex``: each table as ``tab-NAME.tex``, each figure as
    ``fig-NAME.pdf`` and ``fig-NAME.svg``, into ``out_dir``; without matplotlib the
    tables only, and one line saying how to get the figures."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputFileError(f"{out_dir}: cannot write the report ({err.strerror})") from err
    written: list[Path] = []
    for name, grid, rules in tables:
        path = out_dir / f"tab-{name}.tex"
        with open_output(path) as f:
            f.write(grid_latex(grid, name, group_rules=rules))
        written.append(path)
    if figures.available():
        for name, draw in figs:
            fig = draw()
            for ext in ("pdf", "svg"):
                path = out_dir / f"fig-{name}.{ext}"
                write_bytes(path, figures.render(fig, ext))
                written.append(path)
    elif figs:
        print(f"aeval: note: {figures.PLOTS_HINT}", file=sys.stderr)
    print(
        f"wrote {len(written)} files into {out_dir} (LaTeX needs \\usepackage{{booktabs}})",
        file=sys.stderr,
    )
    return 0


def write_bytes(path: Path, data: bytes) -> None:
    try:
        path.write_bytes(data)
    except OSError as err:
        raise InputFileError(f"{path}: cannot write the report ({err.strerror})") from err


def emit(
    args: argparse.Namespace,
    fmt: Format,
    text: dict[str, Callable[[], str]],
    grids: list[Grid],
    default_html: Path | None,
) -> int:
    if fmt == "table":
        if args.output is None:
            print_grids(stdout_console(), grids)
            return 0
        with open_output(args.output) as f:
            print_grids(Console(file=f, width=PIPED_WIDTH), grids)
        print(f"wrote {args.output}", file=sys.stderr)
        return 0
    content = text[fmt]()
    target = args.output or (default_html if fmt == "html" else None)
    if target is None:
        sys.stdout.write(content)
        return 0
    with open_output(target) as f:
        f.write(content)
    print(f"wrote {target}", file=sys.stderr)
    return 0


def print_grids(console: Console, grids: list[Grid]) -> None:
    for grid in grids:
        console.print(grid_rich(grid))


def open_output(path: Path) -> TextIO:
    try:
        return path.open("w", encoding="utf-8")
    except OSError as err:
        raise InputFileError(f"{path}: cannot write the report ({err.strerror})") from err
