"""The numbers of a run: per model, per model × trial and per model × tier.

:func:`summarize` turns a verdict frame (:func:`aeval.verdicts.verdict_schema`)
into the plain, JSON-ready dict written as ``summary.json``; every table, chart
and comparison is rendered from that dict, so what a report shows is what
``summary.json`` says.

Accuracy is counted over *scored* answers: every verdict except the
infrastructure failures (:data:`aeval.verdicts.INFRA_STATUSES`), which are
reported apart so an outage never reads as a weak model. *Lenient* accuracy
counts every ``equivalent``; *strict* accuracy counts only those whose answer
needed no repair (``repaired`` is null).

*Published* accuracy is the WARP study's own evaluator (``correct_published``,
see :mod:`aeval.verify.published`), counted the way the study counted it: over
every verdict that has the reading, infrastructure failures included (a line
with no answer is incorrect there). It is ``None`` when the reading was
switched off.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, TypeVar, cast, get_args

import polars as pl

from aeval.cost import actual_cost
from aeval.errors import RunDirError
from aeval.store.layout import RunLayout
from aeval.store.summary_record import (
    AcrossTrials,
    Group,
    Majority,
    ModelGroup,
    PassAtK,
    Rate,
    Summary,
    TierGroup,
    Tokens,
    TrialGroup,
)
from aeval.store.verdict_file import read_verdict_frames
from aeval.study_reasons import STUDY_CATEGORIES
from aeval.summary.groups import (
    CATEGORY_KEYS,
    category_record,
    group_column,
    group_sort_key,
    separating_items,
    study_tables,
)
from aeval.summary.intervals import CONFIDENCE, ClusterSums, rate_record
from aeval.summary.order import tier_key
from aeval.summary.rounds import first_round, price_rounds, rounds_in, rounds_records, versus_trials
from aeval.summary.sampling import ItemCounts, item_counts, majority_block, pass_at_k_block
from aeval.verdicts import INFRA_STATUSES, Direction, Status, verdict_schema, verdicts_frame

__all__ = [
    "INFRA_STATUS_VALUES",
    "SUMMARY_VERSION",
    "AcrossTrials",
    "Group",
    "Majority",
    "ModelGroup",
    "PassAtK",
    "Rate",
    "Summary",
    "TierGroup",
    "Tokens",
    "TrialGroup",
    "grouped_by",
    "load_run",
    "load_summary",
    "scan_run",
    "summarize",
    "summarize_file",
]

SUMMARY_VERSION = 1
INFRA_STATUS_VALUES: tuple[str, ...] = tuple(sorted(s.value for s in INFRA_STATUSES))
_STATUSES = [s.value for s in Status]
_DIRECTIONS: tuple[str, ...] = get_args(Direction)

Frame = TypeVar("Frame", pl.DataFrame, pl.LazyFrame)


def _successes() -> dict[str, tuple[pl.Expr, pl.Expr]]:
    """The counts whose accuracy gets an item-clustered interval, by name: each
    with what counts as a success and what counts towards its denominator."""
    correct = pl.col("status") == Status.EQUIVALENT.value
    scored = ~pl.col("status").is_in(INFRA_STATUS_VALUES)
    # The published reading counts every verdict that has it, as the study did.
    published = pl.col("correct_published")
    return {
        "correct": (correct, scored),
        "correct_strict": (correct & pl.col("repaired").is_null(), scored),
        "correct_published": (published.fill_null(False), published.is_not_null()),
    }


def _hit(name: str) -> str:
    return f"hit:{name}"


def _counted(name: str) -> str:
    return f"counted:{name}"


def _counts(frame: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    """``keys``, ``custom_id`` and, per verdict, one column for each count a group
    record holds, so that every count of a group is the plain sum of its column.

    Counting this way is a group-by of sums only. The same counts as expressions
    inside the aggregation (``(status == s).sum()``) make polars gather every
    group's rows once per expression: +44 MB of peak memory for four groups of
    200,000 verdicts, and ~90 MB for the 200,000 item groups the intervals need,
    against +4 MB here."""
    status = pl.col("status")
    correct = status == Status.EQUIVALENT.value
    cat = pl.col("published_category")
    columns = [
        status.is_in(INFRA_STATUS_VALUES).alias("infra_failures"),
        correct.alias("correct"),
        (correct & pl.col("repaired").is_null()).alias("correct_strict"),
        pl.col("repaired").is_not_null().alias("repaired"),
        pl.col("correct_published"),
        pl.col("correct_published").is_not_null().alias("n_published"),
        pl.col("prompt_tokens"),
        pl.col("completion_tokens"),
        pl.col("reasoning_tokens"),
        pl.col("reasoning_tokens").is_not_null().alias("reasoning_said"),
        *((status == s).alias(f"status:{s}") for s in _STATUSES),
        *((pl.col("direction") == d).alias(f"direction:{d}") for d in _DIRECTIONS),
        *((cat == k).alias(f"category:{k}") for k in CATEGORY_KEYS),
        (cat.is_null() & pl.col("published_reason").is_not_null()).alias("category:uncategorised"),
    ]
    for name, (hit, counted) in _successes().items():
        columns += [hit.alias(_hit(name)), counted.alias(_counted(name))]
    return frame.select(*keys, "custom_id", *columns)


def _cluster_sums(
    counts: pl.DataFrame, keys: list[str]
) -> dict[tuple[Any, ...], dict[str, ClusterSums]]:
    """Per group of ``keys``: the per-item sums each clustered interval needs.

    An item (``custom_id``) is the cluster: its answers over the group's trials
    (and models, for the overall row) are counted together. ``counts`` is
    :func:`_counts`'s frame.
    """
    names = list(_successes())
    per_item = (
        counts.lazy()
        .group_by([*keys, "custom_id"])
        .agg(pl.col(_hit(n), _counted(n)).cast(pl.Int64).sum() for n in names)
    )
    terms = []
    for name in names:
        y = pl.col(_hit(name)).cast(pl.Float64)
        m = pl.col(_counted(name)).cast(pl.Float64)
        terms += [
            pl.col(_hit(name)).alias(f"{name}:s"),
            pl.col(_counted(name)).alias(f"{name}:n"),
            (pl.col(_counted(name)) > 0).alias(f"{name}:clusters"),
            (y * y).alias(f"{name}:syy"),
            (y * m).alias(f"{name}:sym"),
            (m * m).alias(f"{name}:smm"),
        ]
    # One group per item: polars' streaming engine holds a fraction of what the
    # in-memory one does for 200,000 groups (+18 MB against +49 MB of peak memory).
    # The sums are of integers (the floats too, below 2**53): exact in any order.
    sums = per_item.select(*keys, *terms).group_by(keys).agg(pl.all().sum())
    out: dict[tuple[Any, ...], dict[str, ClusterSums]] = {}
    for row in sums.collect(engine="streaming").to_dicts():
        out[tuple(row[k] for k in keys)] = {
            name: ClusterSums(
                int(row[f"{name}:s"]),
                int(row[f"{name}:n"]),
                int(row[f"{name}:clusters"]),
                float(row[f"{name}:syy"]),
                float(row[f"{name}:sym"]),
                float(row[f"{name}:smm"]),
            )
            for name in names
        }
    return out


def _group_record(row: dict[str, Any], sums: dict[str, ClusterSums]) -> dict[str, Any]:
    n = int(row["n"])
    infra = int(row["infra_failures"])
    scored = n - infra
    correct = int(row["correct"])
    strict = int(row["correct_strict"])
    return {
        "n": n,
        "scored": scored,
        "correct": correct,
        "correct_strict": strict,
        "accuracy": rate_record(correct, scored, sums.get("correct")),
        "strict_accuracy": rate_record(strict, scored, sums.get("correct_strict")),
        "published_accuracy": rate_record(
            int(row["correct_published"] or 0),
            int(row["n_published"] or 0),
            sums.get("correct_published"),
        ),
        "model_failures": scored - correct,
        "infra_failures": infra,
        "repaired": int(row["repaired"]),
        "statuses": {s: int(row[f"status:{s}"]) for s in _STATUSES},
        "directions": {d: int(row[f"direction:{d}"]) for d in _DIRECTIONS},
        "published_categories": category_record(row),
        "tokens": {
            "prompt": int(row["prompt_tokens"] or 0),
            "completion": int(row["completion_tokens"] or 0),
            "total": int((row["prompt_tokens"] or 0) + (row["completion_tokens"] or 0)),
            # Of the completion tokens; None when no answer of the group said how many.
            "reasoning": int(row["reasoning_tokens"] or 0) if row["reasoning_said"] else None,
        },
    }


def _grouped(frame: pl.DataFrame, keys: list[str]) -> list[dict[str, Any]]:
    if frame.is_empty():
        return []
    counts = _counts(frame, keys)
    stats = [c for c in counts.columns[len(keys) + 1 :] if not c.startswith(("hit:", "counted:"))]
    out = counts.group_by(keys, maintain_order=True).agg(pl.len().alias("n"), pl.col(stats).sum())
    sums = _cluster_sums(counts, keys)
    return [
        {**{k: row[k] for k in keys}, **_group_record(row, sums[tuple(row[k] for k in keys)])}
        for row in out.to_dicts()
    ]


def _across_trials(trials: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean ± sample std of per-trial accuracy (the published comparisons' form)."""
    values = [t["accuracy"]["value"] for t in trials if t["accuracy"]["value"] is not None]
    k = len(values)
    # fsum: the same bits whatever order the trials were first seen in
    mean = math.fsum(values) / k if k else None
    std = (
        math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (k - 1))
        if k > 1 and mean is not None
        else None
    )
    return {"trials": k, "mean": mean, "std": std}


