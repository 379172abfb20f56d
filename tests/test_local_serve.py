"""``python -m aeval serve`` as a separate process, the way a user (or a crash test) runs it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import openai
import pytest
from test_local_server import wait_terminal

from aeval.cli import main
from aeval.local import fetch_counters, serve_process


def test_serve_prints_its_url_and_serves_until_terminated(benchmark_path: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "aeval", "serve", "--port", "0", "--dataset", str(benchmark_path),
         "--models", "gpt-4o*=synthetic:seed=5,accuracy=0.5",
         "--faults", "http@GET /v1/batches:status=503,retry_after=0.1,times=1",
         "--log-level", "warning"],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        base_url = proc.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        # curl's view: plain JSON, with the injected 503 first
        first = httpx.get(f"{base_url}/batches")
        assert first.status_code == 503 and first.headers["retry-after"] == "0.1"
        assert httpx.get(f"{base_url}/batches").json()["object"] == "list"
        run_one_batch(base_url, "gpt-4o")
    finally:
        proc.send_signal(signal.SIGTERM)
        # uvicorn shuts down gracefully, then re-raises the signal it caught
        assert proc.wait(timeout=20) in (0, -signal.SIGTERM)


def run_one_batch(base_url: str, model: str) -> str:
    client = openai.OpenAI(base_url=base_url, api_key="x")
    line = {
        "custom_id": "c1",
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": model, "messages": [{"role": "user", "content": "hi"}]},
    }
    file_id = client.files.create(file=("in.jsonl", json.dumps(line).encode()), purpose="batch").id
    batch = client.batches.create(
        input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    assert wait_terminal(client, batch.id).status == "completed"
    return batch.id


def test_serve_process_outlives_its_clients_and_keeps_state(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with serve_process(["--state-dir", str(state)]) as base_url:
        # a client process that dies mid-way does not take the server with it
        killed = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        killed.kill()
        killed.wait()
        batch_id = run_one_batch(base_url, "any-model")
        counters = fetch_counters(base_url)
        assert (counters.batches, counters.files) == (1, 1)
        assert counters.files_by_filename == {"in.jsonl": 1}
    with serve_process(["--state-dir", str(state)]) as again:
        client = openai.OpenAI(base_url=again, api_key="x")
        assert client.batches.retrieve(batch_id).status == "completed"


def test_serve_reports_bad_options_as_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--models", "gpt-4o=psychic"]) == 2
    assert "unknown responder 'psychic'" in capsys.readouterr().err
    assert main(["serve", "--faults", "meteor"]) == 2
    assert "unknown fault kind 'meteor'" in capsys.readouterr().err
