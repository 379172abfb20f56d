"""What repair rounds bought: accuracy by round, the repair rate, and their cost.

With ``--rounds K`` an answer that is not ``equivalent`` is asked again with the
verifier's feedback (:mod:`aeval.feedback`), up to K rounds, so a (model, trial,
item) has one verdict per round it was asked: rounds 1..j, j its first
``equivalent`` round or K. Round r ≥ 2's ``custom_id`` is ``ITEM_rR``
(:func:`aeval.feedback.round_custom_id`); :func:`item_id` gives every verdict its
item back.

**Round 1 is the run.** Every number a one-round run has (accuracy, counts,
failure reasons, intervals, pass@k, maj@n, the study's tables) is counted on the
round-1 verdicts only (:func:`first_round`), so a K-round run's round 1 reads as a
one-round run of the same settings, and no item counts twice. What the later
rounds add is the :class:`~aeval.store.summary_record.RoundsRecord` built here,
per model and per (model, trial):

- ``items``: the denominator, the round-1 answers *scored* (an infrastructure
  failure of round 1, :data:`aeval.verdicts.INFRA_STATUSES`, is left out, as
  accuracy leaves it out; such an answer is never asked again).
- ``accuracy_by_round[k-1]`` (accuracy@k): the share of those solved in rounds
  1..k, an answer solved at its first ``equivalent`` verdict. Non-decreasing, and
  ``accuracy_by_round[0]`` is the group's ``accuracy``. An answer whose later
  round hit an infrastructure failure stays in the denominator, unsolved from
  there on (``infra_failures`` counts them per round, so an outage in round 2
  is seen as one).
- ``repair_rate``: of the answers *first wrong* (round 1 scored and not
  ``equivalent``: ``first_wrong``, the round-1 model failures), the share solved
  in a later round. Undecided round-1 verdicts (``timeout``, ``unknown``,
  ``resource_limit``) are first wrong too, though not asked again
  (:func:`aeval.feedback.is_repairable`): they are model failures in accuracy,
  and leaving them out would make accuracy@K ≠ accuracy@1 + (1 − accuracy@1) ·
  repair rate, which holds here exactly.
- ``mean_rounds_to_solve``: the mean first ``equivalent`` round over the answers
  solved by round K (1 for an answer right at once).
- ``tokens`` and ``cost_usd`` per round, ``cumulative_cost_usd`` for rounds 1..k,
  ``cost_per_solved_usd`` (all rounds' cost over the answers solved by round K)
  and ``tokens_per_solved``. Round 1's cost is the group's ``cost_usd``.
- ``versus_trials`` (a model with several trials): accuracy@k of k rounds beside
  pass@k of k independent trials (round 1 only), each with its cost per item:
  whether feedback beats asking again independently for the same money.

Intervals (``accuracy_at_k``, ``repair_rate``) are the summary's: Wilson,
clustered by item over trials (:mod:`aeval.summary.intervals`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import polars as pl

from aeval.cost import actual_cost
from aeval.summary.intervals import ClusterSums, rate_record
from aeval.verdicts import INFRA_STATUSES, Status

__all__ = [
    "ROUND_KEYS",
    "first_round",
    "item_id",
    "item_solved",
    "price_rounds",
    "rounds_in",
    "rounds_records",
    "versus_trials",
]

_INFRA = sorted(s.value for s in INFRA_STATUSES)
_EQ = Status.EQUIVALENT.value
# One answer of the run: what a round is asked again for.
ROUND_KEYS = ("model", "trial", "item")

Frame = TypeVar("Frame", pl.DataFrame, pl.LazyFrame)


def _round() -> pl.Expr:
    # a frame read from files written before rounds existed may hold nulls: round 1
    return pl.col("round").fill_null(1)


def item_id() -> pl.Expr:
    """The item a verdict answers: ``custom_id`` without its round suffix (``_rR``,
    R ≥ 2, :func:`aeval.feedback.round_custom_id`), named ``item``."""
    cid = pl.col("custom_id")
    suffix = pl.lit("_r") + _round().cast(pl.String)
    return pl.when(_round() > 1).then(cid.str.strip_suffix(suffix)).otherwise(cid).alias("item")


def first_round(frame: Frame) -> Frame:
    """The round-1 verdicts of ``frame`` (all of them when it has no ``round``
    column, or only round 1): what every count of a one-round run reads."""
    if "round" not in frame.collect_schema().names():
        return frame
    return frame.filter(_round() == 1)


def rounds_in(frame: pl.DataFrame | pl.LazyFrame) -> int:
    """The last round any verdict of ``frame`` answers (1 without a ``round`` column)."""
    if "round" not in frame.collect_schema().names():
        return 1
    top = frame.lazy().select(_round().max()).collect().item()
    return int(top) if top is not None else 1


def _item_sums(per_item: pl.DataFrame, y: str, m: str) -> ClusterSums:
    sums = per_item.select(
        pl.col(y).sum().alias("s"),
        pl.col(m).sum().alias("n"),
        (pl.col(m) > 0).sum().alias("c"),
        (pl.col(y) * pl.col(y)).sum().alias("yy"),
        (pl.col(y) * pl.col(m)).sum().alias("ym"),
        (pl.col(m) * pl.col(m)).sum().alias("mm"),
    ).row(0)
    s, n, c, yy, ym, mm = (0 if v is None else v for v in sums)
    return ClusterSums(int(s), int(n), int(c), float(yy), float(ym), float(mm))


def rounds_records(
    frame: pl.DataFrame | pl.LazyFrame, keys: Sequence[str], rounds: int | None = None
) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Per group of ``keys`` (``["model"]`` or ``["model", "trial"]``, ``model``
    first): its :class:`~aeval.store.summary_record.RoundsRecord` (the costs left
    None: :func:`price_rounds` fills them, knowing the model's price).

    :param frame: a verdict frame (``model``, ``trial``, ``custom_id``, ``round``,
        ``status`` and the token columns), every round of it; or a lazy one (a scan of
        the verdict file: only those columns are read, by each query).
    :param rounds: K, the run's; a model whose verdicts hold a later round is read
        to its last. None: each model's K is its last round (many runs read at once,
        each model its own K). A record with K = 1 says nothing: the caller leaves
        it out.
    """
    keys = list(keys)
    k_max = max(rounds or 1, rounds_in(frame))
    lazy = frame.lazy().with_columns(_round().alias("round"), item_id())
    last = dict(lazy.group_by("model").agg(pl.col("round").max()).collect().iter_rows())
    scored = ~pl.col("status").is_in(_INFRA)
    units = (
        lazy.filter((pl.col("round") == 1) & scored)
        .select(*ROUND_KEYS)
        .unique()
        .join(
            lazy.filter(pl.col("status") == _EQ)
            .group_by(*ROUND_KEYS)
            .agg(pl.col("round").min().alias("solved_at")),
            on=list(ROUND_KEYS),
            how="left",
            nulls_equal=True,
        )
    )
    # The cluster of an interval is the item: a model's answers to it over its trials.
    solved_at = pl.col("solved_at")
    first_wrong = solved_at.is_null() | (solved_at > 1)
    per_item = (
        units.group_by(*keys, "item")
        .agg(
            pl.len().alias("m"),
            *((solved_at <= k).sum().alias(f"y{k}") for k in range(1, k_max + 1)),
            first_wrong.sum().alias("wrong"),
            (first_wrong & solved_at.is_not_null()).sum().alias("repaired"),
            solved_at.sum().alias("rounds_sum"),
        )
        .collect()
    )
    per_round = (
        lazy.group_by(*keys, "round")
        .agg(
            pl.len().alias("asked"),
            pl.col("status").is_in(_INFRA).sum().alias("infra"),
            pl.col("prompt_tokens").sum().alias("prompt"),
            pl.col("completion_tokens").sum().alias("completion"),
            pl.col("reasoning_tokens").sum().alias("reasoning"),
            pl.col("reasoning_tokens").is_not_null().any().alias("reasoning_said"),
        )
        .collect()
    )
    rounds_of: dict[tuple[Any, ...], dict[int, dict[str, Any]]] = {}
    for row in per_round.iter_rows(named=True):
        rounds_of.setdefault(tuple(row[k] for k in keys), {})[int(row["round"])] = row
    out: dict[tuple[Any, ...], dict[str, Any]] = {}

    def k_of(key: tuple[Any, ...]) -> int:
        return max(rounds or 1, int(last.get(key[0]) or 1))

    for key, part in per_item.partition_by(keys, as_dict=True, maintain_order=True).items():
        out[key] = _record(part, rounds_of.get(key, {}), k_of(key))
    for key, by_round in rounds_of.items():  # a group with no round-1 answer scored
        if key not in out:
            out[key] = _record(per_item.clear(), by_round, k_of(key))
    return out


