"""Benchmark: verl's reward loop, one GRPO-sized step through the machine's shared pool beside a
pool of the process's own.

    .venv/bin/python bench/reward_node_pool.py [--rows 128] [--group 16] [--repeat 5]

The step is bench/reward.py's (``rows`` benchmark rows x ``group`` completions, no hostile
ones), awaited as verl's reward loop awaits ``compute_score_async``: one await per sample, all
gathered. One side scores through a reward with its own pool (``shared_pool=False``), the other
through the machine's pool server (``shared_pool=True``, what verl's entry points use: chunks go
over a Unix socket). Both have the same workers (the CPU count) and keep no verdicts across
steps (``cache_entries=0``). Steps alternate, ``repeat`` times after a warm-up step each; the
median of the pairs' ratios (shared / own) is printed: the cost of sharing one pool.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from pathlib import Path

import polars as pl
from options import options_parser

sys.path.insert(0, str(Path(__file__).resolve().parent))
import reward as step  # bench/reward.py: the same GRPO-sized step

from aeval.reward import EquivalenceReward


def gathered(reward: EquivalenceReward, checks: list[tuple[str, str, str]]) -> list[float]:
    """One await per sample, in chunks as ``compute_score_async`` sends them."""
    batcher = reward.batcher(1024, 0.02)

    async def one(check: tuple[str, str, str]) -> float:
        [result] = await batcher.check([check])
        return reward.score_of(result, check[0])

    async def all_of() -> list[float]:
        return list(await asyncio.gather(*(one(c) for c in checks)))

    return asyncio.run(all_of())


def main() -> None:
    args = options_parser(
        __doc__, dataset=step.DEFAULT_DATASET, rows=128, group=16, repeat=5, seed=0
    ).parse_args()

    data = pl.read_parquet(args.dataset)
    completions, answers, constants, _ = step.build_step(data, args.rows, args.group, args.seed)
    checks = list(zip(completions, answers, constants, strict=True))
    own = EquivalenceReward(cache_entries=0)
    shared = EquivalenceReward(cache_entries=0, shared_pool=True)
    try:
        expected = gathered(own, checks)  # warm-up, both
        assert gathered(shared, checks) == expected
        times: dict[str, list[float]] = {"own": [], "shared": []}
        for _ in range(args.repeat):
            for name, reward in (("own", own), ("shared", shared)):
                started = time.perf_counter()
                assert gathered(reward, checks) == expected
                times[name].append(time.perf_counter() - started)
        ratios = [s / o for s, o in zip(times["shared"], times["own"], strict=True)]
        print(f"{len(checks)} samples, {sum(expected):.0f} correct, {own.schedule}")
        for name, values in times.items():
            print(f"{name:>6} pool: median {statistics.median(values):.2f} s  {values}")
        print(f"shared / own, median of the pairs: {statistics.median(ratios):.2f}x")
        server = shared.pool_server_pid
    finally:
        own.close()
        shared.close()
    if server is not None:  # the server lingers for the next client: stopped here, by its PID
        import os
        import signal

        os.kill(server, signal.SIGKILL)


if __name__ == "__main__":
    main()
