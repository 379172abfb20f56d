"""The study's lens and beyond: the study's error categories, groupings of the
verdicts by what their items are, and the items that separate models.

- **The study's categories** (``published_category``): the WARP study sorted
  its evaluator's reasons into ``correct``, ``error_syntax``,
  ``error_semantics`` and ``error_output_formatting``
  (:data:`aeval.study_reasons.STUDY_CATEGORIES`). :func:`study_tables`
  gives the counts in the shape of the study's own released tables
  (``openai_model_summary.json``, ``openai_model_tier_summary.json``,
  ``openai_model_problem_stats.json`` in dannkoh/WARP-evaluation), so they
  compare cell for cell.
- **Groupings**: what each item is travels on its verdicts (``tier``,
  ``program``, ``distance``, ``examples``, ``target_n``, ``answer_chars``, see
  :mod:`aeval.dataset.extrapolation`); :data:`GROUPINGS` names the ones a
  report can group by, and the answer size is shown in doubling bins.
- **Separating items** (:func:`separating_items`): per item, how many models
  and trials solve it; the items no model solves; the items where the models
  disagree most.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import polars as pl

from aeval.summary.order import item_sort_key, tier_key
from aeval.verdicts import INFRA_STATUSES, Status

__all__ = [
    "CATEGORY_KEYS",
    "GROUPINGS",
    "category_record",
    "group_column",
    "group_sort_key",
    "item_classes",
    "separating_items",
    "size_bin",
    "size_bin_expr",
    "size_bin_order",
    "study_tables",
]

# In the order of the study's tables.
CATEGORY_KEYS = ("correct", "error_syntax", "error_semantics", "error_output_formatting")
_INFRA = sorted(s.value for s in INFRA_STATUSES)
_MOST_DISAGREED = 20
_UNSOLVED_LISTED = 50

# --by NAME: the verdict column each grouping reads, and how its values read.
GROUPINGS: dict[str, str] = {
    "tier": "tier",
    "program": "program",
    "distance": "distance",
    "examples": "examples",
    "target_n": "target_n",
    "size": "size",  # answer_chars in doubling bins
    "trial": "trial",
}


def category_record(row: dict[str, Any]) -> dict[str, int]:
    """The ``published_categories`` of a group record from its row of ``category:*``
    counts (:mod:`aeval.summary.aggregate`)."""
    return {k: int(row[f"category:{k}"] or 0) for k in (*CATEGORY_KEYS, "uncategorised")}


def group_column(frame: pl.DataFrame, by: str) -> pl.DataFrame:
    """``frame`` with a ``group`` column holding each verdict's value of ``by`` (a
    name of :data:`GROUPINGS`, or a column of ``frame``) as text; ``size`` bins
    ``answer_chars``."""
    if by == "size":
        return frame.with_columns(size_bin_expr().alias("group"))
    column = GROUPINGS.get(by, by)
    return frame.with_columns(pl.col(column).cast(pl.String).alias("group"))


def group_sort_key(by: str) -> Callable[[str | None], tuple[Any, ...]]:
    """How the values of grouping ``by`` sort: numbers as numbers, sizes small to large,
    tiers by size, everything else by name; none last."""

    def key(value: str | None) -> tuple[Any, ...]:
        if value is None:
            return (2, 0, "")
        if by == "size":
            return (0, size_bin_order(value), value)
        if by == "tier":
            return (0, *tier_key(value)[1:])
        try:
            return (0, float(value), value)
        except ValueError:
            return (1, 0, value)

    return key


def study_tables(
    models: list[dict[str, Any]], tiers: list[dict[str, Any]], programs: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """The study's three tables, from the summary's group records (their
    ``published_categories``); None when no verdict has the published reading.

    - ``model_summary``: ``{model: {category: count}}`` (all four categories);
    - ``model_tier_summary``: ``{model: {tier: {...}, "overall": {...}}}``;
    - ``model_problem_stats``: ``{model: {program: {category: count, ...,
      "total_attempts": n}}}``, only the categories that occur, as the study
      writes it (an uncategorised reason counts as ``unknown`` there, as the
      study's ``categorize_result`` would). Empty without programs.

    Verdicts without a category are left out of the first two, as the study's
    aggregation leaves out a reason it does not know.
    """
    rated = [m for m in models if m["published_accuracy"]["n"]]
    if not rated:
        return None

    def four(group: dict[str, Any]) -> dict[str, int]:
        return {k: group["published_categories"][k] for k in CATEGORY_KEYS}

    tier_summary: dict[str, Any] = {}
    for m in rated:
        mine = {
            t["tier"] if t["tier"] is not None else "unknown_tier": four(t)
            for t in tiers
            if t["model"] == m["model"] and sum(four(t).values())
        }
        tier_summary[m["model"]] = {**mine, "overall": four(m)}
    problem_stats: dict[str, Any] = {}
    for g in programs:
        cats = g["published_categories"]
        cell = {k: cats[k] for k in CATEGORY_KEYS if cats[k]}
        if cats["uncategorised"]:
            cell["unknown"] = cats["uncategorised"]
        if cell:
            name = g["program"] if g["program"] is not None else "unknown"
            problem_stats.setdefault(g["model"], {})[name] = {
                **cell,
                "total_attempts": sum(cell.values()),
            }
    return {
        "model_summary": {m["model"]: four(m) for m in rated},
        "model_tier_summary": tier_summary,
        "model_problem_stats": problem_stats,
    }


def _item_counts(frame: pl.DataFrame) -> dict[str, dict[str, tuple[int, int]]]:
    """Per item, per model: (answers correct, answers scored) over the trials."""
    # Counted as a column first, then summed per group, by the streaming engine: the
    # comparison inside the aggregation, in memory, held ~2.5 times the peak memory
    # for 200,000 (item, model) groups.
    per = (
        frame.lazy()
        .filter(~pl.col("status").is_in(_INFRA))
        .select("custom_id", "model", (pl.col("status") == Status.EQUIVALENT.value).alias("c"))
        .group_by(["custom_id", "model"])
        .agg(pl.col("c").sum(), pl.len().alias("n"))
        .collect(engine="streaming")
    )
    out: dict[str, dict[str, tuple[int, int]]] = {}
    for cid, model, c, n in per.iter_rows():
        out.setdefault(cid, {})[model] = (int(c), int(n))
    return out


def _standing(per_model: dict[str, tuple[int, int]]) -> str:
    solving = sum(1 for c, _ in per_model.values() if c)
    if solving == 0:
        return "unsolved"
    if all(c == n for c, n in per_model.values()):
        return "solved"
    return "split" if solving < len(per_model) else "mixed"


def _disagreement(per_model: dict[str, tuple[int, int]]) -> float:
    """The population standard deviation of the models' solve rates: 0 when all
    agree, 0.5 at an even split of always-right and always-wrong models."""
    # fsum is correctly rounded, so the value does not depend on the order the models
    # come in (a group-by's order varies run to run): ties in the ranking stay ties
    # and the same verdicts always list the same items.
    rates = [c / n for c, n in per_model.values()]
    mean = math.fsum(rates) / len(rates)
    return math.sqrt(math.fsum((r - mean) ** 2 for r in rates) / len(rates))


def item_classes(frame: pl.DataFrame) -> dict[str, str]:
    """Each item's standing among the models, for the viewer's filter:
    ``unsolved`` (no model solves it), ``solved`` (every model solves it in every
    trial), ``split`` (some solve it, others never: the items that separate
    models), ``mixed`` (every model solves it, not in every trial)."""
    return {cid: _standing(per) for cid, per in _item_counts(frame).items()}


def separating_items(frame: pl.DataFrame) -> dict[str, Any]:
    """The items that separate models (JSON-ready).

    ``items`` scored, ``unsolved`` (count and, sorted, up to 50 ids of the items
    no model solves in any trial), ``solved_by_all`` (every model, every
    trial), ``split`` (some model solves it in some trial, another never), and
    ``most_disagreed``: the 20 items whose models' solve rates spread most,
    each with its models and trials solving and every model's rate.
    """
    counts = _item_counts(frame)
    models = frame.get_column("model").unique(maintain_order=True).to_list()
    standing = {cid: _standing(per) for cid, per in counts.items()}
    unsolved = sorted((c for c, s in standing.items() if s == "unsolved"), key=item_sort_key)
    spread = {cid: _disagreement(per) for cid, per in counts.items()}
    top = sorted((c for c in counts if spread[c] > 0), key=lambda c: (-spread[c], c))
    top = top[:_MOST_DISAGREED]
    extra = _item_extras(frame, set(top))
    most = []
    for cid in top:
        per = counts[cid]
        most.append(
            {
                "custom_id": cid,
                **extra.get(cid, {}),
                "models_solving": sum(1 for c, _ in per.values() if c),
                "models": len(per),
                "trials_solved": sum(c for c, _ in per.values()),
                "trials": sum(n for _, n in per.values()),
                "disagreement": spread[cid],
                "per_model": {
                    m: {"solved": per[m][0], "trials": per[m][1]} for m in models if m in per
                },
            }
        )
    return {
        "items": len(counts),
        "models": len(models),
        "unsolved": {"count": len(unsolved), "ids": unsolved[:_UNSOLVED_LISTED]},
        "solved_by_all": sum(1 for s in standing.values() if s == "solved"),
        "split": sum(1 for s in standing.values() if s == "split"),
        "most_disagreed": most,
    }


def _item_extras(frame: pl.DataFrame, ids: set[str]) -> dict[str, dict[str, Any]]:
    """What each item is (tier, program, distance), for the listing."""
    if not ids:
        return {}
    cols = [c for c in ("tier", "program", "distance") if c in frame.columns]
    rows = (
        frame.filter(pl.col("custom_id").is_in(ids))
        .unique("custom_id", keep="first")
        .select("custom_id", *cols)
    )
    return {r["custom_id"]: {c: r[c] for c in cols} for r in rows.iter_rows(named=True)}


# Answer sizes are shown in bins that double: the same bins in every run, so two
# runs (or two benchmarks) compare bin for bin.
_SIZE_EDGES = (250, 500, 1_000, 2_000, 4_000, 8_000)


def size_bin(chars: int | None) -> str | None:
    """The label of the size bin ``chars`` falls in (``"500–999"``), None for None."""
    if chars is None:
        return None
    low = 0
    for edge in _SIZE_EDGES:
        if chars < edge:
            return f"<{edge:,}" if low == 0 else f"{low:,}–{edge - 1:,}"
        low = edge
    return f"≥{low:,}"


def size_bin_order(label: str | None) -> int:
    """Sort key of a size-bin label: small to large, None last."""
    labels = [size_bin(0), *(size_bin(edge) for edge in _SIZE_EDGES)]
    return labels.index(label) if label in labels else len(labels)


def size_bin_expr(column: str = "answer_chars") -> pl.Expr:
    """:func:`size_bin` as a polars expression."""
    expr: pl.Expr = pl.lit(f"≥{_SIZE_EDGES[-1]:,}")
    low_edges = (0, *_SIZE_EDGES[:-1])
    for low, edge in reversed(list(zip(low_edges, _SIZE_EDGES, strict=True))):
        expr = pl.when(pl.col(column) < edge).then(pl.lit(size_bin(low))).otherwise(expr)
    return pl.when(pl.col(column).is_null()).then(pl.lit(None, dtype=pl.String)).otherwise(expr)
