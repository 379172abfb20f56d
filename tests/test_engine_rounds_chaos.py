"""Repair rounds killed with SIGKILL in round 2, then resumed (#44): the run completes with
the rounds of an uninterrupted run and sends nothing twice, in batch mode (killed with
round 2 planned but not uploaded, and mid-upload) and in direct mode."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import openai
import pytest
from engine_helpers import SPECS, aeval_process, assert_exits_ok, benchmark_slice
from rounds_checks import NO_500, body_recording_proxy, check_conversations, check_round_structure

from aeval.local import FaultPlan, FaultRule, LocalBatchServer, Serving, Timing

SLOW = Timing(validating_s=0.2, requests_per_second=20.0, finalizing_s=0.2)
FLAGS = ["--poll-initial", "0.05", "--poll-max", "0.2", "--workers", "1", "--display", "quiet"]


def _cli(args: list[str], base_url: str, cwd: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "OPENAI_API_KEY": "sk-rounds",
        "OPENAI_BASE_URL": base_url,
        "AEVAL_LOCAL_SERVER": base_url,
    }
    env.pop("OPENAI_KEY", None)
    return aeval_process(args, env, cwd)


def _round_two(run_dir: Path) -> list[dict[str, object]]:
    try:
        shards = json.loads((run_dir / "manifest.json").read_text())["shards"]
    except (OSError, ValueError, KeyError):
        return []
    return [r for r in shards.values() if r.get("repair_round") == 2]


def _wait(check: Callable[[], bool], proc: subprocess.Popen[bytes], timeout: float = 90) -> bool:
    start = time.monotonic()
    while proc.poll() is None and time.monotonic() - start < timeout:
        if check():
            return True
        time.sleep(0.005)
    return False


# Kill points in round 2 of a batch run: its request file written and recorded, nothing
# uploaded; and its upload under way (the server holds it 2 s), its file id not known.
KILL_POINTS: dict[str, Callable[[list[dict[str, object]]], bool]] = {
    "planned": lambda recs: bool(recs),
    "mid-upload": lambda recs: any(r["upload_attempts"] and not r["input_file_id"] for r in recs),
}


@pytest.mark.parametrize(
    "point",
    [
        # slow: "mid-upload" (default run) kills later in the same round-two shard, after
        # its request file is planned and recorded, and asserts the same pays-once contract
        pytest.param("planned", marks=pytest.mark.slow),
        "mid-upload",
    ],
)
def test_a_batch_run_killed_in_round_two_resumes_and_pays_once(
    benchmark_path: Path, tmp_path: Path, point: str
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=8)
    out = tmp_path / "results"
    run_dir = out / "rounds"
    run_args = ["run", "--model", "model-c", "--rounds", "3", "--dataset", str(data),
                "--out", str(out), "--run-id", "rounds", *FLAGS]  # fmt: skip
    # The second upload (round 2's) is held 2 s by the server: a window to kill it in.
    plan = FaultPlan(rules=(FaultRule("slow", endpoint="POST /v1/files", delay=2.0, skip=1,
                                      times=1),))  # fmt: skip
    with LocalBatchServer(dataset=frame, models=dict(SPECS), timing=SLOW, faults=plan) as server:
        first = _cli(run_args, server.base_url, tmp_path)
        killed = _wait(lambda: KILL_POINTS[point](_round_two(run_dir)), first)
        first.send_signal(signal.SIGKILL)
        first.wait()
        assert killed, "the run never reached round 2"
        assert not (run_dir / "verdicts.parquet").exists()
        resumed = _cli(["resume", str(run_dir), *FLAGS[:4]], server.base_url, tmp_path)
        assert_exits_ok(resumed, 180)
        counters = server.counters()
        client = openai.OpenAI(api_key="k", base_url=server.base_url)
        listed: dict[str, int] = {}
        for batch in client.batches.list(limit=5):
            shard = (batch.metadata or {}).get("aeval_shard")
            listed[shard] = listed.get(shard, 0) + 1  # type: ignore[index]
        files = [f.id for f in client.files.list(purpose="batch")]
        client.close()
    shards = json.loads((run_dir / "manifest.json").read_text())["shards"]
    assert {r.get("repair_round", 1) for r in shards.values()} >= {1, 2}
    # one batch per shard of every round, each created once, no upload left over
    assert listed == dict.fromkeys(shards, 1)
    assert counters.batches == len(shards)
    assert sorted(files) == sorted(r["input_file_id"] for r in shards.values())
    by_item = check_round_structure(run_dir, rounds=3, items=8, jobs=1)
    assert check_conversations(run_dir, frame, by_item) > 0


# slow: the default run holds its two halves, a killed direct run resumed asks nothing
# answered again (test_engine_direct.py::test_sigkill_a_direct_run_then_resume) and a run
# killed in round two resumes with an uninterrupted run's rounds
# (test_a_batch_run_killed_in_round_two_resumes_and_pays_once[mid-upload] above)
@pytest.mark.slow
def test_a_direct_run_killed_in_round_two_resumes_and_asks_nothing_answered_again(
    benchmark_path: Path, tmp_path: Path
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=10)
    out = tmp_path / "results"
    run_dir = out / "d"
    run_args = ["run", "--api", "direct", "--model", "model-c", "--rounds", "3",
                "--max-connections", "2", "--dataset", str(data), "--out", str(out),
                "--run-id", "d", *FLAGS]  # fmt: skip
    answers = run_dir / "outputs"

    def round_two_answered() -> bool:
        return any("_r2" in p.read_text() for p in answers.glob("*-direct.jsonl"))

    serving = Serving(latency_ms=80.0, jitter_ms=20.0)
    sent: dict[tuple[str, str], dict[str, object]] = {}
    with (
        LocalBatchServer(dataset=frame, models=dict(NO_500), serving=serving) as server,
        body_recording_proxy(server.base_url.removesuffix("/v1"), sent) as proxy,
    ):
        first = _cli(run_args, proxy + "/v1", tmp_path)
        killed = _wait(round_two_answered, first)
        first.send_signal(signal.SIGKILL)
        first.wait()
        assert killed, "the run never answered a round-2 request"
        resumed = _cli(["resume", str(run_dir), "--display", "quiet"], proxy + "/v1", tmp_path)
        assert_exits_ok(resumed, 180)
        counters = server.direct_counters()
    by_item = check_round_structure(run_dir, rounds=3, items=10, jobs=1)
    assert check_conversations(run_dir, frame, by_item, sent=sent) > 0
    lines = [
        json.loads(x)["custom_id"]
        for p in answers.glob("*-direct.jsonl")
        for x in p.read_text().splitlines()
    ]
    asked = sum(len(r) for r in by_item.values())
    assert len(lines) == len(set(lines)) == asked  # each answer recorded once
    # every request asked once, plus at most the 2 in flight when it was killed
    assert asked <= counters.total <= asked + 2
    assert max(counters.requests.values()) <= 2
