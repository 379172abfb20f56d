"""Confidence intervals for accuracies whose answers are clustered by item.

With k trials every benchmark item is answered k times, and the k answers to
one item are far from independent (an item a model cannot do, it usually cannot
do in any trial). Pooling them as k·n independent answers overstates certainty:
two identical trials would look twice as informative as one.

:func:`clustered_interval` is a Wilson score interval on the *effective* sample
size ``n / deff``, where ``deff`` is the design effect of the item clusters
(the ratio of the item-clustered variance of the pooled proportion to its
binomial variance; Kish 1965, and Korn & Graubard 1998 for its use with
Wilson-type intervals). It reduces exactly to the Wilson interval when every
item is answered once, gives two identical trials the width of one, and
needs no random numbers, so it is the same on every run of the report.

The plain Wilson interval of whole counts is scipy's
(``scipy.stats.binomtest(...).proportion_ci(method="wilson")``), computed here with
the same normal quantile (``scipy.special.ndtri``) by Newcombe's (1998) formula, to the
last bit of scipy's (tests/test_report_intervals.py): ``scipy.stats`` is not imported
for it, which kept ~48 MB resident at the end of every large run (bench/README.md,
"The end of the run: scipy.stats"). What no maintained library computes is written
here too: the Wilson bounds at a fractional (effective) sample size, the design
effect, and Newcombe's paired difference over clustered intervals.
tests/test_report_intervals.py holds each to a published value or to scipy.

:func:`paired_difference_interval` is Newcombe's interval for a difference of
paired proportions (his method 10), with the two runs' clustered Wilson
intervals and the item-level correlation of the two estimates in place of the
2×2 table's phi: identical runs give a difference of 0 with a nearly zero
width, and the width grows with the items on which the runs disagree.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "CONFIDENCE",
    "ClusterSums",
    "clustered_interval",
    "item_correlation",
    "paired_difference_interval",
    "rate_record",
    "wilson_bounds",
    "wilson_interval",
]

CONFIDENCE = 0.95


def _z(confidence: float) -> float:
    """The two-sided normal quantile: ``scipy.stats.norm.ppf(0.5 + confidence / 2)``,
    by the function it calls (``ndtri``), without loading ``scipy.stats``."""
    # scipy where it is used, never at import: scipy.stats cost ~0.5 s on a quiet
    # machine (5 of the engine's 8 s at load 16), which every command that loads the
    # engine (run, resume, cancel) would pay before its first line.
    from scipy import special

    return float(special.ndtri(0.5 + confidence / 2))


def wilson_bounds(p: float, n: float, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The Wilson score interval for an observed proportion ``p`` out of ``n`` (> 0)
    answers; ``n`` may be fractional (an effective sample size).

    Written out because scipy's Wilson interval (:func:`wilson_interval`) takes whole
    counts only, and the clustered interval's ``n / design_effect`` is not one.
    """
    z = _z(confidence)
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # At p = 0 or 1 the bound is exactly 0 or 1; say so rather than 1e-17.
    low = 0.0 if p <= 0 else max(0.0, centre - half)
    high = 1.0 if p >= 1 else min(1.0, centre + half)
    return low, high


def wilson_interval(
    successes: int, n: int, confidence: float = CONFIDENCE
) -> tuple[float, float] | None:
    """The Wilson score interval of a binomial proportion, or None when ``n`` is 0.

    Wilson rather than the normal approximation because it stays inside [0, 1]
    and behaves at accuracies near 0 or 1 and at small ``n`` (a tier with a
    handful of items), which is where this benchmark's numbers often sit.
    The value of ``scipy.stats.binomtest(successes, n).proportion_ci`` (its ``wilson``
    method, without continuity correction), bit for bit: Newcombe's (1998, method 3)
    centre ``(2np + z²) / 2(n + z²)`` and half-width ``z / 2(n + z²) · √(4npq + z²)``,
    each operation in the order scipy takes it.
    """
    if n <= 0:
        return None
    if not 0 <= successes <= n:
        raise ValueError(f"successes={successes} outside 0..{n}")
    z = _z(confidence)
    p = successes / n
    denom = 2 * (n + z**2)
    centre = (2 * n * p + z**2) / denom
    half = z / denom * math.sqrt(4 * n * p * (1 - p) + z**2)
    # At 0 or n successes the bound is exactly 0 or 1; say so rather than 1e-17.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


