"""Many runs as one leaderboard: a row per model, its runs named, paired comparisons.

:func:`combine_runs` reads the runs' verdicts lazily (only the columns a summary
needs, never re-verified), keeps the items every run scored, and names each
row: a model found in several runs is one row when its trials are compatible
(the same generation settings: temperature, top-p, token limit, seed; and the same
repair rounds: K, feedback level and text), its
trials pooled and renumbered run after run; otherwise one row per group of
runs generated alike, labelled ``model (run, …)``. :func:`leaderboard` then summarises the rows with
:func:`aeval.report.summarize` (so a row's numbers are the ones ``report``
gives a run with those verdicts) and compares every pair of rows on their
shared items (:mod:`aeval.report.paired`).

Cost is at Batch API prices for every row, direct-mode runs included (they
paid full price), so rows compare; per 1,000 answers (an item asked once).
Where a row's price is unknown its tokens per 1,000 answers are the measure.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import polars as pl

from aeval.cost import actual_cost, usd
from aeval.errors import ConfigError
from aeval.model_names import provider_of
from aeval.report.comparable import RunSource
from aeval.report.paired import SIGNIFICANCE, paired_matrix
from aeval.report.samples import round_settings
from aeval.store.layout import RunLayout
from aeval.summary.aggregate import INFRA_STATUS_VALUES, scan_run, summarize
from aeval.summary.round_tables import most_rounds, rounds_grid, rounds_vs_trials_grid
from aeval.summary.rounds import first_round, item_id, price_rounds, versus_trials
from aeval.summary.tables import (
    Grid,
    fmt_interval,
    fmt_mean_std,
    fmt_pct,
    fmt_tokens,
    signed_interval,
)
from aeval.verdicts import Status

__all__ = [
    "Combined",
    "RowSource",
    "combine_runs",
    "leaderboard",
    "leaderboard_csv",
    "leaderboard_grid",
    "paired_grid",
    "provenance_grid",
    "rounds_grids",
]

REASONING_COLUMN = "reasoning_tokens"  # nullable Int64; absent in runs made before it
# The verdict columns a leaderboard reads (a summary's, and the reasoning tokens).
_COLUMNS = (
    *("model", "trial", "custom_id", "round", "tier", "status", "repaired", "direction"),
    *("correct_published", "published_reason", "published_category"),
    *("prompt_tokens", "completion_tokens", "program", "distance", "answer_chars"),
    *("examples", "target_n", "answer_class", REASONING_COLUMN),
)
_TYPES: dict[str, pl.DataType] = {REASONING_COLUMN: pl.Int64()}
# Answer classes are numbered per run (aeval.scoring.answer_classes); pooled, a run's
# wrong classes are moved apart from another's by this much (0 and -1 mean the same
# in every run: the truth's class, and no vote).
_CLASS_STRIDE = 1_000_000
MATRIX_ROWS = 12  # rows of the compact paired matrix in html and LaTeX


@dataclass(frozen=True, slots=True)
class RowSource:
    """Where one row's verdicts come from: ``model`` in ``runs`` (pooled when several)."""

    label: str
    model: str
    runs: tuple[RunSource, ...]

    @property
    def pooled(self) -> bool:
        return len(self.runs) > 1


@dataclass(frozen=True, slots=True)
class Combined:
    """The runs' verdicts as one frame (``model`` is the row's label, ``run`` the run's),
    its rows, the items kept, and what was done to get there, said as notes."""

    frame: pl.DataFrame
    rows: tuple[RowSource, ...]
    items: int
    notes: tuple[str, ...]


def _generation(source: RunSource) -> Any:
    return (source.provenance or {}).get("generation")


def _asked_alike(source: RunSource) -> str:
    """What must agree for two runs' trials to pool: the generation settings, and the
    repair rounds (K, feedback level and text): a K-round run's round 1 compares with
    a one-round run, its rounds do not pool with it."""
    rounds = round_settings(source.config or {})
    repair = None if rounds.rounds == 1 else (rounds.rounds, rounds.feedback, rounds.template)
    return repr((_generation(source), repair))


