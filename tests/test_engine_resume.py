"""Crash-safe resume: never a second batch for a shard, no verdict lost or duplicated.

The chaos tests SIGKILL a real ``python -m aeval run`` subprocess at seeded
random moments while the local server (in this process) outlives it, then
resume until the run finishes.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import anyio
import openai
import polars as pl
import pytest
from engine_helpers import (
    SPECS,
    aeval_process,
    assert_exits_ok,
    benchmark_slice,
    distinct_verdict_count,
    expected_statuses,
    fast_config,
    observed,
)

from aeval.engine import Run
from aeval.events import ShardUpdated
from aeval.local import FaultPlan, FaultRule, LocalBatchServer, Timing

SLOW = Timing(validating_s=0.3, requests_per_second=10.0, finalizing_s=0.3)


def _job_creations(counters: object) -> dict[str, int]:
    return {
        value: n
        for (key, value), n in counters.batches_by_metadata.items()  # type: ignore[attr-defined]
        if key == "aeval_shard"
    }


@pytest.mark.anyio
async def test_cancelled_run_resumes_without_a_second_batch(
    benchmark_path: Path, tmp_path: Path
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=10)
    async with LocalBatchServer(dataset=frame, models=dict(SPECS), timing=SLOW) as server:
        config = fast_config(
            data, tmp_path / "results", server.base_url, models=("model-a", "model-b")
        )
        run = Run(config)

        def stop_when_running(event: object) -> None:
            if isinstance(event, ShardUpdated) and event.phase == "in_progress":
                run.cancel()

        run.subscribe(stop_when_running)
        first = await run.run()
        assert first.outcome == "interrupted"
        assert "resume" in first.message
        manifest = json.loads((first.run_dir / "manifest.json").read_text())
        assert any(r["batch_id"] for r in manifest["shards"].values())

        with anyio.fail_after(60):
            second = await Run.resume(first.run_dir, credentials=config.credentials).run()
        counters = server.counters()
    assert second.outcome == "finished"
    want = expected_statuses(frame, SPECS, trials=1)
    assert observed(second.verdicts) == {k: v for k, v in want.items() if k[0] != "model-c"}
    assert _job_creations(counters) == {"model-a|t1|s0": 1, "model-b|t1|s0": 1}
    assert distinct_verdict_count(first.run_dir) == 20


@pytest.mark.anyio
async def test_batch_created_but_id_never_recorded_is_found_by_metadata(
    benchmark_path: Path, tmp_path: Path
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=6)
    async with LocalBatchServer(dataset=frame, models=dict(SPECS), timing=SLOW) as server:
        config = fast_config(data, tmp_path / "results", server.base_url, models=("model-a",))
        run = Run(config)

        def stop_when_created(event: object) -> None:
            if isinstance(event, ShardUpdated) and event.batch_id:
                run.cancel()

        run.subscribe(stop_when_created)
        first = await run.run()
        # Forge the state a SIGKILL between create and recording leaves behind.
        path = first.run_dir / "manifest.json"
        manifest = json.loads(path.read_text())
        rec = manifest["shards"]["model-a|t1|s0"]
        assert rec["batch_id"] and rec["intent_attempt"] == 0
        rec.update(batch_id=None, status="uploading", created_at=None)
        path.write_text(json.dumps(manifest))

        with anyio.fail_after(60):
            second = await Run.resume(first.run_dir, credentials=config.credentials).run()
        counters = server.counters()
    want = expected_statuses(frame, SPECS, trials=1)
    assert observed(second.verdicts) == {k: v for k, v in want.items() if k[0] == "model-a"}
    assert _job_creations(counters) == {"model-a|t1|s0": 1}


def test_a_torn_verdict_line_is_cut_and_produced_again(
    benchmark_path: Path, tmp_path: Path
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=4)
    with LocalBatchServer(dataset=frame, models=dict(SPECS)) as server:
        config = fast_config(data, tmp_path / "results", server.base_url, models=("model-a",))
        first = anyio.run(Run(config).run)
        path = first.run_dir / "verdicts.jsonl"
        lines = path.read_text().splitlines(keepends=True)
        path.write_text("".join(lines[:2]) + lines[2][:25])  # a crash mid-write
        second = anyio.run(Run.resume(first.run_dir, credentials=config.credentials).run)
        counters = server.counters()
    assert observed(second.verdicts) == observed(first.verdicts)
    distinct_verdict_count(first.run_dir)  # asserts no verdict is written twice
    assert _job_creations(counters) == {"model-a|t1|s0": 1}


# -- chaos: SIGKILL of a real subprocess --------------------------------------------


def _cli(args: list[str], base_url: str, cwd: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "OPENAI_API_KEY": "sk-chaos",
        "OPENAI_BASE_URL": base_url,
        "AEVAL_LOCAL_SERVER": base_url,
    }
    env.pop("OPENAI_KEY", None)
    return aeval_process(args, env, cwd)


# Kill points: a moment after start, a shard status first seen in the manifest,
# or a number of verdicts written, so kills land in every part of the lifecycle.
_STATUSES = ("uploading", "validating", "in_progress", "completed", "downloading", "done")


def _kill_point(rng: random.Random, *, first: bool, total: int) -> tuple[str, float]:
    kinds = ["time", "status"] if first else ["time", "status", "verdicts", "verdicts"]
    kind = rng.choice(kinds)
    if kind == "time":
        return ("time", round(rng.uniform(0.3, 2.0), 2))
    if kind == "status":
        options = _STATUSES[:3] if first else _STATUSES
        return ("status:" + rng.choice(options), float(rng.randint(0, 2)) / 100)
    return ("verdicts", float(rng.randint(1, total - 1)))


def _wait_for(target: tuple[str, float], proc: subprocess.Popen[bytes], run_dir: Path) -> bool:
    """Wait until the kill point is reached (True) or the process ended (False)."""
    kind, value = target
    start = time.monotonic()
    while proc.poll() is None:
        if time.monotonic() - start > 90:
            return True
        if kind == "time":
            if time.monotonic() - start >= value:
                return True
        elif kind == "intent":  # a create recorded as intended, its batch id not yet
            try:
                shards = json.loads((run_dir / "manifest.json").read_text())["shards"]
            except (OSError, ValueError, KeyError):
                shards = {}
            if any(
                r.get("intent_attempt") is not None and not r["batch_id"] for r in shards.values()
            ):
                return True
        elif kind.startswith("status:"):
            try:
                shards = json.loads((run_dir / "manifest.json").read_text())["shards"]
            except (OSError, ValueError, KeyError):
                shards = {}
            if any(r["status"] == kind[7:] for r in shards.values()):
                time.sleep(value)
                return True
        else:
            try:
                with (run_dir / "verdicts.jsonl").open("rb") as fh:
                    if sum(1 for _ in fh) >= value:
                        return True
            except OSError:
                pass
        time.sleep(0.005)
    return False


def _phase_at_kill(run_dir: Path) -> str:
    """Where the killed process was, from what it left on disk."""
    try:
        shards = json.loads((run_dir / "manifest.json").read_text())["shards"]
    except (OSError, ValueError, KeyError):
        return "start-up"
    if not shards:
        return "planning"
    statuses = sorted({r["status"] for r in shards.values()})
    return "+".join(statuses)


# Responses lost after the server acted: an upload stored, a batch created, the
# client told nothing. Neither may cost a second batch or leave a stray file.
LOST_CREATES = (
    FaultRule("drop", endpoint="POST /v1/files", after=True, rate=0.3),
    FaultRule("drop", endpoint="POST /v1/batches", after=True, rate=0.3),
)


def _remote_state(base_url: str, run_id: str) -> tuple[dict[str, int], list[str]]:
    """Batches per ``aeval_shard`` of the run (``batches.list``, every page) and the ids of
    the batch input files the run's uploads left on the server."""
    client = openai.OpenAI(api_key="k", base_url=base_url)
    jobs: dict[str, int] = {}
    for batch in client.batches.list(limit=3):  # small pages: the SDK follows them all
        meta = batch.metadata or {}
        if meta.get("aeval_run") == run_id:
            jobs[meta["aeval_shard"]] = jobs.get(meta["aeval_shard"], 0) + 1
    files = [
        f.id for f in client.files.list(purpose="batch") if f.filename.startswith(f"{run_id}-")
    ]
    client.close()
    return jobs, files