def _attach_sampling(
    tiers: list[dict[str, Any]], models: list[dict[str, Any]], frame: pl.DataFrame
) -> None:
    """Give each tier and model group its ``pass_at_k`` and ``majority`` (see
    :mod:`aeval.summary.sampling`).

    An item belongs to one tier, so a model's items are its tiers' items together:
    one pass over the verdicts serves both levels (the pass, and building one record
    per item, are most of a summary's cost on a large run). Verdicts that put one
    item under two tiers of a model get the model's own pass."""
    by_tier = item_counts(frame, ["model", "tier"])
    by_model: dict[tuple[Any, ...], list[ItemCounts]] = {}
    for (model, _tier), items in by_tier.items():
        by_model.setdefault((model,), []).extend(items)
    for items in by_model.values():
        items.sort(key=lambda i: i.custom_id)
    if any(len({i.custom_id for i in items}) != len(items) for items in by_model.values()):
        by_model = item_counts(frame, ["model"])
    for groups, keys, found in ((tiers, ["model", "tier"], by_tier), (models, ["model"], by_model)):
        for g in groups:
            mine = found.get(tuple(g[k] for k in keys), [])
            g["pass_at_k"] = pass_at_k_block(mine)
            g["majority"] = majority_block(mine)


def _conform(verdicts: Frame) -> Frame:
    present = verdicts.collect_schema().names()
    missing = [c for c in ("model", "trial", "custom_id", "status") if c not in present]
    if missing:
        raise RunDirError(f"verdict frame lacks column(s) {', '.join(missing)}")
    cols = [
        pl.col(c).cast(t) if c in present else pl.lit(None, dtype=t).alias(c)
        for c, t in verdict_schema().items()
    ]
    if "published_category" not in present and "published_reason" in present:
        # verdicts written before the column existed: the category follows from the reason
        cols = [
            pl.col("published_reason")
            .cast(pl.String)
            .replace_strict(STUDY_CATEGORIES, default=None, return_dtype=pl.String)
            .alias(c)
            if c == "published_category"
            else col
            for c, col in zip(verdict_schema(), cols, strict=True)
        ]
    return verdicts.select(cols)