def _rows(sources: Sequence[RunSource], models: Mapping[str, list[str]]) -> list[RowSource]:
    """One row per model and way it was generated (and repaired): the runs that
    generated a model alike are pooled into one row; when its runs differ, each group
    of runs is a row labelled by them."""
    seen: dict[str, list[RunSource]] = {}
    for source in sources:
        for model in models[source.label]:
            seen.setdefault(model, []).append(source)
    rows = []
    for model, runs in seen.items():
        groups: dict[str, list[RunSource]] = {}
        for run in runs:
            groups.setdefault(_asked_alike(run), []).append(run)
        for group in groups.values():
            label = model if len(groups) == 1 else f"{model} ({', '.join(s.label for s in group)})"
            rows.append(RowSource(label, model, tuple(group)))
    return rows


def combine_runs(sources: Sequence[RunSource]) -> Combined:
    """The runs' verdicts on the items every run scored, with each row labelled.

    :raises ConfigError: the runs share no item.
    :raises RunDirError: a run's verdicts cannot be read.
    """
    scans = {s.label: scan_run(s.path, _COLUMNS, types=_TYPES) for s in sources}
    # An item is shared by its id: a repair round's request (ID_rR) answers item ID.
    per_run = {
        label: scan.select("model", item_id()).unique().collect() for label, scan in scans.items()
    }
    models = {
        label: frame.get_column("model").unique(maintain_order=True).sort().to_list()
        for label, frame in per_run.items()
    }
    item_sets = {
        label: set(frame.get_column("item").unique().to_list()) for label, frame in per_run.items()
    }
    shared = set.intersection(*item_sets.values()) if item_sets else set()
    if not shared:
        raise ConfigError(
            "the runs share no item: "
            + ", ".join(f"{label} has {len(ids)}" for label, ids in item_sets.items())
        )
    notes = []
    counts = sorted({len(ids) for ids in item_sets.values()})
    if counts != [len(shared)]:
        notes.append(
            "the runs scored different rows ("
            + ", ".join(f"{label}: {len(ids)}" for label, ids in item_sets.items())
            + f"); every row is read on the {len(shared)} items all of them scored"
        )
    rows = _rows(sources, models)
    parts = []
    offsets: dict[str, int] = {}
    keep = pl.Series("item", sorted(shared), dtype=pl.String)
    for index, source in enumerate(sources):
        label = source.label
        names, trial_base = {}, {}
        for row in rows:
            if source in row.runs:
                names[row.model] = row.label
                trial_base[row.model] = offsets.get(row.label, 0)
        scan = scans[label].filter(item_id().is_in(keep.implode()))
        cls = pl.col("answer_class")
        pooled = any(r.pooled and source in r.runs for r in rows)
        parts.append(
            scan.with_columns(
                pl.col("trial") + pl.col("model").replace_strict(trial_base, return_dtype=pl.Int64),
                pl.when(cls > 0)
                .then(cls + index * _CLASS_STRIDE)
                .otherwise(cls)
                .alias("answer_class")
                if pooled
                else cls,
                pl.col("model").replace_strict(names, return_dtype=pl.String),
                pl.lit(label, dtype=pl.String).alias("run"),
            )
        )
        top = (
            scans[label].group_by("model").agg(pl.col("trial").max()).collect()
            if any(r.pooled for r in rows)
            else None
        )
        if top is not None:
            for model, trial in top.iter_rows():
                offsets[names[model]] = trial_base[model] + int(trial or 0)
    frame = pl.concat(parts, how="vertical").collect()
    for row in rows:
        if row.pooled:
            notes.append(
                f"{row.label}: trials pooled from {', '.join(s.label for s in row.runs)} "
                "(the same generation settings), renumbered run after run; maj@n counts "
                "wrong answers of different runs as different classes (never compared)"
            )
    return Combined(frame, tuple(rows), len(shared), tuple(notes))


