"""Text renderings of a summary, a comparison or a wrong-answer listing: markdown,
csv and json (the html page lives in :mod:`aeval.report.html`).
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping
from typing import Any

import polars as pl

from aeval.report.contents import report_grids
from aeval.report.provenance import provenance_markdown
from aeval.summary.groups import CATEGORY_KEYS
from aeval.summary.round_tables import ROUNDS_NOTE, most_rounds
from aeval.summary.tables import Grid, grid_markdown, most_trials
from aeval.verdicts import Status

__all__ = ["grids_csv", "markdown_report", "summary_csv", "to_json"]

_LEVEL_KEYS = {
    "models": (),
    "trials": ("trial",),
    "tiers": ("tier",),
    "programs": ("program",),
    "distances": ("distance",),
    "sizes": ("size",),
}


def summary_csv(summary: Mapping[str, Any]) -> str:
    """One row per model, per model × trial and per model × tier (``level`` says which),
    with every figure of ``summary.json`` flattened into columns.
    """
    out = io.StringIO()
    statuses = [s.value for s in Status]
    head = [
        "level", "model", "trial", "tier", "n", "scored", "correct", "correct_strict",
        "accuracy", "accuracy_low", "accuracy_high",
        "strict_accuracy", "strict_low", "strict_high",
        "published_accuracy", "published_low", "published_high",
        "model_failures", "infra_failures", "repaired",
        "trials_mean", "trials_std", "prompt_tokens", "completion_tokens", "reasoning_tokens",
        "accuracy_design_effect",
        *statuses,
    ]  # fmt: skip
    ks = range(1, most_trials(summary) + 1)
    head += [f"pass_at_{k}{part}" for k in ks for part in ("", "_low", "_high")]
    head += ["maj_at_n", "maj_low", "maj_high", "maj_n", "maj_ties", "maj_no_votes"]
    # what the items of a programs/distances/sizes row are, and the study's categories
    head += ["program", "distance", "size"]
    head += [f"published_{k}" for k in (*CATEGORY_KEYS, "uncategorised")]
    k_max = most_rounds(summary)  # repair rounds: their columns only when the run had them
    head += _rounds_head(k_max)
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(head)
    for level, keys in _LEVEL_KEYS.items():
        for g in summary.get(level) or []:
            across = g.get("across_trials") or {}
            published = g.get("published_accuracy") or {}
            writer.writerow(
                [
                    level.rstrip("s"),
                    g["model"],
                    g["trial"] if "trial" in keys else "",
                    (g["tier"] or "") if "tier" in keys else "",
                    g["n"],
                    g["scored"],
                    g["correct"],
                    g["correct_strict"],
                    _cell(g["accuracy"]["value"]),
                    _cell(g["accuracy"]["low"]),
                    _cell(g["accuracy"]["high"]),
                    _cell(g["strict_accuracy"]["value"]),
                    _cell(g["strict_accuracy"]["low"]),
                    _cell(g["strict_accuracy"]["high"]),
                    *(_cell(published.get(k)) for k in ("value", "low", "high")),
                    g["model_failures"],
                    g["infra_failures"],
                    g["repaired"],
                    _cell(across.get("mean")),
                    _cell(across.get("std")),
                    g["tokens"]["prompt"],
                    g["tokens"]["completion"],
                    _cell(g["tokens"].get("reasoning")),
                    _cell(g["accuracy"].get("design_effect")),
                    *(g["statuses"][s] for s in statuses),
                    *_sampling_cells(g, ks),
                    *(
                        _text(g.get(k)) if k in keys else ""
                        for k in ("program", "distance", "size")
                    ),
                    *_category_cells(g),
                    *_rounds_cells(g, k_max),
                ]
            )
    return out.getvalue()


def _rounds_head(k_max: int) -> list[str]:
    if not k_max:
        return []
    ks = range(1, k_max + 1)
    head = ["rounds", "rounds_items"]
    head += [f"accuracy_at_{k}{part}" for k in ks for part in ("", "_low", "_high")]
    head += ["first_wrong", "repaired", "repair_rate", "repair_rate_low", "repair_rate_high"]
    head += ["mean_rounds_to_solve", "cost_per_solved_usd", "tokens_per_solved"]
    head += [f"round_{k}_{part}" for k in ks for part in ("asked", "tokens", "cost_usd")]
    return head


def _rounds_cells(group: dict[str, Any], k_max: int) -> list[str]:
    """A model's or trial's rounds record (blank for the other levels, and for rounds
    beyond its own K)."""
    if not k_max:
        return []
    r = group.get("rounds")
    if r is None:
        return [""] * len(_rounds_head(k_max))
    ks = range(1, k_max + 1)
    at = r["accuracy_at_k"]
    cells = [str(r["rounds"]), str(r["items"])]
    cells += [
        _cell(at[k - 1][part]) if k <= len(at) else ""
        for k in ks
        for part in ("value", "low", "high")
    ]
    rate = r["repair_rate"]
    cells += [str(r["first_wrong"]), str(r["repaired"])]
    cells += [_cell(rate[part]) for part in ("value", "low", "high")]
    cells += [_cell(r["mean_rounds_to_solve"]), _cell(r["cost_per_solved_usd"])]
    cells += [_cell(r["tokens_per_solved"])]
    for k in ks:
        if k <= r["rounds"]:
            cells += [str(r["asked"][k - 1]), str(r["tokens"][k - 1]["total"])]
            cells.append(_cell(r["cost_usd"][k - 1]))
        else:
            cells += ["", "", ""]
    return cells


def _sampling_cells(group: dict[str, Any], ks: range) -> list[str]:
    """pass@k for every k, then maj@n (blank where a level or run does not have them)."""
    passk = group.get("pass_at_k") or []
    cells = [
        _cell(passk[k - 1][part]) if k <= len(passk) else ""
        for k in ks
        for part in ("value", "low", "high")
    ]
    majority = group.get("majority") or {}
    cells += [_cell(majority.get(part)) for part in ("value", "low", "high")]
    cells += [str(majority[part]) if part in majority else "" for part in ("n", "ties", "no_votes")]
    return cells


_ITEM_KEYS = ("program", "distance", "size")


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def _category_cells(group: dict[str, Any]) -> list[str]:
    cats = group.get("published_categories")
    if cats is None:  # a summary written before the categories
        return [""] * (len(CATEGORY_KEYS) + 1)
    return [str(cats.get(k, 0)) for k in (*CATEGORY_KEYS, "uncategorised")]


def _cell(value: float | None) -> str:
    return "" if value is None else repr(value)


def grids_csv(grid: Grid) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(grid.columns)
    writer.writerows(grid.rows)
    return out.getvalue()


def markdown_report(summary: Mapping[str, Any], *, title: str) -> str:
    parts = [f"# {title}\n", provenance_markdown(summary.get("provenance")), _md_note(summary)]
    parts += [grid_markdown(g) for g in report_grids(summary)]
    return "\n".join(parts)


def _md_note(summary: Mapping[str, Any]) -> str:
    infra = ", ".join(f"`{s}`" for s in summary.get("infra_statuses", ()))
    note = (
        "Accuracy counts only `equivalent` verdicts over scored answers; infrastructure "
        f"failures ({infra}) are reported apart and not scored. Strict accuracy counts only "
        "answers that needed no repair. Published accuracy is the WARP study's own evaluator, "
        "counted as the study did (over every verdict; \u2014 when it was switched off). "
        "Intervals are 95%: Wilson for one trial; over several "
        "trials, Wilson on the effective sample size of answers clustered by item "
        "(design effect), so repeated trials of the same items are not counted as "
        "independent.\n"
    )
    # pass@k and maj@n, and the repair rounds, when their tables are there
    note += "\n" + SAMPLING_NOTE if most_trials(summary) > 1 else ""
    return note + ("\n" + ROUNDS_NOTE if most_rounds(summary) else "")


SAMPLING_NOTE = (
    "pass@k is the chance that at least one of k of an item's answers is correct "
    "(Chen et al. 2021's unbiased estimator, averaged over items). maj@n is the majority "
    "vote over an item's n answers where answers that Z3 proves equivalent vote together "
    "even when their text differs; it is correct when the winning class is equivalent to "
    "the ground truth, a tie counts 1/t when the truth's class is among the t tied, and "
    "answers without a formula do not vote. Intervals: 95% item bootstrap (seeded).\n"
)


def to_json(value: Any) -> str:
    if isinstance(value, pl.DataFrame):
        value = value.to_dicts()
    return json.dumps(value, indent=2, ensure_ascii=False) + "\n"