def summarize(
    verdicts: pl.DataFrame,
    *,
    batch_prices: bool = True,
    items: bool | Collection[str] = True,
    rounds: int | None = None,
) -> Summary:
    """The content of ``summary.json`` for a verdict frame with ``verdict_schema()``.

    Returns a JSON-serialisable dict (:class:`Summary`) with keys ``version``, ``confidence``,
    ``overall`` (all verdicts), ``models`` (one entry per model, in order of first
    appearance, each with an ``across_trials`` mean ± std), ``trials`` (per model ×
    trial) and ``tiers`` (per model × tier). Every group carries ``n``, ``scored``,
    ``correct``, ``accuracy``, ``strict_accuracy`` and ``published_accuracy``
    (value with a 95 % interval ``low``/``high``: Wilson when each item was
    answered once, item-clustered over trials otherwise, with its
    ``design_effect``; see
    :mod:`aeval.summary.intervals`), ``model_failures``, ``infra_failures``,
    counts per status and per wrong direction, tokens used and ``cost_usd`` (at Batch
    API prices, or full prices with ``batch_prices=False`` for a direct-mode run;
    ``None`` when a model's price is unknown, :mod:`aeval.cost`).

    Model and tier groups also carry ``pass_at_k`` (a list, k = 1 … n trials:
    Chen et al.'s unbiased estimator averaged over items, with a seeded
    item-bootstrap interval) and ``majority`` (maj@n over Z3 equivalence classes
    of the answers, from the ``answer_class`` column; None when the classes were
    not computed). See :mod:`aeval.summary.sampling`.

    ``programs``, ``distances`` and ``sizes`` are the same records per model and
    program, extrapolation distance and answer-size bin (:func:`grouped_by`;
    empty when the verdicts do not say), ``study`` the study's own three tables
    of its categories of the published reading and ``separating`` the items
    that separate models (:mod:`aeval.summary.groups`). ``items=False`` leaves
    those five out (a comparison's per-group summaries need only accuracy), a
    collection of their names keeps only those.

    With repair rounds (``rounds``, K from the run's config; None: each model's last
    round in the verdicts) every number above is of the round-1 verdicts, so round 1
    reads as a one-round run, and each model and trial group gets a ``rounds``
    record (:mod:`aeval.summary.rounds`) when its K > 1. A one-round summary has no
    ``rounds`` key at all.

    :raises RunDirError: when a required column is missing.
    """
    # Only the columns a summary reads: every group-by below copies what it is given,
    # and the texts left out (reasons, counterexamples) are a third of a large frame.
    every_round = _conform(verdicts).select(_SUMMARY_COLUMNS)
    last_round = rounds_in(every_round)
    # a one-round run's frame is used as it is: no copy of it filtered to round 1
    frame = every_round if last_round == 1 else first_round(every_round)
    return _summary(
        frame, every_round, last_round, batch_prices=batch_prices, items=items, rounds=rounds
    )


