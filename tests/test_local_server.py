"""The local batch server through the official SDK: the happy path and the runner."""

from __future__ import annotations

import json
import time

import anyio
import openai
import polars as pl
import pytest
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

from aeval.local import LocalBatchServer, fetch_counters
from aeval.prompts import DEFAULT_INSTRUCTION

INSTRUCTION = DEFAULT_INSTRUCTION  # what the engine sends after each question
TERMINAL = ("completed", "failed", "expired", "cancelled")


def request_line(custom_id: str, question: str, model: str = "gpt-4o-mini") -> str:
    return json.dumps(
        {
            "custom_id": custom_id,
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {
                "model": model,
                "messages": [{"role": "user", "content": question + "\n" + INSTRUCTION}],
            },
        }
    )


def jsonl(dataset: pl.DataFrame, n: int | None = None) -> bytes:
    questions = dataset["question"].to_list()[:n]
    return "\n".join(request_line(f"row-{i}", q) for i, q in enumerate(questions)).encode()


def wait_terminal(client: openai.OpenAI, batch_id: str, timeout: float = 30.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    batch = client.batches.retrieve(batch_id)
    while batch.status not in TERMINAL:
        assert time.monotonic() < deadline, f"batch stuck in {batch.status}"
        time.sleep(0.02)
        batch = client.batches.retrieve(batch_id)
    return batch


def test_reference_batch_completes_with_the_ground_truth(dataset: pl.DataFrame) -> None:
    with LocalBatchServer(dataset=dataset) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="local")
        upload = client.files.create(file=("in.jsonl", jsonl(dataset)), purpose="batch")
        assert upload.bytes == len(jsonl(dataset)) and upload.purpose == "batch"
        batch = client.batches.create(
            input_file_id=upload.id,
            endpoint="/v1/chat/completions",
            completion_window="24h",
            metadata={"aeval_run": "r1", "aeval_shard": "j1"},
        )
        assert batch.status == "validating" and batch.metadata == {
            "aeval_run": "r1",
            "aeval_shard": "j1",
        }
        batch = wait_terminal(client, batch.id)
        assert batch.status == "completed"
        assert batch.request_counts is not None
        assert (batch.request_counts.total, batch.request_counts.completed) == (671, 671)
        assert batch.in_progress_at and batch.finalizing_at and batch.completed_at
        assert batch.model == "gpt-4o-mini" and batch.error_file_id is None
        assert batch.output_file_id is not None
        lines = client.files.content(batch.output_file_id).text.splitlines()
        records = [json.loads(line) for line in lines]
        ids = [r["custom_id"] for r in records]
        assert sorted(ids) == sorted(f"row-{i}" for i in range(671))
        assert ids != [f"row-{i}" for i in range(671)], "output order must not follow the input"
        answers = dataset["answer"].to_list()
        for record in records:
            assert record["error"] is None and record["response"]["status_code"] == 200
            completion = ChatCompletion.model_validate(record["response"]["body"])
            content = completion.choices[0].message.content or ""
            truth = answers[int(record["custom_id"].removeprefix("row-"))]
            assert content.endswith(f"<answer>{truth}</answer>")
            assert completion.choices[0].finish_reason == "stop"
        counters = server.counters()
        assert counters.batches == 1 and counters.files == 1
        assert counters.batches_with("aeval_shard", "j1") == 1
        assert fetch_counters(server.base_url) == counters  # the same, over HTTP


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_background_server_runs_under_asyncio_and_trio(
    dataset: pl.DataFrame, anyio_backend: str
) -> None:
    async with LocalBatchServer(dataset=dataset) as server:
        # The SDK's async client only speaks asyncio; under trio use the sync client,
        # as a trio host would from a worker thread. Both reach the same server.
        client = openai.OpenAI(base_url=server.base_url, api_key="local")
        upload = client.files.create(file=("in.jsonl", jsonl(dataset, 20)), purpose="batch")
        batch = client.batches.create(
            input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        assert wait_terminal(client, batch.id).status == "completed"
    assert server.state_dir is None or not server.state_dir.exists()


@pytest.mark.anyio
async def test_async_client_full_path(dataset: pl.DataFrame) -> None:
    async with LocalBatchServer(dataset=dataset) as server:
        client = openai.AsyncOpenAI(base_url=server.base_url, api_key="local")
        upload = await client.files.create(file=("in.jsonl", jsonl(dataset, 50)), purpose="batch")
        batch = await client.batches.create(
            input_file_id=upload.id, endpoint="/v1/chat/completions", completion_window="24h"
        )
        while batch.status not in TERMINAL:
            await anyio.sleep(0.01)
            batch = await client.batches.retrieve(batch.id)
        assert batch.status == "completed" and batch.output_file_id
        content = await client.files.content(batch.output_file_id)
        assert len(content.text.splitlines()) == 50
        await client.close()


def test_the_servers_connections_send_without_nagle(dataset: pl.DataFrame) -> None:
    """asyncio turns Nagle's algorithm off only on sockets whose ``proto`` says TCP, and
    an accepted socket inherits the listening one's. With proto 0, every response on a
    reused connection (headers, then body: two writes) waited for the client's delayed
    ACK, 40 ms: 1.11x the ideal bound in bench/engine_direct.py instead of 1.03x."""
    import asyncio
    import socket

    server = LocalBatchServer(dataset=dataset)
    listening = server._bind()
    assert listening.proto == socket.IPPROTO_TCP
    nodelay: list[int] = []

    async def main() -> None:
        def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            sock = writer.get_extra_info("socket")
            nodelay.append(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        async with await asyncio.start_server(accepted, sock=listening):
            _, writer = await asyncio.open_connection(*listening.getsockname()[:2])
            for _ in range(100):
                if nodelay:
                    break
                await asyncio.sleep(0.01)
            writer.close()

    asyncio.run(main())
    assert nodelay and nodelay[0] != 0


def test_a_responses_batch_answers_with_responses(dataset: pl.DataFrame) -> None:
    """/v1/responses is a Batch API endpoint (openai 3.57 types/batch_create_params.py): its
    lines are Responses API bodies and its output lines' bodies are ``Response`` objects."""
    questions = dataset["question"].to_list()[:5]
    lines = [
        json.dumps({"custom_id": f"row-{i}", "method": "POST", "url": "/v1/responses",
                    "body": {"model": "gpt-5", "input": f"{q}\n{INSTRUCTION}",
                             "reasoning": {"effort": "high"}}})
        for i, q in enumerate(questions)
    ]  # fmt: skip
    with LocalBatchServer(dataset=dataset) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="local")
        upload = client.files.create(file=("in.jsonl", "\n".join(lines).encode()), purpose="batch")
        batch = client.batches.create(
            input_file_id=upload.id, endpoint="/v1/responses", completion_window="24h"
        )
        batch = wait_terminal(client, batch.id)
        assert batch.status == "completed" and batch.endpoint == "/v1/responses"
        assert batch.output_file_id is not None
        records = [
            json.loads(x) for x in client.files.content(batch.output_file_id).text.splitlines()
        ]
    answers = dataset["answer"].to_list()
    assert sorted(r["custom_id"] for r in records) == [f"row-{i}" for i in range(5)]
    for record in records:
        response = Response.model_validate(record["response"]["body"])
        assert response.output_text == f"<answer>{answers[int(record['custom_id'][4:])]}</answer>"
        assert response.usage is not None and response.usage.output_tokens_details.reasoning_tokens
