"""Comparing two runs: per-model accuracy differences and the items that changed.

The difference of two accuracies carries Newcombe's hybrid score interval for
paired proportions, built from the two runs' own intervals (so it agrees with
what each run reports on its own) and the correlation of the two accuracies
through the items both runs answered: the same items answered twice are not two
independent samples (see :mod:`aeval.summary.intervals`). Where both runs scored
the same (trial, item), the comparison also counts the items one run got right
and the other wrong.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping
from typing import Any

import numpy as np
import polars as pl

from aeval.report.paired import paired_comparison
from aeval.summary.aggregate import INFRA_STATUS_VALUES, summarize
from aeval.summary.groups import group_column, group_sort_key
from aeval.summary.intervals import ClusterSums, item_correlation, paired_difference_interval
from aeval.summary.rounds import first_round, item_solved
from aeval.summary.sampling import item_counts, paired_sampling_diffs
from aeval.summary.tables import (
    Grid,
    fmt_interval,
    fmt_majority,
    fmt_pass,
    fmt_signed_pts,
    shown_ks,
    signed_interval,
)
from aeval.verdicts import Status

__all__ = [
    "compare_by",
    "compare_grid",
    "compare_rounds_grid",
    "compare_runs",
    "compare_sampling_grid",
    "newcombe_interval",
    "with_sampling_columns",
]


def newcombe_interval(a: dict[str, Any], b: dict[str, Any]) -> tuple[float, float] | None:
    """95 % interval of ``b - a`` for two independent rates (summary ``accuracy`` dicts)."""
    if a["value"] is None or b["value"] is None:
        return None
    d = b["value"] - a["value"]
    low = d - math.sqrt((b["value"] - b["low"]) ** 2 + (a["high"] - a["value"]) ** 2)
    high = d + math.sqrt((b["high"] - b["value"]) ** 2 + (a["value"] - a["low"]) ** 2)
    return max(-1.0, low), min(1.0, high)


def _item_counts(frame: pl.DataFrame, model: str) -> pl.DataFrame:
    """Per item of ``model`` over all trials: correct (lenient ``y``, strict ``ys``) of
    the scored answers ``m``, and correct by the published reading ``yp`` of the
    answers that have it ``mp`` (every verdict, as the study counted)."""
    correct = pl.col("status") == Status.EQUIVALENT.value
    published = pl.col("correct_published")
    return (
        frame.filter(pl.col("model") == model)
        .group_by("custom_id")
        .agg(
            correct.cast(pl.Int64).sum().alias("y"),
            (correct & pl.col("repaired").is_null()).cast(pl.Int64).sum().alias("ys"),
            (~pl.col("status").is_in(INFRA_STATUS_VALUES)).cast(pl.Int64).sum().alias("m"),
            published.fill_null(False).cast(pl.Int64).sum().alias("yp"),
            published.is_not_null().cast(pl.Int64).sum().alias("mp"),
        )
    )


# Which summary rate each per-item count estimates, and over which answers.
_READINGS = {
    "y": ("accuracy", "m"),
    "ys": ("strict_accuracy", "m"),
    "yp": ("published_accuracy", "mp"),
}


def _paired_interval(
    ra: Mapping[str, Any], rb: Mapping[str, Any], items: pl.DataFrame, column: str
) -> dict[str, float | None]:
    """B − A of one accuracy (``column`` y: lenient, ys: strict, yp: published) with
    its paired interval."""
    key, m = _READINGS[column]
    rate_a, rate_b = ra.get(key), rb.get(key)
    if rate_a is None or rate_b is None or rate_a["value"] is None or rate_b["value"] is None:
        return {"value": None, "low": None, "high": None, "correlation": None}
    sums_a = ClusterSums.of(items.select(column, m).drop_nulls().iter_rows())
    sums_b = ClusterSums.of(items.select(f"{column}_b", f"{m}_b").drop_nulls().iter_rows())
    shared = items.drop_nulls().select(column, m, f"{column}_b", f"{m}_b").iter_rows()
    r = item_correlation(sums_a, sums_b, shared)
    low, high = paired_difference_interval(
        (rate_a["value"], rate_a["low"], rate_a["high"]),
        (rate_b["value"], rate_b["low"], rate_b["high"]),
        r,
    )
    return {"value": rate_b["value"] - rate_a["value"], "low": low, "high": high, "correlation": r}


def _paired(a: pl.DataFrame, b: pl.DataFrame, model: str) -> dict[str, int]:
    def scored(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.filter(
            (pl.col("model") == model) & ~pl.col("status").is_in(INFRA_STATUS_VALUES)
        ).select("trial", "custom_id", (pl.col("status") == Status.EQUIVALENT.value).alias("ok"))

    both = scored(a).join(scored(b), on=["trial", "custom_id"], suffix="_b")
    return {
        "items": both.height,
        "gained": both.filter(~pl.col("ok") & pl.col("ok_b")).height,
        "lost": both.filter(pl.col("ok") & ~pl.col("ok_b")).height,
    }


def compare_runs(
    a: pl.DataFrame, b: pl.DataFrame, *, a_label: str = "A", b_label: str = "B"
) -> dict[str, Any]:
    """Per-model comparison of run B against run A (JSON-ready).

    Each model entry has both runs' ``accuracy``/``strict_accuracy`` (or None when
    the model is absent from one run), ``diff`` (B − A) with ``low``/``high``,
    ``strict_diff`` (its value) and ``strict_diff_interval``, ``published_diff``
    (the published reading's B − A, ``value`` None when either run lacks it), and ``paired`` counts
    over the (trial, item) pairs both runs scored: ``gained`` (wrong in A, right in
    B) and ``lost``. The intervals are paired over items (Newcombe's method for
    paired proportions with the runs' item-clustered intervals and the item-level
    correlation of the two accuracies, ``correlation``).

    ``pass_at_k_diff`` (each k both runs have) and ``majority_diff`` (maj@n over
    equivalence classes; None unless both runs have their classes) are B − A with
    a paired item-bootstrap interval (:mod:`aeval.summary.sampling`).

    Every figure above reads round 1 of a run with repair rounds. ``rounds_diff``
    (None unless either run had rounds) is B − A of accuracy@K, each run at its own
    last round K (a one-round run at its accuracy), paired over the items both
    scored (:func:`aeval.report.paired.paired_comparison` on the per-item answers
    solved by round K).
    """
    sa, sb = summarize(a, items=False), summarize(b, items=False)
    ma = {m["model"]: m for m in sa["models"]}
    mb = {m["model"]: m for m in sb["models"]}
    models = list(ma) + [m for m in mb if m not in ma]
    a_all, b_all = a, b
    a, b = first_round(a), first_round(b)  # every count but rounds_diff reads round 1
    items_a, items_b = item_counts(a, ["model"]), item_counts(b, ["model"])
    out = []
    for model in models:
        ra, rb = ma.get(model), mb.get(model)
        entry: dict[str, Any] = {"model": model, "a": ra, "b": rb}
        if ra and rb:
            # None exactly when either accuracy is (no scored answers in that run).
            items = _item_counts(a, model).join(
                _item_counts(b, model), on="custom_id", how="full", suffix="_b", coalesce=True
            )
            entry["diff"] = _paired_interval(ra, rb, items, "y")
            strict = _paired_interval(ra, rb, items, "ys")
            entry["strict_diff"] = strict["value"]
            entry["strict_diff_interval"] = strict
            entry["published_diff"] = _paired_interval(ra, rb, items, "yp")
            entry["paired"] = _paired(a, b, model)
            passk, majority = paired_sampling_diffs(
                items_a.get((model,), []), items_b.get((model,), [])
            )
            entry["pass_at_k_diff"] = passk
            entry["majority_diff"] = majority
            entry["rounds_diff"] = _rounds_diff(a_all, b_all, ra, rb, model)
        else:
            entry["diff"] = {"value": None, "low": None, "high": None, "correlation": None}
            entry["strict_diff"] = None
            entry["strict_diff_interval"] = None
            entry["published_diff"] = None
            entry["paired"] = None
            entry["pass_at_k_diff"] = []
            entry["majority_diff"] = None
            entry["rounds_diff"] = None
        out.append(entry)
    return {"a": a_label, "b": b_label, "models": out, "summary_a": sa, "summary_b": sb}


def _last_round(group: Mapping[str, Any]) -> int:
    rounds = group.get("rounds")
    return int(rounds["rounds"]) if rounds else 1


def _rounds_diff(
    a: pl.DataFrame, b: pl.DataFrame, ra: Mapping[str, Any], rb: Mapping[str, Any], model: str
) -> dict[str, Any] | None:
    """B − A of accuracy@K (each run's own K), paired over items; None when neither
    run had repair rounds."""
    ka, kb = _last_round(ra), _last_round(rb)
    if ka == 1 and kb == 1:
        return None
    ia, ib = item_solved(a, model, ka), item_solved(b, model, kb)
    both = ia.join(ib, on="item", how="full", suffix="_b", coalesce=True).fill_null(0)

    def column(name: str) -> np.ndarray:
        return both.get_column(name).to_numpy().astype(float)

    # paired_comparison gives first − second: B first, for B − A
    result = paired_comparison(column("y_b"), column("m_b"), column("y"), column("m"))
    rate_a = (ra.get("rounds") or {}).get("accuracy_at_k", [None])[-1] or ra["accuracy"]
    rate_b = (rb.get("rounds") or {}).get("accuracy_at_k", [None])[-1] or rb["accuracy"]
    # its counts named for B first, too: named back for A and B
    swapped = {"only_a": result["only_b"], "only_b": result["only_a"]}
    if "a_only_right" in result:
        swapped |= {"a_only_right": result["b_only_right"], "b_only_right": result["a_only_right"]}
    return {"k_a": ka, "k_b": kb, "a": rate_a, "b": rate_b, **result, **swapped}


def compare_grid(comparison: dict[str, Any]) -> Grid:
    rows = []
    for e in comparison["models"]:
        ra, rb, d = e["a"], e["b"], e["diff"]
        paired = e["paired"]
        rows.append(
            (
                e["model"],
                fmt_interval(ra["accuracy"]) if ra else "(absent)",
                fmt_interval(rb["accuracy"]) if rb else "(absent)",
                signed_interval(d),
                fmt_signed_pts(e["strict_diff"]),
                fmt_signed_pts(e["published_diff"]["value"] if e["published_diff"] else None),
                str(paired["gained"]) if paired else "—",
                str(paired["lost"]) if paired else "—",
                f"{paired['items']}" if paired else "—",
                f"{ra['infra_failures'] if ra else '—'}/{rb['infra_failures'] if rb else '—'}",
            )
        )
    a, b = comparison["a"], comparison["b"]
    return Grid(
        f"B − A per model (A = {a}, B = {b}; points, 95% interval paired over items)",
        (
            "Model",
            "A accuracy",
            "B accuracy",
            "Δ pts [95% CI]",
            "Δ strict",
            "Δ published",
            "Gained",
            "Lost",
            "Paired items",
            "Infra A/B",
        ),
        tuple(rows),
        right=frozenset(range(1, 10)),
    )


def compare_sampling_grid(comparison: dict[str, Any]) -> Grid:
    """pass@k and maj@n of both runs per model, with B − A and its paired interval."""
    rows = []
    for e in comparison["models"]:
        ra, rb = e["a"], e["b"]
        if not ra or not rb:
            continue
        diffs = {d["k"]: d for d in e["pass_at_k_diff"]}
        for k in shown_ks(len(diffs)):
            rows.append(
                (
                    e["model"],
                    f"pass@{k}",
                    fmt_pass(ra, k),
                    fmt_pass(rb, k),
                    signed_interval(diffs[k]),
                )
            )
        rows.append(
            (
                e["model"],
                "maj@n",
                fmt_majority(ra),
                fmt_majority(rb),
                signed_interval(e["majority_diff"]),
            )
        )
    return Grid(
        "pass@k and maj@n (majority over Z3 equivalence classes), B − A per model "
        "(points, 95% item-bootstrap interval paired over items)",
        ("Model", "Statistic", "A", "B", "Δ pts [95% CI]"),
        tuple(rows),
        right=frozenset(range(2, 5)),
    )


def compare_rounds_grid(comparison: dict[str, Any]) -> Grid:
    """accuracy@K of both runs per model (each at its own K) with B − A, its interval
    and the paired test, when either run had repair rounds (no rows otherwise)."""
    rows = []
    for e in comparison["models"]:
        d = e.get("rounds_diff")
        if not d:
            continue
        p = d["p"]
        rows.append(
            (
                e["model"],
                f"acc@{d['k_a']}: {fmt_interval(d['a'])}",
                f"acc@{d['k_b']}: {fmt_interval(d['b'])}",
                signed_interval(d["diff"]),
                "—" if d["test"] is None else f"{d['test']} ({d['form']})",
                "—" if p is None else (f"{p:.3f}" if p >= 0.001 else "<0.001"),
                str(d["items"]),
            )
        )
    return Grid(
        "Repair rounds: accuracy@K of each run (its own last round K; a one-round run's "
        "accuracy), B − A per model (points, 95% interval paired over items; McNemar for "
        "one trial, a paired test on per-item means for several)",
        ("Model", "A", "B", "Δ pts [95% CI]", "Test", "p", "Paired items"),
        tuple(rows),
        right=frozenset(range(3, 7)),
    )


def with_sampling_columns(table: str, comparison: dict[str, Any]) -> str:
    """The comparison's csv (one row per model, in ``comparison["models"]`` order) with
    maj@n of both runs, B − A of maj@n and of pass@k for every k both runs have, and
    their intervals appended as columns (full precision; blank where absent)."""
    models = comparison["models"]
    top = max((len(e.get("pass_at_k_diff") or []) for e in models), default=0)
    head = ["maj_at_n_a", "maj_at_n_b"]
    head += [f"maj_at_n_diff{p}" for p in ("", "_low", "_high")]
    head += [f"pass_at_{k}_diff{p}" for k in range(1, top + 1) for p in ("", "_low", "_high")]
    rounds = any(e.get("rounds_diff") for e in models)  # only when a run had repair rounds
    if rounds:
        head += ["rounds_k_a", "rounds_k_b", "accuracy_at_k_a", "accuracy_at_k_b"]
        head += ["rounds_diff", "rounds_diff_low", "rounds_diff_high", "rounds_p"]

    def cell(value: float | None) -> str:
        return "" if value is None else repr(value)

    def values(entry: dict[str, Any]) -> list[str]:
        runs = [(entry.get(side) or {}).get("majority") or {} for side in ("a", "b")]
        out = [cell(run.get("value")) for run in runs]
        diff = entry.get("majority_diff") or {}
        out += [cell(diff.get(p)) for p in ("value", "low", "high")]
        passk = entry.get("pass_at_k_diff") or []
        out += [
            cell(passk[k - 1][p]) if k <= len(passk) else ""
            for k in range(1, top + 1)
            for p in ("value", "low", "high")
        ]
        if rounds:
            d = entry.get("rounds_diff") or {}
            out += [str(d.get("k_a", "")), str(d.get("k_b", ""))]
            out += [cell((d.get(side) or {}).get("value")) for side in ("a", "b")]
            diff = d.get("diff") or {}
            out += [cell(diff.get(p)) for p in ("value", "low", "high")] + [cell(d.get("p"))]
        return out

    rows = list(csv.reader(io.StringIO(table)))
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    for i, row in enumerate(rows):
        writer.writerow(row + (head if i == 0 else values(models[i - 1])))
    return out.getvalue()


def compare_by(
    a: pl.DataFrame, b: pl.DataFrame, by: str, *, a_label: str = "A", b_label: str = "B"
) -> list[dict[str, Any]]:
    """:func:`compare_runs` within each group of ``by`` (a grouping of
    :data:`aeval.summary.groups.GROUPINGS` or a column both frames have): per group
    value (text, in the grouping's order), every model's B − A with its interval
    paired over the group's items, and the gained/lost counts."""
    ga, gb = group_column(a, by), group_column(b, by)
    values = set(ga.get_column("group").to_list()) | set(gb.get_column("group").to_list())
    out = []
    for value in sorted(values, key=group_sort_key(by)):

        def part(frame: pl.DataFrame, value: str | None = value) -> pl.DataFrame:
            hit = pl.col("group").is_null() if value is None else pl.col("group") == value
            return frame.filter(hit).drop("group")

        comparison = compare_runs(part(ga), part(gb), a_label=a_label, b_label=b_label)
        out.append({"group": value, "models": comparison["models"]})
    return out
