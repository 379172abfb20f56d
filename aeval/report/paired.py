"""Paired comparisons of models answered on the same items: a test and a difference
with its interval, per pair.

Two models answered the same items, so their accuracies are not independent: a
hard item is hard for both. Each pair is compared on the items both scored (at
least one scored answer each), with the item as the unit:

- **one answer per item each** (one trial): McNemar's test (McNemar 1947) on the
  discordant items, ``b`` (right for the first model, wrong for the second) and
  ``c``. Under the null hypothesis each discordant item is a fair coin, so the
  exact two-sided p-value is the binomial ``2·P(X ≤ min(b, c))``, ``X ~ Bin(b + c,
  ½)`` (``scipy.stats.binomtest``); from 25 discordant items on, the chi-square form
  with Edwards' continuity correction, ``(|b − c| − 1)² / (b + c)`` on one degree
  of freedom (``scipy.stats.chi2``), which it then matches closely.
- **several answers per item** (trials): the answers to one item are a cluster,
  not independent observations, so the test is on the per-item mean accuracies:
  the mean of the per-item differences over its standard error across items,
  a paired z-test (Miller 2024, "Adding Error Bars to Evals", arXiv:2411.00640,
  on paired differences with clustered standard errors; the clustered analogue of
  McNemar's test, Obuchowski 1998, Statistics in Medicine 17:1495–1507). With one
  answer per item it is McNemar's statistic without the continuity correction.

The difference ``first − second`` of the pooled accuracies over the shared items
carries the interval ``report A B`` gives a difference (Newcombe's method 10 on
the two item-clustered intervals and their item-level correlation,
:mod:`aeval.summary.intervals`). The interval and the test answer slightly
different questions and can disagree at the margin; significance is the
test's (p < 0.05).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from aeval.summary.intervals import (
    ClusterSums,
    clustered_interval,
    item_correlation,
    paired_difference_interval,
)

__all__ = ["EXACT_BELOW", "SIGNIFICANCE", "mcnemar_p", "paired_comparison", "paired_matrix"]

SIGNIFICANCE = 0.05
# McNemar's exact binomial form below this many discordant items, the chi-square above.
EXACT_BELOW = 25


def mcnemar_p(b: int, c: int) -> tuple[float, str]:
    """McNemar's two-sided p-value for ``b`` and ``c`` discordant items, and which form
    gave it (``exact``: binomial; ``chi2``: continuity-corrected chi-square)."""
    # scipy.stats where it is used, never at import (~0.5 s; aeval.summary.intervals._z)
    from scipy import stats

    n = b + c
    if n == 0:
        return 1.0, "exact"
    if n < EXACT_BELOW:
        # two-sided at p = ½: the binomial is symmetric, so this is 2·P(X ≤ min(b, c))
        return min(1.0, float(stats.binomtest(b, n, 0.5).pvalue)), "exact"
    chi2 = (abs(b - c) - 1) ** 2 / n
    return float(stats.chi2.sf(chi2, 1)), "chi2"


def _sums(y: np.ndarray, m: np.ndarray) -> ClusterSums:
    """:class:`ClusterSums` of per-item counts held as arrays (no loop in Python)."""
    return ClusterSums(
        int(y.sum()),
        int(m.sum()),
        int((m > 0).sum()),
        float((y * y).sum()),
        float((y * m).sum()),
        float((m * m).sum()),
    )


def _rate(sums: ClusterSums) -> tuple[float, float, float]:
    ci = clustered_interval(sums)
    assert ci is not None  # only called with scored answers
    return sums.successes / sums.n, ci[0], ci[1]


def paired_comparison(
    ya: np.ndarray, ma: np.ndarray, yb: np.ndarray, mb: np.ndarray
) -> dict[str, Any]:
    """A − B on the items both scored.

    :param ya: per item, model A's correct answers; ``ma`` its scored answers (0:
        none scored); ``yb``, ``mb`` the same for B, over the same items.
    :returns: ``items`` (shared), ``only_a`` and ``only_b`` (items one scored and the
        other did not), ``diff`` (``value``, ``low``, ``high``), ``test``
        (``mcnemar`` or ``paired-items``), ``form`` (``exact``, ``chi2`` or ``z``),
        ``p``, ``significant``, and for McNemar the discordant counts
        ``a_only_right`` and ``b_only_right``.
    """
    shared = (ma > 0) & (mb > 0)
    out: dict[str, Any] = {
        "items": int(shared.sum()),
        "only_a": int(((ma > 0) & (mb == 0)).sum()),
        "only_b": int(((mb > 0) & (ma == 0)).sum()),
    }
    if not shared.any():
        none = {"value": None, "low": None, "high": None}
        return {**out, "diff": none, "test": None, "form": None, "p": None, "significant": False}
    ya, ma, yb, mb = ya[shared], ma[shared], yb[shared], mb[shared]
    sa, sb = _sums(ya, ma), _sums(yb, mb)
    rate_a, rate_b = _rate(sa), _rate(sb)
    pairs = zip(ya.tolist(), ma.tolist(), yb.tolist(), mb.tolist(), strict=True)
    r = item_correlation(sb, sa, ((y2, m2, y1, m1) for y1, m1, y2, m2 in pairs))
    low, high = paired_difference_interval(rate_b, rate_a, r)
    out["diff"] = {"value": rate_a[0] - rate_b[0], "low": low, "high": high}
    if (ma == 1).all() and (mb == 1).all():
        b = int(((ya == 1) & (yb == 0)).sum())
        c = int(((ya == 0) & (yb == 1)).sum())
        p, form = mcnemar_p(b, c)
        out.update(test="mcnemar", form=form, p=p, a_only_right=b, b_only_right=c)
    else:
        d = ya / ma - yb / mb
        n = d.size
        mean = float(d.mean())
        se = float(d.std(ddof=1)) / math.sqrt(n) if n > 1 else 0.0
        if se > 0:
            from scipy import stats  # where it is used: see mcnemar_p

            p = float(2 * stats.norm.sf(abs(mean) / se))
        else:
            # every item differs by the same amount: no spread for a z; the sign
            # test's exact p for n items all on one side (1 when they all agree)
            p = 1.0 if mean == 0 else min(1.0, 2.0 ** (1 - n))
        out.update(test="paired-items", form="z", p=p)
    out["significant"] = out["p"] < SIGNIFICANCE
    return out


def paired_matrix(labels: Sequence[str], y: np.ndarray, m: np.ndarray) -> list[dict[str, Any]]:
    """Every pair of rows, each in the order given (``a`` before ``b``).

    :param y: items × rows of correct answers; ``m`` of scored answers.
    """
    out = []
    for i in range(len(labels)):
        for j in range(i + 1, len(labels)):
            result = paired_comparison(y[:, i], m[:, i], y[:, j], m[:, j])
            out.append({"a": labels[i], "b": labels[j], **result})
    return out
