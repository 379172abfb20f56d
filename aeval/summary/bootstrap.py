"""A seeded item bootstrap: percentile intervals for means over benchmark items.

pass@k and maj@n are means over items of a per-item value, and the items are
the unit of sampling (a benchmark is a sample of possible items; the trials of
one item are not independent), so their intervals resample *items*, with
replacement, and take the 2.5th and 97.5th percentiles of the resampled means
(Efron & Tibshirani 1993, ch. 13).

Resampling m items with replacement is the same, in distribution, as drawing
multinomial counts over the *distinct* per-item values with probabilities their
frequencies. Per-item values here take few distinct values (pass@k depends only
on an item's (n, c); maj@n is 0, 1 or 1/t), so each resample costs the number
of distinct values, not m: 2,000 resamples of 100,000 items take milliseconds.
The generator is seeded with a constant, so a report gives the same interval
every time it is made from the same verdicts.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from aeval.summary.intervals import CONFIDENCE

__all__ = ["BOOTSTRAP_RESAMPLES", "BOOTSTRAP_SEED", "item_bootstrap", "percentile_interval"]

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 2021  # the year of Chen et al.'s estimator; any constant keeps reports stable


def item_bootstrap(
    rows: Sequence[tuple[float | None, ...]],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> np.ndarray:
    """Column means of ``rows`` (one tuple of values per item) over item resamples.

    :param rows: per item, one value per statistic; ``None`` where the statistic
        does not cover the item (it is left out of that column's mean, so several
        statistics over overlapping item sets are resampled *jointly*: paired).
    :returns: an array of shape ``(resamples, columns)``; NaN where a resample
        held no item with that column (or there were no rows at all).
    """
    width = len(rows[0]) if rows else 0
    if not rows:
        return np.full((resamples, width), math.nan)
    distinct = Counter(rows)
    keys = list(distinct)
    freq = np.array([distinct[k] for k in keys], dtype=float)
    rng = np.random.default_rng(seed)
    counts = rng.multinomial(len(rows), freq / freq.sum(), size=resamples).astype(float)
    values = np.array([[math.nan if v is None else v for v in k] for k in keys], dtype=float)
    present = ~np.isnan(values)
    sums = counts @ np.where(present, values, 0.0)
    totals = counts @ present.astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(totals > 0, sums / np.where(totals > 0, totals, 1.0), math.nan)


def percentile_interval(
    means: np.ndarray, confidence: float = CONFIDENCE
) -> tuple[float, float] | None:
    """The percentile interval of bootstrap means (one column), or None when none exist."""
    finite = means[~np.isnan(means)]
    if finite.size == 0:
        return None
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(finite, [tail, 100 - tail])
    return float(low), float(high)
