"""The local server's Gemini, Together, Mistral and Groq routes, driven by each official SDK.

One port serves every wire format; each SDK sees only its own provider's
files and batches, in its own shapes (Gemini's resumable upload and inline or
file results, Together's presigned upload and upper-case statuses, Mistral's
jobs with inline outputs, Groq's windows up to 7 d).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import groq
import polars as pl
import pytest
import together
from google import genai
from mistralai.client import Mistral

from aeval.local import FaultPlan, FaultRule, LocalBatchServer

pytestmark = pytest.mark.anyio


@pytest.fixture
def rows(dataset: pl.DataFrame) -> pl.DataFrame:
    return dataset.head(6)


def _root(server: LocalBatchServer) -> str:
    return server.base_url.removesuffix("/v1")


def _chat_lines(path: Path, rows: pl.DataFrame, prefix: str, **body: str) -> Path:
    """A request file at ``path``: each row's question as a user message with ``body``'s
    other fields, its custom id ``prefix`` and the row's index."""
    lines = [
        {
            "custom_id": f"{prefix}{i}",
            "body": {**body, "messages": [{"role": "user", "content": q}]},
        }
        for i, q in enumerate(rows["question"].to_list())
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


async def _until(check: Any, timeout: float = 30.0) -> Any:
    with anyio.fail_after(timeout):
        while True:
            result = await check()
            if result is not None:
                return result
            await anyio.sleep(0.02)


async def test_gemini_inline_batch_answers_without_metadata_with_thought_parts(
    rows: pl.DataFrame,
) -> None:
    questions = rows["question"].to_list()
    async with LocalBatchServer(dataset=rows) as server:
        client = genai.Client(api_key="k", http_options={"base_url": _root(server)})
        src = [
            {
                "contents": [{"parts": [{"text": q}], "role": "user"}],
                "metadata": {"key": f"k{i}"},
                "config": {
                    "system_instruction": "be brief",
                    "max_output_tokens": 4000,
                    "thinking_config": {"include_thoughts": True},
                },
            }
            for i, q in enumerate(questions)
        ]
        job = await client.aio.batches.create(
            model="gemini-2.5-flash", src=src, config={"display_name": "aeval_shard=g|t2|s0"}
        )
        assert job.display_name == "aeval_shard=g|t2|s0" and job.name.startswith("batches/")

        async def done() -> Any:
            got = await client.aio.batches.get(name=job.name)
            return got if got.done else None

        finished = await _until(done)
        assert finished.state.name == "JOB_STATE_SUCCEEDED"
        answers = finished.dest.inlined_responses
        # As the service is reported to answer (python-genai #2008, #1909): no metadata
        # echoed, so nothing says which request an inline answer is for.
        assert [a.metadata for a in answers] == [None] * len(questions)
        first = answers[0].response
        parts = first.candidates[0].content.parts
        assert parts[0].thought is True and not parts[-1].thought
        assert first.usage_metadata.thoughts_token_count > 0
        assert server.counters().batches_with("aeval_shard", "g|t2|s0") == 1
        await client.aio.aclose()


async def test_gemini_file_batch_uploads_resumably_and_answers_with_a_responses_file(
    rows: pl.DataFrame, tmp_path: Path
) -> None:
    path = tmp_path / "in.jsonl"
    lines = [
        {"key": f"f{i}", "request": {"contents": [{"parts": [{"text": q}], "role": "user"}]}}
        for i, q in enumerate(rows["question"].to_list())
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    async with LocalBatchServer(dataset=rows) as server:
        client = genai.Client(api_key="k", http_options={"base_url": _root(server)})
        uploaded = await client.aio.files.upload(
            file=str(path), config={"display_name": "run-shard.jsonl", "mime_type": "jsonl"}
        )
        assert uploaded.display_name == "run-shard.jsonl"
        assert uploaded.size_bytes == path.stat().st_size
        job = await client.aio.batches.create(
            model="gemini-2.0-flash", src=uploaded.name, config={"display_name": "file job"}
        )

        async def done() -> Any:
            got = await client.aio.batches.get(name=job.name)
            return got if got.done else None

        finished = await _until(done)
        data = await client.aio.files.download(file=finished.dest.file_name)
        results = [json.loads(line) for line in data.decode().splitlines()]
        assert sorted(r["key"] for r in results) == sorted(line["key"] for line in lines)
        assert all("thoughtsTokenCount" not in r["response"]["usageMetadata"] for r in results)
        listed = [f.display_name async for f in await client.aio.files.list()]
        assert listed == ["run-shard.jsonl"], "the responses file is not an upload"
        names = [b.name async for b in await client.aio.batches.list(config={"page_size": 1})]
        assert names == [job.name]
        await client.aio.aclose()


async def test_gemini_oversized_inline_request_is_refused() -> None:
    async with LocalBatchServer() as server:
        client = genai.Client(api_key="k", http_options={"base_url": _root(server)})
        text = "x" * (21 * 1024 * 1024)
        with pytest.raises(genai.errors.ClientError) as caught:
            await client.aio.batches.create(
                model="gemini-2.5-flash",
                src=[{"contents": [{"parts": [{"text": text}], "role": "user"}]}],
                config={"display_name": "big"},
            )
        assert caught.value.code == 400 and server.counters().batches == 0
        await client.aio.aclose()


async def test_together_upload_dedupes_by_checksum_and_batch_completes(
    rows: pl.DataFrame, tmp_path: Path
) -> None:
    path = _chat_lines(tmp_path / "run-shard.jsonl", rows, "t", model="meta-llama/Llama-3.3-70B")
    async with LocalBatchServer(dataset=rows) as server:
        client = together.AsyncTogether(api_key="k", base_url=_root(server))
        first = await client.files.upload(file=path, purpose="batch-api")
        again = await client.files.upload(file=path, purpose="batch-api")
        assert again.id == first.id and server.counters().files == 1
        created = await client.batches.create(
            endpoint="/v1/chat/completions", input_file_id=first.id
        )
        assert created.job is not None and created.job.status == "VALIDATING"

        async def done() -> Any:
            job = await client.batches.retrieve(created.job.id)
            return job if job.status in ("COMPLETED", "FAILED") else None

        job = await _until(done)
        assert job.status == "COMPLETED" and job.progress == 100.0
        content = await (await client.files.content(job.output_file_id)).read()
        ids = sorted(json.loads(line)["custom_id"] for line in content.decode().splitlines())
        assert ids == sorted(f"t{i}" for i in range(len(rows)))
        assert [j.id for j in await client.batches.list()] == [job.id]
        await client.close()


async def test_mistral_file_and_inline_jobs_and_their_listing(
    rows: pl.DataFrame, tmp_path: Path
) -> None:
    path = _chat_lines(tmp_path / "ms.jsonl", rows, "m")
    async with LocalBatchServer(dataset=rows) as server:
        client = Mistral(api_key="k", server_url=_root(server))
        with path.open("rb") as handle:
            uploaded = await client.files.upload_async(
                file={"file_name": path.name, "content": handle}, purpose="batch"
            )
        job = await client.batch.jobs.create_async(
            input_files=[uploaded.id], model="mistral-small-latest",
            endpoint="/v1/chat/completions", metadata={"aeval_shard": "m|t1|s0"},
        )  # fmt: skip
        hello = {"messages": [{"role": "user", "content": "hi"}]}
        inline = await client.batch.jobs.create_async(
            requests=[{"custom_id": "x", "body": hello}],
            model="mistral-small-latest", endpoint="/v1/chat/completions",
        )  # fmt: skip

        async def done(job_id: str) -> Any:
            got = await client.batch.jobs.get_async(job_id=job_id)
            return got if got.status in ("SUCCESS", "FAILED") else None

        finished = await _until(lambda: done(job.id))
        assert finished.status == "SUCCESS" and finished.succeeded_requests == len(rows)
        assert finished.metadata == {"aeval_shard": "m|t1|s0"}
        output = await client.files.download_async(file_id=finished.output_file)
        assert len((await output.aread()).decode().splitlines()) == len(rows)
        inline_done = await _until(lambda: done(inline.id))
        assert [o["custom_id"] for o in inline_done.outputs] == ["x"]
        listed = await client.batch.jobs.list_async(page_size=1)
        assert listed.total == 2 and len(listed.data) == 1
        await client.__aexit__(None, None, None)


async def test_groq_takes_windows_up_to_seven_days_and_sees_only_its_batches(
    rows: pl.DataFrame, tmp_path: Path
) -> None:
    path = tmp_path / "gq.jsonl"
    path.write_text(
        json.dumps({"custom_id": "g0", "method": "POST", "url": "/v1/chat/completions",
                    "body": {"model": "llama-3.1-8b-instant",
                             "messages": [{"role": "user", "content": "hi"}]}}) + "\n"
    )  # fmt: skip
    async with LocalBatchServer(dataset=rows) as server:
        client = groq.AsyncGroq(api_key="k", base_url=_root(server))
        uploaded = await client.files.create(file=path, purpose="batch")
        batch = await client.batches.create(
            input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="7d"
        )
        assert batch.completion_window == "7d"
        with pytest.raises(groq.BadRequestError):
            await client.batches.create(
                input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="8d"
            )
        assert [b.id for b in (await client.batches.list()).data] == [batch.id]
        await client.close()


async def test_a_fault_can_target_one_provider_on_a_shared_path(rows: pl.DataFrame) -> None:
    plan = FaultPlan(
        (FaultRule("http", "POST /v1/batches", status=400, provider="together", times=1),)
    )
    async with LocalBatchServer(dataset=rows, faults=plan) as server:
        client = together.AsyncTogether(api_key="k", base_url=_root(server))
        with pytest.raises(together.BadRequestError):
            await client.batches.create(endpoint="/v1/chat/completions", input_file_id="f")
        assert server.counters().faults_injected == {"http:400": 1}
        await client.close()
