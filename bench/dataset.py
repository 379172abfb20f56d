"""Benchmark loading and synthetic generation: time, peak memory, throughput, side by side.

    .venv/bin/python bench/dataset.py [--rows 100000] [--repeat 3]

Loading: ``aeval.dataset.load_dataset`` against two baselines on the same
file in the same run: a bare ``polars.read_parquet``/``read_ndjson`` (the floor:
what validation costs on top) and the pandas route of the reference notebook
(``datasets`` → ``to_pandas``). Each load runs in a fresh process so its peak
RSS is its own.

Synthesis: ``aeval.synth.generate`` (each distinct constraint Z3-checked once,
rows joined in polars) against the naive way (one Z3 check and one Python
string build per row), the latter measured on a slice and scaled up.
Timings on a shared machine are noisy; read the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
REAL = ROOT / "tests" / "data" / "warp-benchmark.parquet"
OUT = ROOT / "bench" / "out"

# Runs in a fresh interpreter: imports first, then one load, reporting the
# time and how far the peak RSS rose above the post-import peak.
_LOAD_SNIPPET = """
import json, sys, time
how, path = sys.argv[1], sys.argv[2]
import polars as pl
from aeval.dataset import load_dataset
import datasets
def status_mb(field):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(field)
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")  # reset the peak (VmHWM) to the current RSS: count only the load
before = status_mb("VmRSS")
t = time.perf_counter()
if how == "aeval":
    rows = load_dataset(path).height
elif how == "aeval+fingerprint":  # what a run does: also the file's and the rows' sha256
    from aeval.dataset import load_dataset_fingerprinted
    rows = load_dataset_fingerprinted(path)[0].height
elif how == "polars":
    rows = (pl.read_parquet(path) if path.endswith(".parquet") else pl.read_ndjson(path)).height
else:  # the reference notebook's route: datasets, then pandas
    kind = "parquet" if path.endswith(".parquet") else "json"
    ds = datasets.load_dataset(kind, data_files=path, split="train")
    rows = len(ds.to_pandas())
seconds = time.perf_counter() - t
print(json.dumps({"rows": rows, "seconds": seconds, "peak_mb": status_mb("VmHWM") - before}))
"""


def _load(how: str, path: Path, cache: Path) -> dict[str, float]:
    # A fresh datasets cache per run: its route converts the file to Arrow on first load.
    env = dict(os.environ, HF_DATASETS_CACHE=str(cache), HF_HUB_OFFLINE="1")
    done = subprocess.run(
        [sys.executable, "-c", _LOAD_SNIPPET, how, str(path)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def bench_loads(files: list[Path], repeat: int) -> None:
    print(f"\n## load (best of {repeat}; peak = RSS growth during the load)")
    print(f"{'file':<28}{'rows':>8}  {'route':<18}{'seconds':>9}{'peak MB':>9}{'time x':>8}")
    for path in files:
        results: dict[str, dict[str, float]] = {}
        for how in ("aeval", "aeval+fingerprint", "polars", "datasets+pandas"):
            runs = []
            for _ in range(repeat):
                with tempfile.TemporaryDirectory(dir=OUT) as cache:
                    runs.append(_load(how, path, Path(cache)))
            results[how] = min(runs, key=lambda r: r["seconds"])
            results[how]["peak_mb"] = max(r["peak_mb"] for r in runs)
        base = results["aeval"]["seconds"]
        for how, r in results.items():
            print(
                f"{path.name:<28}{int(r['rows']):>8}  {how:<18}{r['seconds']:>9.3f}"
                f"{r['peak_mb']:>9.0f}{r['seconds'] / base:>8.2f}"
            )


def bench_synth(rows: int) -> pl.DataFrame:
    import z3

    from aeval.synth import QUESTION_HEAD, constraint, generate, problems

    print(f"\n## synth ({rows:,} rows)")
    t = time.perf_counter()
    frame, stats = generate(rows, seed=1)
    ours = time.perf_counter() - t
    print(
        f"aeval.synth.generate: {ours:.2f} s = {rows / ours:,.0f} rows/s "
        f"(render+plan {stats.seconds_render:.2f} s, Z3 {stats.constraints_verified} distinct "
        f"checks {stats.seconds_verify:.2f} s, polars assembly {stats.seconds_assemble:.2f} s)"
    )

    # Whole-process peak of the CLI doing the same job (fresh interpreter, written to parquet).
    out = OUT / "synth-peak.parquet"
    subprocess.run(
        [sys.executable, "-m", "aeval", "synth", "--out", str(out), f"--rows={rows}", "--seed=1"],
        check=True,
        capture_output=True,
    )
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(
        f"python -m aeval synth --rows {rows}: peak RSS {peak:,.0f} MB "
        f"(the frame itself: {frame.estimated_size() / 2**20:,.0f} MB)"
    )

    # Naive baseline on a slice: every row re-renders and re-checks its own truth.
    by_name = {p.name: p for p in problems()}
    slice_rows = min(rows, 1500)
    t = time.perf_counter()
    for name, n in frame.select("problem", "n").head(slice_rows).iter_rows():
        c = constraint(by_name[name], n)
        solver = z3.Solver()
        solver.from_string(f"{c.constants}\n{c.assertion}")
        assert solver.check() == z3.sat
        _ = QUESTION_HEAD + c.assertion
    naive = (time.perf_counter() - t) * rows / slice_rows
    print(
        f"naive per-row Z3 (measured on {slice_rows} rows, scaled): {naive:.1f} s = "
        f"{rows / naive:,.0f} rows/s  -> aeval is {naive / ours:.1f}x faster"
    )
    return frame


def bench_validation(path: Path, repeat: int = 7) -> None:
    """What validation alone costs, in-process (the fresh-process loads above are noisier)."""
    from aeval.dataset import validate_frame

    read_times, check_times = [], []
    for _ in range(repeat):
        t = time.perf_counter()
        raw = pl.read_parquet(path)
        read_times.append(time.perf_counter() - t)
        t = time.perf_counter()
        validate_frame(raw)
        check_times.append(time.perf_counter() - t)
    print(
        f"\n## validation alone ({path.name}, best of {repeat}): read {min(read_times):.3f} s, "
        f"validate_frame {min(check_times):.3f} s "
        f"({min(check_times) / min(read_times):.1%} of the read)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)

    from aeval.synth import write_benchmark

    frame = bench_synth(args.rows)
    big_parquet = write_benchmark(frame, OUT / f"synth-{args.rows}.parquet")
    big_jsonl = write_benchmark(frame, OUT / f"synth-{args.rows}.jsonl")
    del frame
    bench_loads([REAL, big_parquet, big_jsonl], args.repeat)
    bench_validation(big_parquet)


if __name__ == "__main__":
    main()
