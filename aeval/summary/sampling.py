"""pass@k and maj@n over the trials of a model: what repeated sampling buys.

**pass@k** is the probability that at least one of k answers drawn from an
item's n answers is correct, estimated without bias by Chen et al. (2021,
"Evaluating Large Language Models Trained on Code", eq. 1) as
``1 − C(n−c, k) / C(n, k)`` for an item with c correct answers out of n, and
averaged over items. pass@1 is the mean per-item accuracy. An item whose answers
were partly lost to infrastructure failures has a smaller n; it counts for
``k ≤ n`` only (each ``k`` says over how many items it is taken).

**maj@n** is majority voting (self-consistency, Wang et al. 2023) where votes
are counted over *equivalence classes* of answers, not over their text: the
``answer_class`` column (:mod:`aeval.scoring.answer_classes`) puts answers that Z3
proved equivalent into one class, class 0 being the ground truth's. Per item:

- answers without a formula (``no_answer``, ``parse_error``, ``unknown_symbol``,
  ``forbidden_command``, ``too_large``: class ``-1``) do not vote, as
  self-consistency discards answers it cannot parse; an item where nobody voted
  scores 0 (``no_votes``). Infrastructure failures neither vote nor count.
- the largest class wins; it is correct iff it is class 0. A tie between the t
  largest classes scores ``1/t`` when class 0 is among them (the expected
  score of a fair coin between them, without a coin: the report is the same
  every time), else 0 (``ties`` counts such items).

Both come with a seeded item-bootstrap 95 % interval (:mod:`aeval.summary.bootstrap`).
Both read the lenient reading (``status == equivalent``), as accuracy does.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any, NamedTuple

import polars as pl

from aeval.summary.bootstrap import item_bootstrap, percentile_interval
from aeval.verdicts import INFRA_STATUSES, Status

__all__ = [
    "ItemCounts",
    "item_counts",
    "majority_block",
    "majority_vote",
    "paired_sampling_diffs",
    "pass_at_k",
    "pass_at_k_block",
]

_INFRA = sorted(s.value for s in INFRA_STATUSES)
NO_VOTE = -1  # answer_class of an answer that does not vote
TRUTH_CLASS = 0  # answer_class of the answers equivalent to the ground truth


def pass_at_k(n: int, c: int, k: int) -> float:
    """Chen et al.'s unbiased pass@k of one item: ``1 − C(n−c, k) / C(n, k)``.

    :raises ValueError: unless ``0 ≤ c ≤ n`` and ``1 ≤ k ≤ n``.
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:  # every draw of k answers holds a correct one
        return 1.0
    # Exact integers, one rounding: no cancellation for large n.
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def majority_vote(classes: Sequence[int]) -> tuple[float, bool, bool]:
    """One item's maj@n credit from its answers' classes: ``(credit, tie, no_votes)``.

    Classes below 0 do not vote; the largest class wins, class 0 is the truth's;
    a tie between t largest classes gives ``1/t`` when class 0 is among them.
    """
    votes = Counter(c for c in classes if c >= 0)
    if not votes:
        return 0.0, False, True
    top = max(votes.values())
    leaders = [c for c, count in votes.items() if count == top]
    credit = 1.0 / len(leaders) if TRUTH_CLASS in leaders else 0.0
    return credit, len(leaders) > 1, False


class ItemCounts(NamedTuple):
    """One item of one group: scored answers, correct ones, and the answers' classes
    (``None`` when the classes were never computed for some answer).

    A named tuple rather than a frozen dataclass: a report builds one per item and
    group (tens of thousands on a large run), and a tuple is built several times
    faster than a frozen dataclass, whose ``__init__`` sets each field through
    ``object.__setattr__``."""

    custom_id: str
    n: int
    c: int
    classes: tuple[int, ...] | None


def item_counts(frame: pl.DataFrame, keys: list[str]) -> dict[tuple[Any, ...], list[ItemCounts]]:
    """Per group of ``keys``: every item with at least one scored answer, sorted by id."""
    if frame.is_empty():
        return {}
    scored = ~pl.col("status").is_in(_INFRA)
    cls = (
        pl.col("answer_class")
        if "answer_class" in frame.columns
        else pl.lit(None, dtype=pl.Int64).alias("answer_class")
    )
    # The comparison is a column before the group-by, and the group-by streams: with
    # the comparison inside the aggregation, in memory, 200,000 item groups held
    # twice the peak memory.
    items = (
        frame.lazy()
        .filter(scored)
        .select(
            *keys,
            "custom_id",
            "trial",
            (pl.col("status") == Status.EQUIVALENT.value).alias("c"),
            cls,
        )
        .group_by([*keys, "custom_id"])
        .agg(
            pl.len().alias("n"),
            pl.col("c").sum(),
            pl.col("answer_class").null_count().alias("unclassified"),
            pl.col("answer_class").sort_by("trial").alias("classes"),
        )
        .sort([*keys, "custom_id"], nulls_last=True)
        .collect(engine="streaming")
    )
    out: dict[tuple[Any, ...], list[ItemCounts]] = {}
    width = len(keys)
    for row in items.iter_rows():
        cid, n, c, unclassified, classes = row[width:]
        out.setdefault(row[:width], []).append(
            ItemCounts(cid, int(n), int(c), None if unclassified else tuple(classes))
        )
    return out


