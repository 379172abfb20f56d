"""Benchmark: the 671 ground-truth identity checks, three ways, side by side in one run.

    .venv/bin/python bench/verify.py [--rounds 3] [--workers N] [--dataset PATH]

1. naive      raw in-process single-thread Z3, a fresh context per check, the
              declarations glued in front of each formula, two directions.
2. process    the reference approach: one ``z3 -in`` process per check over a
              textual script (declarations + spliced answer + two check-sats).
3. aeval      VerifierPool: start-up reported apart, then all checks at once.

Each round runs the three back to back and the medians over rounds are
reported, because the machine is shared and absolute timings drift; the
ratios are what to read. Then: the pool's per-check overhead (wall time of a
lone check minus the worker's own time), and the context-reuse measurement
behind the worker's design (reused context vs a fresh one per check, time and
RSS over several passes).
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import anyio
import polars as pl
import z3

from aeval.verdicts import Status
from aeval.verify import VerifierPool
from aeval.verify.equivalence import Verifier

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from answer_corpus import truth_conjuncts  # noqa: E402

DEFAULT_DATASET = ROOT / "tests" / "data" / "warp-benchmark.parquet"
TARGET_WARM = 3.0
TARGET_END_TO_END = 15.0
TARGET_OVERHEAD_MS = 0.3

Row = tuple[str, str]  # (truth, constants)


def z3_binary() -> str:
    candidate = Path(sys.executable).parent / "z3"
    return str(candidate) if candidate.exists() else "z3"


def term_of(assert_text: str) -> str:
    text = assert_text.strip()
    assert text.startswith("(assert") and text.endswith(")")
    return text[len("(assert") : -1]


# -- 1. naive --------------------------------------------------------------------------


def naive(rows: list[Row], answers: list[str] | None = None) -> float:
    start = time.perf_counter()
    for i, (truth, constants) in enumerate(rows):
        answer = truth if answers is None else answers[i]
        ctx = z3.Context()
        t = z3.And(*z3.parse_smt2_string(constants + "\n" + truth, ctx=ctx))
        a = z3.And(*z3.parse_smt2_string(constants + "\n" + answer, ctx=ctx))
        for formula in (z3.And(t, z3.Not(a)), z3.And(a, z3.Not(t))):
            solver = z3.Solver(ctx=ctx)
            solver.add(formula)
            assert solver.check() == z3.unsat
    return time.perf_counter() - start


# -- 2. one z3 process per check -------------------------------------------------------


def process_per_check(rows: list[Row]) -> float:
    binary = z3_binary()
    start = time.perf_counter()
    for truth, constants in rows:
        answer = truth
        script = (
            f"{constants}\n(push)\n{truth}\n(assert (not {term_of(answer)}))\n(check-sat)\n(pop)\n"
            f"(push)\n{answer}\n(assert (not {term_of(truth)}))\n(check-sat)\n(pop)\n"
        )
        out = subprocess.run([binary, "-in"], input=script, capture_output=True, text=True).stdout
        verdicts = [line for line in out.split() if line in ("sat", "unsat", "unknown")][:2]
        assert verdicts == ["unsat", "unsat"], out[:200]
    return time.perf_counter() - start


# -- 3. aeval's pool -------------------------------------------------------------------


async def pool_run(
    rows: list[Row], workers: int | None, rewrites: list[str]
) -> tuple[float, float, float]:
    """(start-up s, warm s for all identity checks at once, warm s for all rewrites).

    The rewrite pass runs after the identity pass in the same pool, whose
    workers then have every ground truth cached (as in a real run, where each
    truth is checked once per model and trial).
    """
    start = time.perf_counter()
    async with VerifierPool(workers=workers) as pool:
        startup = time.perf_counter() - start
        statuses: list[Status] = []

        async def one(answer: str, truth: str, constants: str) -> None:
            result = await pool.check(f"<answer>{answer}</answer>", truth, constants)
            statuses.append(result.status)

        warm = []
        for answers in ([t for t, _ in rows], rewrites):
            start = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for answer, (truth, constants) in zip(answers, rows, strict=True):
                    tg.start_soon(one, answer, truth, constants)
            warm.append(time.perf_counter() - start)
    assert statuses.count(Status.EQUIVALENT) == 2 * len(rows), set(statuses)
    return startup, warm[0], warm[1]


def make_rewrites(rows: list[Row]) -> list[str]:
    """Each truth as one assert per conjunct, in reverse order: equivalent, not identical."""
    out = []
    for truth, constants in rows:
        parts = truth_conjuncts(truth, constants)
        out.append("\n".join(f"(assert {p.sexpr()})" for p in reversed(parts)))
    return out


async def pool_overhead(rows: list[Row]) -> list[float]:
    """Per lone check: wall time through the pool minus the worker's own check time (ms)."""
    async with VerifierPool(workers=1) as pool:
        for truth, constants in rows[:20]:  # warm the worker's truth cache and Z3
            await pool.check(f"<answer>{truth}</answer>", truth, constants)
        overheads = []
        for truth, constants in rows:
            start = time.perf_counter()
            result = await pool.check(f"<answer>{truth}</answer>", truth, constants)
            wall_ms = (time.perf_counter() - start) * 1000.0
            overheads.append(wall_ms - result.elapsed_ms)
    return overheads


