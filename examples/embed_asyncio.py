"""Embed an aeval run in an asyncio program.

Builds a config in Python, starts the run inside an event loop that is already
running (``asyncio.run``), follows its events as they arrive from another task,
and gets the polars frame of verdicts at the end. aeval prints nothing, installs
no signal handler and keeps no global state: two runs can share this loop.

This example is offline: it starts aeval's local OpenAI-compatible batch server
with synthetic models on the bundled demo benchmark. Against OpenAI, drop the
server and the ``credentials=`` argument (the key then comes from
``OPENAI_API_KEY``) and name real models.

    .venv/bin/python examples/embed_asyncio.py [OUT_DIR]
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import polars as pl

from aeval.config import Credentials, RunConfig
from aeval.dataset import demo_dataset_path, load_dataset
from aeval.engine import Run
from aeval.events import Event, JobFinished, RunFinished, RunStarted, VerdictProduced
from aeval.local import LocalBatchServer, ModelSpec
from aeval.report import summarize

MODELS = {
    "strong-model": ModelSpec("synthetic", seed=1, accuracy=0.8),
    "weak-model": ModelSpec("synthetic", seed=2, accuracy=0.3),
}


async def watch(events: AsyncIterator[Event]) -> dict[str, int]:
    """Follow a run's events as they arrive; returns verdicts counted per model."""
    counts: dict[str, int] = {}
    async for event in events:
        if isinstance(event, RunStarted):
            print(f"started {event.run_id}: {len(event.shards)} shard(s) → {event.run_dir}")
        elif isinstance(event, VerdictProduced):
            model = event.verdict.model
            counts[model] = counts.get(model, 0) + 1
        elif isinstance(event, JobFinished):
            print(f"{event.model} trial {event.trial}: {'ok' if event.ok else event.message}")
        elif isinstance(event, RunFinished):
            print(f"run {event.outcome}")
    return counts


async def evaluate_offline(
    out_dir: Path, *, limit: int = 20
) -> tuple[pl.DataFrame, dict[str, int]]:
    """Run two synthetic models on ``limit`` demo rows.

    Returns the verdict frame and the verdicts counted from the event stream.
    """
    dataset = str(demo_dataset_path())
    async with LocalBatchServer(dataset=load_dataset(dataset), models=MODELS) as server:
        config = RunConfig(
            models=tuple(MODELS),
            dataset=dataset,
            limit=limit,
            out_dir=out_dir,
            credentials=Credentials(
                api_key="sk-local", base_url=server.base_url, aeval_server=True
            ),
        )
        run = Run(config)
        async with asyncio.TaskGroup() as tg:
            # Subscribe before the run starts, so no event is missed.
            events = tg.create_task(watch(run.events()))
            result = await run.run()
        counts = events.result()
    print(f"{result.outcome}: {result.verdicts.height} verdicts in {result.run_dir}")
    return result.verdicts, counts


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tmp)
        verdicts, _ = asyncio.run(evaluate_offline(out_dir))
    for m in summarize(verdicts)["models"]:
        print(f"{m['model']}: accuracy {m['accuracy']['value']:.2f} over {m['scored']} answers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
