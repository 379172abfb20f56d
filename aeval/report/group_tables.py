"""The report's tables of the study's categories, of accuracy per group of items
(program, extrapolation distance, answer size, any ``--by``), and of the items
that separate models. Like every table, built from the summary dict only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from aeval.summary.groups import CATEGORY_KEYS
from aeval.summary.tables import Grid, group_cells, group_heads, signed_interval

__all__ = [
    "BY_LABELS",
    "brief_grids",
    "by_compare_grid",
    "by_grid",
    "category_grids",
    "fmt_compact",
    "group_grids",
    "pivot_grid",
    "separating_grids",
]

# How a grouping reads in a title or a column head.
BY_LABELS = {
    "program": "Program",
    "distance": "Distance",
    "size": "Answer size",
    "tier": "Tier",
    "examples": "Examples",
    "target_n": "Target N",
    "trial": "Trial",
}
_CATEGORY_HEADS = ("Correct", "Syntax", "Semantics", "Output format")
_UNSOLVED_SHOWN = 12  # ids in the table; summary.json lists more


def fmt_compact(rate: dict[str, Any]) -> str:
    """``62.3 [58.5, 66.0]``: a rate and its interval in percent, for cells of a pivot."""
    if rate["value"] is None:
        return "—"
    return f"{100 * rate['value']:.1f} [{100 * rate['low']:.1f}, {100 * rate['high']:.1f}]"


def _value(group: dict[str, Any], key: str) -> str:
    value = group.get(key)
    return "(none)" if value is None else str(value)


def _category_cells(group: dict[str, Any]) -> tuple[str, ...]:
    cats = group.get("published_categories") or {}
    return (
        *(str(cats.get(k, 0)) for k in CATEGORY_KEYS),
        str(cats.get("uncategorised", 0)),
    )


def category_grids(summary: Mapping[str, Any]) -> list[Grid]:
    """The study's categories of the published reading: per model, per model × tier,
    per model × program (the rows of the study's three tables); none when the
    published reading was off."""
    if not summary.get("study"):
        return []
    heads = (*_CATEGORY_HEADS, "Other")
    out = [
        Grid(
            "Published reading by the study's categories, per model (Other: a reason "
            "the study never gave, e.g. aeval refused the answer)",
            ("Model", *heads),
            tuple((m["model"], *_category_cells(m)) for m in summary["models"]),
            right=frozenset(range(1, 6)),
        ),
        Grid(
            "Published reading by the study's categories, per tier",
            ("Model", "Tier", *heads),
            tuple((t["model"], _value(t, "tier"), *_category_cells(t)) for t in summary["tiers"]),
            right=frozenset(range(2, 7)),
        ),
    ]
    if summary.get("programs"):
        out.append(
            Grid(
                "Published reading by the study's categories, per program",
                ("Model", "Program", *heads),
                tuple(
                    (p["model"], _value(p, "program"), *_category_cells(p))
                    for p in summary["programs"]
                ),
                right=frozenset(range(2, 7)),
            )
        )
    return out


def pivot_grid(groups: list[dict[str, Any]], key: str, title: str) -> Grid:
    """Accuracy [95% CI] with one row per value of ``key`` and one column per model
    (compact: 20 programs × 7 models fit a screen, where a long table would not)."""
    models = list(dict.fromkeys(g["model"] for g in groups))
    values = list(dict.fromkeys(g[key] for g in groups))
    cell = {(g["model"], g[key]): g for g in groups}
    rows = []
    for value in values:
        items = max((cell[(m, value)]["n"] for m in models if (m, value) in cell), default=0)
        rows.append(
            (
                "(none)" if value is None else str(value),
                *(
                    fmt_compact(cell[(m, value)]["accuracy"]) if (m, value) in cell else "—"
                    for m in models
                ),
                str(items),
            )
        )
    return Grid(
        title,
        (BY_LABELS.get(key, key), *models, "Answers"),
        tuple(rows),
        right=frozenset(range(1, len(models) + 2)),
    )


def group_grids(summary: Mapping[str, Any]) -> list[Grid]:
    """Accuracy per program, per extrapolation distance and per answer size (the
    ones the verdicts know), each a pivot of model columns."""
    out = []
    why = "% of scored answers [95% interval, clustered by item over trials], per model"
    levels = (
        ("programs", "program", "program"),
        ("distances", "distance", "extrapolation distance (target N − largest example N)"),
        ("sizes", "size", "answer size (characters of the ground truth)"),
    )
    for level, key, label in levels:
        groups = summary.get(level) or []
        if groups:
            out.append(pivot_grid(groups, key, f"Accuracy by {label}: {why}"))
    return out


def separating_grids(summary: Mapping[str, Any]) -> list[Grid]:
    """The items no model solves and the items where models disagree most (only
    worth a table with two models or more)."""
    sep = summary.get("separating") or {}
    if sep.get("models", 0) < 2 or not sep.get("items"):
        return []
    models = [m["model"] for m in summary["models"]]
    unsolved = sep["unsolved"]
    listed = unsolved["ids"][:_UNSOLVED_SHOWN]
    shown = ", ".join(listed)
    if unsolved["count"] > len(listed):
        shown += f", … ({unsolved['count'] - len(listed)} more)"
    counts = Grid(
        "Items that separate models",
        ("Items", "Solved by no model", "Solved by every model, every trial", "Split", "Unsolved"),
        (
            (
                str(sep["items"]),
                str(unsolved["count"]),
                str(sep["solved_by_all"]),
                str(sep["split"]),
                shown or "—",
            ),
        ),
        right=frozenset(range(0, 4)),
    )
    rows = []
    for item in sep["most_disagreed"]:
        per = item["per_model"]
        rows.append(
            (
                item["custom_id"],
                _value(item, "tier"),
                _value(item, "program") if "program" in item else "",
                _value(item, "distance") if "distance" in item else "",
                f"{item['models_solving']}/{item['models']}",
                f"{item['trials_solved']}/{item['trials']}",
                *(f"{per[m]['solved']}/{per[m]['trials']}" if m in per else "—" for m in models),
            )
        )
    disagree = Grid(
        "Items where models disagree most (spread of the models' solve rates; "
        "cells: trials solved / answered)",
        ("Item", "Tier", "Program", "Distance", "Models solving", "Trials solved", *models),
        tuple(rows),
        right=frozenset(range(3, 6 + len(models))),
    )
    return [counts, disagree]


def by_grid(groups: list[dict[str, Any]], by: str) -> Grid:
    """``report --by``: one row per model and group, as the tier table."""
    label = BY_LABELS.get(by, by)
    rows = tuple(
        (
            *group_cells(g, _value(g, "group"), fmt_compact(g["accuracy"])),
            *_category_cells(g)[:4],
        )
        for g in groups
    )
    return Grid(
        f"Accuracy by {label.lower()} (% [95% interval, clustered by item "
        "over trials]); the study's categories of the published reading",
        (*group_heads(label), *_CATEGORY_HEADS),
        rows,
        right=frozenset(range(2, 11)),
        alert=frozenset({6}),
    )


def by_compare_grid(groups: list[dict[str, Any]], by: str, a: str, b: str) -> Grid:
    """``report A B --by``: B − A per group and model, paired over the group's items."""
    label = BY_LABELS.get(by, by)
    rows = []
    for g in groups:
        for e in g["models"]:
            ra, rb, paired = e["a"], e["b"], e["paired"]
            rows.append(
                (
                    _value(g, "group"),
                    e["model"],
                    fmt_compact(ra["accuracy"]) if ra else "(absent)",
                    fmt_compact(rb["accuracy"]) if rb else "(absent)",
                    signed_interval(e["diff"]),
                    str(paired["gained"]) if paired else "—",
                    str(paired["lost"]) if paired else "—",
                    str(paired["items"]) if paired else "—",
                )
            )
    return Grid(
        f"B − A by {label.lower()} (A = {a}, B = {b}; points, 95% interval "
        "paired over the group's items)",
        (label, "Model", "A accuracy", "B accuracy", "Δ pts [95% CI]", "Gained", "Lost", "Paired"),
        tuple(rows),
        right=frozenset(range(2, 8)),
    )


def brief_grids(summary: Mapping[str, Any]) -> list[Grid]:
    """The terminal report's share (besides the study's categories, rows of the
    status table): the counts of the items that separate models, and where to see
    the rest."""
    out = []
    sep = summary.get("separating") or {}
    if sep.get("models", 0) >= 2 and sep.get("items"):
        more = (
            "per tier and program: report --by tier|program; accuracy by program, "
            "distance and answer size, and the items models disagree on most: "
            "--by or --format md|html"
        )
        out.append(
            Grid(
                f"Items that separate models ({more})",
                ("Items", "Solved by no model", "Solved by every model, every trial", "Split"),
                (
                    (
                        str(sep["items"]),
                        str(sep["unsolved"]["count"]),
                        str(sep["solved_by_all"]),
                        str(sep["split"]),
                    ),
                ),
                right=frozenset(range(0, 4)),
            )
        )
    return out
