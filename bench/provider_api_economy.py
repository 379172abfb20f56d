"""API economy per provider: the calls a 10-minute batch costs on Gemini, Together, Groq, Mistral.

The same measurement as ``bench/engine_api_economy.py`` (a batch that takes
600 s, replayed ``--scale`` times faster: the local server, in its own process,
paces each batch so and the poll settings are divided by the same factor), run
once per provider through that provider's real adapter and official SDK
against the local server's routes for its wire format. Every adapter call is
counted by kind; an adapter call is one HTTP request except Gemini's upload (2:
the resumable upload's start and one chunk per 8 MB) and Together's (3: the
form, the presigned PUT, ``preprocess``). OpenAI is measured beside them as the
reference. Target: fewer than 60 calls per batch while waiting.

    .venv/bin/python bench/provider_api_economy.py       # scale 20: ~2-3 min for five providers
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import anyio
import polars as pl
from engine_api_economy import (
    BATCH_SECONDS,
    BENCHMARK,
    CountingProvider,
    scaled_poll,
    schedule_polls,
)
from options import options_parser

from aeval.batch.providers.registry import provider_spec
from aeval.config import Credentials, PollSettings, RetrySettings, RunConfig
from aeval.engine import Run
from aeval.local import serve_process

PROVIDERS = ("openai", "google", "together", "groq", "mistral")


async def measure(provider: str, args: argparse.Namespace, work: Path) -> tuple[float, dict]:
    scaled = scaled_poll(args.scale)
    data = work / "rows.parquet"
    rps = args.rows / (BATCH_SECONDS / args.scale)
    models = tuple(f"{provider}/model-{c}" for c in "abc"[: args.batches])
    serve_args = ["--dataset", str(data), "--models", "model-*=synthetic:seed=2,accuracy=0.6"]
    serve_args += ["--requests-per-second", f"{rps:.4f}", "--log-level", "error"]
    with serve_process(serve_args) as base_url:
        spec = provider_spec(provider)
        root = base_url.removesuffix("/v1")
        credentials = Credentials("bench", root + spec.root_path)
        counting = CountingProvider(spec.open(credentials, RetrySettings()))
        config = RunConfig(
            models=models,
            dataset=str(data),
            poll=scaled,
            out_dir=work / f"runs-{provider}",
            workers=1,
            credentials={provider: credentials},
        )
        start = time.time()
        result = await Run(config, provider=counting).run()
        wall = time.time() - start
    assert result.outcome == "finished", result.message
    return wall, dict(counting.calls)


async def main(args: argparse.Namespace) -> None:
    work = Path(tempfile.mkdtemp(prefix="aeval-provider-economy-"))
    frame = pl.read_parquet(BENCHMARK).filter(pl.col("tier") == "small").head(args.rows)
    frame.write_parquet(work / "rows.parquet")
    print(
        f"{args.batches} batches of {args.rows} requests per provider, each ~{BATCH_SECONDS:.0f} s "
        f"replayed {args.scale:g}x faster; poll schedule alone over 600 s: "
        f"{schedule_polls(PollSettings(), BATCH_SECONDS)} polls"
    )
    header = f"{'provider':9} {'wall s':>7} {'polls/batch':>12} {'all calls/batch':>16}"
    print(header + "  calls by kind")
    for provider in args.providers.split(","):
        wall, calls = await measure(provider, args, work)
        polls = calls.get("retrieve", 0) / args.batches
        total = sum(calls.values()) / args.batches
        kinds = dict(sorted(calls.items()))
        print(f"{provider:9} {wall:7.1f} {polls:12.1f} {total:16.1f}  {kinds}")


if __name__ == "__main__":
    parser = options_parser(__doc__, scale=20.0, rows=60, batches=3, providers=",".join(PROVIDERS))
    anyio.run(main, parser.parse_args())