def _provider(model: str, source: RunSource) -> str:
    if source.api == "direct":
        return "OpenAI-compatible endpoint (direct)"
    if source.api == "rescore":
        return "unknown (rescored from files)"
    try:
        return provider_of(model)
    except ConfigError:
        return "unknown"


def _date(stamp: float | None) -> str | None:
    if stamp is None:
        return None
    return datetime.fromtimestamp(stamp, UTC).strftime("%Y-%m-%d %H:%M UTC")


def _row_provenance(row: RowSource) -> list[dict[str, Any]]:
    out = []
    for source in row.runs:
        started, finished = RunLayout(source.path).dates()
        prov = source.provenance or {}
        out.append(
            {
                "run": source.label,
                "path": str(source.path),
                "provider": _provider(row.model, source),
                "api": source.api,
                "started": _date(started),
                "finished": _date(finished),
                "aeval": (prov.get("versions") or {}).get("aeval"),
                "synthetic": prov.get("synthetic"),
                "generation": prov.get("generation"),
            }
        )
    return out


def _per_1000(total: float | None, answers: int) -> float | None:
    return None if total is None or answers <= 0 else 1000 * total / answers


def _item_matrix(frame: pl.DataFrame, labels: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Items × rows of correct (lenient) and scored answers."""
    scored = ~pl.col("status").is_in(INFRA_STATUS_VALUES)
    per_item = (
        frame.lazy()
        .group_by("custom_id", "model")
        .agg(
            (scored & (pl.col("status") == Status.EQUIVALENT.value)).sum().alias("y"),
            scored.sum().alias("m"),
        )
        .collect()
    )
    items = {cid: i for i, cid in enumerate(per_item.get_column("custom_id").unique().sort())}
    column = {label: j for j, label in enumerate(labels)}
    y = np.zeros((len(items), len(labels)))
    m = np.zeros((len(items), len(labels)))
    rows = per_item.get_column("custom_id").replace_strict(items, return_dtype=pl.Int64).to_numpy()
    cols = per_item.get_column("model").replace_strict(column, return_dtype=pl.Int64).to_numpy()
    y[rows, cols] = per_item.get_column("y").to_numpy()
    m[rows, cols] = per_item.get_column("m").to_numpy()
    return y, m


def leaderboard(combined: Combined) -> dict[str, Any]:
    """The leaderboard (JSON-ready): ``rows`` ranked by lenient accuracy, ``pairs`` (every
    pair of rows, :mod:`aeval.report.paired`), ``tiers`` (per row and tier), ``items``,
    ``notes``.

    A row holds the summary's record of its verdicts (three readings with
    intervals, ``across_trials``, ``pass_at_k``, ``majority``, failures, tokens),
    and ``row``, ``model``, ``runs``, ``pooled``, ``rank``, ``tokens.reasoning``
    (None where no run recorded reasoning tokens), ``cost_usd`` at Batch API
    prices, ``cost_per_1000`` and ``tokens_per_1000`` (per 1,000 answers),
    ``vs_best`` (the paired comparison with the first row) and ``provenance`` (one
    record per run).
    """
    frame = combined.frame
    summary = summarize(frame, items=False)
    by_label = {r.label: r for r in combined.rows}
    records = []
    for group in summary["models"]:
        source = by_label[group["model"]]
        record: dict[str, Any] = dict(group)
        # tokens.reasoning: None where no run recorded reasoning tokens (the summary's)
        tokens = dict(used := group["tokens"])
        answered = max(group["n"] - group["infra_failures"], 1)  # the requests billed
        cost = actual_cost(source.model, tokens, requests=answered, batch=True)
        record.update(
            row=source.label,
            model=source.model,
            runs=[s.label for s in source.runs],
            pooled=source.pooled,
            tokens=tokens,
            cost_usd=cost,
            cost_per_1000=_per_1000(cost, group["n"]),
            tokens_per_1000=_per_1000(used["total"], group["n"]),
            provenance=_row_provenance(source),
        )
        if "rounds" in group:  # priced again, as the row's cost: at its model's batch price
            rounds = record["rounds"] = dict(group["rounds"])
            price_rounds(rounds, source.model, batch=True)
            if "versus_trials" in rounds:
                rounds["versus_trials"] = versus_trials(rounds, group["pass_at_k"])
        records.append(record)
    records.sort(key=lambda r: (-(r["accuracy"]["value"] or -1.0), r["row"]))
    for rank, record in enumerate(records, start=1):
        record["rank"] = rank
    labels = [r["row"] for r in records]
    y, m = _item_matrix(first_round(frame), labels)  # round 1, as the rows' accuracy
    pairs = paired_matrix(labels, y, m)
    for record in records[1:]:
        vs = next(p for p in pairs if p["a"] == labels[0] and p["b"] == record["row"])
        record["vs_best"] = vs
    if records:
        records[0]["vs_best"] = None
    tiers = [dict(t, row=t["model"], model=by_label[t["model"]].model) for t in summary["tiers"]]
    return {
        "rows": records,
        "pairs": pairs,
        "tiers": tiers,
        "items": combined.items,
        "confidence": summary["confidence"],
        "significance": SIGNIFICANCE,
        "notes": list(combined.notes),
    }


def tied_with_best(record: Mapping[str, Any]) -> bool:
    """The best row is not significantly better than this one (or this is the best)."""
    vs = record.get("vs_best")
    return vs is None or not vs["significant"]


def _vs_best(record: Mapping[str, Any]) -> str:
    vs = record.get("vs_best")
    if vs is None:
        return "best"
    if vs["p"] is None:
        return "no shared items"
    p = vs["p"]
    shown = f"p={p:.3f}" if p >= 0.001 else "p<0.001"
    return shown + ("" if vs["significant"] else " (n.s.)")


def _cost_cell(record: Mapping[str, Any], synthetic: bool) -> str:
    if record["cost_per_1000"] is not None and not synthetic:
        return usd(record["cost_per_1000"])
    per = record["tokens_per_1000"]
    return "—" if per is None else f"{fmt_tokens(round(per))} tok"


def _tokens_cell(record: Mapping[str, Any]) -> str:
    tokens = record["tokens"]
    text = fmt_tokens(tokens["total"])
    if tokens.get("reasoning") is not None:
        text += f" ({fmt_tokens(tokens['reasoning'])} reasoning)"
    return text


def _synthetic(record: Mapping[str, Any]) -> bool:
    return any(p.get("synthetic") for p in record["provenance"])


def leaderboard_grid(board: Mapping[str, Any], *, brief: bool = False) -> Grid:
    """The table: one row per model, best first (``brief``: the terminal's, with an
    interval for lenient accuracy only)."""

    def rate(value: Mapping[str, Any] | None) -> str:
        if not value:
            return "—"
        return fmt_pct(value["value"]) if brief else fmt_interval(dict(value))

    rows = tuple(
        (
            str(r["rank"]),
            r["row"] + (" ≈" if tied_with_best(r) and r["rank"] > 1 else ""),
            ", ".join(r["runs"]) + (" (pooled)" if r["pooled"] else ""),
            fmt_interval(r["accuracy"]),
            rate(r["strict_accuracy"]),
            rate(r["published_accuracy"]),
            fmt_mean_std(r["across_trials"]),
            rate((r.get("pass_at_k") or [None])[-1]) + _k(r),
            rate(r.get("majority")),
            str(r["model_failures"]),
            str(r["infra_failures"]),
            _tokens_cell(r),
            _cost_cell(r, _synthetic(r)),
            _vs_best(r),
        )
        for r in board["rows"]
    )
    ci = "" if brief else " [95% CI]"
    return Grid(
        f"Leaderboard on {board['items']} shared items (95% intervals clustered by item; "
        "≈: the best is not significantly better, paired test p ≥ "
        f"{board['significance']}; cost per 1,000 answers at Batch API price, tokens where "
        "no price is known)",
        (
            "#",
            "Model",
            "Runs",
            "Lenient [95% CI]",
            f"Strict{ci}",
            f"Published{ci}",
            "Trials mean ± std",
            f"pass@n{ci}",
            f"maj@n{ci}",
            "Model fail",
            "Infra fail",
            "Tokens",
            "Cost /1k",
            "vs best",
        ),
        rows,
        right=frozenset({0, *range(3, 13)}),
        alert=frozenset({10}),
    )


def _as_summary(board: Mapping[str, Any]) -> dict[str, Any]:
    """The board's rows as a summary's models (keyed by row), for the rounds' tables."""
    synthetic = any(p.get("synthetic") for r in board["rows"] for p in r["provenance"])
    return {
        "models": [{**r, "model": r["row"]} for r in board["rows"]],
        "provenance": {"synthetic": synthetic} if synthetic else None,
    }