def _record(
    part: pl.DataFrame, by_round: Mapping[int, Mapping[str, Any]], k_max: int
) -> dict[str, Any]:
    items = int(part.get_column("m").sum() or 0)
    solved_by = [int(part.get_column(f"y{k}").sum() or 0) for k in range(1, k_max + 1)]
    solved = [b - a for a, b in zip([0, *solved_by], solved_by, strict=False)]
    at_k = [
        {"k": k, **rate_record(solved_by[k - 1], items, _item_sums(part, f"y{k}", "m"))}
        for k in range(1, k_max + 1)
    ]
    wrong = int(part.get_column("wrong").sum() or 0)
    repaired = int(part.get_column("repaired").sum() or 0)
    rounds_sum = int(part.get_column("rounds_sum").sum() or 0)
    total = solved_by[-1] if solved_by else 0
    tokens: list[dict[str, int | None]] = []
    asked: list[int] = []
    infra: list[int] = []
    all_tokens = 0
    for r in range(1, k_max + 1):
        row = by_round.get(r) or {}
        prompt, completion = int(row.get("prompt") or 0), int(row.get("completion") or 0)
        tokens.append(
            {
                "prompt": prompt,
                "completion": completion,
                "total": prompt + completion,
                "reasoning": int(row.get("reasoning") or 0) if row.get("reasoning_said") else None,
            }
        )
        asked.append(int(row.get("asked") or 0))
        infra.append(int(row.get("infra") or 0))
        all_tokens += prompt + completion
    return {
        "rounds": k_max,
        "items": items,
        "asked": asked,
        "infra_failures": infra,
        "solved": solved,
        "solved_by": solved_by,
        "accuracy_by_round": [r["value"] for r in at_k],
        "accuracy_at_k": at_k,
        "first_wrong": wrong,
        "repaired": repaired,
        "repair_rate": rate_record(repaired, wrong, _item_sums(part, "repaired", "wrong")),
        "mean_rounds_to_solve": rounds_sum / total if total else None,
        "tokens": tokens,
        "cost_usd": [None] * k_max,
        "cumulative_cost_usd": [None] * k_max,
        "cost_per_solved_usd": None,
        "tokens_per_solved": all_tokens / total if total else None,
    }


