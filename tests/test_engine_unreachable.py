"""An endpoint that never answers: a clear stop before anything exists, patience after.

A wrong ``OPENAI_BASE_URL`` or a closed port used to be retried for 30 minutes
with nothing said in plain mode, and ``cancel`` ended in a traceback.
"""

from __future__ import annotations

import os
import select
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from engine_helpers import FAST_RETRY, SPECS, benchmark_slice, fast_config, slice_path

from aeval.config import Credentials, RetrySettings
from aeval.engine import Run, RunResult
from aeval.errors import UnreachableError
from aeval.events import RetryScheduled, ShardUpdated
from aeval.local import LocalBatchServer, Timing
from aeval.store import RunStore


def _closed_port_url() -> str:
    """A base URL where nothing listens (a port the OS just handed out, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def _cli(args: list[str], base_url: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_KEY",)}
    env.update(
        OPENAI_API_KEY="sk-unreachable",
        OPENAI_BASE_URL=base_url,
        PYTHONPATH=str(Path(__file__).resolve().parents[1]),
    )
    return subprocess.run(
        [sys.executable, "-m", "aeval", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.anyio
async def test_a_closed_port_ends_the_run_at_the_connect_deadline(
    benchmark_path: Path, tmp_path: Path
) -> None:
    data = slice_path(benchmark_path, tmp_path, rows=3)
    url = _closed_port_url()
    retry = RetrySettings(initial_s=0.02, max_s=0.3, deadline_s=60.0, connect_deadline_s=1.0)
    config = fast_config(data, tmp_path / "r", url, models=("model-a",), retry=retry)
    events: list[object] = []
    started = time.monotonic()
    with anyio.fail_after(30), pytest.raises(UnreachableError) as caught:
        await Run(config, subscribers=[events.append]).run()
    assert time.monotonic() - started < 20  # the connect deadline, not the 60 s one
    message = str(caught.value)
    assert url in message and "ConnectError" in message
    assert any(isinstance(e, RetryScheduled) and e.operation == "upload" for e in events)
    (run_dir,) = (tmp_path / "r").iterdir()
    assert (run_dir / "verdicts.jsonl").read_text() == ""  # nothing scored, all resumable


async def _batch_left_behind(benchmark_path: Path, tmp_path: Path) -> tuple[RunResult, str]:
    """A run of model-a cancelled once its batch exists, on a server gone once this returns
    (its port closed): the run's result and the server's base URL."""
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=3)
    slow = Timing(validating_s=0.3, requests_per_second=5.0)
    async with LocalBatchServer(dataset=frame, models=dict(SPECS), timing=slow) as server:
        config = fast_config(data, tmp_path / "r", server.base_url, models=("model-a",))
        run = Run(config)
        run.subscribe(
            lambda e: run.cancel() if isinstance(e, ShardUpdated) and e.batch_id else None
        )
        result = await run.run()
    return result, server.base_url


@pytest.mark.anyio
async def test_once_batches_exist_a_lost_endpoint_is_retried_past_the_connect_deadline(
    benchmark_path: Path, tmp_path: Path
) -> None:
    first, url = await _batch_left_behind(benchmark_path, tmp_path)
    assert first.outcome == "interrupted"
    # The server is gone (its port closed) while the run's batch exists remotely.
    retry = RetrySettings(initial_s=0.02, max_s=0.2, deadline_s=2.0, connect_deadline_s=0.3)
    events: list[object] = []
    with anyio.fail_after(30):
        second = await Run.resume(
            first.run_dir,
            credentials=Credentials("k", url),
            subscribers=[events.append],
            retry=retry,
        ).run()
    # no UnreachableError at 0.3 s: the shard gave up at the long deadline (2 s)
    assert second.outcome == "finished_with_failures"
    assert "gave up retrying" in second.message and "connection problem" in second.message
    assert any(isinstance(e, RetryScheduled) for e in events)


def test_cli_run_at_a_closed_port_exits_2_naming_the_url(
    benchmark_path: Path, tmp_path: Path
) -> None:
    data = slice_path(benchmark_path, tmp_path, rows=2)
    url = _closed_port_url()
    args = ["run", "--model", "model-a", "--dataset", str(data), "--out", str(tmp_path / "r")]
    proc = _cli([*args, "--connect-deadline", "1", "--display", "plain"], url, tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("aeval: error:")]
    assert len(errors) == 1 and url in errors[0] and "ConnectError" in errors[0]
    # plain mode said why it was retrying while it did
    assert "upload retry 1" in proc.stdout and "connection problem" in proc.stdout


def test_cli_cancel_at_a_closed_port_is_a_clear_error(benchmark_path: Path, tmp_path: Path) -> None:
    result, url = anyio.run(_batch_left_behind, benchmark_path, tmp_path)
    run_dir = result.run_dir
    started = time.monotonic()
    proc = _cli(["cancel", str(run_dir), "--connect-deadline", "1"], url, tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert time.monotonic() - started < 60
    assert "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("aeval: error: cannot reach") and url in line


def test_fast_retry_keeps_the_sdk_defaults() -> None:
    # The test settings shorten our own backoff only: the SDK retries as in production.
    assert FAST_RETRY.sdk_max_retries == RetrySettings().sdk_max_retries
    assert FAST_RETRY.request_timeout_s == RetrySettings().request_timeout_s


def test_cli_cancel_at_an_unreachable_provider_says_what_it_does_before_calling_it(
    benchmark_path: Path, tmp_path: Path
) -> None:
    """Production retry settings (a 60 s connect deadline): the first line, naming the
    batch and its provider, is out before any call to the provider, and each retry is
    said as it is scheduled; it used to wait silently for minutes. The provider is a
    port that takes the first connection and holds it unanswered: the line must be in
    the pipe by then (however slowly a loaded machine starts the process); the port is
    then closed, the connection reset, and every later call refused (unreachable)."""
    result, _ = anyio.run(_batch_left_behind, benchmark_path, tmp_path)
    batch_id = next(r.batch_id for r in RunStore.open(result.run_dir).shards.values())
    provider = socket.create_server(("127.0.0.1", 0))
    provider.settimeout(120)  # a bound on start-up, not the thing tested
    url = f"http://127.0.0.1:{provider.getsockname()[1]}/v1"
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_KEY",)}
    env.update(
        OPENAI_API_KEY="sk-unreachable",
        OPENAI_BASE_URL=url,
        PYTHONPATH=str(Path(__file__).resolve().parents[1]),
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "aeval", "cancel", str(result.run_dir)],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        try:
            held, _ = provider.accept()  # the first call, left unanswered
        finally:
            provider.close()  # from now on nothing listens there
        # Written before the call was made, so in the pipe now: nothing has read it yet.
        said_first = select.select([proc.stdout], [], [], 0)[0] != []
        held.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        held.close()  # a reset: the call fails as on a lost endpoint
        first = proc.stdout.readline()
        retry = proc.stdout.readline()
    finally:
        proc.terminate()  # by its PID: it stops as Ctrl-C stops it
        proc.communicate(timeout=60)
    assert said_first, "the first line came only after a call to the provider"
    assert first == f"cancelling at openai: 1 batch(es) {batch_id}\n"
    assert retry.startswith(f"openai: cancel batch {batch_id}: attempt 1 failed (")
    assert "trying again in" in retry and "Traceback" not in retry