def rounds_grids(board: Mapping[str, Any]) -> list[Grid]:
    """The rows with repair rounds: accuracy@1…@K, the repair rate, rounds to solve and
    the cost per solved item (Batch API price), and k rounds against k trials at their
    costs where a row had several trials; none when no row had rounds."""
    as_summary = _as_summary(board)
    if not most_rounds(as_summary):
        return []
    grid = rounds_grid(as_summary, brief=True)
    out = [
        Grid(
            "Repair rounds per row (K = the row's rounds; accuracy@k over the round-1 "
            "answers scored on the shared items; cost per solved item at Batch API price, "
            "tokens where no price is known)",
            grid.columns,
            grid.rows,
            right=grid.right,
        )
    ]
    versus = rounds_vs_trials_grid(as_summary)
    return out + ([versus] if versus.rows else [])


def _k(record: Mapping[str, Any]) -> str:
    n = len(record.get("pass_at_k") or [])
    return f" (k={n})" if n else ""


def paired_grid(board: Mapping[str, Any], limit: int = MATRIX_ROWS) -> Grid:
    """The compact matrix: row minus column, in points, for the top ``limit`` rows; a
    star where the paired test finds the difference significant."""
    labels = [r["row"] for r in board["rows"][:limit]]
    pairs = {(p["a"], p["b"]): p for p in board["pairs"]}

    def cell(a: str, b: str) -> str:
        if a == b:
            return "—"
        p = pairs.get((a, b))
        sign = 1
        if p is None:
            p, sign = pairs[(b, a)], -1
        d = p["diff"]["value"]
        if d is None:
            return "n/a"
        return f"{100 * sign * d:+.1f}" + ("*" if p["significant"] else "")

    shown = len(board["rows"])
    more = f" (the top {limit} of {shown}; every pair in the JSON)" if shown > limit else ""
    return Grid(
        "Paired differences, row − column in accuracy points on the items both scored; "
        f"*: p < {board['significance']} (McNemar for one trial, a paired test on "
        f"per-item means for several){more}",
        ("Model", *labels),
        tuple((a, *(cell(a, b) for b in labels)) for a in labels),
        right=frozenset(range(1, len(labels) + 1)),
    )


