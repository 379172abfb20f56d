"""``python -m aeval report``: tables and charts from one run directory, or the
differences between two.

Works on a finished run, a ``rescore`` output directory (both hold
``verdicts.parquet``) and on a run still going or interrupted (only
``verdicts.jsonl``). The numbers are recomputed from the verdicts with
:func:`aeval.report.summarize`, the same function that wrote ``summary.json``.

Its arguments are in :mod:`aeval.commands.report_args`, which ``--help`` loads
without polars and the report's modules.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from aeval.commands.options import Format
from aeval.commands.report_output import emit, emit_paper, open_output
from aeval.display import PIPED_WIDTH, stdout_console
from aeval.errors import ConfigError
from aeval.report import figures, load_run, load_summary, summarize
from aeval.report.by import by_csv, with_grouping
from aeval.report.comparable import check_same_data
from aeval.report.compare import (
    compare_by,
    compare_grid,
    compare_rounds_grid,
    compare_runs,
    compare_sampling_grid,
    with_sampling_columns,
)
from aeval.report.contents import report_grids
from aeval.report.figures import compare_figures, group_figure, run_figures
from aeval.report.group_tables import BY_LABELS, by_compare_grid, by_grid
from aeval.report.html import figure_html, html_compare, html_report, html_table_page
from aeval.report.latex import paper_grids
from aeval.report.provenance import (
    provenance_grid,
    provenance_html,
    provenance_markdown,
    with_provenance_columns,
)
from aeval.report.samples import load_samples, run_config, run_rounds
from aeval.report.text import grids_csv, markdown_report, summary_csv, to_json
from aeval.report.wrong import with_answers, wrong_answers, wrong_blocks, wrong_grid
from aeval.store.layout import RunLayout
from aeval.store.provenance import load_provenance, synthetic_label
from aeval.summary.aggregate import grouped_by
from aeval.summary.tables import grid_markdown, grid_rich


def main(args: argparse.Namespace) -> int:
    dirs: list[Path] = args.run_dirs
    if len(dirs) > 2:
        raise ConfigError(f"report takes one run directory, or two to compare (got {len(dirs)})")
    fmt: Format = args.format
    provenances = [load_provenance(d) for d in dirs]
    banner = _dataset_banner(dirs, provenances, args.allow_different_datasets)
    frames = [load_run(d) for d in dirs]
    if args.by is not None:
        if args.wrong is not None:
            raise ConfigError("--by and --wrong are two different reports: give one")
        if fmt == "latex":
            raise ConfigError(
                "--format latex writes a run's tables per tier, program and distance and "
                "its figures: give it without --by"
            )
        return _report_by(args, fmt, dirs, frames, provenances, banner)
    if args.dataset is not None:
        raise ConfigError("--dataset is read by --by only: give --by GROUPING with it")
    if fmt == "latex" and args.wrong is not None:
        raise ConfigError(
            "--format latex writes a run's (or a comparison's) tables and figures; "
            "--wrong lists answers: use md, csv, json or html with it"
        )
    if args.wrong is not None:
        if len(dirs) != 1:
            raise ConfigError("--wrong lists one run's answers: give a single run directory")
        prov = provenances[0]
        wrong = wrong_answers(frames[0], args.wrong, include_infra=args.include_infra)
        samples = load_samples(dirs[0], verdicts=frames[0])
        for note in samples.notes:
            print(f"aeval: note: {note}", file=sys.stderr)
        wrong = with_answers(wrong, samples, args.wrong)
        grid = wrong_grid(wrong, args.wrong, width=10_000 if fmt != "table" else 60)
        title = f"{synthetic_label(prov)}aeval: wrong answers of {args.wrong} in {dirs[0].name}"
        text = {
            "md": lambda: f"# {title}\n\n" + provenance_markdown(prov) + grid_markdown(grid),
            "csv": lambda: with_provenance_columns(wrong.write_csv(), prov),
            "json": lambda: to_json(wrong),
            "html": lambda: html_table_page(grid, title=title, header=provenance_html(prov)),
        }
        if fmt == "table":
            return _print_wrong(args, wrong, prov)
        grids = [provenance_grid(prov), grid]
        return emit(args, fmt, text, grids, RunLayout(dirs[0]).wrong_page(_slug(args.wrong)))

    if len(dirs) == 2:
        a, b = (str(d) for d in dirs)
        comparison = compare_runs(frames[0], frames[1], a_label=a, b_label=b)
        comparison["provenance"] = {"a": provenances[0], "b": provenances[1]}
        comparison["banner"] = banner
        grid = compare_grid(comparison)
        # pass@k and maj@n, B − A: a second table (in the csv, columns of the first); and
        # accuracy@K when either run had repair rounds
        named = [
            ("compare-pass-at-k", compare_sampling_grid(comparison)),
            ("compare-rounds", compare_rounds_grid(comparison)),
        ]
        named = [(name, g) for name, g in named if g.rows]
        sampling = [g for _, g in named]
        label = synthetic_label(provenances[0]) or synthetic_label(provenances[1])
        title = f"{label}aeval: {dirs[1].name} against {dirs[0].name}"
        md_head = f"> **{banner}**\n\n" if banner else ""
        keys = ("a", "b", "models", "provenance", "banner")
        text = {
            "md": lambda: (
                f"# {title}\n\n{md_head}" + "\n".join(grid_markdown(g) for g in [grid, *sampling])
            ),
            "csv": lambda: with_sampling_columns(
                with_provenance_columns(
                    with_provenance_columns(grids_csv(grid), provenances[0], prefix="a_"),
                    provenances[1],
                    prefix="b_",
                ),
                comparison,
            ),
            "json": lambda: to_json({k: comparison[k] for k in keys}),
            "html": lambda: html_compare(comparison, grid, title=title),
        }
        if fmt == "latex":
            return emit_paper(
                args.output or RunLayout(dirs[1]).compare_paper_dir,
                [("compare", grid, False)] + [(name, g, False) for name, g in named],
                compare_figures(comparison),
            )
        grids = [provenance_grid(p) for p in provenances] + [grid, *sampling]
        return emit(args, fmt, text, grids, RunLayout(dirs[1]).compare_page)

    # the terminal shows only the study's categories and the separating items' counts
    # of the item levels: computing the rest would only slow it down
    items = ("separating",) if fmt == "table" else True
    summary = summarize(
        frames[0],
        batch_prices=not _direct_run(dirs[0]),
        items=items,
        rounds=run_rounds(dirs[0]),
    )
    prov = provenances[0]
    if prov is not None:
        summary["provenance"] = prov
    partial = not RunLayout(dirs[0]).is_finished()
    _check_against_summary_json(dirs[0], summary)
    title = f"{synthetic_label(prov)}aeval report: {dirs[0].name}" + (
        " (partial: run not finished)" if partial else ""
    )
    text = {
        "md": lambda: markdown_report(summary, title=title),
        "csv": lambda: with_provenance_columns(summary_csv(summary), prov),
        "json": lambda: to_json(summary),
        "html": lambda: html_report(summary, title=title),
    }
    if fmt == "latex":
        return emit_paper(
            args.output or RunLayout(dirs[0]).paper_dir, paper_grids(summary), run_figures(summary)
        )
    if fmt == "html" and not figures.available():
        print(f"aeval: note: {figures.PLOTS_HINT}", file=sys.stderr)
    grids = [provenance_grid(prov), *report_grids(summary, brief=True)]
    return emit(args, fmt, text, grids, RunLayout(dirs[0]).report_page)


def _report_by(
    args: argparse.Namespace,
    fmt: Format,
    dirs: list[Path],
    frames: list[Any],
    provenances: Sequence[Any],
    banner: str | None,
) -> int:
    """``--by``: accuracy per model and group (one run), or B − A per group (two)."""
    by: str = args.by
    frames = [
        with_grouping(f, by, run_dir=d, dataset=args.dataset)
        for f, d in zip(frames, dirs, strict=True)
    ]
    label = synthetic_label(provenances[0]) or (
        synthetic_label(provenances[1]) if len(provenances) > 1 else ""
    )
    if len(dirs) == 2:
        a, b = (str(d) for d in dirs)
        groups = compare_by(frames[0], frames[1], by, a_label=a, b_label=b)
        grid = by_compare_grid(groups, by, a, b)
        title = f"{label}aeval: {dirs[1].name} against {dirs[0].name}, by {by}"
        md_head = f"> **{banner}**\n\n" if banner else ""
        text = {
            "md": lambda: f"# {title}\n\n{md_head}" + grid_markdown(grid),
            "csv": lambda: grids_csv(grid),
            "json": lambda: to_json({"a": a, "b": b, "by": by, "groups": groups, "banner": banner}),
            "html": lambda: html_table_page(grid, title=title),
        }
        grids = [provenance_grid(p) for p in provenances] + [grid]
        return emit(args, fmt, text, grids, RunLayout(dirs[1]).compare_by_page(_slug(by)))
    groups = grouped_by(frames[0], by)
    grid = by_grid(groups, by)
    prov = provenances[0]
    title = f"{label}aeval report: {dirs[0].name}, by {by}"
    chart = [{**g, by: g["group"]} for g in groups]
    text = {
        "md": lambda: f"# {title}\n\n" + provenance_markdown(prov) + grid_markdown(grid),
        "csv": lambda: with_provenance_columns(by_csv(groups, by), prov),
        "json": lambda: to_json({"by": by, "groups": groups, "provenance": prov}),
        "html": lambda: html_table_page(
            grid,
            title=title,
            header=provenance_html(prov)
            + figure_html(
                "chart-by",
                f"Accuracy by {by}",
                lambda: group_figure(chart, by, label=BY_LABELS.get(by, by)),
            ),
        ),
    }
    return emit(
        args, fmt, text, [provenance_grid(prov), grid], RunLayout(dirs[0]).report_by_page(_slug(by))
    )


def _dataset_banner(
    dirs: list[Path], provenances: Sequence[Mapping[str, Any] | None], allow: bool
) -> str | None:
    """Refuse to pair two runs scored on different data (unless allowed: then a banner).

    Runs made before aeval recorded fingerprints cannot be checked: said on stderr.
    """
    if len(dirs) != 2:
        return None
    check = check_same_data([str(d) for d in dirs], provenances, allow=allow)
    if check.unchecked:
        print(
            f"aeval: warning: {', '.join(check.unchecked)} recorded no dataset fingerprint; "
            "cannot check that both runs used the same data",
            file=sys.stderr,
        )
    if check.banner:
        print(f"aeval: {check.banner}", file=sys.stderr)
    return check.banner


def _counts(summary: Mapping[str, Any]) -> dict[str, tuple[int, int, int]]:
    return {m["model"]: (m["n"], m["correct"], m["infra_failures"]) for m in summary["models"]}


def _direct_run(run_dir: Path) -> bool:
    """Whether ``run_dir`` is a direct-mode run (its requests were paid at full price)."""
    # a rescore directory, or no config: Batch API prices, as ever
    return run_config(run_dir).get("api") == "direct"


def _check_against_summary_json(run_dir: Path, summary: Mapping[str, Any]) -> None:
    """Say so when the run's summary.json no longer matches its verdicts (edited,
    or written by another version); the report shows what the verdicts say."""
    on_disk = load_summary(run_dir)
    if on_disk is None or "models" not in on_disk:
        return
    try:
        stale = _counts(on_disk) != _counts(summary)
    except (KeyError, TypeError):
        stale = True
    if stale:
        print(
            f"aeval: warning: {RunLayout(run_dir).summary} does not match the run's verdicts; "
            "this report shows the numbers recomputed from the verdicts",
            file=sys.stderr,
        )


def _print_wrong(args: argparse.Namespace, wrong: Any, prov: Mapping[str, Any] | None) -> int:
    """What the run was made from, then one block per wrong answer: reasons wrapped,
    answer over truth at their difference."""
    if args.output is None:
        console = stdout_console()
        console.print(grid_rich(provenance_grid(prov)))
        console.print(wrong_blocks(wrong, args.wrong, width=console.width))
        return 0
    with open_output(args.output) as f:
        console = Console(file=f, width=PIPED_WIDTH)
        console.print(grid_rich(provenance_grid(prov)))
        console.print(wrong_blocks(wrong, args.wrong, width=PIPED_WIDTH))
    print(f"wrote {args.output}", file=sys.stderr)
    return 0


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
