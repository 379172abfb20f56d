"""Long drills (``-m slow``): many batches under a storm of faults, and the real 50,000 limit."""

from __future__ import annotations

import json
import time
from pathlib import Path

import anyio
import openai
import polars as pl
import pytest
from test_local_server import jsonl

from aeval.local import FaultPlan, FaultRule, LocalBatchServer, ModelSpec, Timing

pytestmark = pytest.mark.slow

TERMINAL = ("completed", "failed", "expired", "cancelled")


@pytest.mark.anyio
async def test_many_batches_survive_a_fault_storm(dataset: pl.DataFrame) -> None:
    plan = FaultPlan(
        (
            FaultRule("http", status=429, retry_after=0.05, rate=0.15),
            FaultRule("http", status=503, retry_after=0.05, rate=0.1),
            FaultRule("drop", endpoint="GET *", rate=0.05),
            FaultRule("slow", delay=0.2, rate=0.05),
            FaultRule("stuck_finalizing", delay=0.5, rate=0.3),
        ),
        seed=11,
    )
    models = {"*": ModelSpec("synthetic", seed=4, accuracy=0.5)}
    timing = Timing(validating_s=0.1, requests_per_second=400, finalizing_s=0.1)
    async with LocalBatchServer(
        dataset=dataset, models=models, faults=plan, timing=timing
    ) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="x", max_retries=10)
        outcomes: dict[int, tuple[str, int]] = {}

        async def one(job: int) -> None:
            upload = await client.files.create(
                file=(f"job-{job}.jsonl", jsonl(dataset, 120)), purpose="batch"
            )
            batch = await client.batches.create(
                input_file_id=upload.id,
                endpoint="/v1/chat/completions",
                completion_window="24h",
                metadata={"aeval_shard": str(job)},
            )
            while batch.status not in TERMINAL:
                await anyio.sleep(0.05)
                batch = await client.batches.retrieve(batch.id)
            lines = 0
            for file_id in (batch.output_file_id, batch.error_file_id):
                if file_id:
                    lines += len((await client.files.content(file_id)).text.splitlines())
            outcomes[job] = (batch.status, lines)

        async with anyio.create_task_group() as tg:
            for job in range(16):
                tg.start_soon(one, job)
        await client.close()
    assert outcomes == {job: ("completed", 120) for job in range(16)}
    counters = server.counters()
    # drops only hit GETs here (before acting), so nothing was created twice
    assert counters.batches == 16 and counters.files == 16
    assert all(counters.batches_with("aeval_shard", str(j)) == 1 for j in range(16))
    assert sum(counters.faults_injected.values()) > 20


def test_fifty_thousand_and_one_requests_fail_validation(tmp_path: Path) -> None:
    line = {
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "m", "messages": [{"role": "user", "content": "q"}]},
    }
    content = "\n".join(json.dumps({"custom_id": f"r{i}", **line}) for i in range(50_001))
    with LocalBatchServer() as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="x")
        upload = client.files.create(file=("big.jsonl", content.encode()), purpose="batch")
        batch = client.batches.create(
            input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        while batch.status not in TERMINAL:
            time.sleep(0.02)
            batch = client.batches.retrieve(batch.id)
        assert batch.status == "failed" and batch.errors and batch.errors.data
        assert [e.code for e in batch.errors.data] == ["too_many_requests"]