def summarize_file(
    path: Path,
    *,
    batch_prices: bool = True,
    items: bool | Collection[str] = True,
    rounds: int | None = None,
) -> Summary:
    """:func:`summarize` of the verdicts in the parquet file ``path``, the same dict, read
    lazily: only the round-1 verdicts' summary columns are held in memory; the rounds
    block reads every round's few columns it needs from the file.

    The end of a run summarises this way from the verdict frame it has just written,
    having let the frame go: at 4 × 50,000 requests with three rounds (319,000
    verdicts) the whole frame beside the summary's work set the run's peak memory
    (bench/README.md, "Repair rounds: memory").

    :raises RunDirError: when a required column is missing.
    """
    every_round = _conform(pl.scan_parquet(path)).select(_SUMMARY_COLUMNS)
    last_round = rounds_in(every_round)
    frame = first_round(every_round).collect()
    return _summary(
        frame, every_round, last_round, batch_prices=batch_prices, items=items, rounds=rounds
    )


def _summary(
    frame: pl.DataFrame,
    every_round: pl.DataFrame | pl.LazyFrame,
    last_round: int,
    *,
    batch_prices: bool,
    items: bool | Collection[str],
    rounds: int | None,
) -> Summary:
    """:func:`summarize`'s dict from the round-1 verdicts (``frame``) and every round's
    (``every_round``, read only for the rounds block), both with ``_SUMMARY_COLUMNS``."""
    models = _grouped(frame, ["model"])
    trials = _grouped(frame, ["model", "trial"])
    tiers = _grouped(frame, ["model", "tier"])
    overall = _grouped(frame.with_columns(pl.lit("all").alias("_all")), ["_all"])
    for m in models:
        m["across_trials"] = _across_trials([t for t in trials if t["model"] == m["model"]])
    _attach_sampling(tiers, models, frame)
    _add_cost(models, trials, tiers, overall, batch=batch_prices)
    if max(rounds or 1, last_round) > 1:
        _attach_rounds(models, trials, every_round, rounds, batch=batch_prices)
    order = {m["model"]: i for i, m in enumerate(models)}
    trials.sort(key=lambda t: (order[t["model"]], t["trial"] is None, t["trial"] or 0))
    tiers.sort(key=lambda t: (order[t["model"]], *tier_key(t["tier"])))
    # The groups are built as plain dicts, key by key, above: the cast names what they hold.
    summary: Summary = {
        "version": SUMMARY_VERSION,
        "confidence": CONFIDENCE,
        "infra_statuses": list(INFRA_STATUS_VALUES),  # a fresh list: callers may edit it
        "overall": (
            cast(Group, {k: v for k, v in overall[0].items() if k != "_all"}) if overall else None
        ),
        "models": cast("list[ModelGroup]", models),
        "trials": cast("list[TrialGroup]", trials),
        "tiers": cast("list[TierGroup]", tiers),
    }
    if items:
        wanted = ITEM_LEVELS if items is True else frozenset(items)
        levels = _item_levels(frame, wanted, models, tiers)
        summary.update(levels)  # type: ignore[typeddict-item]
    return summary


