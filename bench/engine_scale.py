"""Scale: 4 models × 50,000 requests through the engine with flat memory.

A synthetic benchmark (``aeval.synth``) of ``--requests`` rows; the local
server in its own process answers every model with the synthetic responder
at full speed. The engine runs in a child process of this script (so its peak
RSS is its own, not the server's or this script's); measured side by side:

- peak RSS of the engine process (``ru_maxrss``): target < 500 MB;
- the engine's verification throughput (verdicts per second between the
  first and the last verdict) against the pool's standalone throughput on
  lines of the same run (the same pool size, straight into
  ``VerifierPool.check``): target ≥ 80 %.

    .venv/bin/python bench/engine_scale.py                          # 4 × 50,000
    .venv/bin/python bench/engine_scale.py --requests 5000          # quicker
    .venv/bin/python bench/engine_scale.py --rounds 3               # repair rounds (#44)

The RSS after the last verdict (sampled every 0.1 s) is printed as a profile of the run's
end: where its peak is (the verdict frame's build, the summary, the frame read back).

With ``--rounds K`` each model's wrong answers are asked again, up to K rounds, with the
conversation so far (the verification throughput then counts every round's verdicts).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import anyio
from options import options_parser

from aeval.allocator import return_freed_pages
from aeval.local import serve_process

MODELS = ("model-a", "model-b", "model-c", "model-d")
# --variants: two models at two efforts each (issue #37): the server thinks by the level
# (reasoning tokens in every answer), the engine keeps four labels for two bare names.
VARIANTS = ("model-a@low", "model-a@high", "model-b@low", "model-b@high")


def child(args: argparse.Namespace) -> None:
    """Run the engine; print its figures as one JSON line."""
    from aeval.config import Credentials, PollSettings, RunConfig
    from aeval.engine import Run
    from aeval.events import Event, RunStarted, VerdictProduced

    first: list[float] = []
    last = [0.0]
    count = [0]

    rss_at: dict[str, str] = {}

    def rss_mb() -> str:
        """Peak RSS so far (VmHWM) and RSS now (VmRSS): a peak that stays flat
        says nothing of what the process holds at that moment."""
        with open("/proc/self/status") as fh:
            wanted = ("VmHWM", "VmRSS")
            kb = {x.split(":")[0]: int(x.split()[1]) for x in fh if x.startswith(wanted)}
        return f"{kb['VmHWM'] / 1024:8.0f} MB   (now {kb['VmRSS'] / 1024:4.0f} MB)"

    total = args.requests * args.models
    marks = {1_000, total // 4, total // 2, total * 3 // 4, total}

    def on_event(event: Event) -> None:
        if isinstance(event, RunStarted):
            rss_at["peak after load + plan"] = rss_mb()
        if isinstance(event, VerdictProduced):
            if not first:
                first.append(event.time)
            last[0] = event.time
            count[0] += 1
            if count[0] in marks:
                rss_at[f"peak at {count[0]:,} verdicts"] = rss_mb()

    # RSS sampled every 0.1 s (tracemalloc does not see polars' allocations): the run's
    # end, from its last verdict on, is printed as a profile.
    samples: list[tuple[float, float]] = []
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.wait(0.1):
            with open("/proc/self/status") as fh:
                kb = next(int(x.split()[1]) for x in fh if x.startswith("VmRSS"))
            samples.append((time.time(), kb / 1024))

    threading.Thread(target=sample, daemon=True).start()
    config = RunConfig(
        models=(VARIANTS if args.variants else MODELS)[: args.models],
        dataset=str(args.dataset),
        poll=PollSettings(initial_s=0.2, max_s=1.0),
        out_dir=args.out,
        workers=args.workers,
        credentials=Credentials("bench", args.base_url),
        rounds=args.rounds,
    )
    start = time.time()
    result = anyio.run(Run(config, subscribers=[on_event]).run)
    wall = time.time() - start
    # After the last verdict: the end of the run (answer classes, the verdict
    # frame, verdicts.parquet, summary.json).
    rss_at["peak at the end of the run"] = rss_mb()
    sampling.set()
    tail = [(t - last[0], mb) for t, mb in samples if t >= last[0]]
    rss_at["RSS after the last verdict"] = "  ".join(
        f"{t:.0f}s {mb:.0f}" for t, mb in tail[:: max(1, len(tail) // 24)]
    ) + (f"   (max {max(mb for _, mb in tail):.0f} MB)" if tail else "")
    print(
        json.dumps(
            {
                "outcome": result.outcome,
                "run_dir": str(result.run_dir),
                "verdicts": count[0],
                "wall_s": wall,
                "verify_window_s": last[0] - first[0],
                "rss_at": rss_at,
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                "cpu_s": resource.getrusage(resource.RUSAGE_SELF).ru_utime
                + resource.getrusage(resource.RUSAGE_SELF).ru_stime,
            }
        )
    )


async def standalone(
    output: Path, truth: dict[str, tuple[str, str]], n: int, workers: int, published: bool
) -> float:
    """Checks per second of a bare pool on ``n`` lines (with the published reading
    too, as the engine reads each answer, when ``published``)."""
    from aeval.scoring.responses import parse_batch_line
    from aeval.verify import VerifierPool

    responses = []
    with output.open() as fh:
        for i, line in enumerate(fh, start=1):
            responses.append(parse_batch_line(line, source=str(output), lineno=i))
            if len(responses) >= n:
                break
    send, receive = anyio.create_memory_object_stream[object](len(responses))
    for r in responses:
        send.send_nowait(r)
    send.close()
    async with VerifierPool(workers=workers, published=published) as pool:
        start = time.time()

        async def checker() -> None:
            async for r in receive.clone():
                answer, constants = truth[r.custom_id]  # type: ignore[attr-defined]
                if published:
                    await pool.check_both(r.content, answer, constants)  # type: ignore[attr-defined]
                else:
                    await pool.check(r.content, answer, constants)  # type: ignore[attr-defined]

        async with anyio.create_task_group() as tg:
            for _ in range(workers * 2):
                tg.start_soon(checker)
        return len(responses) / (time.time() - start)


def main(args: argparse.Namespace) -> None:
    import polars as pl

    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="aeval-scale-"))
    work.mkdir(parents=True, exist_ok=True)
    data = work / f"synth-{args.requests}.parquet"
    subprocess.run(
        [sys.executable, "-m", "aeval", "synth", "--rows", str(args.requests), "--out", str(data)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    serve_args = ["--dataset", str(data), "--models", "model-*=synthetic:seed=9,accuracy=0.6"]
    # The engine's process as the CLI starts it: polars' allocator returns freed pages.
    child_env = dict(os.environ)
    return_freed_pages(child_env)
    with serve_process([*serve_args, "--log-level", "error"], timeout=300) as base_url:
        proc = subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                "--base-url",
                base_url,
                "--dataset",
                str(data),
                "--out",
                str(work / "runs"),
                "--workers",
                str(args.workers),
                "--models",
                str(args.models),
                "--requests",
                str(args.requests),
                "--rounds",
                str(args.rounds),
                *(["--variants"] if args.variants else []),
            ],
            capture_output=True,
            text=True,
            env=child_env,
        )
    if proc.returncode != 0:
        sys.exit(proc.stderr[-3000:])
    figures = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"engine: {figures['verdicts']:,} verdicts, peak RSS {figures['peak_rss_mb']:.0f} MB")
    run_dir = Path(figures["run_dir"])
    frame = pl.read_parquet(data)
    from aeval.dataset import load_dataset

    frame = load_dataset(str(data))
    truth = {r["id"]: (r["answer"], r["constants"]) for r in frame.iter_rows(named=True)}
    output = sorted((run_dir / "outputs").glob("model-a[-_]*-s0-a*.output.jsonl"))[0]
    alone = anyio.run(standalone, output, truth, args.sample, args.workers, False)
    alone_both = anyio.run(standalone, output, truth, args.sample, args.workers, True)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    engine_rate = figures["verdicts"] / figures["verify_window_s"]
    print(
        f"{args.models} models × {args.requests:,} requests, {args.rounds} round(s), "
        f"{args.workers} verifier workers"
    )
    print(
        f"outcome {figures['outcome']}, {figures['verdicts']:,} verdicts, "
        f"wall {figures['wall_s']:.1f} s"
    )
    print(f"engine main-process CPU        {figures['cpu_s']:8.1f} s")
    print(f"engine peak RSS                {figures['peak_rss_mb']:8.0f} MB   (target < 500 MB)")
    for label, mb in figures["rss_at"].items():
        print(f"  {label:28s} {mb}")
    print(f"engine verification throughput {engine_rate:8.0f} verdicts/s")
    print(f"pool standalone ({args.sample:,} lines)  {alone:8.0f} checks/s")
    print(f"  engine / standalone          {engine_rate / alone:8.0%}   (target ≥ 80 %)")
    print(
        f"pool standalone, published too {alone_both:8.0f} checks/s   (check + published reading)"
    )
    print(f"  engine / that                {engine_rate / alone_both:8.0%}")


if __name__ == "__main__":
    parser = options_parser(__doc__, requests=50_000, models=4, workers=2, sample=10_000)
    parser.add_argument(
        "--keep", type=Path, help="work in this directory and keep it (the run, to study its end)"
    )
    parser.add_argument(
        "--variants", action="store_true", help="model-a@low, model-a@high, model-b@low, …"
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="repair rounds (run --rounds K), default 1"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    parser.add_argument("--dataset", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    ns = parser.parse_args()
    child(ns) if ns.child else main(ns)