# -- context reuse ---------------------------------------------------------------------


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def context_reuse(rows: list[Row], passes: int) -> None:
    reused = Verifier()
    print(f"\ncontext reuse, in-process Verifier, {passes} passes over {len(rows)} checks each")
    print(f"{'pass':>4}  {'reused ctx':>11}  {'RSS':>7}  {'fresh ctx':>10}  {'RSS':>7}")
    for p in range(1, passes + 1):
        gc.collect()
        start = time.perf_counter()
        for truth, constants in rows:
            reused.check(f"<answer>{truth}</answer>", truth, constants)
        reuse_s, reuse_rss = time.perf_counter() - start, rss_mb()
        reused._truths.clear()  # re-parse truths each pass, like the fresh side
        gc.collect()
        start = time.perf_counter()
        for truth, constants in rows:
            Verifier().check(f"<answer>{truth}</answer>", truth, constants)
        fresh_s, fresh_rss = time.perf_counter() - start, rss_mb()
        print(
            f"{p:>4}  {reuse_s:>10.2f}s  {reuse_rss:>5.0f}MB  {fresh_s:>9.2f}s  {fresh_rss:>5.0f}MB"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--reuse-passes", type=int, default=3)
    args = parser.parse_args()
    frame = pl.read_parquet(args.dataset)
    rows: list[Row] = list(zip(frame["answer"], frame["constants"], strict=True))
    n = len(rows)
    print(f"{n} identity checks, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")

    rewrites = make_rewrites(rows)
    naive_s, process_s, startup_s, warm_s, naive_rw_s, warm_rw_s = [], [], [], [], [], []
    for r in range(1, args.rounds + 1):
        naive_s.append(naive(rows))
        process_s.append(process_per_check(rows))
        startup, warm, warm_rw = anyio.run(pool_run, rows, args.workers, rewrites)
        startup_s.append(startup)
        warm_s.append(warm)
        warm_rw_s.append(warm_rw)
        naive_rw_s.append(naive(rows, rewrites))
        print(
            f"round {r}: identity: naive {naive_s[-1]:.2f}s  process {process_s[-1]:.2f}s  "
            f"aeval start-up {startup:.2f}s + warm {warm:.2f}s | "
            f"rewrites: naive {naive_rw_s[-1]:.2f}s  aeval warm {warm_rw:.2f}s"
        )
    med = statistics.median
    nv, pr, st, wm = med(naive_s), med(process_s), med(startup_s), med(warm_s)
    nv_rw, wm_rw = med(naive_rw_s), med(warm_rw_s)
    warm_ratio = nv / wm
    e2e_ratio = pr / (st + wm)
    print(f"\nmedians over {args.rounds} round(s), {n} identity checks:")
    print(f"  naive (fresh context, 1 thread)    {nv:6.2f} s  {n / nv:7.0f} checks/s")
    print(f"  process per check (z3 -in)         {pr:6.2f} s  {n / pr:7.0f} checks/s")
    print(f"  aeval pool start-up                {st:6.2f} s")
    print(f"  aeval pool warm                    {wm:6.2f} s  {n / wm:7.0f} checks/s")
    print(f"  aeval pool end to end              {st + wm:6.2f} s")
    ok = "ok" if warm_ratio >= TARGET_WARM else "MISSED"
    print(f"\n  warm pool vs naive throughput      {warm_ratio:5.1f}x  (target >= 3x: {ok})")
    ok = "ok" if e2e_ratio >= TARGET_END_TO_END else "MISSED"
    print(f"  end to end vs process per check    {e2e_ratio:5.1f}x  (target >= 15x: {ok})")
    print(
        f"\n{n} rewrites (flattened, reversed; never identical, so Z3 must decide every one):\n"
        f"  naive {nv_rw:.2f} s, aeval pool warm {wm_rw:.2f} s: {nv_rw / wm_rw:.1f}x"
    )

    overheads = anyio.run(pool_overhead, rows)
    q = statistics.quantiles(overheads, n=20)
    verdict = "ok" if med(overheads) < TARGET_OVERHEAD_MS else "MISSED"
    print(
        f"  pool overhead per check            median {med(overheads):.3f} ms, p95 {q[18]:.3f} ms "
        f"(target median < {TARGET_OVERHEAD_MS} ms: {verdict})"
    )
    context_reuse(rows, args.reuse_passes)


if __name__ == "__main__":
    main()
