"""What pass@k and maj@n add to ``summarize``, side by side with the rest of it.

A seeded synthetic verdict frame (models × items × trials, with answer classes)
is summarised; the pass@k / maj@n part (per-item counts, estimator, item
bootstrap for every model and tier) is timed on its own in the same run.

    .venv/bin/python bench/sampling.py --items 20000 --trials 5 --models 3
"""

from __future__ import annotations

import random
import time

import polars as pl
from options import options_parser

from aeval.report import summarize
from aeval.summary.sampling import item_counts, majority_block, pass_at_k_block


def frame(models: int, items: int, trials: int, seed: int) -> pl.DataFrame:
    rnd = random.Random(seed)
    rows: dict[str, list[object]] = {
        k: [] for k in ("model", "trial", "custom_id", "status", "tier", "answer_class")
    }
    for m in range(models):
        for i in range(items):
            skill = rnd.random()
            for t in range(1, trials + 1):
                right = rnd.random() < skill
                rows["model"].append(f"model-{m}")
                rows["trial"].append(t)
                rows["custom_id"].append(str(i))
                rows["status"].append("equivalent" if right else "not_equivalent")
                rows["tier"].append(("small", "medium", "large")[i % 3])
                rows["answer_class"].append(0 if right else rnd.randint(1, 3))
    return pl.DataFrame(rows)


def main(models: int, items: int, trials: int, repeat: int) -> None:
    data = frame(models, items, trials, seed=1)
    best_all = best_part = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        summarize(data)
        best_all = min(best_all, time.perf_counter() - start)
        start = time.perf_counter()
        for keys in (["model"], ["model", "tier"]):
            for group in item_counts(data, keys).values():
                pass_at_k_block(group)
                majority_block(group)
        best_part = min(best_part, time.perf_counter() - start)
    print(f"{data.height} verdicts ({models} models × {items} items × {trials} trials)")
    print(f"summarize, all of it: {best_all:.2f} s (best of {repeat})")
    print(f"of which pass@k + maj@n: {best_part:.2f} s ({best_part / best_all:.0%})")


if __name__ == "__main__":
    args = options_parser(__doc__, models=3, items=20000, trials=5, repeat=3).parse_args()
    main(args.models, args.items, args.trials, args.repeat)
