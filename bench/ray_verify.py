"""Benchmark: verification on a Ray cluster on this machine against the local pool, side by side.

    .venv/bin/python bench/ray_verify.py [--rounds 3] [--rows 671] [--copies 5]

Starts a 3-node Ray cluster on loopback (a head with no CPUs, two workers of
one CPU each: the same two cores the local pool gets) and measures, in one run:

1. ``rescore`` of 3 trial files of the WARP rows (bench/rescore.py's mix; with
   ``--copies 5`` the 671 rows five times over: 3 × 3,355 answers), each
   round in fresh processes: the local pool (2 workers) and ``--ray`` (one
   actor per worker node, its pool sized to its one CPU). Wall time with start-up
   (connecting, starting actors and workers) and the scoring alone; the
   verdicts must be the same (status and reason of every line).
2. Chunk size: the scoring alone at several chunk sizes, and the cost of one
   Ray call (an empty chunk's round trip) from this driver.
3. A worker node removed mid-rescore: the verdicts must equal the local
   pool's, every line once.
4. A GRPO-sized step (128 prompts × 16 completions) through the reward, local
   against Ray (median step time over rounds, after a warm-up step).
5. The hostile-answer set scored on the cluster: no ``equivalent`` (either
   reading), no file written.

Prints ratios and the targets: rescore ≤ 1.25× the local pool, the GRPO step
≤ 1.3×. The machine is shared: note ``uptime`` with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # loopback only (see tests)

import anyio
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from rescore import write_trials
from reward import build_step, hostile

from aeval.dataset import load_dataset
from aeval.rescoring.rescore import rescore_files
from aeval.reward import EquivalenceReward
from aeval.verdicts import Status
from aeval.verify import VerifyLimits
from aeval.verify.checker import open_checker
from aeval.verify.cluster import RayVerifierPool

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATASET = ROOT / "tests" / "data" / "warp-benchmark.parquet"
TARGET_RESCORE = 1.25
TARGET_STEP = 1.3
TARGET_STARTUP_EXTRA_S = 1.0  # Ray's start-up over the local pool's
TARGET_PER_ANSWER = 1.10  # Ray's scoring time per answer over the local pool's

# One rescore in a fresh interpreter: (total s, scoring s, verdicts).
_CHILD = """
import json, sys, time, anyio
from aeval.dataset import load_dataset
from aeval.rescoring.rescore import rescore_files
from aeval.verify.checker import open_checker
from aeval.verify.cluster import RayVerifierPool
dataset_path, address, chunk, *files = sys.argv[1:]
frame = load_dataset(dataset_path)
async def main():
    start = time.perf_counter()
    if address == "local":
        pool = open_checker(workers=2)
    else:
        pool = RayVerifierPool(address, chunk_size=int(chunk))
    async with pool:
        ready = time.perf_counter()
        result = await rescore_files(files, frame, pool=pool)
        done = time.perf_counter()
    return start, ready, done, result
start, ready, done, result = anyio.run(main)
print(json.dumps({"total": done - start, "scoring": done - ready,
                  "verdicts": [[v.model, v.trial, v.custom_id, v.status.value, v.reason]
                               for v in result.verdicts]}))
