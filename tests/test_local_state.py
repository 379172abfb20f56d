"""Persistent state: a server restarted on the same state_dir keeps files and batches."""

from __future__ import annotations

import time
from pathlib import Path

import openai
import polars as pl
import pytest
from test_local_server import jsonl, wait_terminal

from aeval.local import LocalBatchServer, Timing


@pytest.fixture(scope="module")
def dataset(benchmark_path: Path) -> pl.DataFrame:
    return pl.read_parquet(benchmark_path)


def client_for(server: LocalBatchServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="local")


def test_restart_keeps_finished_batches_and_files(tmp_path: Path, dataset: pl.DataFrame) -> None:
    with LocalBatchServer(dataset=dataset, state_dir=tmp_path) as server:
        client = client_for(server)
        file_id = client.files.create(file=("in.jsonl", jsonl(dataset, 10)), purpose="batch").id
        batch = client.batches.create(
            input_file_id=file_id,
            endpoint="/v1/chat/completions",
            completion_window="24h",
            metadata={"aeval_run": "r"},
        )
        done = wait_terminal(client, batch.id)
        assert done.output_file_id is not None
        output = client.files.content(done.output_file_id).content
    with LocalBatchServer(dataset=dataset, state_dir=tmp_path) as again:
        client = client_for(again)
        assert client.batches.retrieve(batch.id) == done
        assert [b.id for b in client.batches.list()] == [batch.id]
        assert client.files.content(done.output_file_id).content == output
        assert client.files.retrieve(file_id).filename == "in.jsonl"
        assert again.counters().batches == 0  # counters count what this server created


def test_restart_finishes_a_batch_left_running(tmp_path: Path, dataset: pl.DataFrame) -> None:
    slow = Timing(requests_per_second=100)
    with LocalBatchServer(dataset=dataset, state_dir=tmp_path, timing=slow) as server:
        client = client_for(server)
        file_id = client.files.create(file=("in.jsonl", jsonl(dataset, 200)), purpose="batch").id
        batch = client.batches.create(
            input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        while client.batches.retrieve(batch.id).status != "in_progress":
            time.sleep(0.02)
    with LocalBatchServer(dataset=dataset, state_dir=tmp_path) as again:
        client = client_for(again)
        done = wait_terminal(client, batch.id)
        assert done.status == "completed" and done.request_counts is not None
        assert done.request_counts.completed == 200
        assert done.output_file_id is not None
        lines = client.files.content(done.output_file_id).text.splitlines()
        assert len(lines) == 200


def test_without_state_dir_nothing_is_left_behind(dataset: pl.DataFrame) -> None:
    with LocalBatchServer(dataset=dataset) as server:
        root = server.state_dir
        assert root is not None and root.exists()
    assert not root.exists()