def _chaos(
    benchmark_path: Path,
    tmp_path: Path,
    *,
    seed: int,
    kills: int,
    faults: tuple[FaultRule, ...] = (),
    first_kill: tuple[str, float] | None = None,
) -> None:
    rng = random.Random(seed)
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=8)
    out = tmp_path / "results"
    run_dir = out / "chaos"
    models = ("model-a", "model-b")
    run_args = [
        "run",
        "--model",
        ",".join(models),
        "--trials",
        "2",
        "--dataset",
        str(data),
        "--out",
        str(out),
        "--run-id",
        "chaos",
        "--poll-initial",
        "0.05",
        "--poll-max",
        "0.2",
        "--workers",
        "1",
        "--display",
        "quiet",
    ]
    resume_args = ["resume", str(run_dir), "--poll-initial", "0.05", "--poll-max", "0.2"]
    killed_at: list[tuple[str, float]] = []
    phases: list[str] = []
    total = len(models) * 2 * frame.height
    plan = FaultPlan(rules=faults, seed=seed)
    with LocalBatchServer(dataset=frame, models=dict(SPECS), timing=SLOW, faults=plan) as server:
        for attempt in range(kills + 1):
            args = resume_args if (run_dir / "manifest.json").exists() else run_args
            proc = _cli(args, server.base_url, tmp_path)
            if attempt < kills:
                target = _kill_point(rng, first=attempt == 0, total=total)
                if attempt == 0 and first_kill is not None:
                    target = first_kill
                if _wait_for(target, proc, run_dir):
                    proc.send_signal(signal.SIGKILL)
                    proc.wait()
                    killed_at.append(target)
                    phases.append(_phase_at_kill(run_dir))
                    continue
                if proc.returncode == 0:
                    break  # finished before the kill point: nothing left to kill
                raise AssertionError(proc.stderr.read().decode() if proc.stderr else "")
            assert_exits_ok(proc, 120)
        counters = server.counters()
        listed, files_left = _remote_state(server.base_url, "chaos")
    assert killed_at, "no kill happened: the chaos test tested nothing"
    print(f"chaos seed {seed}: kill points {killed_at} found the run in {phases}")
    verdicts = pl.read_parquet(run_dir / "verdicts.parquet")
    want = expected_statuses(frame, SPECS, trials=2)
    assert observed(verdicts) == {k: v for k, v in want.items() if k[0] in models}
    assert distinct_verdict_count(run_dir) == len(models) * 2 * frame.height
    one_each = {f"{m}|t{t}|s0": 1 for m in models for t in (1, 2)}
    assert _job_creations(counters) == one_each
    assert listed == one_each
    shards = json.loads((run_dir / "manifest.json").read_text())["shards"].values()
    assert sorted(files_left) == sorted(r["input_file_id"] for r in shards)  # no stray upload
    if faults:
        assert counters.faults_injected.get("drop", 0) > 0, "no response was lost"


