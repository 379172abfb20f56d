"""What aeval puts on a real service's wire: the requests and the SDKs' own headers,
nothing of aeval's. A recording proxy on loopback stands where a provider would be
(it forwards to the local server, so the runs finish); it is not aeval's own server."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import httpx
import pytest
import uvicorn
from engine_helpers import SPECS, benchmark_slice, fast_config
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from aeval.config import Credentials
from aeval.engine import Run
from aeval.local import LocalBatchServer
from aeval.uvicorn_thread import UvicornThread, listening_socket

_HOP = {"host", "content-length", "transfer-encoding", "connection", "content-encoding"}


@contextmanager
def recording_proxy(target: str, seen: list[tuple[str, str, dict[str, str]]]) -> Iterator[str]:
    """A loopback proxy to ``target`` (a server root) noting (method, path, headers) of
    every request; yields its root URL."""

    async def forward(request: Request) -> Response:
        seen.append((request.method, request.url.path, dict(request.headers)))
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _HOP}
        async with httpx.AsyncClient(timeout=60) as client:
            answer = await client.request(
                request.method,
                target + request.url.path,
                params=request.query_params,
                headers=headers,
                content=await request.body(),
            )
        kept = {k: v for k, v in answer.headers.items() if k.lower() not in _HOP}
        return Response(answer.content, status_code=answer.status_code, headers=kept)

    methods = ["GET", "POST", "PUT", "DELETE"]
    app = Starlette(routes=[Route("/{path:path}", forward, methods=methods)])
    sock, url = listening_socket("127.0.0.1", 0)
    server = UvicornThread("the recording proxy", "recording-proxy", 10.0)
    server.start(uvicorn.Config(app, log_level="warning", lifespan="off"), sock)
    try:
        yield url.rstrip("/")
    finally:
        server.stop()


@pytest.mark.anyio
@pytest.mark.parametrize("api", ["direct", "batch"])
async def test_nothing_of_aeval_s_reaches_a_provider(
    api: str, benchmark_path: Path, tmp_path: Path
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=4)
    seen: list[tuple[str, str, dict[str, str]]] = []
    async with LocalBatchServer(dataset=frame, models=dict(SPECS)) as server:
        root = server.base_url.removesuffix("/v1")
        with recording_proxy(root, seen) as proxy:
            config = fast_config(
                data, tmp_path / "r", server.base_url, models=("model-a",), api=api,
                credentials=Credentials("sk-test", proxy + "/v1"),
            )  # fmt: skip
            with anyio.fail_after(60):
                result = await Run(config).run()
    assert result.outcome == "finished"
    assert seen, "nothing went through the proxy"
    aeval_headers = {
        k for _, _, headers in seen for k in headers if k.lower().startswith("x-aeval")
    }
    assert not aeval_headers
    assert not [path for _, path, _ in seen if "/aeval/" in path]