def pairs_grid(board: Mapping[str, Any]) -> Grid:
    """Every pair as a row: the difference with its interval, the test, the items."""
    rows = []
    for p in board["pairs"]:
        note = "; ".join(
            f"{count} item(s) only {who} scored"
            for count, who in ((p["only_a"], p["a"]), (p["only_b"], p["b"]))
            if count
        )
        p_text = "—" if p["p"] is None else (f"{p['p']:.3g}")
        test = "—" if p["test"] is None else f"{p['test']} ({p['form']})"
        rows.append(
            (p["a"], p["b"], signed_interval(p["diff"]), test, p_text, str(p["items"]), note)
        )
    return Grid(
        "Paired comparisons: A − B on the items both scored (points, 95% interval paired "
        "over items)",
        ("A", "B", "Δ pts [95% CI]", "Test", "p", "Items", "Note"),
        tuple(rows),
        right=frozenset({2, 4, 5}),
    )


def provenance_grid(board: Mapping[str, Any]) -> Grid:
    """Where each row comes from: one line per (row, run)."""
    rows = tuple(
        (
            r["row"],
            p["run"],
            p["provider"],
            p["api"],
            p["started"] or "—",
            p["finished"] or "—",
            p["aeval"] or "—",
            "SYNTHETIC" if p["synthetic"] else ("unknown" if p["synthetic"] is None else "model"),
        )
        for r in board["rows"]
        for p in r["provenance"]
    )
    return Grid(
        "Provenance of each row",
        ("Model", "Run", "Provider", "API", "Started", "Finished", "aeval", "Answers"),
        rows,
    )


