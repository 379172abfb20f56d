"""aeval's item bootstrap against scipy.stats.bootstrap, side by side in one run.

    .venv/bin/python bench/bootstrap_scipy.py [ITEMS ...]

For pass@1 over ITEMS items (0/1 per item, as a one-trial run has), both give the 95 %
percentile interval from 2,000 resamples: aeval's multinomial draw over the distinct
per-item values (aeval.summary.bootstrap), and scipy's resampling of the items
themselves (``method="percentile"``, ``batch`` bounding its memory). Prints each one's
time (best of 3), the ratio and both intervals.
"""

from __future__ import annotations

import sys
import time

import numpy as np
from scipy import stats

from aeval.summary.bootstrap import BOOTSTRAP_RESAMPLES, item_bootstrap, percentile_interval


def best_of(n: int, fn) -> tuple[float, object]:  # type: ignore[no-untyped-def]
    best, result = float("inf"), None
    for _ in range(n):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main(sizes: list[int]) -> None:
    head = f"{'items':>8} {'aeval s':>9} {'scipy s':>9} {'ratio':>7}"
    print(head + "  aeval interval      scipy interval")
    for items in sizes:
        values = np.random.default_rng(1).integers(0, 2, size=items).astype(float)
        rows = [(float(v),) for v in values]
        ours_s, ours = best_of(3, lambda rows=rows: percentile_interval(item_bootstrap(rows)[:, 0]))
        theirs_s, theirs = best_of(
            3,
            lambda values=values: (
                stats.bootstrap(
                    (values,),
                    np.mean,
                    n_resamples=BOOTSTRAP_RESAMPLES,
                    method="percentile",
                    batch=50,
                    random_state=np.random.default_rng(1),
                ).confidence_interval
            ),
        )
        lo, hi = ours  # type: ignore[misc]
        print(
            f"{items:>8} {ours_s:>9.4f} {theirs_s:>9.4f} {theirs_s / ours_s:>7.0f}  "
            f"[{lo:.4f}, {hi:.4f}]  [{theirs.low:.4f}, {theirs.high:.4f}]"  # type: ignore[attr-defined]
        )


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [671, 10_000, 100_000])