"""


def child(dataset: Path, files: list[Path], address: str, chunk: int = 16) -> dict[str, Any]:
    argv = [sys.executable, "-c", _CHILD, str(dataset), address, str(chunk), *map(str, files)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(argv, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr)
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def start_cluster() -> Any:
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 0, "node_ip_address": "127.0.0.1", "include_dashboard": False},
    )
    for _ in range(2):
        cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")
    cluster.wait_for_nodes()
    return cluster


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def bench_rescore(args: argparse.Namespace, cluster: Any, files: list[Path]) -> None:
    lines = args.rows * args.copies
    print(f"\n## 1. rescore, 3 × {lines} lines: local pool (2 workers) vs --ray (2 × 1 CPU)")
    rows: dict[str, list[dict[str, Any]]] = {"local": [], "ray": []}
    for r in range(args.rounds):
        order = ("local", "ray") if r % 2 == 0 else ("ray", "local")
        got = {
            way: child(args.dataset, files, "local" if way == "local" else cluster.address)
            for way in order
        }
        assert got["ray"]["verdicts"] == got["local"]["verdicts"], "verdicts differ"
        for way in rows:
            rows[way].append(got[way])
        print(
            f"round {r + 1} (load {load()}): "
            + ", ".join(
                f"{w} {got[w]['total']:.2f} s ({got[w]['scoring']:.2f} scoring)" for w in order
            )
            + "; same verdicts"
        )
    for what in ("total", "scoring"):
        ratios = [
            ray[what] / loc[what] for ray, loc in zip(rows["ray"], rows["local"], strict=True)
        ]
        med = {w: statistics.median(g[what] for g in rows[w]) for w in rows}
        print(
            f"{what}: local {med['local']:.2f} s, ray {med['ray']:.2f} s, median ratio "
            f"{statistics.median(ratios):.3f}"
            + (
                f" (target ≤ {TARGET_RESCORE}: "
                f"{'met' if statistics.median(ratios) <= TARGET_RESCORE else 'NOT met'})"
                if what == "total"
                else ""
            )
        )
    print_costs(rows, 3 * lines)


def print_costs(rows: dict[str, list[dict[str, Any]]], answers: int) -> None:
    """Ray's fixed start-up over the local pool's and its cost per answer against the
    local pool's (issue 39's targets), from the same rounds, each round side by side."""
    startup = {w: [g["total"] - g["scoring"] for g in rows[w]] for w in rows}
    extra = [r - lo for r, lo in zip(startup["ray"], startup["local"], strict=True)]
    per = {w: [g["scoring"] / answers * 1000 for g in rows[w]] for w in rows}
    ratio = [r / lo for r, lo in zip(per["ray"], per["local"], strict=True)]
    med_extra, med_ratio = statistics.median(extra), statistics.median(ratio)
    print(
        f"start-up: local {statistics.median(startup['local']):.2f} s, ray "
        f"{statistics.median(startup['ray']):.2f} s, ray's extra (median of the rounds' "
        f"differences) {med_extra:.2f} s (target ≤ {TARGET_STARTUP_EXTRA_S}: "
        f"{'met' if med_extra <= TARGET_STARTUP_EXTRA_S else 'NOT met'})"
    )
    print(
        f"per answer: local {statistics.median(per['local']):.3f} ms, ray "
        f"{statistics.median(per['ray']):.3f} ms, median ratio {med_ratio:.3f} (target ≤ "
        f"{TARGET_PER_ANSWER}: {'met' if med_ratio <= TARGET_PER_ANSWER else 'NOT met'})"
    )


def bench_chunks(args: argparse.Namespace, cluster: Any, files: list[Path]) -> None:
    import ray

    print("\n## 2. chunk size (scoring only, one fresh process each) and the cost of a Ray call")
    for chunk in (1, 4, 16, 64):
        got = child(args.dataset, files, cluster.address, chunk)
        per = got["scoring"] / len(got["verdicts"]) * 1000
        print(f"chunk {chunk:>3}: scoring {got['scoring']:.2f} s ({per:.2f} ms a line)")

    async def calls() -> None:
        async with RayVerifierPool(cluster.address) as pool:
            actor = pool._actors.live()[0]
            empty = [("check", None, "(assert true)", "", False)] * 0
            for _ in range(20):  # warm
                await pool._calls.resolve(actor.handle.check_chunk.remote(empty))
            n = 300
            start = time.perf_counter()
            for _ in range(n):
                await pool._calls.resolve(actor.handle.check_chunk.remote(empty))
            serial = (time.perf_counter() - start) / n
            start = time.perf_counter()
            refs = [actor.handle.check_chunk.remote(empty) for _ in range(n)]
            await anyio.to_thread.run_sync(ray.get, refs)
            pipelined = (time.perf_counter() - start) / n
        print(
            f"one Ray call (empty chunk): {serial * 1000:.2f} ms round trip, "
            f"{pipelined * 1000:.2f} ms each when {n} are in flight (load {load()})"
        )

    anyio.run(calls)


def bench_node_loss(args: argparse.Namespace, cluster: Any, files: list[Path]) -> None:
    print("\n## 3. a worker node removed mid-rescore")
    local = child(args.dataset, files, "local")["verdicts"]
    frame = load_dataset(str(args.dataset))
    extra = cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1")
    cluster.wait_for_nodes()
    done = [0]
    half = threading.Event()

    def counted(_v: object) -> None:
        done[0] += 1
        if done[0] == len(local) // 3:
            half.set()

    async def main() -> tuple[list[list[Any]], int, int]:
        async with RayVerifierPool(cluster.address) as pool:
            nodes = len(pool.nodes)

            async def remove() -> None:
                await anyio.to_thread.run_sync(half.wait)
                await anyio.to_thread.run_sync(
                    lambda: cluster.remove_node(extra, allow_graceful=False)
                )

            async with anyio.create_task_group() as tg:
                tg.start_soon(remove)
                result = await rescore_files(files, frame, pool=pool, on_verdict=counted)
            got = [
                [v.model, v.trial, v.custom_id, v.status.value, v.reason] for v in result.verdicts
            ]
            return got, nodes, pool.chunks_lost

    got, nodes, lost = anyio.run(main)
    keys = [tuple(v[:3]) for v in got]
    print(
        f"{nodes} worker nodes, one removed after {len(local) // 3} verdicts: {lost} chunk(s) "
        f"sent again; {len(got)} verdicts for {len(local)} lines, {len(keys) - len(set(keys))} "
        f"twice; identical to the local pool: {got == local}"
    )


def bench_step(args: argparse.Namespace, cluster: Any) -> None:
    print("\n## 4. a GRPO step, 128 × 16 completions, through the reward")
    data = pl.read_parquet(args.dataset)
    completions, answers, constants, _ = build_step(data, 128, 16, seed=1)
    times: dict[str, list[float]] = {"local": [], "ray": []}
    scores: dict[str, list[float]] = {}
    with (
        EquivalenceReward(workers=2, cache_entries=0) as local,
        EquivalenceReward(ray_address=cluster.address, cache_entries=0) as remote,
    ):
        rewards = {"local": local, "ray": remote}
        for way, reward in rewards.items():  # warm-up: start the workers / actors
            scores[way] = reward(completions=completions, answer=answers, constants=constants)
            print(f"warm-up {way}: {reward.last_stats}")
        differ = sum(a != b for a, b in zip(scores["ray"], scores["local"], strict=True))
        print(f"scores that differ between local and ray: {differ} of {len(completions)}")
        for r in range(args.rounds):
            order = ("local", "ray") if r % 2 == 0 else ("ray", "local")
            for way in order:
                start = time.perf_counter()
                got = rewards[way](completions=completions, answer=answers, constants=constants)
                times[way].append(time.perf_counter() - start)
                stats = rewards[way].last_stats
                assert stats is not None
                if got != scores[way] or stats.past_deadline or stats.retried:
                    print(f"  {way}: {stats}")
            print(
                f"round {r + 1} (load {load()}): "
                + ", ".join(f"{w} {times[w][-1]:.2f} s" for w in order)
            )
    ratios = [r / lo for r, lo in zip(times["ray"], times["local"], strict=True)]
    ratio = statistics.median(ratios)
    print(
        f"step: local {statistics.median(times['local']):.2f} s, ray "
        f"{statistics.median(times['ray']):.2f} s, median ratio {ratio:.3f} "
        f"(target ≤ {TARGET_STEP}: {'met' if ratio <= TARGET_STEP else 'NOT met'}); same scores"
    )


def bench_hostile(args: argparse.Namespace, cluster: Any) -> None:
    print("\n## 5. the hostile-answer set on the cluster")
    data = pl.read_parquet(args.dataset)
    target = Path(tempfile.gettempdir()) / f"aeval-ray-bench-{uuid.uuid4().hex}"
    rows = [
        (t, c)
        for t, c in zip(data["answer"], data["constants"], strict=True)
        if c.count("Int") >= 3
    ][:6]
    answers: list[tuple[str, str, str]] = []
    for n, (truth, constants) in enumerate(rows):
        answers.append((hostile(truth, constants, n % 3), truth, constants))
        answers.append(
            (
                f'<answer>(set-option :regular-output-channel "{target}")\n{truth}</answer>',
                truth,
                constants,
            )
        )
        answers.append(
            (
                f'<answer>{truth}) (set-option :diagnostic-output-channel "{target}") '
                f'(echo "x") (assert true</answer>',
                truth,
                constants,
            )
        )
    limits = VerifyLimits.with_budget(2.0)

    async def main() -> tuple[int, int, dict[str, int]]:
        forged = forged_published = 0
        statuses: dict[str, int] = {}
        async with open_checker(limits, published=True, ray_address=cluster.address) as pool:
            for text, truth, constants in answers:
                check = await pool.check(text, truth, constants)
                published = await pool.check_published(text, truth, constants)
                forged += check.status is Status.EQUIVALENT
                forged_published += published.correct
                statuses[check.status.value] = statuses.get(check.status.value, 0) + 1
        return forged, forged_published, statuses

    start = time.perf_counter()
    forged, forged_published, statuses = anyio.run(main)
    print(
        f"{len(answers)} hostile answers in {time.perf_counter() - start:.1f} s: statuses "
        f"{statuses}; forged equivalent: {forged} (published reading: {forged_published}); "
        f"file written: {target.exists()}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rows", type=int, default=671, help="rows of the benchmark to use")
    parser.add_argument(
        "--copies", type=int, default=5, help="the rows this many times over in each trial file"
    )
    parser.add_argument(
        "--only", help="comma-separated parts to run (rescore,chunks,loss,step,hostile)"
    )
    args = parser.parse_args()
    parts = set((args.only or "rescore,chunks,loss,step,hostile").split(","))
    print(f"load average at start: {load()}; {os.cpu_count()} cores")
    cluster = start_cluster()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            dataset = Path(tmp) / "rows.parquet"
            rows = pl.read_parquet(args.dataset).head(args.rows)
            pl.concat([rows] * args.copies).write_parquet(dataset)
            args.dataset = dataset
            files = write_trials(dataset, Path(tmp))
            if "rescore" in parts:
                bench_rescore(args, cluster, files)
            if "chunks" in parts:
                bench_chunks(args, cluster, files)
            if "loss" in parts:
                bench_node_loss(args, cluster, files)
            if "step" in parts:
                args.dataset = DEFAULT_DATASET if args.rows < 128 else dataset
                bench_step(args, cluster)
            if "hostile" in parts:
                bench_hostile(args, cluster)
    finally:
        import ray

        ray.shutdown()
        cluster.shutdown()
    print(f"\nload average at end: {load()}")


if __name__ == "__main__":
    main()
