"""The local server's xAI and Azure OpenAI (v1) routes, driven by the openai SDK as aeval's
adapters drive them, and the request lines aeval writes for both, held against the
openai SDK's own types (openai 3.63: ``types/chat/completion_create_params.py``,
``types/batch_create_params.py``, ``types/file_create_params.py``).

xAI's shapes are its Batch API guide's (https://docs.x.ai/developers/advanced-api-usage/
batch-api) as litellm's xAI adapter reads them; Azure's are its batch guide's
(https://learn.microsoft.com/azure/ai-foundry/openai/how-to/batch).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import groq
import openai
import polars as pl
import pytest
from openai.types.chat.completion_create_params import CompletionCreateParamsNonStreaming
from pydantic import TypeAdapter

from aeval.api_settings import Credentials
from aeval.batch.providers.azure_spec import ENTRA_ID
from aeval.batch.providers.azure_spec import SPEC as AZURE
from aeval.batch.providers.azure_spec import resolve as azure_credentials
from aeval.batch.providers.xai_spec import SPEC as XAI
from aeval.errors import ConfigError
from aeval.local import LocalBatchServer, ModelSpec
from aeval.model_names import parse_model
from aeval.prompts import GenerationSettings, PromptSettings

DAYS_14 = {"seconds": 14 * 24 * 3600, "anchor": "created_at"}


def _root(server: LocalBatchServer) -> str:
    return server.base_url.removesuffix("/v1")


def _lines(path: Path, rows: pl.DataFrame, url: str, model: str) -> Path:
    lines = [
        {"custom_id": f"r{i}", "method": "POST", "url": url,
         "body": {"model": model, "messages": [{"role": "user", "content": q}]}}
        for i, q in enumerate(rows["question"].to_list())
    ]  # fmt: skip
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


async def _until(check: Any, timeout: float = 30.0) -> Any:
    with anyio.fail_after(timeout):
        while True:
            result = await check()
            if result is not None:
                return result
            await anyio.sleep(0.02)


@pytest.mark.parametrize(
    ("spec", "model", "url"),
    [(XAI, "xai/grok-3-mini@low", "/v1/chat/completions"),
     (AZURE, "azure/gpt-4o-batch", "/chat/completions")],
)  # fmt: skip
def test_each_request_line_is_an_openai_chat_body_at_the_providers_route(
    spec: Any, model: str, url: str
) -> None:
    parsed = parse_model(model)
    gen = GenerationSettings(temperature=0.2, seed=7).with_reasoning(parsed.reasoning)
    spec.check_request(parsed, gen, PromptSettings())
    body = spec.request_body(parsed.name, "Write (assert true).", PromptSettings(), gen)
    TypeAdapter(CompletionCreateParamsNonStreaming).validate_python(body)
    assert set(body) <= set(CompletionCreateParamsNonStreaming.__annotations__)
    assert body["model"] == parsed.name  # Azure: the deployment, named in every line
    assert spec.request_url == url


@pytest.mark.anyio
async def test_xai_upload_create_poll_results_and_cancel_in_xais_shapes(
    dataset: pl.DataFrame, tmp_path: Path
) -> None:
    rows = dataset.head(5)
    path = _lines(tmp_path / "in.jsonl", rows, "/v1/chat/completions", "grok-4")
    # the synthetic models of the offline demo (`run --model xai/grok-4` with no key)
    models = {"*": ModelSpec("synthetic", seed=3, accuracy=1.0)}
    async with LocalBatchServer(dataset=rows, models=models) as server:
        base = _root(server) + "/xai/v1"
        async with openai.AsyncOpenAI(api_key="k", base_url=base) as client:
            uploaded = await client.files.create(file=path, purpose="batch")
            files: Any = await client.get("/files", cast_to=object)
            assert [f["id"] for f in files["data"]] == [uploaded.id]
            assert "pagination_token" in files
            made: Any = await client.post(
                "/batches", cast_to=object, body={"name": "aeval-x", "input_file_id": uploaded.id}
            )
            assert made["name"] == "aeval-x" and made["input_file_id"] == uploaded.id
            assert set(made["state"]) == {"num_requests", "num_pending", "num_success",
                                          "num_error", "num_cancelled"}  # fmt: skip

            async def ended() -> Any:
                got: Any = await client.get(f"/batches/{made['batch_id']}", cast_to=object)
                return (
                    got
                    if got["state"]["num_requests"] and not got["state"]["num_pending"]
                    else None
                )

            done = await _until(ended)
            assert done["state"]["num_success"] + done["state"]["num_error"] == 5
            first: Any = await client.get(
                f"/batches/{made['batch_id']}/results",
                cast_to=object,
                options={"params": {"limit": 2}},
            )
            assert len(first["results"]) == 2 and first["pagination_token"]
            rest: Any = await client.get(
                f"/batches/{made['batch_id']}/results", cast_to=object,
                options={"params": {"limit": 100, "pagination_token": first["pagination_token"]}},
            )  # fmt: skip
            results = first["results"] + rest["results"]
            assert rest["pagination_token"] is None
            assert sorted(r["batch_request_id"] for r in results) == [f"r{i}" for i in range(5)]
            answered = [r for r in results if "response" in r["batch_result"]]
            assert answered
            assert all("chat_get_completion" in r["batch_result"]["response"] for r in answered)
            # Grok 4 always reasons and bills it (tests/conformance/xai/results.json)
            usages = [r["batch_result"]["response"]["chat_get_completion"]["usage"]
                      for r in answered]  # fmt: skip
            assert all(u["completion_tokens_details"]["reasoning_tokens"] > 0 for u in usages)
            listed: Any = await client.get("/batches", cast_to=object)
            assert [b["batch_id"] for b in listed["batches"]] == [made["batch_id"]]
            # an ended batch is shown as it stands; an unknown one is a 404 in xAI's shape
            again: Any = await client.post(f"/batches/{made['batch_id']}:cancel", cast_to=object)
            assert again["cancel_time"] is None
            with pytest.raises(openai.NotFoundError) as missing:
                await client.get("/batches/batch_nope", cast_to=object)
            wire = missing.value.response.json()
            assert wire == {"code": "404", "error": "Batch batch_nope not found"}


@pytest.mark.anyio
async def test_azure_v1_takes_its_route_and_expiries_and_groq_keeps_its_own(
    dataset: pl.DataFrame, tmp_path: Path
) -> None:
    rows = dataset.head(3)
    path = _lines(tmp_path / "in.jsonl", rows, "/chat/completions", "gpt-4o-batch")
    async with LocalBatchServer(dataset=rows) as server:
        root = _root(server)
        async with openai.AsyncOpenAI(api_key="k", base_url=root + "/openai/v1") as azure:
            # in extra_body, as the adapter sends them: openai 1.67 (the floor) has neither
            # files.create's expires_after nor batches.create's output_expires_after
            uploaded = await azure.files.create(
                file=path, purpose="batch", extra_body={"expires_after": DAYS_14}
            )
            with pytest.raises(openai.BadRequestError, match=r"output_expires_after\.seconds"):
                await azure.batches.create(
                    input_file_id=uploaded.id, endpoint="/chat/completions",  # type: ignore[arg-type]
                    completion_window="24h",
                    extra_body={"output_expires_after": {"seconds": 3600, "anchor": "created_at"}},
                )  # fmt: skip
            batch = await azure.batches.create(
                input_file_id=uploaded.id, endpoint="/chat/completions",  # type: ignore[arg-type]
                completion_window="24h", extra_body={"output_expires_after": DAYS_14},
                metadata={"aeval_run": "r"},
            )  # fmt: skip

            async def ended() -> Any:
                got = await azure.batches.retrieve(batch.id)
                return got if got.status in ("completed", "failed") else None

            done = await _until(ended)
            assert done.status == "completed", done.errors
            assert (done.model_extra or {}).get("output_expires_after") == DAYS_14
            assert [b.id async for b in azure.batches.list()] == [batch.id]
        # Groq's SDK on the same paths sees Groq's batches only, not Azure's.
        async with groq.AsyncGroq(api_key="k", base_url=root) as client:
            assert (await client.batches.list()).data == []


def test_azure_credentials_are_the_key_and_endpoint_or_entra_id() -> None:
    endpoint = "https://res.openai.azure.com/"
    key = azure_credentials({"AZURE_OPENAI_API_KEY": "az", "AZURE_OPENAI_ENDPOINT": endpoint})
    assert key == Credentials("az", "https://res.openai.azure.com/openai/v1")
    entra = azure_credentials({"AZURE_OPENAI_ENDPOINT": endpoint})
    assert entra is not None and entra.api_key == ENTRA_ID
    whole = azure_credentials({"AZURE_OPENAI_API_KEY": "az",
                               "AZURE_OPENAI_BASE_URL": endpoint + "openai/v1/"})  # fmt: skip
    assert whole == key
    assert azure_credentials({}) is None  # no Azure at all: the offline demo
    with pytest.raises(ConfigError, match="AZURE_OPENAI_ENDPOINT is not"):
        azure_credentials({"AZURE_OPENAI_API_KEY": "az"})


@pytest.mark.anyio
async def test_entra_id_gives_the_sdk_azure_identitys_token_provider() -> None:
    from aeval.batch.providers.azure_api import AzureBatchProvider

    entra = Credentials(ENTRA_ID, "https://res.openai.azure.com/openai/v1")
    if not hasattr(openai.AsyncOpenAI, "_refresh_api_key"):  # an SDK before token providers
        with pytest.raises(ConfigError, match="needs an openai SDK that takes a token provider"):
            AzureBatchProvider(entra)
        return
    provider = AzureBatchProvider(entra)
    try:
        # The SDK calls the provider for a bearer token before each request (openai 3.63
        # AsyncOpenAI: api_key may be an async callable); nothing is sent on opening.
        assert provider._client._api_key_provider is not None
        assert provider.endpoint == "https://res.openai.azure.com/openai/v1"
    finally:
        await provider.aclose()


def test_status_and_cancel_reach_xai_and_azure_batches_of_a_live_run(
    benchmark_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from engine_helpers import SPECS, benchmark_slice, fast_config

    from aeval.cli import main
    from aeval.engine import Run
    from aeval.events import ShardUpdated
    from aeval.local import Timing

    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=6)
    slow = Timing(validating_s=0.1, requests_per_second=0.5, finalizing_s=0.1)
    models = ("xai/model-a", "azure/model-b")
    with LocalBatchServer(dataset=frame, models=dict(SPECS), timing=slow) as server:
        root = _root(server)
        monkeypatch.setenv("XAI_API_KEY", "k")
        monkeypatch.setenv("XAI_BASE_URL", root + "/xai/v1")
        monkeypatch.setenv("AZURE_OPENAI_API_KEY", "k")
        monkeypatch.setenv("AZURE_OPENAI_BASE_URL", root + "/openai/v1")
        monkeypatch.delenv("AZURE_OPENAI_ENDPOINT", raising=False)
        config = fast_config(data, tmp_path / "r", server.base_url, models=models, credentials=None)
        run = Run(config)
        running: set[str] = set()

        def stop_when_both_run(event: object) -> None:
            if isinstance(event, ShardUpdated) and event.phase == "in_progress":
                running.add(event.model)
                if running == set(models):
                    run.cancel()

        run.subscribe(stop_when_both_run)
        first = anyio.run(run.run)
        assert first.outcome == "interrupted"
        capsys.readouterr()
        assert main(["status", str(first.run_dir), "--json"]) == 0
        shards = {s["model"]: s for s in json.loads(capsys.readouterr().out)["shards"]}
        assert {m: (s["status"], s.get("live")) for m, s in shards.items()} == {
            m: ("in_progress", True) for m in models
        }
        assert main(["cancel", "--no-collect", str(first.run_dir)]) == 0
        said = capsys.readouterr().out
        for model in models:
            assert f"{model}|t1|s0: batch {shards[model]['batch_id']} cancell" in said

        async def cancelled() -> tuple[Any, Any]:
            async with openai.AsyncOpenAI(api_key="k", base_url=root + "/xai/v1") as xai:
                xai_id = shards["xai/model-a"]["batch_id"]
                shown: Any = await xai.get(f"/batches/{xai_id}", cast_to=object)
            async with openai.AsyncOpenAI(api_key="k", base_url=root + "/openai/v1") as azure:
                batch = await azure.batches.retrieve(shards["azure/model-b"]["batch_id"])
            return shown, batch

        async def until_ended() -> tuple[Any, Any]:
            async def check() -> tuple[Any, Any] | None:
                shown, batch = await cancelled()
                ended = shown["cancel_time"] is not None and batch.status == "cancelled"
                return (shown, batch) if ended else None

            return await _until(check)

        shown, batch = anyio.run(until_ended)
        assert shown["cancel_by_xai_message"] is None  # the caller's cancel, not xAI's refusal
        assert batch.status == "cancelled"