@pytest.mark.slow  # the seeded chaos below covers random kills; the default run keeps the
# lost-create and intent-without-id kills
def test_sigkill_at_random_points_then_resume(benchmark_path: Path, tmp_path: Path) -> None:
    _chaos(benchmark_path, tmp_path, seed=3, kills=3)


def test_sigkill_and_lost_create_responses_then_resume(
    benchmark_path: Path, tmp_path: Path
) -> None:
    _chaos(benchmark_path, tmp_path, seed=5, kills=2, faults=LOST_CREATES)


def test_sigkill_between_a_create_intent_and_its_batch_id_then_resume(
    benchmark_path: Path, tmp_path: Path
) -> None:
    # The first batch create's response is lost after the server created the batch:
    # the manifest holds the intent and no id while the client waits to look it up.
    # A SIGKILL right there, then resume: the batch is found by its metadata, not paid twice.
    lost_once = (FaultRule("drop", endpoint="POST /v1/batches", after=True, times=1),)
    _chaos(benchmark_path, tmp_path, seed=7, kills=1, faults=lost_once, first_kill=("intent", 0))


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(6))
def test_sigkill_chaos_many_seeds(benchmark_path: Path, tmp_path: Path, seed: int) -> None:
    _chaos(
        benchmark_path, tmp_path, seed=100 + seed, kills=8, faults=LOST_CREATES if seed % 2 else ()
    )


@pytest.mark.anyio
async def test_a_run_refused_for_its_key_resumes_once_the_key_is_fixed(
    benchmark_path: Path, tmp_path: Path
) -> None:
    from aeval.config import Credentials

    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=4)
    async with LocalBatchServer(dataset=frame, models=dict(SPECS), api_key="right") as server:
        config = fast_config(data, tmp_path / "results", server.base_url, models=("model-a",))
        first = await Run(config).run()  # fast_config's key is wrong for this server
        assert first.outcome == "finished_with_failures"
        assert set(first.verdicts["status"]) == {"api_error"} and first.verdicts.height == 4
        fixed = Credentials("right", server.base_url)
        with anyio.fail_after(60):
            second = await Run.resume(first.run_dir, credentials=fixed).run()
        counters = server.counters()
    assert second.outcome == "finished"
    want = expected_statuses(frame, SPECS, trials=1)
    assert observed(second.verdicts) == {k: v for k, v in want.items() if k[0] == "model-a"}
    assert _job_creations(counters) == {"model-a|t1|s0": 1}
