"""The HTTP surface: the OpenAI Files and Batches routes (completions: aeval.local.direct;
Anthropic's Message Batches: aeval.local.message_batches; Gemini, Together, Mistral:
their own modules, reached through aeval.local.wire_routing).

Starlette routes translate HTTP to :class:`Store`/:class:`BatchRunner` calls
and back; every error is shaped as OpenAI shapes it
(``{"error": {"message", "type", "param", "code"}}``). Two pure-ASGI layers
sit in front (:mod:`aeval.local.layers`): authentication (only when the server
has an API key) and fault injection (see :mod:`aeval.local.faults`).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup
from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from aeval.local.direct import DirectState, direct_routes
from aeval.local.faults import FaultInjector
from aeval.local.gemini_api import gemini_app
from aeval.local.layers import AuthLayer, FaultLayer
from aeval.local.message_batches import message_batch_routes
from aeval.local.mistral_api import mistral_app
from aeval.local.models import ModelRouter, describe_models
from aeval.local.simulated_batch import BatchRunner, new_batch
from aeval.local.state import BatchRecord, FileRecord, Store
from aeval.local.timing import Limits
from aeval.local.together_api import together_app
from aeval.local.wire import error_body
from aeval.local.wire_routing import WireRouter

__all__ = ["COUNTERS_PATH", "RESPONDERS_PATH", "ServerContext", "build_app"]

log = logging.getLogger(__name__)

SUPPORTED_ENDPOINTS = ("/v1/chat/completions",)
COUNTERS_PATH = "/aeval/counters"
AZURE_PREFIX = "/openai"
GROQ_PREFIX = "/openai/v1"
# Which responders answer here: a run sent to this server records it (aeval.store.provenance).
RESPONDERS_PATH = "/aeval/responders"
FILE_PURPOSES = frozenset(
    {"assistants", "batch", "fine-tune", "vision", "user_data", "evals", "batch_output"}
)


@dataclass(slots=True)
class ServerContext:
    """Everything the routes of one server share."""

    store: Store
    router: ModelRouter
    faults: FaultInjector
    runner: BatchRunner
    limits: Limits
    api_key: str | None = None
    task_group: TaskGroup | None = field(default=None)
    direct: DirectState = field(default_factory=DirectState)


def api_error(
    status: int,
    message: str,
    type: str = "invalid_request_error",
    param: str | None = None,
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    return JSONResponse(error_body(message, type, param, code), status_code=status, headers=headers)


def _not_found(kind: str, object_id: str) -> JSONResponse:
    return api_error(404, f"No such {kind}: '{object_id}'", param="id", code=None)


def _int_param(request: Request, name: str, default: int, low: int, high: int) -> int:
    raw = request.query_params.get(name)
    if raw is None:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise _BadRequest(f"Invalid '{name}': expected an integer between {low} and {high}.", name)
    return value


class _BadRequest(Exception):
    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


def _page(items: list[dict[str, Any]], after: str | None, limit: int) -> dict[str, Any]:
    """Cursor pagination the SDK's CursorPage follows (``after`` = last id seen)."""
    start = 0
    if after is not None:
        ids = [item["id"] for item in items]
        start = ids.index(after) + 1 if after in ids else len(items)
    data = items[start : start + limit]
    return {
        "object": "list",
        "data": data,
        "first_id": data[0]["id"] if data else None,
        "last_id": data[-1]["id"] if data else None,
        "has_more": start + limit < len(items),
    }


def _save_upload(source: IO[bytes], dest: Path) -> None:
    source.seek(0)
    with dest.open("wb") as out:
        shutil.copyfileobj(source, out, 1024 * 1024)


