"""A server without the Batch API (vLLM's ``vllm serve``, SGLang, Ollama, llama.cpp):
404 on ``/v1/files`` and ``/v1/batches``. The batch mode says so, and what to do."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from aeval.batch.providers.base import BatchInput, BatchTag
from aeval.batch.providers.openai_api import OpenAIBatchProvider
from aeval.config import Credentials
from aeval.errors import ApiError

pytestmark = pytest.mark.anyio


async def _chat(request: Request) -> JSONResponse:
    return JSONResponse({"object": "error", "message": "not used here", "code": 400}, 400)


async def _not_found(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse({"detail": "Not Found"}, status_code=404)  # FastAPI's, as vLLM sends


@pytest.fixture(scope="module")
def inference_server() -> Iterator[str]:
    """Only the inference routes, like ``vllm serve``: anything else is FastAPI's 404."""
    app = Starlette(
        routes=[Route("/v1/chat/completions", _chat, methods=["POST"])],
        exception_handlers={404: _not_found},
    )
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])))
    thread.start()
    while not server.started:
        threading.Event().wait(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


async def test_upload_list_and_create_say_there_is_no_batch_api(
    inference_server: str, tmp_path: Path
) -> None:
    provider = OpenAIBatchProvider(Credentials(api_key="k", base_url=inference_server))
    requests = tmp_path / "r.jsonl"
    requests.write_text("{}\n")
    try:
        with pytest.raises(ApiError, match=r"no Batch API \(404 on /v1/files\)") as upload:
            await provider.upload(requests)
        with pytest.raises(ApiError, match=r"no Batch API \(404 on /v1/batches\)"):
            await provider.find(BatchTag("run", "x", 0))
        with pytest.raises(ApiError, match=r"no Batch API \(404 on /v1/batches\)"):
            await provider.create(BatchInput(requests, "file-1", 1, 3), BatchTag("run", "x", 0))
    finally:
        await provider.aclose()
    assert "direct mode" in str(upload.value) and "docs/providers.md" in str(upload.value)


async def test_an_unknown_batch_id_is_not_taken_for_a_missing_api(inference_server: str) -> None:
    provider = OpenAIBatchProvider(Credentials(api_key="k", base_url=inference_server))
    try:
        with pytest.raises(ApiError) as caught:
            await provider.retrieve("batch_123")
    finally:
        await provider.aclose()
    assert "HTTP 404" in str(caught.value) and "no Batch API" not in str(caught.value)


def test_a_run_against_it_stops_with_that_advice(
    inference_server: str,
    benchmark_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from aeval.cli import main

    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("OPENAI_BASE_URL", inference_server)
    argv = ["run", "--model", "Qwen2.5-7B", "--dataset", str(benchmark_path), "--limit", "2"]
    code = main([*argv, "--out", str(tmp_path), "-q"])
    err = capsys.readouterr().err
    assert code != 0
    # the terminal wraps the line wherever the SDK's own message leaves it
    assert "no Batch API (404 on /v1/" in " ".join(err.split()), err
