"""The study's lens and beyond: the study's error categories, groupings of the
verdicts by what their items are, and the items that separate models.

- **The study's categories** (``published_category``): the WARP study sorted
  its evaluator's reasons into ``correct``, ``error_syntax``,
  ``error_semantics`` and ``error_output_formatting``
  (:data:`aeval.verify.published.STUDY_CATEGORIES`). :func:`study_tables`
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

from collections.abc import Callable
from typing import Any

import polars as pl

from aeval.dataset.extrapolation import size_bin_expr, size_bin_order
from aeval.verdicts import INFRA_STATUSES, Status

__all__ = [
    "CATEGORY_KEYS",
    "GROUPINGS",
    "category_exprs",
    "category_record",
    "group_column",
    "group_sort_key",
    "item_classes",
    "separating_items",
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


def category_exprs() -> list[pl.Expr]:
    """Per group: the count of each of the study's categories, and of verdicts whose
    published reason is in none (``uncategorised``: aeval's refusals, a z3 killed)."""
    cat = pl.col("published_category")
    return [
        *((cat == k).sum().alias(f"category:{k}") for k in CATEGORY_KEYS),
        (cat.is_null() & pl.col("published_reason").is_not_null())
        .sum()
        .alias("category:uncategorised"),
    ]


def category_record(row: dict[str, Any]) -> dict[str, int]:
    """The ``published_categories`` of a group record from :func:`category_exprs`'s row."""
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
    from aeval.report.summary import tier_key

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


def study_tables(frame: pl.DataFrame) -> dict[str, Any] | None:
    """The study's three tables from the verdicts' ``published_category``; None
    when no verdict has the published reading.

    - ``model_summary``: ``{model: {category: count}}`` (all four categories);
    - ``model_tier_summary``: ``{model: {tier: {...}, "overall": {...}}}``;
    - ``model_problem_stats``: ``{model: {program: {category: count, ...,
      "total_attempts": n}}}``, only the categories that occur, as the study
      writes it (an uncategorised reason counts as ``unknown`` there, as the
      study's ``categorize_result`` would). Empty without programs.

    Verdicts without a category are left out of the first two, as the study's
    aggregation leaves out a reason it does not know.
    """
    rated = frame.filter(pl.col("published_reason").is_not_null())
    if rated.is_empty():
        return None
    counted = rated.filter(pl.col("published_category").is_not_null())
    models = list(dict.fromkeys(rated.get_column("model").to_list()))

    def counts(keys: list[str]) -> dict[tuple[Any, ...], dict[str, int]]:
        out: dict[tuple[Any, ...], dict[str, int]] = {}
        grouped = counted.group_by([*keys, "published_category"]).len()
        for row in grouped.iter_rows(named=True):
            key = tuple(row[k] for k in keys)
            out.setdefault(key, dict.fromkeys(CATEGORY_KEYS, 0))[row["published_category"]] = int(
                row["len"]
            )
        return out

    blank = dict.fromkeys(CATEGORY_KEYS, 0)
    per_model = counts(["model"])
    per_tier = counts(["model", "tier"])
    from aeval.report.summary import tier_key

    tiers = sorted({t for (_, t) in per_tier}, key=tier_key)
    tier_summary: dict[str, Any] = {}
    for model in models:
        mine = {
            t if t is not None else "unknown_tier": per_tier[(model, t)]
            for t in tiers
            if (model, t) in per_tier
        }
        tier_summary[model] = {**mine, "overall": per_model.get((model,), dict(blank))}
    problem_stats: dict[str, Any] = {}
    if rated.get_column("program").null_count() < rated.height:
        stats = (
            rated.with_columns(pl.col("published_category").fill_null("unknown"))
            .group_by(["model", "program", "published_category"], maintain_order=True)
            .len()
        )
        for row in stats.iter_rows(named=True):
            program = row["program"] if row["program"] is not None else "unknown"
            cell = problem_stats.setdefault(row["model"], {}).setdefault(program, {})
            cell[row["published_category"]] = int(row["len"])
            cell["total_attempts"] = cell.get("total_attempts", 0) + int(row["len"])
    return {
        "model_summary": {m: per_model.get((m,), dict(blank)) for m in models},
        "model_tier_summary": tier_summary,
        "model_problem_stats": problem_stats,
    }


def _per_item(frame: pl.DataFrame) -> pl.DataFrame:
    """Per (item, model): correct and scored answers over the trials."""
    return (
        frame.filter(~pl.col("status").is_in(_INFRA))
        .group_by(["custom_id", "model"])
        .agg(
            (pl.col("status") == Status.EQUIVALENT.value).sum().alias("c"),
            pl.len().alias("n"),
        )
    )


def _item_table(frame: pl.DataFrame) -> pl.DataFrame:
    """Per item: models that answered, models that solved it (any trial), trials
    solved and answered, and how much the models' solve rates disagree (their
    population standard deviation: 0 when all agree, 0.5 at an even split of
    always-right and always-wrong models)."""
    per = _per_item(frame).with_columns((pl.col("c") / pl.col("n")).alias("rate"))
    return (
        per.group_by("custom_id")
        .agg(
            pl.len().alias("models"),
            (pl.col("c") > 0).sum().alias("models_solving"),
            pl.col("c").sum().alias("trials_solved"),
            pl.col("n").sum().alias("trials"),
            pl.col("rate").std(ddof=0).fill_null(0.0).alias("disagreement"),
        )
        .with_columns(pl.col(c).cast(pl.Int64) for c in ("models", "models_solving"))
        .with_columns(pl.col(c).cast(pl.Int64) for c in ("trials_solved", "trials"))
    )


def item_classes(frame: pl.DataFrame) -> dict[str, str]:
    """Each item's standing among the models, for the viewer's filter:
    ``unsolved`` (no model solves it), ``solved`` (every model solves it in every
    trial), ``split`` (some solve it, others not: the items that separate
    models), ``mixed`` (one model, some trials right)."""
    table = _item_table(frame)
    out: dict[str, str] = {}
    for cid, models, solving, solved, trials in table.select(
        "custom_id", "models", "models_solving", "trials_solved", "trials"
    ).iter_rows():
        if solving == 0:
            out[cid] = "unsolved"
        elif solved == trials:
            out[cid] = "solved"
        elif solving < models:
            out[cid] = "split"
        else:
            out[cid] = "mixed"
    return out


def separating_items(frame: pl.DataFrame) -> dict[str, Any]:
    """The items that separate models (JSON-ready).

    ``items`` scored, ``unsolved`` (count and, sorted, up to 50 ids of the items
    no model solves in any trial), ``solved_by_all`` (every model, every
    trial), ``split`` (some model solves it in some trial, another never), and
    ``most_disagreed``: the 20 items whose models' solve rates spread most,
    each with its models and trials solving and every model's rate.
    """
    from aeval.report.samples import item_sort_key

    per = _per_item(frame)
    table = _item_table(frame)
    if table.is_empty():
        return {
            "items": 0,
            "models": 0,
            "unsolved": {"count": 0, "ids": []},
            "solved_by_all": 0,
            "split": 0,
            "most_disagreed": [],
        }
    models = list(dict.fromkeys(frame.get_column("model").to_list()))
    unsolved = sorted(
        table.filter(pl.col("models_solving") == 0).get_column("custom_id").to_list(),
        key=item_sort_key,
    )
    all_solved = table.filter(pl.col("trials_solved") == pl.col("trials")).height
    split = table.filter(
        (pl.col("models_solving") > 0) & (pl.col("models_solving") < pl.col("models"))
    ).height
    top = (
        table.filter(pl.col("disagreement") > 0)
        .sort(["disagreement", "custom_id"], descending=[True, False])
        .head(_MOST_DISAGREED)
    )
    wanted = set(top.get_column("custom_id").to_list())
    rates: dict[str, dict[str, dict[str, int]]] = {}
    for cid, model, c, n in per.filter(pl.col("custom_id").is_in(wanted)).iter_rows():
        rates.setdefault(cid, {})[model] = {"solved": int(c), "trials": int(n)}
    extra = _item_extras(frame, wanted)
    most = []
    for row in top.iter_rows(named=True):
        mine = rates[row["custom_id"]]
        most.append(
            {
                "custom_id": row["custom_id"],
                **extra.get(row["custom_id"], {}),
                "models_solving": row["models_solving"],
                "models": row["models"],
                "trials_solved": row["trials_solved"],
                "trials": row["trials"],
                "disagreement": row["disagreement"],
                "per_model": {m: mine[m] for m in models if m in mine},
            }
        )
    return {
        "items": table.height,
        "models": len(models),
        "unsolved": {"count": len(unsolved), "ids": unsolved[:_UNSOLVED_LISTED]},
        "solved_by_all": all_solved,
        "split": split,
        "most_disagreed": most,
    }


def _item_extras(frame: pl.DataFrame, ids: set[str]) -> dict[str, dict[str, Any]]:
    """What each item is (tier, program, distance), for the listing."""
    cols = [c for c in ("tier", "program", "distance") if c in frame.columns]
    rows = (
        frame.filter(pl.col("custom_id").is_in(ids))
        .unique("custom_id", keep="first")
        .select("custom_id", *cols)
    )
    return {r["custom_id"]: {c: r[c] for c in cols} for r in rows.iter_rows(named=True)}