def _attach_rounds(
    models: list[dict[str, Any]],
    trials: list[dict[str, Any]],
    frame: pl.DataFrame | pl.LazyFrame,
    rounds: int | None,
    *,
    batch: bool,
) -> None:
    """Give each model and trial group its ``rounds`` record, where its model's K > 1
    (``rounds``, or the last round of its verdicts when None)."""
    for level, keys in ((models, ["model"]), (trials, ["model", "trial"])):
        found = rounds_records(frame, keys, rounds)
        for g in level:
            record = found.get(tuple(g[k] for k in keys))
            if record is None or record["rounds"] < 2:
                continue
            price_rounds(record, g["model"], batch=batch)
            g["rounds"] = record
    for m in models:
        trials_of = sum(1 for t in trials if t["model"] == m["model"])
        if "rounds" in m and trials_of > 1:
            m["rounds"]["versus_trials"] = versus_trials(m["rounds"], m["pass_at_k"])


ITEM_LEVELS = frozenset({"programs", "distances", "sizes", "study", "separating"})
# What summarize reads of a verdict frame (the groups' keys and counts, the item
# levels' columns, the answers' classes).
_SUMMARY_COLUMNS = (
    *("model", "trial", "custom_id", "round", "tier", "status", "repaired", "direction"),
    *("correct_published", "published_reason", "published_category"),
    *(
        "prompt_tokens",
        "completion_tokens",
        "reasoning_tokens",
        "program",
        "distance",
        "answer_chars",
    ),
    "answer_class",
)


def _item_levels(
    frame: pl.DataFrame,
    wanted: Collection[str],
    models: list[dict[str, Any]],
    tiers: list[dict[str, Any]],
) -> dict[str, Any]:
    """What the items are (empty when the verdicts do not say): per model and program,
    extrapolation distance and answer size; the study's tables; the separating items.

    One level at a time: the three stacked into one pass saved ~0.1 s on 200,000
    verdicts but held three copies of their counts at once (+130 MB of peak memory)."""
    out: dict[str, Any] = {}
    levels = [
        (level, by)
        for level, column, by in (
            ("programs", "program", "program"),
            ("distances", "distance", "distance"),
            ("sizes", "answer_chars", "size"),
        )
        if (level in wanted or (level == "programs" and "study" in wanted))
        and frame.get_column(column).null_count() < frame.height
    ]
    for level, _ in (("programs", 0), ("distances", 0), ("sizes", 0)):
        if level in wanted or (level == "programs" and "study" in wanted):
            out[level] = []
    if levels:
        models_seen = frame.get_column("model").unique(maintain_order=True).to_list()
        order = {m: i for i, m in enumerate(models_seen)}
        for level, by in levels:
            out[level] = _renamed(_level_groups(frame, by, order), by)
    if "study" in wanted:
        out["study"] = study_tables(models, tiers, out["programs"])
        if "programs" not in wanted:
            del out["programs"]
    if "separating" in wanted:
        out["separating"] = separating_items(frame)
    return out


def _level_groups(frame: pl.DataFrame, by: str, order: dict[str, int]) -> list[dict[str, Any]]:
    """The groups of one item level, by model (in ``order``) and then by value of ``by``."""
    key = group_sort_key(by)
    groups = _grouped(group_column(frame, by), ["model", "group"])
    return sorted(groups, key=lambda g: (order[g["model"]], key(g["group"])))


