"""The end of a large repair-round run: peak memory with the summary beside the whole
verdict frame, or computed from the verdict file with the frame let go (issue 44).

A run's end builds its verdict frame from ``verdicts.jsonl``, summarises it and writes
``verdicts.parquet`` and ``summary.json``. This replays that end, each way in its own
child process on the same verdicts, and prints each one's peak RSS (VmHWM) above its
start beside the other's, and whether the two wrote the same files:

- ``frame``: ``summarize(frame)`` with the whole frame held, then ``write_results``
  (the run's end before this cut);
- ``file``: ``stage_verdicts(frame)``, the frame let go, ``summarize_file`` of the
  staged file, ``publish_results``, the frame read back (the run's end now).

The verdicts are a kept run's (``engine_scale.py --rounds 3 --keep DIR``), copied
``--copies`` times with each copy's items renamed, so a quick small run stands for a
large one (4 × 1,000 requests × 50 copies: 319,050 verdicts, the 4 × 50,000 run's
319,484). The answers' classes are left out (the same step both ways).

    .venv/bin/python bench/engine_scale.py --requests 1000 --sample 500 --rounds 3 --keep /tmp/k
    .venv/bin/python bench/run_end_memory.py --run /tmp/k --copies 50
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from options import options_parser

from aeval.allocator import return_freed_pages


def _peak_and_now() -> tuple[float, float]:
    with open("/proc/self/status") as fh:
        kb = {x.split(":")[0]: int(x.split()[1]) for x in fh if x.startswith(("VmHWM", "VmRSS"))}
    return kb["VmHWM"] / 1024, kb["VmRSS"] / 1024


def child(verdicts: Path, out: Path, how: str, rounds: int) -> None:
    """Replay the end ``how``; print its figures as one JSON line."""
    import polars as pl

    from aeval.cost import warm_prices
    from aeval.store.results import concat_sorted, publish_results, stage_verdicts, write_results
    from aeval.store.verdict_file import read_verdict_frames
    from aeval.summary.aggregate import summarize, summarize_file

    warm_prices()  # the run loads the price data after its first verdict, long before its end
    start = _peak_and_now()[1]
    began = time.time()
    frame = concat_sorted(list(read_verdict_frames(verdicts)), ["model", "trial", "custom_id"])
    built = _peak_and_now()
    if how == "frame":
        summary = summarize(frame, rounds=rounds)
        write_results(out, frame, summary)
    else:
        frames = [frame]
        del frame
        staged = stage_verdicts(out, frames.pop())
        summary = summarize_file(staged, rounds=rounds)
        publish_results(out, staged, summary)
        frame = pl.read_parquet(out / "verdicts.parquet")
    peak, now = _peak_and_now()
    print(
        json.dumps(
            {
                "verdicts": frame.height,
                "start": start,
                "built_peak": built[0] - start,
                "built_now": built[1] - start,
                "peak": peak - start,
                "now": now - start,
                "seconds": time.time() - began,
            }
        )
    )


def main(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="aeval-run-end-"))
    (source,) = Path(args.run).glob("runs/*/verdicts.jsonl")
    verdicts = work / "verdicts.jsonl"
    with source.open() as src, verdicts.open("w") as dst:
        lines = src.read().splitlines()
        for copy in range(args.copies):
            for line in lines:
                record = json.loads(line)
                record["custom_id"] = f"c{copy:02d}-{record['custom_id']}"
                dst.write(json.dumps(record, ensure_ascii=False) + "\n")
    env = dict(os.environ)
    return_freed_pages(env)  # the engine's process as the CLI starts it
    figures = {}
    for how in ("frame", "file"):
        out = work / how
        out.mkdir()
        proc = subprocess.run(
            [
                *(sys.executable, __file__, "--child", how, "--verdicts", str(verdicts)),
                *("--out", str(out), "--rounds", str(args.rounds)),
            ],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        if proc.returncode != 0:
            sys.exit(proc.stderr[-3000:])
        figures[how] = json.loads(proc.stdout.strip().splitlines()[-1])
    same_summary = (work / "frame" / "summary.json").read_bytes() == (
        work / "file" / "summary.json"
    ).read_bytes()
    import polars as pl

    same_frame = pl.read_parquet(work / "frame" / "verdicts.parquet").equals(
        pl.read_parquet(work / "file" / "verdicts.parquet")
    )
    print(f"{figures['file']['verdicts']:,} verdicts ({args.copies} copies of {source})")
    print(f"{'MB above the start':32s} {'frame':>8s} {'file':>8s}")
    for key, label in (
        ("built_peak", "peak building the frame"),
        ("built_now", "resident with the frame"),
        ("peak", "peak of the whole end"),
        ("now", "resident at the end"),
    ):
        print(f"{label:32s} {figures['frame'][key]:8.0f} {figures['file'][key]:8.0f}")
    print(f"{'seconds':32s} {figures['frame']['seconds']:8.1f} {figures['file']['seconds']:8.1f}")
    print(f"summary.json byte-equal: {same_summary}; verdicts.parquet equal: {same_frame}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    parser = options_parser(__doc__, copies=50, rounds=3)
    parser.add_argument("--run", type=Path, help="a run kept by engine_scale.py --keep")
    parser.add_argument("--child", choices=("frame", "file"), help=argparse.SUPPRESS)
    parser.add_argument("--verdicts", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns.child:
        child(ns.verdicts, ns.out, ns.child, ns.rounds)
    elif ns.run is None:
        parser.error("--run DIR is required (a run kept by engine_scale.py --keep)")
    else:
        main(ns)
