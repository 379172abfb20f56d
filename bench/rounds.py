"""What repair rounds add to ``summarize``, side by side in one run.

A seeded synthetic verdict frame (models × items × trials) is summarised as a
one-round run; then the same answers as round 1 of a K-round run, each wrong
answer asked again up to K rounds (repaired with a fixed chance per round), are
summarised with their ``rounds`` records. Printed: the verdicts of each, the best
time of each and their ratio, and the rounds records' part alone.

    .venv/bin/python bench/rounds.py --items 20000 --trials 3 --models 3 --rounds 3
"""

from __future__ import annotations

import random
import time

import polars as pl
from options import options_parser

from aeval.feedback import round_custom_id
from aeval.report import summarize
from aeval.summary.rounds import rounds_records


def frames(
    models: int, items: int, trials: int, rounds: int, seed: int
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(the one-round run, the same answers as round 1 of a K-round run)."""
    rnd = random.Random(seed)
    cols = ("model", "trial", "custom_id", "round", "status", "tier", "prompt_tokens")
    one: dict[str, list[object]] = {k: [] for k in cols}
    more: dict[str, list[object]] = {k: [] for k in cols}
    for m in range(models):
        for i in range(items):
            skill = rnd.random()
            for t in range(1, trials + 1):
                for r in range(1, rounds + 1):
                    right = rnd.random() < (skill if r == 1 else 0.3)
                    row = (
                        f"model-{m}",
                        t,
                        round_custom_id(str(i), r),
                        r,
                        "equivalent" if right else "not_equivalent",
                        ("small", "medium", "large")[i % 3],
                        400 * r,
                    )
                    for k, v in zip(cols, row, strict=True):
                        more[k].append(v)
                        if r == 1:
                            one[k].append(v)
                    if right:
                        break
    # the token columns rounds_records reads (summarize fills them itself)
    extra = (
        pl.lit(50).alias("completion_tokens"),
        pl.lit(None, pl.Int64).alias("reasoning_tokens"),
    )
    return pl.DataFrame(one).with_columns(*extra), pl.DataFrame(more).with_columns(*extra)


def best(repeat: int, call: object) -> float:
    out = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        call()  # type: ignore[operator]
        out = min(out, time.perf_counter() - start)
    return out


def main(models: int, items: int, trials: int, rounds: int, repeat: int) -> None:
    one, more = frames(models, items, trials, rounds, seed=1)
    t_one = best(repeat, lambda: summarize(one, items=False))
    t_more = best(repeat, lambda: summarize(more, items=False, rounds=rounds))
    t_part = best(
        repeat,
        lambda: [rounds_records(more, keys, rounds) for keys in (["model"], ["model", "trial"])],
    )
    print(f"one round: {one.height} verdicts; {rounds} rounds: {more.height} verdicts")
    print(f"summarize, one round: {t_one:.2f} s (best of {repeat})")
    print(f"summarize, {rounds} rounds: {t_more:.2f} s ({t_more / t_one:.2f}x)")
    print(f"of which the rounds records: {t_part:.2f} s ({t_part / t_more:.0%})")


if __name__ == "__main__":
    args = options_parser(__doc__, models=3, items=20000, trials=3, rounds=3, repeat=3)
    ns = args.parse_args()
    main(ns.models, ns.items, ns.trials, ns.rounds, ns.repeat)