def _renamed(groups: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """Groups of :func:`grouped_by` with their ``group`` key named for what it is."""
    out = []
    for g in groups:
        value = g.pop("group")
        out.append({"model": g.pop("model"), name: value, **g})
    return out


def grouped_by(frame: pl.DataFrame, by: str, *, conform: bool = False) -> list[dict[str, Any]]:
    """Per model and value of ``by`` (``program``, ``tier``, ``distance``, ``size``,
    … or any column of ``frame``; round-1 verdicts only): the same record as a tier's, with its
    item-clustered intervals, keyed ``model`` and ``group`` (text; None for
    verdicts without a value), ordered by model then by value.

    :param conform: bring ``frame`` to the verdict schema first (keeping extra
        columns, e.g. a dataset's joined in).
    """
    if conform:
        schema = verdict_schema()
        extra = [c for c in frame.columns if c not in schema]
        frame = pl.concat([_conform(frame), frame.select(extra)], how="horizontal")
    frame = first_round(frame)  # a repair run's groups are of its round 1, as its accuracy
    grouped = group_column(frame, by)
    groups = _grouped(grouped, ["model", "group"])
    order = {m: i for i, m in enumerate(dict.fromkeys(frame.get_column("model").to_list()))}
    key = group_sort_key(by)
    groups.sort(key=lambda g: (order[g["model"]], key(g["group"])))
    return groups


def _add_cost(*levels: list[dict[str, Any]], batch: bool) -> None:
    """Each group's ``cost_usd`` at Batch API prices (:mod:`aeval.cost`), or at full price
    (``batch=False``: a direct-mode run): ``None`` for a model whose price is unknown;
    overall, the sum when every model's is known."""
    *by_model, overall = levels
    for level in by_model:
        for g in level:
            answered = g["n"] - g["infra_failures"]  # what was billed per request, on average
            g["cost_usd"] = actual_cost(
                g["model"], g["tokens"], requests=max(answered, 1), batch=batch
            )
    costs = [m["cost_usd"] for m in by_model[0]]
    for g in overall:
        known = bool(costs) and all(c is not None for c in costs)
        g["cost_usd"] = round(sum(costs), 6) if known else None


def load_run(run_dir: Path | str) -> pl.DataFrame:
    """The verdicts of a run (or ``rescore`` output) directory as a ``verdict_schema()`` frame.

    Reads ``verdicts.parquet`` when present, else ``verdicts.jsonl`` (a run still
    going or interrupted), through :mod:`aeval.store.verdict_file` (a torn last
    line is passed over; any other unreadable line is an error naming it). When
    the same (model, trial, custom_id) appears twice, the later line wins.

    :raises RunDirError: the directory or its verdicts are missing or unreadable.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunDirError(f"{run_dir}: not a directory (expected a run or rescore output dir)")
    layout = RunLayout(run_dir)
    parquet, jsonl = layout.verdicts_parquet, layout.verdicts
    if parquet.is_file():
        try:
            frame = pl.read_parquet(parquet)
        except Exception as err:  # polars raises several unrelated types here
            raise RunDirError(f"{parquet}: unreadable parquet ({err})") from err
        try:
            return _conform(frame)
        except RunDirError as err:
            raise RunDirError(f"{parquet}: {err}") from err
    if jsonl.is_file():
        return _read_jsonl(jsonl)
    raise RunDirError(
        f"{run_dir}: no verdicts.parquet or verdicts.jsonl "
        "(is this a run directory made by 'aeval run' or 'aeval rescore'?)"
    )


def scan_run(
    run_dir: Path | str,
    columns: Collection[str],
    *,
    types: Mapping[str, pl.DataType] | None = None,
) -> pl.LazyFrame:
    """``columns`` of a run's (or ``rescore`` output's) verdicts, read lazily: only those
    columns of ``verdicts.parquet`` are read, and only when the frame is collected.

    A column the file lacks (verdicts written before it existed) is null, with the
    verdict schema's type (or the one ``types`` gives a column the schema does not
    know; String when neither does). A run
    still going (only ``verdicts.jsonl``) is read whole, as :func:`load_run` does.

    :raises RunDirError: as :func:`load_run`.
    """
    layout = RunLayout(Path(run_dir))
    schema: dict[str, pl.DataType] = {**(types or {}), **verdict_schema()}
    if layout.verdicts_parquet.is_file():
        frame = pl.scan_parquet(layout.verdicts_parquet)
        try:
            present = frame.collect_schema().names()
        except Exception as err:  # polars raises several unrelated types here
            raise RunDirError(f"{layout.verdicts_parquet}: unreadable parquet ({err})") from err
    else:
        whole = load_run(run_dir)
        frame, present = whole.lazy(), whole.columns
    return frame.select(
        pl.col(c).cast(schema.get(c, pl.String()))
        if c in present
        else pl.lit(None, dtype=schema.get(c, pl.String())).alias(c)
        for c in columns
    )


def _read_jsonl(path: Path) -> pl.DataFrame:
    parts = list(read_verdict_frames(path)) or [verdicts_frame([])]
    frame = pl.concat(parts, how="vertical") if len(parts) > 1 else parts[0]
    return frame.unique(["model", "trial", "custom_id"], keep="last", maintain_order=True)


def load_summary(run_dir: Path | str) -> Summary | None:
    """``summary.json`` of a run directory, or None when the run never wrote one."""
    return RunLayout(Path(run_dir)).read_summary()
