"""The local server held against the conformance corpus (tests/conformance/).

The stand-in must emit only what the real services do: its batch objects and result
lines are validated with each SDK's own pydantic models (``model_validate``: every
required field, every typed value), the statuses it reports are ones the corpus has,
and its upload limits are the documented ones. A stand-in that drifted into agreeing
with a wrong adapter would fail here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from engine_helpers import FAST_POLL, FAST_RETRY, SPECS, benchmark_slice

from aeval.config import Credentials, RunConfig
from aeval.engine import Run
from aeval.local import LocalBatchServer
from aeval.local.timing import Limits
from aeval.verify import VerifyLimits

CORPUS = Path(__file__).parent / "conformance"
PROVIDERS = ("openai", "anthropic", "together", "groq", "mistral", "azure")
BASE_PATHS = {"openai": "/v1", "azure": "/openai/v1"}


def _corpus_statuses(provider: str) -> set[str]:
    doc = json.loads((CORPUS / provider / "statuses.json").read_text())
    return {f["wire"] for f in doc["fixtures"]}


@pytest.mark.parametrize(
    ("provider", "name"),
    [("openai", "openai"), ("groq", "groq"), ("together", "together"), ("gemini", "google"),
     ("mistral", "mistral"), ("anthropic", "anthropic"), ("xai", "xai"), ("azure", "azure")],
)  # fmt: skip
def test_the_local_server_takes_batches_up_to_the_documented_limits_only(
    provider: str, name: str
) -> None:
    """Upload size and request count as the provider documents them (Gemini documents
    no request count: tests/conformance/gemini/limits.json)."""
    documented = json.loads((CORPUS / provider / "limits.json").read_text())
    assert Limits().file_bytes(name) == documented["max_bytes"]
    if provider != "gemini":
        assert Limits().requests(name) == documented["max_requests"]
    else:
        assert "max_requests" not in documented


async def _raw_batches(provider: str, root: str) -> list[dict[str, Any]]:
    """The batches the server lists for ``provider``, as raw JSON objects."""
    if provider in ("openai", "azure"):
        import openai

        async with openai.AsyncOpenAI(api_key="k", base_url=root + BASE_PATHS[provider]) as client:
            raw = await client.batches.with_raw_response.list()
            return list(raw.http_response.json()["data"])
    if provider == "groq":
        import groq

        async with groq.AsyncGroq(api_key="k", base_url=root) as client:
            raw = await client.batches.with_raw_response.list()
            return list(raw.http_response.json()["data"])
    if provider == "together":
        import together

        async with together.AsyncTogether(api_key="k", base_url=root) as client:
            raw = await client.batches.with_raw_response.list()
            return list(raw.http_response.json())
    if provider == "anthropic":
        import anthropic

        async with anthropic.AsyncAnthropic(api_key="k", base_url=root) as client:
            raw = await client.messages.batches.with_raw_response.list()
            return list(raw.http_response.json()["data"])
    from mistralai.client import Mistral

    async with Mistral(api_key="k", server_url=root) as client:  # its SDK validates as it reads
        listed = await client.batch.jobs.list_async()
        return [j.model_dump(mode="json") for j in listed.data or []]


def _validate_batch(provider: str, raw: dict[str, Any]) -> str:
    """``raw`` through the SDK's own model; returns its status word."""
    if provider in ("openai", "azure"):
        import openai.types

        return openai.types.Batch.model_validate(raw).status
    if provider == "groq":
        import groq.types

        return groq.types.BatchRetrieveResponse.model_validate(raw).status
    if provider == "together":
        import together.types

        return str(together.types.BatchJob.model_validate(raw).status)
    if provider == "anthropic":
        from anthropic.types.messages import MessageBatch

        return MessageBatch.model_validate(raw).processing_status
    from mistralai.client import models

    return str(models.BatchJob.model_validate(raw).status)


@pytest.mark.anyio
async def test_the_local_server_emits_only_shapes_the_sdks_accept(
    benchmark_path: Path, tmp_path: Path
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=3)
    async with LocalBatchServer(dataset=frame, models=dict(SPECS)) as server:
        root = server.base_url.removesuffix("/v1")
        creds = {p: Credentials("k", root + BASE_PATHS.get(p, "")) for p in PROVIDERS}
        config = RunConfig(
            models=tuple(f"{p}/model-a" for p in PROVIDERS), trials=1, dataset=str(data),
            poll=FAST_POLL, retry=FAST_RETRY, limits=VerifyLimits(timeout_s=20.0),
            out_dir=tmp_path / "r", workers=2, credentials=creds,
        )  # fmt: skip
        with anyio.fail_after(120):
            result = await Run(config).run()
        listed = {p: await _raw_batches(p, root) for p in PROVIDERS}
        anthropic_results = []
        async with httpx.AsyncClient() as client:
            for raw in listed["anthropic"]:
                got = await client.get(raw["results_url"], headers={"x-api-key": "k"})
                anthropic_results += got.text.splitlines()
    assert result.outcome == "finished"
    from anthropic.types.messages import MessageBatchIndividualResponse

    assert anthropic_results
    for line in anthropic_results:
        MessageBatchIndividualResponse.model_validate_json(line)
    for provider, batches in listed.items():
        assert batches, f"{provider}: nothing listed"
        statuses = {_validate_batch(provider, raw) for raw in batches}
        assert statuses <= _corpus_statuses(provider), provider
    # Every downloaded output line: an OpenAI output line whose body is a chat completion
    # the openai SDK accepts (Together's, Groq's and Mistral's lines share the shape).
    import openai.types.chat

    outputs = list((result.run_dir / "outputs").glob("*.output.jsonl"))
    assert outputs
    for path in outputs:
        if "anthropic" in path.name:
            continue  # converted by the adapter from Message Batch results
        for line in path.read_text().splitlines():
            record = json.loads(line)
            body = (record.get("response") or {}).get("body") or {}
            if record["response"]["status_code"] == 200:
                openai.types.chat.ChatCompletion.model_validate(body)
