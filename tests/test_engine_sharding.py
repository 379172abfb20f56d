"""A job over the per-file request limit is split into shards, each its own batch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from engine_helpers import (
    SPECS,
    benchmark_slice,
    expected_statuses,
    fast_config,
    observed,
    slice_path,
)

from aeval.config import ShardLimits
from aeval.dataset import load_dataset
from aeval.engine import Run, plan_run
from aeval.local import LocalBatchServer


@pytest.mark.anyio
async def test_job_over_the_request_limit_is_sharded(benchmark_path: Path, tmp_path: Path) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=11)
    async with LocalBatchServer(dataset=frame, models=dict(SPECS)) as server:
        config = fast_config(
            data,
            tmp_path / "results",
            server.base_url,
            models=("model-a", "model-b"),
            shard_limits=ShardLimits(max_requests=4, max_bytes=10_000_000),
        )
        result = await Run(config).run()
        counters = server.counters()
    want = expected_statuses(frame, SPECS, trials=1)
    assert observed(result.verdicts) == {k: v for k, v in want.items() if k[0] != "model-c"}
    jobs = {v: n for (k, v), n in counters.batches_by_metadata.items() if k == "aeval_shard"}
    assert jobs == {f"{m}|t1|s{s}": 1 for m in ("model-a", "model-b") for s in range(3)}
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    sizes = sorted(r["requests"] for r in manifest["shards"].values())
    assert sizes == [3, 3, 4, 4, 4, 4]


def test_byte_limit_splits_too(benchmark_path: Path, tmp_path: Path) -> None:
    data = slice_path(benchmark_path, tmp_path, rows=6)
    config = fast_config(
        data,
        tmp_path / "results",
        "http://127.0.0.1:9",
        models=("m",),
        shard_limits=ShardLimits(max_requests=1000, max_bytes=16_384),
    )
    plan = plan_run(config)
    assert len(plan.shards) > 1
    assert all(r.bytes <= 16_384 for r in plan.shards)
    assert sum(r.requests for r in plan.shards) == 6
    ids = [
        json.loads(line)["custom_id"]
        for r in plan.shards
        for line in (plan.run_dir / r.input_path).read_text().splitlines()
    ]
    assert ids == load_dataset(str(data))["id"].to_list()  # every row once, in order


def test_each_batch_trial_sends_its_own_seed(tmp_path: Path) -> None:
    """--generation-seed S: trial t sends S + t - 1 in batch mode too (one seed in every
    trial would make a seed-honouring API answer the trials alike)."""
    from aeval.config import RunConfig
    from aeval.dataset import demo_dataset_path
    from aeval.prompts import GenerationSettings

    config = RunConfig(
        models=("m1", "m2"),
        trials=3,
        dataset=str(demo_dataset_path()),
        limit=2,
        out_dir=tmp_path,
        generation=GenerationSettings(temperature=0.6, seed=7),
    )
    plan = plan_run(config)
    seeds = {
        (r.model, r.trial): {
            json.loads(line)["body"]["seed"]
            for line in (plan.run_dir / r.input_path).read_text().splitlines()
        }
        for r in plan.shards
    }
    assert seeds == {(m, t): {6 + t} for m in ("m1", "m2") for t in (1, 2, 3)}