def item_solved(frame: pl.DataFrame, model: str, k: int | None = None) -> pl.DataFrame:
    """Per item of ``model`` over its trials: ``y``, its answers solved by round ``k``
    (None: by the last round), and ``m``, its round-1 answers scored: the per-item
    counts a paired comparison of accuracy@k reads (for a one-round run, accuracy)."""
    lazy = frame.lazy().filter(pl.col("model") == model)
    if "round" not in frame.columns:
        lazy = lazy.with_columns(pl.lit(1, dtype=pl.Int64).alias("round"))
    lazy = lazy.with_columns(_round().alias("round"), item_id())
    scored = ~pl.col("status").is_in(_INFRA)
    units = lazy.filter((pl.col("round") == 1) & scored).select("trial", "item").unique()
    solved = lazy.filter(pl.col("status") == _EQ)
    if k is not None:
        solved = solved.filter(pl.col("round") <= k)
    hits = solved.select("trial", "item").unique().with_columns(pl.lit(1).alias("hit"))
    return (
        units.join(hits, on=["trial", "item"], how="left", nulls_equal=True)
        .group_by("item")
        .agg(pl.col("hit").fill_null(0).sum().cast(pl.Int64).alias("y"), pl.len().alias("m"))
        .sort("item")
        .collect()
    )


def price_rounds(record: dict[str, Any], model: str, *, batch: bool) -> None:
    """Fill ``record``'s costs at ``model``'s price (Batch API, or list price with
    ``batch=False``), as :func:`aeval.summary.aggregate.summarize` prices a group:
    each round over the requests it answered. Left None when the price is unknown."""
    costs = []
    for tokens, asked, infra in zip(
        record["tokens"], record["asked"], record["infra_failures"], strict=True
    ):
        answered = asked - infra
        costs.append(actual_cost(model, tokens, requests=max(answered, 1), batch=batch))
    record["cost_usd"] = costs
    cumulative: list[float | None] = []
    running: float | None = 0.0
    for cost in costs:
        running = None if running is None or cost is None else running + cost
        cumulative.append(None if running is None else round(running, 6))
    record["cumulative_cost_usd"] = cumulative
    total, solved = cumulative[-1] if cumulative else None, record["solved_by"][-1]
    record["cost_per_solved_usd"] = total / solved if total is not None and solved else None


def versus_trials(
    record: Mapping[str, Any], pass_at_k: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """accuracy@k of k rounds beside pass@k of k independent trials (a model's
    round-1 answers), k = 1 … the larger of K and the trials, each at its cost per
    item: k rounds cost rounds 1..k of one answer, k trials k round-1 answers."""
    items = record["items"]
    first_cost = record["cost_usd"][0] if record["cost_usd"] else None
    first_tokens = record["tokens"][0]["total"] if record["tokens"] else 0
    cumulative_tokens = 0
    out = []
    for k in range(1, max(record["rounds"], len(pass_at_k)) + 1):
        in_rounds, in_trials = k <= record["rounds"], k <= len(pass_at_k)
        if in_rounds:
            cumulative_tokens += record["tokens"][k - 1]["total"]
        cost = record["cumulative_cost_usd"][k - 1] if in_rounds else None
        out.append(
            {
                "k": k,
                "accuracy_at_k": record["accuracy_by_round"][k - 1] if in_rounds else None,
                "rounds_cost_per_item": cost / items if cost is not None and items else None,
                "rounds_tokens_per_item": cumulative_tokens / items
                if in_rounds and items
                else None,
                "pass_at_k": pass_at_k[k - 1]["value"] if in_trials else None,
                "trials_cost_per_item": (
                    k * first_cost / items
                    if in_trials and first_cost is not None and items
                    else None
                ),
                "trials_tokens_per_item": k * first_tokens / items if in_trials and items else None,
            }
        )
    return out
