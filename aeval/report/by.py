"""``report --by``: accuracy per model and group of items, for any grouping.

A grouping is one of :data:`aeval.summary.groups.GROUPINGS` (``program``,
``tier``, ``distance``, ``size``, ``examples``, ``target_n``, ``trial``),
read from the verdicts, or any column of the run's dataset (for other
benchmarks), joined to the verdicts by item id. Verdicts written before aeval
knew an item's program and question facts get them from the run's dataset.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import polars as pl

from aeval.dataset import TruthTable, load_dataset
from aeval.errors import AevalError, ConfigError
from aeval.store import RunLayout
from aeval.summary.groups import CATEGORY_KEYS, GROUPINGS
from aeval.summary.rounds import item_id

__all__ = ["by_csv", "dataset_ref", "with_grouping"]

# Groupings whose values come from the dataset when older verdicts lack them.
_ITEM_FACTS = ("program", "examples", "target_n", "distance", "answer_chars")


def dataset_ref(run_dir: Path) -> str | None:
    """The benchmark a run (``config.json``) or a rescore (its provenance) was scored on."""
    layout = RunLayout(run_dir)
    for path in (layout.config, layout.summary):
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(doc, dict):
            continue
        if isinstance(doc.get("dataset"), str):
            return str(doc["dataset"])
        recorded = ((doc.get("provenance") or {}).get("dataset") or {}).get("ref")
        if isinstance(recorded, str):
            return recorded
    return None


def _column(by: str) -> str:
    return "answer_chars" if by == "size" else GROUPINGS.get(by, by)


def with_grouping(
    frame: pl.DataFrame, by: str, *, run_dir: Path, dataset: str | None = None
) -> pl.DataFrame:
    """``frame`` (a run's verdicts) ready to be grouped by ``by``.

    :param dataset: the benchmark to read a dataset column (or older verdicts'
        item facts) from; default: the one the run directory records.
    :raises ConfigError: ``by`` is neither a grouping with values in these
        verdicts nor a column of the dataset, or the dataset cannot be read.
    """
    column = _column(by)
    if column in frame.columns and frame.get_column(column).null_count() < frame.height:
        return frame
    ref = dataset or dataset_ref(run_dir)
    known = ", ".join(GROUPINGS)
    if ref is None:
        raise ConfigError(
            f"--by {by}: these verdicts have no {column!r} and {run_dir} records no dataset "
            f"to take it from; give --dataset (groupings: {known}, or a dataset column)"
        )
    # A repair round's verdict (ID_rR) answers item ID: it takes the item's value.
    keyed = frame.with_columns(
        item_id().alias("_item") if "round" in frame.columns else pl.col("custom_id").alias("_item")
    )
    try:
        data = load_dataset(ref)
    except AevalError as err:
        raise ConfigError(f"--by {by}: cannot read the dataset {ref}: {err}") from None
    if by in _ITEM_FACTS or by == "size":
        truth = TruthTable(data)
        ids = keyed.get_column("_item").unique().to_list()
        facts = {cid: t for cid in ids if (t := truth.get(cid)) is not None}
        values = [getattr(facts[c], column) if c in facts else None for c in ids]
        joined = pl.DataFrame(
            {"_item": ids, column: values},
            schema={"_item": pl.String, column: pl.String if by == "program" else pl.Int64},
        )
        if joined.get_column(column).null_count() == joined.height:
            raise ConfigError(
                f"--by {by}: neither these verdicts nor the dataset {ref} say what it is for "
                f"any item (a program is known only for the WARP benchmark; distances only "
                f"for questions that show N=<n>: examples)"
            )
    elif by in data.columns:
        joined = data.select(pl.col("id").cast(pl.String).alias("_item"), pl.col(by).alias(column))
    else:
        raise ConfigError(
            f"--by {by}: not a grouping ({known}) and not a column of the dataset {ref} "
            f"(it has {', '.join(data.columns)})"
        )
    joined_frame = keyed.drop(column, strict=False).join(
        joined, on="_item", how="left", maintain_order="left"
    )
    return joined_frame.drop("_item")


def by_csv(groups: list[dict[str, Any]], by: str) -> str:
    """One row per model and group, every figure at full precision."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    rates = ("accuracy", "strict_accuracy", "published_accuracy")
    writer.writerow(
        [
            "model",
            by,
            "n",
            "scored",
            "correct",
            *(f"{r}{p}" for r in rates for p in ("", "_low", "_high")),
            "accuracy_design_effect",
            "infra_failures",
            *(f"published_{k}" for k in (*CATEGORY_KEYS, "uncategorised")),
        ]
    )
    for g in groups:
        cats = g["published_categories"]
        writer.writerow(
            [
                g["model"],
                "" if g["group"] is None else g["group"],
                g["n"],
                g["scored"],
                g["correct"],
                *(_cell(g[r][p]) for r in rates for p in ("value", "low", "high")),
                _cell(g["accuracy"]["design_effect"]),
                g["infra_failures"],
                *(cats[k] for k in (*CATEGORY_KEYS, "uncategorised")),
            ]
        )
    return out.getvalue()


def _cell(value: float | None) -> str:
    return "" if value is None else repr(value)