def build_app(ctx: ServerContext) -> ASGIApp:
    """The ASGI app of one server: routes behind the auth and fault layers."""
    store, limits = ctx.store, ctx.limits

    def batch_api(provider: str, windows: Callable[[str], bool]) -> list[tuple[str, Any, str]]:
        """The Files and Batches routes as ``provider`` serves them (OpenAI, Azure: "openai";
        Groq: "groq", whose completion windows run from 24 h to 7 d)."""

        async def create_file(request: Request) -> Response:
            declared = int(request.headers.get("content-length") or 0)
            if declared > limits.file_bytes(provider) + 64 * 1024:
                return _too_large()
            try:
                form = await request.form(max_files=1, max_fields=8)
            except Exception as err:  # starlette raises its own HTTPException subclasses
                return api_error(400, f"Could not parse the multipart form: {err}")
            try:
                upload, purpose = form.get("file"), form.get("purpose")
                if not isinstance(upload, UploadFile):
                    return api_error(400, "Missing required parameter: 'file'.", param="file")
                if not isinstance(purpose, str) or not purpose:
                    return api_error(400, "Missing required parameter: 'purpose'.", param="purpose")
                if purpose not in FILE_PURPOSES:
                    return api_error(
                        400, f"Invalid value for 'purpose': '{purpose}'.", param="purpose"
                    )
                if (upload.size or 0) > limits.file_bytes(provider):
                    return _too_large()
                file_id, path = store.new_file_path()
                await anyio.to_thread.run_sync(_save_upload, upload.file, path)
                record = store.add_file(
                    file_id,
                    upload.filename or "upload",
                    purpose,
                    counted=True,
                    api=provider,
                )
            finally:
                await form.close()
            return JSONResponse(record.to_api())

        def _too_large() -> JSONResponse:
            return api_error(
                413,
                f"File is too large: the maximum size is {limits.file_bytes(provider)} bytes.",
                param="file",
                code="file_too_large",
            )

        async def list_files(request: Request) -> Response:
            limit = _int_param(request, "limit", 10000, 1, 10000)
            purpose = request.query_params.get("purpose")
            order = request.query_params.get("order", "desc")
            records = [
                f
                for f in store.files.values()
                if f.api == provider and (purpose is None or f.purpose == purpose)
            ]
            if order == "desc":
                records.reverse()
            page = _page([f.to_api() for f in records], request.query_params.get("after"), limit)
            return JSONResponse(page)

        async def get_file(request: Request) -> Response:
            file_id = request.path_params["file_id"]
            record = _own(store.files.get(file_id), provider)
            return JSONResponse(record.to_api()) if record else _not_found("file", file_id)

        async def delete_file(request: Request) -> Response:
            file_id = request.path_params["file_id"]
            if _own(store.files.get(file_id), provider) is None:
                return _not_found("file", file_id)
            store.delete_file(file_id)
            return JSONResponse({"id": file_id, "object": "file", "deleted": True})

        async def file_content(request: Request) -> Response:
            file_id = request.path_params["file_id"]
            if _own(store.files.get(file_id), provider) is None:
                return _not_found("file", file_id)
            return FileResponse(store.file_path(file_id), media_type="application/octet-stream")

        async def create_batch(request: Request) -> Response:
            body = await _json_body(request)
            input_file_id = _required_text(body, "input_file_id")
            endpoint = _required_text(body, "endpoint")
            window = _required_text(body, "completion_window")
            metadata = body.get("metadata")
            if endpoint not in SUPPORTED_ENDPOINTS:
                raise _BadRequest(
                    f"Invalid value for 'endpoint': '{endpoint}'. This server supports "
                    f"{', '.join(SUPPORTED_ENDPOINTS)}.",
                    "endpoint",
                )
            if not windows(window):
                supported = "'24h'" if provider == "openai" else "'24h' to '7d'"
                raise _BadRequest(
                    f"Invalid value for 'completion_window': '{window}'. "
                    f"Supported values are: {supported}.",
                    "completion_window",
                )
            _check_metadata(metadata)
            record = _own(store.files.get(input_file_id), provider)
            if record is None:
                return _not_found("file", input_file_id)
            if record.purpose != "batch":
                raise _BadRequest(
                    f"The input file {input_file_id} must have purpose 'batch', "
                    f"not '{record.purpose}'.",
                    "input_file_id",
                )
            batch = new_batch(input_file_id, endpoint, window, metadata)
            batch.api = provider
            store.add_batch(batch)
            assert ctx.task_group is not None, "the app runs inside its lifespan"
            ctx.task_group.start_soon(ctx.runner.run, batch)
            return JSONResponse(batch.to_api())

        async def list_batches(request: Request) -> Response:
            limit = _int_param(request, "limit", 20, 1, 100)
            batches = [b.to_api() for b in reversed(store.batches.values()) if b.api == provider]
            return JSONResponse(_page(batches, request.query_params.get("after"), limit))

        async def get_batch(request: Request) -> Response:
            batch_id = request.path_params["batch_id"]
            batch = _own(store.batches.get(batch_id), provider)
            return JSONResponse(batch.to_api()) if batch else _not_found("batch", batch_id)

        async def cancel_batch(request: Request) -> Response:
            batch_id = request.path_params["batch_id"]
            batch = _own(store.batches.get(batch_id), provider)
            if batch is None:
                return _not_found("batch", batch_id)
            if batch.terminal:
                raise _BadRequest(f"Cannot cancel a batch with status '{batch.status}'.")
            store.cancel_batch(batch)
            return JSONResponse(batch.to_api())

        return [
            ("/files", create_file, "POST"),
            ("/files", list_files, "GET"),
            ("/files/{file_id}", get_file, "GET"),
            ("/files/{file_id}", delete_file, "DELETE"),
            ("/files/{file_id}/content", file_content, "GET"),
            ("/batches", create_batch, "POST"),
            ("/batches", list_batches, "GET"),
            ("/batches/{batch_id}", get_batch, "GET"),
            ("/batches/{batch_id}/cancel", cancel_batch, "POST"),
        ]

    async def counters(request: Request) -> Response:
        # Outside /v1 on purpose: not part of the OpenAI API, for tests that run
        # the server in another process (see aeval.local.fetch_counters).
        counted = store.counters(ctx.faults.injected()).to_json()
        return JSONResponse({**counted, "direct": ctx.direct.counters().to_json()})

    async def responders(request: Request) -> Response:
        # Outside /v1 too: lets a run know its answers are not a real model's.
        specs = ctx.router.models
        synthetic = any(spec.responder != "replay" for spec in specs.values())
        body = {"server": "aeval-local", "synthetic": synthetic}
        return JSONResponse({**body, "responders": describe_models(specs)})

    async def bad_request(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, _BadRequest)
        return api_error(400, str(exc), param=exc.param)

    async def not_found(request: Request, exc: Exception) -> Response:
        return api_error(404, f"Invalid URL ({request.method} {request.url.path})")

    async def method_not_allowed(request: Request, exc: Exception) -> Response:
        return api_error(405, f"Method {request.method} not allowed on {request.url.path}")

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with anyio.create_task_group() as tg:
            ctx.task_group = tg
            # A persistent store may hold batches a previous server left unfinished.
            for batch in list(store.batches.values()):
                if not batch.terminal:
                    tg.start_soon(ctx.runner.run, batch)
            try:
                yield
            finally:
                tg.cancel_scope.cancel()
                ctx.task_group = None

    def start_batch(batch: BatchRecord) -> None:
        assert ctx.task_group is not None, "the app runs inside its lifespan"
        ctx.task_group.start_soon(ctx.runner.run, batch)

    openai_api = batch_api("openai", lambda window: window == "24h")
    groq_api = batch_api("groq", groq_window)
    routes = [
        *(Route("/v1" + path, handler, methods=[method]) for path, handler, method in openai_api),
        # Azure OpenAI's shape of the same API, as the SDK's Azure client sends it.
        *(
            Route(AZURE_PREFIX + path, _azure(handler), methods=[method])
            for path, handler, method in openai_api
        ),
        # Groq's OpenAI-compatible Batch API, under its own prefix.
        *(
            Route(GROQ_PREFIX + path, handler, methods=[method])
            for path, handler, method in groq_api
        ),
        *direct_routes(ctx.router, ctx.direct),
        # Anthropic's Message Batches, answered by the same batches.
        *message_batch_routes(store, start_batch, lambda r: str(r.base_url).rstrip("/")),
        Route(COUNTERS_PATH, counters, methods=["GET"]),
        Route(RESPONDERS_PATH, responders, methods=["GET"]),
    ]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        exception_handlers={_BadRequest: bad_request, 404: not_found, 405: method_not_allowed},
    )
    # Gemini, Together and Mistral share paths with OpenAI: one port, told apart per request.
    wires = WireRouter(
        {
            "openai": app,
            "google": gemini_app(ctx),
            "together": together_app(ctx),
            "mistral": mistral_app(ctx),
        }
    )
    return FaultLayer(AuthLayer(wires, ctx.api_key), ctx.faults)