def _interval(means: Any, column: int) -> tuple[float | None, float | None]:
    ci = percentile_interval(means[:, column])
    return (ci[0], ci[1]) if ci else (None, None)


def pass_at_k_block(items: Sequence[ItemCounts]) -> list[dict[str, Any]]:
    """pass@k for k = 1 … the most answers any item has: ``k``, ``value``, ``low``,
    ``high`` (item bootstrap, all k on the same resamples) and ``items`` (those with
    at least k scored answers)."""
    if not items:
        return []
    top = max(i.n for i in items)
    # An item's values depend only on its (n, c): computed once per distinct pair.
    by_counts: dict[tuple[int, int], tuple[float | None, ...]] = {}
    for n, c in {(i.n, i.c) for i in items}:
        by_counts[n, c] = tuple(pass_at_k(n, c, k) if k <= n else None for k in range(1, top + 1))
    rows = [by_counts[i.n, i.c] for i in items]
    means = item_bootstrap(rows)
    out = []
    for k in range(1, top + 1):
        values = [v for r in rows if (v := r[k - 1]) is not None]
        low, high = _interval(means, k - 1)
        out.append(
            {
                "k": k,
                "value": sum(values) / len(values),
                "low": low,
                "high": high,
                "items": len(values),
            }
        )
    return out


def majority_block(items: Sequence[ItemCounts]) -> dict[str, Any] | None:
    """maj@n over equivalence classes, or None when any answer has no class yet
    (a run summarised before its classes were computed)."""
    if not items or any(i.classes is None for i in items):
        return None
    seen: dict[tuple[int, ...], tuple[float, bool, bool]] = {}  # few distinct vote patterns
    votes = []
    for i in items:
        classes = i.classes or ()
        vote = seen.get(classes)
        if vote is None:
            vote = seen[classes] = majority_vote(classes)
        votes.append(vote)
    credits = [v[0] for v in votes]
    low, high = _interval(item_bootstrap([(c,) for c in credits]), 0)
    return {
        "n": max(i.n for i in items),
        "items": len(items),
        "value": sum(credits) / len(credits),
        "low": low,
        "high": high,
        "correct": sum(credits),
        "ties": sum(v[1] for v in votes),
        "no_votes": sum(v[2] for v in votes),
        "classes": sum(len({c for c in i.classes or () if c >= 0}) for i in items),
    }


def paired_sampling_diffs(
    a: Sequence[ItemCounts], b: Sequence[ItemCounts]
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """B − A of pass@k (each k both runs have) and of maj@n, with intervals from one
    item bootstrap over the union of both runs' items (an item resampled is resampled
    in both runs: paired)."""
    by_a = {i.custom_id: i for i in a}
    by_b = {i.custom_id: i for i in b}
    ids = sorted(set(by_a) | set(by_b))
    top = min(max((i.n for i in a), default=0), max((i.n for i in b), default=0))
    majority = bool(a) and bool(b) and all(i.classes is not None for i in (*a, *b))

    def values(item: ItemCounts | None) -> tuple[float | None, ...]:
        ks = tuple(
            pass_at_k(item.n, item.c, k) if item is not None and k <= item.n else None
            for k in range(1, top + 1)
        )
        maj = (
            majority_vote(item.classes)[0]
            if majority and item is not None and item.classes is not None
            else None
        )
        return (*ks, maj)

    rows = [(*values(by_a.get(cid)), *values(by_b.get(cid))) for cid in ids]
    width = top + 1
    if not rows:
        return [], None
    means = item_bootstrap(rows)

    def diff(column: int) -> dict[str, Any]:
        va = [v for r in rows if (v := r[column]) is not None]
        vb = [v for r in rows if (v := r[width + column]) is not None]
        value = sum(vb) / len(vb) - sum(va) / len(va)
        ci = percentile_interval(means[:, width + column] - means[:, column])
        return {"value": value, "low": ci[0] if ci else None, "high": ci[1] if ci else None}

    passk = [{"k": k, **diff(k - 1)} for k in range(1, top + 1)]
    return passk, (diff(top) if majority else None)
