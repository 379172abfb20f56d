"""API economy: how many calls a batch costs while we wait for it.

A batch that takes 10 minutes, with the default poll settings, replayed
``--scale`` times faster: the local server (own process) paces each batch so
it takes ``600 / scale`` seconds, and the poll settings are divided by the
same factor, so the number of polls is what a real 10-minute batch costs.
Every call the engine makes goes through a counting wrapper around the real
OpenAI provider. Printed beside it: the same count from the poll schedule
alone over 600 s (no HTTP), as a cross-check. Target: fewer than 60 calls per
batch while waiting.

    .venv/bin/python bench/engine_api_economy.py                         # scale 20: ~30 s
    .venv/bin/python bench/engine_api_economy.py --provider anthropic    # Message Batches

With ``--provider anthropic`` the same batches are Message Batches through the
anthropic SDK (the server's ``/v1/messages/batches`` routes): no upload, and
counts that only move when the batch ends, so only the backoff spaces the polls.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections import Counter
from pathlib import Path

import anyio
import polars as pl
from options import options_parser

from aeval.batch.pacing import PollSchedule
from aeval.batch.providers.base import BatchInput, BatchProvider, BatchTag
from aeval.batch.providers.openai_api import OpenAIBatchProvider
from aeval.config import Credentials, PollSettings, RunConfig
from aeval.local import serve_process

ROOT = Path(__file__).resolve().parents[1]
BENCHMARK = ROOT / "tests" / "data" / "warp-benchmark.parquet"
BATCH_SECONDS = 600.0


class CountingProvider:
    """The real provider, counting calls by kind."""

    def __init__(self, inner: BatchProvider) -> None:
        self.inner = inner
        self.calls: Counter[str] = Counter()
        self.name = inner.name
        self.serial_creates = inner.serial_creates

    @property
    def endpoint(self) -> str:
        return self.inner.endpoint

    def wants_upload(self, size_bytes: int) -> bool:
        return self.inner.wants_upload(size_bytes)

    async def upload(self, path: Path, *, filename: str | None = None) -> str:
        self.calls["upload"] += 1
        return await self.inner.upload(path, filename=filename)

    async def find_files(self, filename: str) -> list[str]:
        self.calls["list files"] += 1
        return await self.inner.find_files(filename)

    async def create(self, source: BatchInput, tag: BatchTag):  # type: ignore[no-untyped-def]
        self.calls["create"] += 1
        return await self.inner.create(source, tag)

    async def retrieve(self, batch_id: str):  # type: ignore[no-untyped-def]
        self.calls["retrieve"] += 1
        return await self.inner.retrieve(batch_id)

    async def find(self, tag: BatchTag):  # type: ignore[no-untyped-def]
        self.calls["list"] += 1
        return await self.inner.find(tag)

    async def cancel(self, batch_id: str):  # type: ignore[no-untyped-def]
        self.calls["cancel"] += 1
        return await self.inner.cancel(batch_id)

    def open_lines(self, file_id: str, tag: BatchTag | None = None):  # type: ignore[no-untyped-def]
        self.calls["download"] += 1
        return self.inner.open_lines(file_id, tag)

    async def delete_file(self, file_id: str) -> None:
        self.calls["delete"] += 1
        await self.inner.delete_file(file_id)

    async def aclose(self) -> None:
        await self.inner.aclose()


def schedule_polls(settings: PollSettings, seconds: float) -> int:
    schedule, waited, polls = PollSchedule(settings, random.Random(0)), 0.0, 0
    while waited < seconds:
        waited += schedule.next_delay()
        polls += 1
    return polls


def scaled_poll(scale: float) -> PollSettings:
    """The default poll schedule, ``scale`` times faster (as the batches are replayed)."""
    default = PollSettings()
    return PollSettings(
        initial_s=default.initial_s / scale,
        factor=default.factor,
        max_s=default.max_s / scale,
        jitter=default.jitter,
    )


async def main(args: argparse.Namespace) -> None:
    default = PollSettings()
    scaled = scaled_poll(args.scale)
    work = Path(tempfile.mkdtemp(prefix="aeval-economy-"))
    data = work / "rows.parquet"
    pl.read_parquet(BENCHMARK).filter(pl.col("tier") == "small").head(args.rows).write_parquet(data)
    rps = args.rows / (BATCH_SECONDS / args.scale)
    prefix = "anthropic/" if args.provider == "anthropic" else ""
    models = tuple(f"{prefix}model-{c}" for c in "abc"[: args.batches])
    serve_args = ["--dataset", str(data), "--models", "model-*=synthetic:seed=2,accuracy=0.6"]
    serve_args += ["--requests-per-second", f"{rps:.4f}", "--log-level", "error"]
    with serve_process(serve_args) as base_url:
        credentials = Credentials("bench", base_url)
        inner: BatchProvider
        if args.provider == "anthropic":
            from aeval.batch.providers.anthropic_api import AnthropicBatchProvider

            root = base_url.removesuffix("/v1")
            inner = AnthropicBatchProvider(Credentials("bench", root))
        else:
            inner = OpenAIBatchProvider(credentials)
        provider = CountingProvider(inner)
        from aeval.engine import Run

        config = RunConfig(
            models=models,
            dataset=str(data),
            poll=scaled,
            out_dir=work / "runs",
            workers=1,
            credentials=credentials,
        )
        start = time.time()
        result = await Run(config, provider=provider).run()
        wall = time.time() - start
    assert result.outcome == "finished", result.message
    per_batch = provider.calls["retrieve"] / len(models)
    print(
        f"{args.provider}: {len(models)} batches of {args.rows} requests, each "
        f"~{BATCH_SECONDS:.0f} s "
        f"replayed {args.scale:g}× faster ({wall:.1f} s wall)"
    )
    print(f"calls by kind: {dict(sorted(provider.calls.items()))}")
    print(f"polls per batch while waiting (measured over HTTP)   {per_batch:6.1f}   (target < 60)")
    print(
        f"polls over 600 s from the poll schedule alone       "
        f"{schedule_polls(default, BATCH_SECONDS):6d}"
    )
    total = sum(provider.calls.values()) / len(models)
    what = (
        "create, polls, results"
        if args.provider == "anthropic"
        else "upload, create, polls, 2 downloads"
    )
    print(f"all calls per batch ({what}) {total:6.1f}")


if __name__ == "__main__":
    parser = options_parser(
        __doc__, scale=20.0, rows=60, batches=3, provider=("openai", "anthropic")
    )
    anyio.run(main, parser.parse_args())
