"""Which tables a single-run report shows, in reading order.

Composes the per-model tables of :mod:`aeval.summary.tables` with the group
tables of :mod:`aeval.report.group_tables`, so it sits above both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aeval.report.group_tables import brief_grids, category_grids, group_grids, separating_grids
from aeval.summary.round_tables import rounds_grids
from aeval.summary.tables import (
    Grid,
    most_trials,
    sampling_grid,
    sampling_tier_grid,
    status_grid,
    summary_grid,
    tier_grid,
    trial_grid,
)

__all__ = ["report_grids"]


def report_grids(summary: Mapping[str, Any], *, brief: bool = False) -> list[Grid]:
    """Every table of a single-run report, in reading order (pass@k and maj@n only
    when some model answered an item more than once: with one trial they are accuracy;
    accuracy by repair round, the repair rate and cost per solved item when the run
    had rounds;
    the study's categories, accuracy per program, distance and size, and the items
    that separate models when the summary has them).

    ``brief`` (the terminal report): of those, only the study's categories per
    model and how many items separate models, with a pointer to ``--by`` and
    the other formats; a terminal lays tables out cell by cell, and the per-group
    tables would make the report several times slower to print.
    """
    grids = [summary_grid(summary), trial_grid(summary), tier_grid(summary)]
    if most_trials(summary) > 1:
        grids += [sampling_grid(summary), sampling_tier_grid(summary)]
    grids += rounds_grids(summary, brief=brief)  # a run with repair rounds
    if brief:
        return [*grids, status_grid(summary, categories=True), *brief_grids(summary)]
    return [
        *grids,
        status_grid(summary),
        *category_grids(summary),
        *group_grids(summary),
        *separating_grids(summary),
    ]