def leaderboard_csv(board: Mapping[str, Any]) -> str:
    """One line per row, full precision (blank where absent)."""
    import csv
    import io

    def cell(value: Any) -> str:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return ""
        return repr(value) if isinstance(value, float) else str(value)

    head = ["rank", "row", "model", "runs", "pooled", "n", "scored"]
    for reading in ("accuracy", "strict_accuracy", "published_accuracy"):
        head += [reading, f"{reading}_low", f"{reading}_high"]
    head += ["trials", "trials_mean", "trials_std", "pass_at_n", "pass_at_n_k"]
    head += ["maj_at_n", "model_failures", "infra_failures"]
    head += ["prompt_tokens", "completion_tokens", "reasoning_tokens", "cost_usd_batch"]
    head += ["cost_per_1000", "tokens_per_1000", "vs_best_p", "vs_best_significant"]
    k_max = most_rounds(_as_summary(board))  # repair rounds: columns only when a row had them
    if k_max:
        head += ["rounds", *(f"accuracy_at_{k}" for k in range(1, k_max + 1))]
        head += ["repair_rate", "mean_rounds_to_solve", "cost_per_solved_usd", "tokens_per_solved"]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(head)
    for r in board["rows"]:
        passes = r.get("pass_at_k") or []
        vs = r.get("vs_best") or {}
        line: list[Any] = [r["rank"], r["row"], r["model"], " ".join(r["runs"]), r["pooled"]]
        line += [r["n"], r["scored"]]
        for reading in ("accuracy", "strict_accuracy", "published_accuracy"):
            line += [r[reading]["value"], r[reading]["low"], r[reading]["high"]]
        across = r["across_trials"]
        line += [across["trials"], across["mean"], across["std"]]
        line += [passes[-1]["value"] if passes else None, len(passes)]
        line += [(r.get("majority") or {}).get("value"), r["model_failures"], r["infra_failures"]]
        tokens = r["tokens"]
        line += [tokens["prompt"], tokens["completion"], tokens.get("reasoning"), r["cost_usd"]]
        line += [r["cost_per_1000"], r["tokens_per_1000"], vs.get("p"), vs.get("significant")]
        if k_max:
            rounds = r.get("rounds") or {}
            at = rounds.get("accuracy_by_round") or []
            line += [rounds.get("rounds")]
            line += [at[k - 1] if k <= len(at) else None for k in range(1, k_max + 1)]
            line += [(rounds.get("repair_rate") or {}).get("value")]
            line += [rounds.get(k) for k in ("mean_rounds_to_solve", "cost_per_solved_usd")]
            line += [rounds.get("tokens_per_solved")]
        writer.writerow([cell(v) for v in line])
    return out.getvalue()
