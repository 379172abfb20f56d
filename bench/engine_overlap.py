"""Overlap: verification of early batches hides behind the wait for later ones.

Three models whose batches finish at staggered times (the local server, in
its own process, holds each model's batch in ``finalizing`` for 1×, 2× and
3× ``--stagger`` seconds). Measured side by side in one run:

- the engine running the three models at once: its wall time, and the *tail*
  (run end minus the moment the last batch was seen ``completed``);
- the time to verify that last batch's output alone (same pool size, the
  same lines, straight into a ``VerifierPool``): the tail should be ≤ 1.2× it;
- the same work model by model, sequentially (three runs one after another):
  the concurrent run should be ≥ 2× faster.

    .venv/bin/python bench/engine_overlap.py                 # 300 rows, stagger 4 s
    .venv/bin/python bench/engine_overlap.py --rows 600 --stagger 6
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import anyio
import polars as pl

from aeval.config import Credentials, PollSettings, RetrySettings, RunConfig
from aeval.engine import Run
from aeval.events import Event, RunFinished, ShardUpdated
from aeval.local import serve_process
from aeval.scoring.responses import parse_batch_line
from aeval.verify import VerifierPool, VerifyLimits

ROOT = Path(__file__).resolve().parents[1]
BENCHMARK = ROOT / "tests" / "data" / "warp-benchmark.parquet"
MODELS = ("model-a", "model-b", "model-c")
POLL = PollSettings(initial_s=0.05, factor=1.5, max_s=0.25, jitter=0.1)


def server_args(dataset: Path, stagger: float) -> list[str]:
    """`serve` arguments: each model's batch is held in finalizing a stagger longer."""
    args = ["--dataset", str(dataset), "--models", "model-*=synthetic:seed=5,accuracy=0.6"]
    for i, m in enumerate(MODELS):
        args += ["--faults", f"stuck_finalizing:model={m},delay={stagger * (i + 1)}"]
    return args


def config(dataset: Path, out: Path, base_url: str, models: tuple[str, ...], workers: int):
    return RunConfig(
        models=models,
        dataset=str(dataset),
        poll=POLL,
        retry=RetrySettings(initial_s=0.05, max_s=1.0),
        out_dir=out,
        workers=workers,
        limits=VerifyLimits(),
        credentials=Credentials("bench", base_url),
    )


async def timed_run(cfg: RunConfig) -> tuple[float, list[Event], Path]:
    events: list[Event] = []
    start = time.time()
    result = await Run(cfg, subscribers=[events.append]).run()
    assert result.outcome == "finished", result.message
    return time.time() - start, events, result.run_dir


async def verify_alone(
    output: Path, truth: dict[str, tuple[str, str]], workers: int, passes: int = 3
) -> float:
    """Verify a batch output file straight through the pool, as fast as it goes.

    The engine's pool had already checked these rows for the other models (the
    workers cache per-row declarations), so a first pass warms this pool the
    same way; the figure is the median of the ``passes`` after it.
    """
    responses = [
        parse_batch_line(line, source=str(output), lineno=i)
        for i, line in enumerate(output.read_text().splitlines(), start=1)
    ]
    times: list[float] = []
    async with VerifierPool(VerifyLimits(), workers) as pool:
        for _ in range(passes + 1):
            send, receive = anyio.create_memory_object_stream[object](len(responses))
            for r in responses:
                send.send_nowait(r)
            send.close()
            start = time.time()

            async def checker(receive=receive) -> None:  # type: ignore[no-untyped-def]
                async for r in receive.clone():
                    answer, constants = truth[r.custom_id]
                    await pool.check(r.content, answer, constants)

            async with anyio.create_task_group() as tg:
                for _ in range(workers * 2):
                    tg.start_soon(checker)
            receive.close()
            times.append(time.time() - start)
    return sorted(times[1:])[len(times[1:]) // 2]


async def main(args: argparse.Namespace) -> None:
    frame = pl.read_parquet(args.dataset).filter(pl.col("tier") != "large").head(args.rows)
    work = Path(tempfile.mkdtemp(prefix="aeval-overlap-"))
    data = work / "rows.parquet"
    frame.write_parquet(data)
    from aeval.dataset import load_dataset

    loaded = load_dataset(str(data))
    truth = {r["id"]: (r["answer"], r["constants"]) for r in loaded.iter_rows(named=True)}
    with serve_process(server_args(data, args.stagger)) as base_url:
        wall, events, run_dir = await timed_run(
            config(data, work / "conc", base_url, MODELS, args.workers)
        )
        completed = [
            e.time for e in events if isinstance(e, ShardUpdated) and e.phase == "completed"
        ]
        end = next(e.time for e in events if isinstance(e, RunFinished))
        tail = end - max(completed)
        from aeval.events import OutputDownloaded, VerdictProduced

        last = max(completed)
        downloaded = max(e.time for e in events if isinstance(e, OutputDownloaded))
        last_verdict = max(e.time for e in events if isinstance(e, VerdictProduced))
        first_after = min(
            e.time for e in events if isinstance(e, VerdictProduced) and e.time >= last
        )
        breakdown = (
            f"download +{downloaded - last:.2f}, first verdict +{first_after - last:.2f}, "
            f"last verdict +{last_verdict - last:.2f}, run end +{end - last:.2f} s"
        )
        last_output = sorted((run_dir / "outputs").glob(f"{MODELS[-1]}-*.output.jsonl"))[0]
        alone = await verify_alone(last_output, truth, args.workers)
        sequential = 0.0
        for m in MODELS if not args.skip_sequential else ():
            t, _, _ = await timed_run(config(data, work / "seq", base_url, (m,), args.workers))
            sequential += t
    print(
        f"rows {frame.height} × {len(MODELS)} models, stagger {args.stagger:g} s, "
        f"{args.workers} verifier workers"
    )
    print(f"concurrent run wall time          {wall:7.2f} s")
    print(f"  tail after last batch completed {tail:7.2f} s")
    print(f"    ({breakdown})")
    print(f"  last batch verified alone       {alone:7.2f} s   (warm pool, median of 3)")
    print(f"  tail / alone                    {tail / alone:7.2f}×   (target ≤ 1.2×)")
    print(f"sequential, model by model       {sequential:7.2f} s")
    print(f"  sequential / concurrent         {sequential / wall:7.2f}×   (target ≥ 2×)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=BENCHMARK)
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--stagger", type=float, default=4.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--skip-sequential", action="store_true", help="(for profiling)")
    anyio.run(main, parser.parse_args())
