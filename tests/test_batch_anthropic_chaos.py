"""A mixed openai + anthropic run SIGKILLed between each provider's intent and its batch id.

Both providers' create responses are lost (the server creates the batch, then drops the
connection), and the look-ups that would recover them are slowed down, so the killed
process recorded each intent but never an id. The resume finds both batches: exactly one
per shard on each provider, counted by listing through each provider's SDK, and one
verdict per row.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from engine_helpers import SPECS, benchmark_slice
from test_batch_anthropic import KEY, anthropic_batches, expected, openai_batches

from aeval.batch.providers.registry import server_credentials
from aeval.engine import Run
from aeval.local import FaultPlan, FaultRule, LocalBatchServer

pytestmark = pytest.mark.slow

MODELS = ("model-a", "anthropic/model-b")


def _env(base_url: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    for name in ("OPENAI_KEY", "AZURE_OPENAI_ENDPOINT"):
        env.pop(name, None)
    env.update(
        OPENAI_API_KEY=KEY,
        OPENAI_BASE_URL=base_url,
        ANTHROPIC_API_KEY=KEY,
        ANTHROPIC_BASE_URL=base_url.removesuffix("/v1"),
    )
    return env


def _intents_without_ids(run_dir: Path) -> set[str]:
    try:
        shards = json.loads((run_dir / "manifest.json").read_text())["shards"]
    except (OSError, ValueError, KeyError):
        return set()
    return {
        r["model"]
        for r in shards.values()
        if r.get("intent_attempt") is not None and r.get("batch_id") is None
    }


def test_sigkill_between_intent_and_id_on_both_providers_resumes_with_one_batch_each(
    benchmark_path: Path, tmp_path: Path
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=6)
    faults = (
        FaultRule("drop", endpoint="POST /v1/batches", after=True, times=1),
        FaultRule("drop", endpoint="POST /v1/messages/batches", after=True, times=1),
        # the look-ups after the lost responses: slow enough to be killed in
        FaultRule("slow", endpoint="GET /v1/batches", delay=5.0, times=1),
        FaultRule("slow", endpoint="GET /v1/messages/batches", delay=5.0, times=1),
    )
    out = tmp_path / "results"
    run_dir = out / "k"
    with LocalBatchServer(
        dataset=frame, models=dict(SPECS), faults=FaultPlan(rules=faults)
    ) as server:
        argv = ["run", "--model", ",".join(MODELS), "--dataset", str(data), "--out", str(out)]
        argv += ["--run-id", "k", "--workers", "1", "--display", "quiet"]
        proc = subprocess.Popen(
            [sys.executable, "-m", "aeval", *argv],
            env=_env(server.base_url),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and proc.poll() is None:
                # both batches created (their responses then lost), neither id recorded
                counters = server.counters()
                dropped = counters.faults_injected.get("drop", 0)
                created = counters.batches == 2 and dropped == 2
                if created and _intents_without_ids(run_dir) == set(MODELS):
                    break
                time.sleep(0.01)
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        # killed with both intents recorded and neither id: the batches exist remotely
        assert _intents_without_ids(run_dir) == set(MODELS)
        assert len(anyio.run(anthropic_batches, server.base_url)) == 1
        assert len(anyio.run(openai_batches, server.base_url)) == 1

        creds = server_credentials(server.base_url, KEY)
        result = anyio.run(Run.resume(run_dir, credentials=creds).run)
        on_anthropic = anyio.run(anthropic_batches, server.base_url)
        on_openai = anyio.run(openai_batches, server.base_url)
    assert result.outcome == "finished", result.message
    assert len(on_anthropic) == 1 and len(on_openai) == 1  # found, never created again
    want = {**expected(frame, MODELS[0], "model-a"), **expected(frame, MODELS[1], "model-b")}
    got = {
        (r["model"], r["trial"], r["custom_id"]): r["status"]
        for r in result.verdicts.iter_rows(named=True)
    }
    assert got == want
    lines = (run_dir / "verdicts.jsonl").read_text().splitlines()
    keys = [(json.loads(x)["model"], json.loads(x)["custom_id"]) for x in lines]
    assert len(keys) == len(set(keys)) == 2 * frame.height
