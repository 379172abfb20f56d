"""Azure OpenAI in batch mode: credentials read as the SDK reads them, the SDK's Azure
client, and one batch run over real HTTP to the local server's Azure-shaped routes."""

from __future__ import annotations

from pathlib import Path

import openai
import polars as pl
import pytest

from aeval.batch.providers.openai_api import OpenAIBatchProvider
from aeval.config import Credentials, RunConfig, resolve_credentials
from aeval.errors import ConfigError
from aeval.local import LocalBatchServer, parse_faults

ENDPOINT = "https://myres.openai.azure.com"
VERSION = "2024-10-21"


def test_azure_credentials_are_read_as_the_sdk_reads_them() -> None:
    env = {
        "AZURE_OPENAI_ENDPOINT": ENDPOINT,
        "AZURE_OPENAI_API_KEY": "az",
        "OPENAI_API_VERSION": VERSION,
        "OPENAI_API_KEY": "sk-other",
    }
    creds = resolve_credentials(env)
    assert creds == Credentials(api_key="az", azure_endpoint=ENDPOINT, api_version=VERSION)
    assert "az'" not in repr(creds) and ENDPOINT in repr(creds)
    # without the Azure endpoint: OpenAI, as before
    assert resolve_credentials({"OPENAI_API_KEY": "sk"}) == Credentials(api_key="sk")


@pytest.mark.parametrize(
    ("env", "needle"),
    [
        (
            {"AZURE_OPENAI_ENDPOINT": ENDPOINT, "OPENAI_API_VERSION": VERSION},
            "AZURE_OPENAI_API_KEY",
        ),
        ({"AZURE_OPENAI_ENDPOINT": ENDPOINT, "AZURE_OPENAI_API_KEY": "az"}, "OPENAI_API_VERSION"),
    ],
)
def test_half_an_azure_setup_is_a_config_error(env: dict[str, str], needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        resolve_credentials(env)


@pytest.mark.anyio
async def test_the_provider_builds_the_sdks_azure_client() -> None:
    creds = Credentials(api_key="az", azure_endpoint=ENDPOINT, api_version=VERSION)
    provider = OpenAIBatchProvider(creds)
    try:
        client = provider._client
        assert isinstance(client, openai.AsyncAzureOpenAI)
        assert provider.base_url == f"{ENDPOINT}/openai"
        assert client._custom_query == {"api-version": VERSION}
        # the create-once client keeps the Azure shape
        assert str(provider._once.base_url) == f"{ENDPOINT}/openai/"
        assert provider._once._custom_query == {"api-version": VERSION}
    finally:
        await provider.aclose()


@pytest.mark.anyio
async def test_a_batch_run_through_the_azure_client(
    benchmark_path: Path, dataset: pl.DataFrame, tmp_path: Path
) -> None:
    from aeval.engine import evaluate

    # Count every request to the Azure routes (a zero-delay "slow" fault is a
    # counter); anything sent to /v1 would fail the run.
    faults = parse_faults(["slow@/openai/*:delay=0", "http@/v1/*:status=404"])
    async with LocalBatchServer(dataset=dataset, api_key="az-key", faults=faults) as server:
        root = server.base_url.removesuffix("/v1")
        config = RunConfig(
            models=("gpt-4o-mini-deployment",),
            dataset=str(benchmark_path),
            limit=3,
            out_dir=tmp_path,
            credentials=Credentials(api_key="az-key", azure_endpoint=root, api_version=VERSION),
        )
        verdicts = await evaluate(config)
        counters = server.counters()
    assert verdicts.height == 3
    assert set(verdicts["status"].to_list()) == {"equivalent"}  # the reference responder
    assert counters.batches == 1 and counters.files_by_purpose.get("batch") == 1
    assert counters.faults_injected.get("slow", 0) >= 4  # upload, create, poll, download
    assert "http:404" not in counters.faults_injected


def test_the_azure_routes_need_an_api_version() -> None:
    import httpx

    with LocalBatchServer() as server:
        root = server.base_url.removesuffix("/v1")
        bare = httpx.get(f"{root}/openai/batches")
        versioned = httpx.get(f"{root}/openai/batches", params={"api-version": VERSION})
    assert bare.status_code == 400 and "api-version" in bare.json()["error"]["message"]
    assert versioned.status_code == 200 and versioned.json()["object"] == "list"