@dataclass(frozen=True, slots=True)
class ClusterSums:
    """What the clustered variance needs from per-item counts ``(y_i, m_i)``: an item's
    successes and scored answers over the trials of one group.

    ``syy``, ``sym``, ``smm`` are the sums of ``y²``, ``y·m`` and ``m²``;
    ``clusters`` counts the items with at least one scored answer.
    """

    successes: int
    n: int
    clusters: int
    syy: float
    sym: float
    smm: float

    @classmethod
    def of(cls, items: Iterable[tuple[int, int]]) -> ClusterSums:
        """From ``(successes, scored)`` per item."""
        s = n = clusters = 0
        syy = sym = smm = 0
        for y, m in items:
            s, n = s + y, n + m
            clusters += m > 0
            syy, sym, smm = syy + y * y, sym + y * m, smm + m * m
        return cls(s, n, clusters, syy, sym, smm)

    def residual_ss(self) -> float:
        """``Σ (y_i − p·m_i)²``, the clustered spread around the pooled proportion ``p``."""
        p = self.successes / self.n
        return max(0.0, self.syy - 2 * p * self.sym + p * p * self.smm)

    def design_effect(self) -> float:
        """Clustered over binomial variance of the pooled proportion, at least 1.

        Never below 1: trials that merely look less alike than independent ones
        by chance must not buy a narrower interval than pooling would give. At a
        proportion of 0 or 1 the data cannot tell, and the conservative answer
        (each item counts once) is taken: ``n / clusters``.
        """
        p = self.successes / self.n
        if p <= 0 or p >= 1:
            return self.n / self.clusters
        return max(1.0, self.residual_ss() / (self.n * p * (1 - p)))

    def variance(self) -> float:
        """The item-clustered (linearised) variance of the pooled proportion."""
        return self.residual_ss() / (self.n * self.n)


def clustered_interval(
    sums: ClusterSums, confidence: float = CONFIDENCE
) -> tuple[float, float, float] | None:
    """``(low, high, design_effect)`` of the pooled proportion ``successes / n``,
    or None when nothing was scored.

    A Wilson interval on ``n / design_effect`` answers; when every item was
    answered once (one trial) the design effect is 1 and this is the plain
    Wilson interval.
    """
    if sums.n <= 0:
        return None
    if sums.clusters == sums.n:  # one answer per item: no clustering to account for
        plain = wilson_interval(sums.successes, sums.n, confidence)
        assert plain is not None  # n > 0
        return plain[0], plain[1], 1.0
    deff = sums.design_effect()
    low, high = wilson_bounds(sums.successes / sums.n, sums.n / deff, confidence)
    return low, high, deff


def item_correlation(
    a: ClusterSums, b: ClusterSums, shared: Iterable[tuple[int, int, int, int]]
) -> float:
    """The correlation of two runs' pooled proportions through their shared items.

    :param shared: ``(y_a, m_a, y_b, m_b)`` for each item both runs scored.
    :returns: the linearised covariance over the product of the standard errors,
        or 0 when either run's proportion has no spread (0 or 1). When each item
        was answered once per run this is Newcombe's continuity-corrected phi of
        the paired 2×2 table (``ad − bc`` less ``n/2`` when positive); with more answers
        per item the correction is half an item's worth of answers.
    """
    if a.n <= 0 or b.n <= 0:
        return 0.0
    pa, pb = a.successes / a.n, b.successes / b.n
    cross = sum((ya - pa * ma) * (yb - pb * mb) for ya, ma, yb, mb in shared)
    # Newcombe's correction: a positive association counts half an item less, so
    # chance agreement never narrows the interval. An item weighs its answers per
    # run (m_a·m_b), which keeps k copies of the same trials as wide as one.
    half_item = 0.5 * (a.n / a.clusters) * (b.n / b.clusters)
    cross = max(0.0, cross - half_item) if cross >= 0 else cross
    spread = math.sqrt(a.residual_ss() * b.residual_ss())
    return max(-1.0, min(1.0, cross / spread)) if spread > 0 else 0.0


def paired_difference_interval(
    a: tuple[float, float, float],
    b: tuple[float, float, float],
    correlation: float,
) -> tuple[float, float]:
    """Newcombe's (1998, method 10) interval for ``p_b − p_a`` of paired proportions.

    :param a: ``(p, low, high)`` of run A (its clustered interval).
    :param b: the same for run B.
    :param correlation: of the two estimates over the items both runs scored
        (phi for one trial per item); 0 for independent runs.
    """
    pa, la, ua = a
    pb, lb, ub = b
    d = pb - pa
    r = max(-1.0, min(1.0, correlation))
    down_b, up_a = pb - lb, ua - pa
    up_b, down_a = ub - pb, pa - la
    low = d - math.sqrt(max(0.0, down_b**2 - 2 * r * down_b * up_a + up_a**2))
    high = d + math.sqrt(max(0.0, up_b**2 - 2 * r * up_b * down_a + down_a**2))
    return max(-1.0, low), min(1.0, high)


def rate_record(successes: int, n: int, sums: ClusterSums | None = None) -> dict[str, Any]:
    """A proportion with its 95 % interval, as ``summary.json`` writes one (``value``,
    ``low``, ``high``, ``successes``, ``n``, ``design_effect``): item-clustered when
    ``sums`` (per-item counts of the group) are given and agree with the totals, else
    plain Wilson."""
    if sums is not None and sums.n == n and sums.successes == successes:
        clustered = clustered_interval(sums)
        ci = clustered[:2] if clustered else None
        deff = clustered[2] if clustered else None
    else:
        ci, deff = wilson_interval(successes, n), (1.0 if n else None)
    return {
        "value": successes / n if n else None,
        "low": ci[0] if ci else None,
        "high": ci[1] if ci else None,
        "successes": successes,
        "n": n,
        "design_effect": deff,
    }
