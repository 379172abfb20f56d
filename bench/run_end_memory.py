"""The end of a large repair-round run: peak memory with the verdict frame built from
``verdicts.jsonl`` one record at a time through Python, or by polars' NDJSON reader
(issue 44).

A run's end builds its verdict frame from ``verdicts.jsonl``, writes it to
``verdicts.parquet``'s temporary sibling, lets it go, summarises from that file, puts
the file in place with ``summary.json`` and reads the frame back for the run's result.
This replays that end, each way in its own child process on the same verdicts, and
prints each stage's peak RSS (VmHWM, reset between stages through
``/proc/self/clear_refs``: tracemalloc does not see polars' allocations) above the
process's start beside the other's, and whether the two wrote the same files and
frame:

- ``records``: 2,000 records at a time through Python, each batch a frame
  (``verdicts_frame``): the reader before this cut;
- ``polars``: ``read_verdict_frames`` (the reader now).

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
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from options import options_parser

from aeval.allocator import return_freed_pages

if TYPE_CHECKING:
    import polars as pl


def _peak_and_now() -> tuple[float, float]:
    with open("/proc/self/status") as fh:
        kb = {x.split(":")[0]: int(x.split()[1]) for x in fh if x.startswith(("VmHWM", "VmRSS"))}
    return kb["VmHWM"] / 1024, kb["VmRSS"] / 1024


def _reset_peak() -> None:
    """VmHWM from now on (Linux: writing 5 to clear_refs resets it to the current RSS)."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")


def _through_records(path: Path) -> Iterator[pl.DataFrame]:
    """The reader before polars' NDJSON reader: 2,000 records at a time, each a frame."""
    from aeval.store.verdict_file import read_verdict_records
    from aeval.verdicts import verdicts_frame

    batch = []
    for _, rec in read_verdict_records(path):
        batch.append(rec)
        if len(batch) >= 2_000:
            yield verdicts_frame(batch)
            batch = []
    if batch:
        yield verdicts_frame(batch)


def child(verdicts: Path, out: Path, how: str, rounds: int) -> None:
    """Replay the end with the frame read ``how``; print its figures as one JSON line."""
    import polars as pl

    from aeval.cost import warm_prices
    from aeval.store.results import concat_sorted, publish_results, stage_verdicts
    from aeval.store.verdict_file import read_verdict_frames
    from aeval.summary.aggregate import summarize_file

    warm_prices()  # the run loads the price data after its first verdict, long before its end
    start = _peak_and_now()[1]
    figures: dict[str, float] = {}

    def stage(name: str) -> None:
        peak, now = _peak_and_now()
        figures[f"{name}_peak"], figures[f"{name}_now"] = peak - start, now - start
        _reset_peak()

    began = time.time()
    _reset_peak()
    reader = read_verdict_frames if how == "polars" else _through_records
    frames = [concat_sorted(list(reader(verdicts)), ["model", "trial", "custom_id"])]
    figures["read_seconds"] = time.time() - began
    stage("built")
    staged = stage_verdicts(out, frames.pop())
    stage("staged")
    summary = summarize_file(staged, rounds=rounds)
    stage("summary")
    publish_results(out, staged, summary)
    frame = pl.read_parquet(out / "verdicts.parquet")
    stage("read_back")
    frame.write_parquet(out / "result.parquet")  # the run's result, compared by main()
    figures["seconds"] = time.time() - began
    figures["verdicts"] = frame.height
    print(json.dumps(figures))


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
    for how in ("records", "polars"):
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
    same_summary = (work / "records" / "summary.json").read_bytes() == (
        work / "polars" / "summary.json"
    ).read_bytes()
    import polars as pl
    from polars.testing import assert_frame_equal

    for name in ("verdicts.parquet", "result.parquet"):
        assert_frame_equal(
            pl.read_parquet(work / "records" / name), pl.read_parquet(work / "polars" / name)
        )
    print(f"{figures['polars']['verdicts']:,} verdicts ({args.copies} copies of {source})")
    print(f"{'MB above the start':40s} {'records':>8s} {'polars':>8s}")
    for key, label in (
        ("built_peak", "peak building the frame"),
        ("built_now", "resident with the frame"),
        ("staged_peak", "peak writing it"),
        ("summary_peak", "peak summarising from the file"),
        ("read_back_peak", "peak reading the frame back"),
        ("read_back_now", "resident at the end"),
    ):
        print(f"{label:40s} {figures['records'][key]:8.0f} {figures['polars'][key]:8.0f}")
    for how in figures:
        figures[how]["whole"] = max(v for k, v in figures[how].items() if k.endswith("_peak"))
    print(
        f"{'peak of the whole end':40s} {figures['records']['whole']:8.0f} "
        f"{figures['polars']['whole']:8.0f}"
    )
    for key, label in (("read_seconds", "seconds reading"), ("seconds", "seconds, whole end")):
        print(f"{label:40s} {figures['records'][key]:8.1f} {figures['polars'][key]:8.1f}")
    print(
        f"summary.json byte-equal: {same_summary}; verdicts.parquet and the result's frame "
        "equal (assert_frame_equal)"
    )
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    parser = options_parser(__doc__, copies=50, rounds=3)
    parser.add_argument("--run", type=Path, help="a run kept by engine_scale.py --keep")
    parser.add_argument("--child", choices=("records", "polars"), help=argparse.SUPPRESS)
    parser.add_argument("--verdicts", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns.child:
        child(ns.verdicts, ns.out, ns.child, ns.rounds)
    elif ns.run is None:
        parser.error("--run DIR is required (a run kept by engine_scale.py --keep)")
    else:
        main(ns)
