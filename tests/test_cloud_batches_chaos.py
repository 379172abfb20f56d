"""Bedrock and Vertex AI runs killed and resumed (``-m slow``), through ``python -m aeval`` reaching
the stand-ins with the SDKs' own variables (``AWS_ENDPOINT_URL_BEDROCK``…,
``GOOGLE_VERTEX_BASE_URL``, ``GOOGLE_APPLICATION_CREDENTIALS``, ``STORAGE_EMULATOR_HOST``).

A run SIGKILLed while a create hangs (the job exists, its id never recorded), resumed,
SIGKILLed again while polling, resumed to the end: one job per shard (listed through the
SDK), one verdict per row and trial, each the one the responder was told to give (nothing
scored against the wrong row). And ``status`` then ``cancel`` on a killed run: the jobs
are stopped and what they finished is collected.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import polars as pl
import pytest
from cloud_fixtures import (
    bedrock_env,
    bedrock_stand_in,
    gcs_emulator,
    s3_emulator,
    vertex_env,
    vertex_stand_in,
)
from engine_helpers import aeval_process, assert_exits_ok, benchmark_slice
from test_cloud_batches import CLAUDE, MODELS, bedrock_jobs, expected, vertex_jobs

from aeval.cloud_standins.bedrock import BedrockFaults, BedrockTiming
from aeval.cloud_standins.vertex import VertexFaults, VertexTiming

pytestmark = pytest.mark.slow
__all__ = ["gcs_emulator", "s3_emulator"]

SLOW_BEDROCK = BedrockTiming(submitted_s=0.2, validating_s=0.2, scheduled_s=0.2, in_progress_s=8)
SLOW_VERTEX = VertexTiming(queued_s=0.2, pending_s=0.2, running_s=8)
POLL = ["--poll-initial", "0.05", "--poll-max", "0.2"]


def _env(extra: dict[str, str]) -> dict[str, str]:
    dropped = ("OPENAI_", "AZURE_", "AWS_", "GOOGLE_", "AEVAL_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(dropped)}
    return {**env, **extra}


def _shards(run_dir: Path) -> dict[str, Any]:
    try:
        return dict(json.loads((run_dir / "manifest.json").read_text())["shards"])
    except (OSError, ValueError, KeyError):
        return {}


def _wait(check: Callable[[], bool], proc: Any, timeout: float = 120) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if check():
            return True
        time.sleep(0.05)
    return False


def _intent_without_id(run_dir: Path) -> bool:
    return any(
        r.get("intent_attempt") is not None and not r.get("batch_id")
        for r in _shards(run_dir).values()
    )


def _polling(run_dir: Path) -> bool:
    return any(r.get("status") == "in_progress" for r in _shards(run_dir).values())


def _kill(proc: Any) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()


@pytest.mark.parametrize("provider", ["bedrock", "vertex"])
def test_killed_while_a_create_hangs_and_while_polling_then_resumed_pays_once(
    provider: str, benchmark_path: Path, tmp_path: Path, s3_emulator: Any, gcs_emulator: Any
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=6)
    out, run_dir = tmp_path / "results", tmp_path / "results" / "k"
    if provider == "bedrock":
        model = f"bedrock/{CLAUDE}"
        cm: Any = bedrock_stand_in(s3_emulator, tmp_path, frame, MODELS, timing=SLOW_BEDROCK,
                                   faults=BedrockFaults(create_delay_s=2.0))  # fmt: skip
    else:
        model = "vertex/gemini-2.5-flash"
        cm = vertex_stand_in(gcs_emulator, tmp_path, frame, MODELS, timing=SLOW_VERTEX,
                             faults=VertexFaults(create_delay_s=2.0))  # fmt: skip
    with cm as (stand_in, creds, bucket):
        if provider == "bedrock":
            env = _env({**bedrock_env(stand_in.base_url, creds.option("s3_endpoint") or "",
                                      bucket), "AEVAL_BEDROCK_MIN_RECORDS": "1"})  # fmt: skip
        else:
            env = _env(vertex_env(stand_in.base_url, creds.option("gcs_endpoint") or "", bucket,
                                  Path(creds.option("adc_file") or "")))  # fmt: skip
        args = ["run", "--model", model, "--trials", "2", "--dataset", str(data),
                "--out", str(out), "--run-id", "k", "--workers", "1", "--display", "quiet",
                *POLL]  # fmt: skip
        first = aeval_process(args, env, tmp_path)
        assert _wait(lambda: _intent_without_id(run_dir), first), "never between intent and id"
        _kill(first)
        second = aeval_process(["resume", str(run_dir), *POLL], env, tmp_path)
        assert _wait(lambda: _polling(run_dir), second), "never polling"
        _kill(second)
        last = aeval_process(["resume", str(run_dir), *POLL], env, tmp_path)
        assert_exits_ok(last, 180)
        jobs = bedrock_jobs(stand_in.base_url) if provider == "bedrock" else anyio.run(
            vertex_jobs, creds)  # fmt: skip
    assert len(jobs) == 2, f"{provider}: one job per shard, not {len(jobs)}"
    verdicts = pl.read_parquet(run_dir / "verdicts.parquet")
    keys = [(r["model"], r["trial"], r["custom_id"]) for r in verdicts.iter_rows(named=True)]
    assert len(keys) == len(set(keys)) == 2 * frame.height
    got = {k: r["status"] for k, r in zip(keys, verdicts.iter_rows(named=True), strict=True)}
    assert got == expected(frame, model, trials=2)


@pytest.mark.parametrize("provider", ["bedrock", "vertex"])
def test_status_and_cancel_reach_a_killed_runs_jobs(
    provider: str, benchmark_path: Path, tmp_path: Path, s3_emulator: Any, gcs_emulator: Any
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=6)
    out, run_dir = tmp_path / "results", tmp_path / "results" / "c"
    slow_b = BedrockTiming(submitted_s=0.2, validating_s=0.2, scheduled_s=0.2, in_progress_s=60)
    slow_v = VertexTiming(queued_s=0.2, pending_s=0.2, running_s=60)
    if provider == "bedrock":
        model = f"bedrock/{CLAUDE}"
        cm: Any = bedrock_stand_in(s3_emulator, tmp_path, frame, MODELS, timing=slow_b)
    else:
        model = "vertex/gemini-2.5-flash"
        cm = vertex_stand_in(gcs_emulator, tmp_path, frame, MODELS, timing=slow_v)
    with cm as (stand_in, creds, bucket):
        if provider == "bedrock":
            env = _env({**bedrock_env(stand_in.base_url, creds.option("s3_endpoint") or "",
                                      bucket), "AEVAL_BEDROCK_MIN_RECORDS": "1"})  # fmt: skip
        else:
            env = _env(vertex_env(stand_in.base_url, creds.option("gcs_endpoint") or "", bucket,
                                  Path(creds.option("adc_file") or "")))  # fmt: skip
        args = ["run", "--model", model, "--dataset", str(data), "--out", str(out),
                "--run-id", "c", "--workers", "1", "--display", "quiet", *POLL]  # fmt: skip
        run = aeval_process(args, env, tmp_path)
        assert _wait(lambda: _polling(run_dir), run), "never polling"
        _kill(run)
        status = aeval_process(["status", str(run_dir)], env, tmp_path)
        assert_exits_ok(status, 60)
        cancel = aeval_process(["cancel", str(run_dir), "--display", "quiet"], env, tmp_path)
        cancel.wait(120)
        jobs = bedrock_jobs(stand_in.base_url) if provider == "bedrock" else anyio.run(
            vertex_jobs, creds)  # fmt: skip
    states = {j["status"] for j in jobs} if provider == "bedrock" else {
        j.state.name for j in jobs}  # fmt: skip
    assert states <= {"Stopping", "Stopped", "JOB_STATE_CANCELLING", "JOB_STATE_CANCELLED"}
    verdicts = pl.read_parquet(run_dir / "verdicts.parquet")
    assert verdicts.height == frame.height  # each row: what the job finished, or why not
    answered = verdicts.filter(~pl.col("status").is_in(["api_error", "missing"]))
    want = expected(frame, model, trials=1)
    assert answered.height == frame.height // 2
    assert all(want[(r["model"], r["trial"], r["custom_id"])] == r["status"]
               for r in answered.iter_rows(named=True))  # fmt: skip


@pytest.mark.parametrize("provider", ["bedrock", "vertex"])
def test_two_resumes_racing_for_a_killed_run_pay_once(
    provider: str, benchmark_path: Path, tmp_path: Path, s3_emulator: Any, gcs_emulator: Any
) -> None:
    # Killed once an upload began (its name is in the manifest from then on), then two
    # resumes started together: one drives, the other is refused, one job per shard.
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=6)
    out, run_dir = tmp_path / "results", tmp_path / "results" / "r"
    if provider == "bedrock":
        model = f"bedrock/{CLAUDE}"
        cm: Any = bedrock_stand_in(s3_emulator, tmp_path, frame, MODELS, timing=SLOW_BEDROCK)
    else:
        model = "vertex/gemini-2.5-flash"
        cm = vertex_stand_in(gcs_emulator, tmp_path, frame, MODELS, timing=SLOW_VERTEX)
    with cm as (stand_in, creds, bucket):
        if provider == "bedrock":
            env = _env({**bedrock_env(stand_in.base_url, creds.option("s3_endpoint") or "",
                                      bucket), "AEVAL_BEDROCK_MIN_RECORDS": "1"})  # fmt: skip
        else:
            env = _env(vertex_env(stand_in.base_url, creds.option("gcs_endpoint") or "", bucket,
                                  Path(creds.option("adc_file") or "")))  # fmt: skip
        args = ["run", "--model", model, "--trials", "2", "--dataset", str(data),
                "--out", str(out), "--run-id", "r", "--workers", "1", "--display", "quiet",
                *POLL]  # fmt: skip
        first = aeval_process(args, env, tmp_path)
        assert _wait(lambda: '"upload_name": "' in _text(run_dir / "manifest.json"), first)
        _kill(first)
        racers = [aeval_process(["resume", str(run_dir), *POLL], env, tmp_path) for _ in range(2)]
        for racer in racers:
            racer.wait(180)
        codes = sorted(r.returncode for r in racers)
        errors = [r.stderr.read().decode() if r.stderr else "" for r in racers]
        jobs = bedrock_jobs(stand_in.base_url) if provider == "bedrock" else anyio.run(
            vertex_jobs, creds)  # fmt: skip
    assert codes == [0, 2], errors
    assert any("in use by process" in e for e in errors), errors
    assert len(jobs) == 2, f"{provider}: one job per shard, not {len(jobs)}"
    verdicts = pl.read_parquet(run_dir / "verdicts.parquet")
    got = {(r["model"], r["trial"], r["custom_id"]): r["status"]
           for r in verdicts.iter_rows(named=True)}  # fmt: skip
    assert verdicts.height == len(got) == 2 * frame.height
    assert got == expected(frame, model, trials=2)


def _text(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
