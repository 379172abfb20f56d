"""SDK errors are translated around the SDK's calls only, never around the caller's code.

A download's lines are read inside ``async with provider.open_lines(...)``; what
the caller does with each line there (score it, write it to disk) is the
caller's. An error it raises must reach the caller as it was raised: taken for
a connection problem it would be retried for up to the run's deadline. Every
provider's adapter, over real HTTP against the local server with its official
SDK at production settings; the same downloads, read to the end, are held to the
one answer-line format (every provider's lines, not only the shared helpers').
"""

from __future__ import annotations

import errno
import json
from pathlib import Path

import anyio
import pytest
from engine_helpers import SPECS, slice_path

from aeval.batch.providers.base import BatchInput, BatchTag
from aeval.batch.providers.registry import provider_spec, server_credentials
from aeval.batch.transient import TransientApiError
from aeval.config import RetrySettings
from aeval.dataset import load_dataset
from aeval.errors import ApiError
from aeval.local import LocalBatchServer
from aeval.prompts import GenerationSettings, PromptSettings
from aeval.scoring.responses import parse_batch_line

PROVIDERS = ("openai", "anthropic", "google", "together", "groq", "mistral", "xai", "azure")


def consumer_errors() -> list[Exception]:
    # What scoring raises when its stream is gone (anyio's own error, from the module
    # the transport check looks for) and what a write to a full disk raises.
    return [anyio.BrokenResourceError(), OSError(errno.ENOSPC, "No space left on device")]


@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_an_error_of_the_caller_inside_open_lines_is_not_translated(
    provider: str, benchmark_path: Path, tmp_path: Path
) -> None:
    frame = load_dataset(str(slice_path(benchmark_path, tmp_path, rows=3)))
    spec = provider_spec(provider)
    path = tmp_path / "shard.jsonl"
    with path.open("w") as out:
        for cid, question in zip(frame["id"], frame["question"], strict=True):
            body = spec.request_body("model-a", question, PromptSettings(), GenerationSettings())
            line = {"custom_id": cid, "method": "POST", "url": spec.request_url, "body": body}
            out.write(json.dumps(line) + "\n")
    async with LocalBatchServer(dataset=frame, models=dict(SPECS)) as server:
        credentials = server_credentials(server.base_url, "k")[provider]
        adapter = spec.open(credentials, RetrySettings())
        try:
            size = path.stat().st_size
            file_id = await adapter.upload(path) if adapter.wants_upload(size) else None
            tag = BatchTag(run_id="run-1", shard=f"{provider}/model-a|t1|s0", attempt=0, requests=3)
            remote = await adapter.create(BatchInput(path, file_id, 3, size), tag)
            with anyio.fail_after(30):
                while not remote.terminal:
                    await anyio.sleep(0.02)
                    remote = await adapter.retrieve(remote.id)
            assert remote.output_file_id is not None
            for error in consumer_errors():
                with pytest.raises(type(error)) as raised:
                    async with adapter.open_lines(remote.output_file_id, tag) as lines:
                        async for _ in lines:
                            raise error
                assert raised.value is error
                assert not isinstance(raised.value, TransientApiError | ApiError)
            # the same download, left alone, reads every line, each an OpenAI Batch-API
            # output line the scoring reads whatever the provider's own format
            async with adapter.open_lines(remote.output_file_id, tag) as lines:
                parsed = [parse_batch_line(line) async for line in lines]
        finally:
            await adapter.aclose()
    assert sorted(p.custom_id for p in parsed) == sorted(frame["id"].to_list())
    assert all(not p.is_error and p.content and (p.prompt_tokens or 0) > 0 for p in parsed)