_Owned = TypeVar("_Owned", FileRecord, BatchRecord)


def _own(record: _Owned | None, provider: str) -> _Owned | None:
    """``record`` when ``provider``'s API holds it: each API sees only its own files and batches."""
    return record if record is not None and record.api == provider else None


def groq_window(window: str) -> bool:
    """Groq takes completion windows from 24 h to 7 d (``"24h"``, ``"36h"``, ``"7d"``)."""
    unit = window[-1:]
    if unit not in ("h", "d") or not window[:-1].isdigit():
        return False
    hours = int(window[:-1]) * (24 if unit == "d" else 1)
    return 24 <= hours <= 7 * 24


def _azure(handler: Callable[[Request], Awaitable[Response]]) -> Callable[..., Any]:
    """An Azure route: the same handler, once the ``api-version`` query parameter is there."""

    async def route(request: Request) -> Response:
        if not request.query_params.get("api-version"):
            return api_error(
                400,
                "Missing required query parameter 'api-version'.",
                param="api-version",
                code="MissingApiVersionParameter",
            )
        return await handler(request)

    return route


async def _json_body(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError as err:
        raise _BadRequest(f"The request body is not valid JSON: {err}") from err
    if not isinstance(body, dict):
        raise _BadRequest("The request body must be a JSON object.")
    return body


def _required_text(body: dict[str, Any], name: str) -> str:
    value = body.get(name)
    if not isinstance(value, str) or not value:
        raise _BadRequest(f"Missing required parameter: '{name}'.", name)
    return value


def _check_metadata(metadata: object) -> None:
    if metadata is None:
        return
    if not isinstance(metadata, dict) or len(metadata) > 16:
        raise _BadRequest("'metadata' must be an object of at most 16 string pairs.", "metadata")
    for key, value in metadata.items():
        if not isinstance(value, str) or len(key) > 64 or len(value) > 512:
            raise _BadRequest(
                f"Invalid metadata item '{key}': keys are strings of at most 64 characters, "
                "values strings of at most 512.",
                "metadata",
            )
