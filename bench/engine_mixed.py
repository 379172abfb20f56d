"""A mixed OpenAI + Anthropic run beside an OpenAI-only run of the same size: the seam's cost.

Both runs send the same requests (``--rows`` benchmark rows × 2 models, one trial)
to one local server (its own process, instant timing): the OpenAI-only run as
``model-a,model-b``, the mixed run as ``model-a,anthropic/model-b`` (the second
model through Message Batches and the anthropic SDK). Verification is the same work
in both. Runs alternate, ``--repeat`` times each; printed are the medians of the
wall time and of this process's CPU time, and their ratios mixed / OpenAI-only.

    .venv/bin/python bench/engine_mixed.py
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import anyio
import polars as pl
from options import options_parser

from aeval.batch.providers.registry import server_credentials
from aeval.config import PollSettings, RunConfig
from aeval.engine import Run
from aeval.local import serve_process

ROOT = Path(__file__).resolve().parents[1]
BENCHMARK = ROOT / "tests" / "data" / "warp-benchmark.parquet"
POLL = PollSettings(initial_s=0.05, factor=1.5, max_s=0.5, jitter=0.2)


async def one_run(
    models: tuple[str, ...], data: Path, out: Path, base_url: str
) -> tuple[float, float]:
    config = RunConfig(
        models=models,
        dataset=str(data),
        poll=POLL,
        out_dir=out,
        workers=2,
        credentials=server_credentials(base_url, "bench"),
    )
    wall, cpu = time.perf_counter(), time.process_time()
    result = await Run(config).run()
    assert result.outcome == "finished", result.message
    return time.perf_counter() - wall, time.process_time() - cpu


async def main(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="aeval-mixed-"))
    data = work / "rows.parquet"
    pl.read_parquet(BENCHMARK).head(args.rows).write_parquet(data)
    serve_args = ["--dataset", str(data), "--models", "model-*=synthetic:seed=2,accuracy=0.6"]
    serve_args += ["--log-level", "error"]
    runs: dict[str, list[tuple[float, float]]] = {"openai": [], "mixed": []}
    shapes = {"openai": ("model-a", "model-b"), "mixed": ("model-a", "anthropic/model-b")}
    with serve_process(serve_args) as base_url:
        for i in range(args.repeat):
            for name in ("openai", "mixed") if i % 2 == 0 else ("mixed", "openai"):
                runs[name].append(await one_run(shapes[name], data, work / name, base_url))
    med = {
        k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
        for k, v in runs.items()
    }
    print(f"{args.rows} rows × 2 models, {args.repeat} runs each (medians)")
    for name in ("openai", "mixed"):
        wall, cpu = med[name]
        print(f"  {name:<7} {' + '.join(shapes[name]):<30} wall {wall:6.2f} s   cpu {cpu:6.2f} s")
    print(
        f"  mixed / OpenAI-only: wall {med['mixed'][0] / med['openai'][0]:.2f}x, "
        f"cpu {med['mixed'][1] / med['openai'][1]:.2f}x"
    )


if __name__ == "__main__":
    anyio.run(main, options_parser(__doc__, rows=200, repeat=3).parse_args())
