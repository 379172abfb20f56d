"""Benchmark: each distinct answer checked once (the verdict cache), side by side in one run.

    .venv/bin/python bench/verdict_cache.py [--rows 128] [--group 16] [--rounds 3]

1. A GRPO step whose completions are half duplicates: ``rows`` benchmark rows ×
   ``group`` completions, each row's group being ``group / 2`` distinct
   completions (bench/reward.py's mix: correct, rewrites, a dropped conjunct,
   malformed) twice each. In one warm pool, alternating: today's schedule (every
   completion checked: ``reward.schedule.run_schedule``) and the reward's
   (``check_all``: each distinct answer once). Target: ≥ 1.7×.
2. ``python -m aeval rescore`` of 3 × 671 answers (bench/rescore.py's mix), whole
   process, into a fresh ``--out`` (the cache file written as it goes), then
   again into the same ``--out``; ``--no-cache`` into another fresh directory
   as the reference. Target: second ≥ 5× faster than the first.
"""

from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import polars as pl
from options import options_parser

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from rescore import write_trials  # noqa: E402
from reward import group_of  # noqa: E402

from aeval.reward.schedule import Schedule, check_all, run_schedule  # noqa: E402
from aeval.verify import VerifierPool  # noqa: E402

DEFAULT_DATASET = ROOT / "tests" / "data" / "warp-benchmark.parquet"


def half_duplicate_step(dataset: Path, rows: int, group: int, seed: int = 0):
    frame = pl.read_parquet(dataset).select("answer", "constants")
    rng = random.Random(seed)
    picked = rng.sample(frame.rows(), rows)
    checks = []
    for truth, constants in picked:
        distinct = list(dict.fromkeys(group_of(truth, constants, rng)))
        for text in rng.sample(distinct, group // 2) * 2:
            checks.append((text, truth, constants))
    return checks


async def grpo(checks, rounds: int, workers: int) -> dict[str, list[float]]:
    schedule = Schedule(deadline_s=10.0)
    times: dict[str, list[float]] = {"today": [], "once": []}
    async with VerifierPool(workers=workers) as pool:
        await check_all(pool, checks, schedule)  # warm: truths parsed in every worker
        for _ in range(rounds):
            for way in times:
                start = time.perf_counter()
                if way == "today":
                    out = await run_schedule(pool, checks, schedule)
                else:
                    out = await check_all(pool, checks, schedule)
                times[way].append(time.perf_counter() - start)
                statuses = [r.status for r in out.results]
                if way == "today":
                    expected = statuses
                assert statuses == expected, "the verdicts differ"
    return times


def rescore(dataset: Path, files: list[Path], out: Path, *flags: str) -> float:
    argv = [sys.executable, "-m", "aeval", "rescore", "--dataset", str(dataset)]
    argv += ["--out", str(out), "--workers", "2", "--quiet", *flags, *map(str, files)]
    start = time.perf_counter()
    subprocess.run(argv, capture_output=True, check=True, cwd=ROOT)
    return time.perf_counter() - start


def main() -> None:
    args = options_parser(
        __doc__, dataset=DEFAULT_DATASET, rows=128, group=16, rounds=3, workers=2
    ).parse_args()
    print(f"load: {os.getloadavg()[0]:.2f}")

    checks = half_duplicate_step(args.dataset, args.rows, args.group)
    times = anyio.run(grpo, checks, args.rounds, args.workers)
    today, once = (statistics.median(times[w]) for w in ("today", "once"))
    print(f"\nGRPO step, {len(checks)} completions (half duplicates), {args.workers} workers:")
    print(f"  today (every completion): {today:.2f} s   each distinct once: {once:.2f} s")
    print(f"  speed-up {today / once:.2f}× (target ≥ 1.7×)")

    with tempfile.TemporaryDirectory() as tmp:
        files = write_trials(args.dataset, Path(tmp))
        runs: dict[str, list[float]] = {"no-cache": [], "first": [], "second": []}
        for r in range(args.rounds):
            runs["no-cache"].append(rescore(args.dataset, files, Path(tmp) / f"n{r}", "--no-cache"))
            out = Path(tmp) / f"c{r}"
            runs["first"].append(rescore(args.dataset, files, out))
            runs["second"].append(rescore(args.dataset, files, out))
            print(
                f"rescore round {r + 1}: "
                + ", ".join(f"{w} {t[-1]:.2f} s" for w, t in runs.items())
            )
        med = {w: statistics.median(t) for w, t in runs.items()}
        print(f"\nrescore of 3 × 671 answers, whole process (median of {args.rounds}):")
        print("| --no-cache | first (cache written) | second (same --out) |\n|---|---|---|")
        print(f"| {med['no-cache']:.2f} s | {med['first']:.2f} s | {med['second']:.2f} s |")
        print(f"  first / second: {med['first'] / med['second']:.1f}× (target ≥ 5×)")


if __name__ == "__main__":
    main()
