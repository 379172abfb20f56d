"""Manifest cost of a 5,000-shard run: written on the event loop vs in a worker thread.

Every shard state change rewrites the whole manifest (atomically: temporary
file, fsync, rename, fsync the directory). With 5,000 shards one rewrite
serialises 5,000 records. Measured side by side in one run, on the same
manifest, with ``--tasks`` shards changing state at once (``--rounds`` times
each), while a heartbeat task ticks every millisecond:

- ``loop``: ``RunStore.put_shard`` (the write on the event loop, as before);
- ``thread``: ``RunStore.save_shards`` (the write in a worker thread; saves that
  arrive during a write share the next one).

For each: wall time, manifest writes, and how long the event loop was blocked
(the heartbeat's total and longest lateness). Ratios are loop / thread.

    .venv/bin/python bench/engine_manifest.py                 # 5,000 shards, 40 tasks × 2
    .venv/bin/python bench/engine_manifest.py --shards 500
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
from options import options_parser

from aeval.store import RunStore, ShardRecord, shard_key

TICK_S = 0.001


def _records(shards: int) -> list[ShardRecord]:
    out = []
    for i in range(shards):
        model, trial, shard = f"model-{i % 4}", 1 + (i // 4) % 3, i
        out.append(
            ShardRecord(
                key=shard_key(model, trial, shard),
                model=model,
                trial=trial,
                shard=shard,
                requests=49_000,
                input_path=f"requests/{model}-0123abcd-t{trial}-s{shard}.jsonl",
                sha256="ab" * 32,
                bytes=190_000_000,
                input_file_id=f"file-{i:024d}",
                upload_name=f"run-{model}-t{trial}-s{shard}.jsonl",
                upload_attempts=1,
                attempt=0,
                intent_attempt=0,
                batch_id=f"batch_{i:024d}",
                status="in_progress",
                total=49_000,
                created_at=1.7e9,
            )
        )
    return out


async def _measure(
    store: RunStore, save: Callable[[ShardRecord], Awaitable[None]], tasks: int, rounds: int
) -> dict[str, float]:
    late_total = late_max = 0.0
    done = anyio.Event()

    async def heartbeat() -> None:
        nonlocal late_total, late_max
        while not done.is_set():
            start = time.perf_counter()
            await anyio.sleep(TICK_S)
            late = time.perf_counter() - start - TICK_S
            if late > 0.002:  # beyond scheduling noise: the loop was busy
                late_total += late
                late_max = max(late_max, late)

    keys = list(store.shards)[:tasks]

    async def shard(key: str) -> None:
        for n in range(rounds):
            rec = store.shards[key]
            await save(rec.evolve(completed=rec.completed + 1 + n))

    writes = store.manifest_writes
    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        tg.start_soon(heartbeat)
        async with anyio.create_task_group() as work:
            for key in keys:
                work.start_soon(shard, key)
        wall = time.perf_counter() - start
        done.set()
    return {
        "wall_s": wall,
        "writes": store.manifest_writes - writes,
        "blocked_s": late_total,
        "longest_block_s": late_max,
    }


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = RunStore.create(Path(tmp), "bench", {"models": ["m"]})
        try:
            store.put_shards(_records(args.shards))
            size = (store.run_dir / "manifest.json").stat().st_size

            async def on_loop(rec: ShardRecord) -> None:
                store.put_shard(rec)
                await anyio.lowlevel.checkpoint()  # the engine awaits between calls too

            async def in_thread(rec: ShardRecord) -> None:
                await store.save_shards([rec])

            figures = {}
            for name, save in (("loop", on_loop), ("thread", in_thread)):
                figures[name] = await _measure(store, save, args.tasks, args.rounds)
        finally:
            store.close()
    saves = args.tasks * args.rounds
    print(
        f"{args.shards} shards, manifest {size / 1e6:.1f} MB; {args.tasks} shards changing "
        f"state {args.rounds}× each ({saves} saves)"
    )
    print(f"{'route':8} {'wall s':>8} {'writes':>7} {'loop blocked s':>15} {'longest block s':>16}")
    for name, f in figures.items():
        print(
            f"{name:8} {f['wall_s']:8.2f} {f['writes']:7.0f} {f['blocked_s']:15.2f} "
            f"{f['longest_block_s']:16.3f}"
        )
    loop, thread = figures["loop"], figures["thread"]
    print(
        f"ratios loop/thread: wall {loop['wall_s'] / thread['wall_s']:.1f}×, writes "
        f"{loop['writes'] / max(1, thread['writes']):.1f}×, loop blocked "
        f"{loop['blocked_s'] / max(1e-3, thread['blocked_s']):.1f}×, longest block "
        f"{loop['longest_block_s'] / max(1e-3, thread['longest_block_s']):.1f}×"
    )


if __name__ == "__main__":
    anyio.run(main, options_parser(__doc__, shards=5000, tasks=40, rounds=2).parse_args())
