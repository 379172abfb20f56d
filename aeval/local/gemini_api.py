"""The Gemini Developer API's Batch and Files routes (as google-genai calls them).

- ``POST /{v}/models/{model}:batchGenerateContent``: requests inline
  (``inputConfig.requests.requests``, under 20 MB a call) or in an uploaded
  JSONL file (``inputConfig.fileName``, lines ``{"key", "request"}``);
- ``GET /{v}/batches`` (``pageSize``/``pageToken``), ``GET /{v}/batches/{id}``,
  ``POST /{v}/batches/{id}:cancel``, ``DELETE /{v}/batches/{id}``;
- the resumable upload: ``POST /upload/{v}/files`` with
  ``X-Goog-Upload-Command: start`` answers an upload URL in
  ``X-Goog-Upload-URL``; chunks go there (``upload`` … ``upload, finalize``);
- ``GET /{v}/files``, ``GET``/``DELETE /{v}/files/{id}``, and
  ``GET /{v}/files/{id}:download?alt=media`` for a batch's responses file.

``{v}`` is ``v1beta`` or ``v1`` (google-genai 3.x defaults to ``v1``). A batch
that took inline requests answers inline (``inlinedResponses``); one that took a
file answers with a responses file, one line per request: ``{"key",
"response"}`` or ``{"key", "error"}``. Neither keeps the requests' order, and
inline responses carry no ``metadata``: what the service is reported to do
(googleapis/python-genai #1909, #2008; googleapis/js-genai #1191), though its
reference promises the metadata back, so a client that leans on either fails here.
"""

from __future__ import annotations

import json
import random
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from aeval.local.gemini_wire import (
    batch_resource,
    chat_body,
    display_metadata,
    error_body,
    file_resource,
    generate_content_response,
    line_status,
    wants_thoughts,
)
from aeval.local.provider_batches import BatchStarter, jsonl_objects, result_lines
from aeval.local.state import BatchRecord, Store

if TYPE_CHECKING:
    from aeval.local.context import ServerContext

__all__ = ["GEMINI_VERSIONS", "INLINE_LIMIT_BYTES", "gemini_app"]

GEMINI_VERSIONS = ("v1beta", "v1")
INLINE_LIMIT_BYTES = 20 * 1024 * 1024  # a batchGenerateContent call's body
PROVIDER = "google"
_PAGE = 50


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse(error_body(status, message), status_code=status)


@dataclass(slots=True)
class _Upload:
    display_name: str
    size: int
    path: Path
    file_id: str
    received: int = 0


@dataclass(slots=True)
class _Uploads:
    sessions: dict[str, _Upload] = field(default_factory=dict)


def _file_id(name: str) -> str:
    return "file-" + name.removeprefix("files/")


def _file_requests(model: str, path: Path) -> Iterator[tuple[Any, Any]]:
    for _, line in jsonl_objects(path):
        if not isinstance(line, dict):
            yield None, None
            continue
        yield line.get("key"), chat_body(model, line.get("request"))


def _write_responses(store: Store, batch: BatchRecord, path: Path) -> None:
    model, thoughts = batch.extra["model"], bool(batch.extra.get("thoughts"))
    results = [_keyed_result(line, model, thoughts) for line in result_lines(store, batch)]
    random.Random(batch.id).shuffle(results)  # the service keeps no order (module doc)
    with path.open("w", encoding="utf-8") as out:
        for result in results:
            out.write(json.dumps(result))
            out.write("\n")


def _keyed_result(line: dict[str, Any], model: str, thoughts: bool) -> dict[str, Any]:
    response = line.get("response") or {}
    if response.get("status_code") == 200:
        body = generate_content_response(response.get("body") or {}, model, thoughts=thoughts)
        return {"key": line.get("custom_id"), "response": body}
    return {"key": line.get("custom_id"), "error": line_status(line)}


def _inline_output(store: Store, batch: BatchRecord) -> dict[str, Any]:
    model, thoughts = batch.extra["model"], bool(batch.extra.get("thoughts"))
    by_key = {
        line.get("custom_id"): _keyed_result(line, model, thoughts)
        for line in result_lines(store, batch)
    }
    ordered = []
    for _, request in jsonl_objects(store.file_path(batch.input_file_id)):
        key = request.get("custom_id") if isinstance(request, dict) else None
        result = by_key.get(key) or {"key": key, "error": {"code": 13, "message": "not run"}}
        # No metadata echoed, and no order kept (the module's doc says why).
        ordered.append({k: result[k] for k in ("response", "error") if k in result})
    random.Random(batch.id).shuffle(ordered)
    return {"inlinedResponses": {"inlinedResponses": ordered}}


def gemini_app(ctx: ServerContext) -> Starlette:
    """The Gemini API of one server (errors in Gemini's shape)."""

    async def not_found(request: Request, exc: Exception) -> Response:
        return _error(404, f"Invalid URL ({request.method} {request.url.path})")

    async def not_allowed(request: Request, exc: Exception) -> Response:
        return _error(405, f"Method {request.method} not allowed on {request.url.path}")

    return Starlette(routes=_routes(ctx), exception_handlers={404: not_found, 405: not_allowed})


def _routes(ctx: ServerContext) -> list[Route]:
    """The Gemini routes of one server, under every API version google-genai may use."""
    store = ctx.store
    starter = BatchStarter(store, ctx.runner)
    uploads = _Uploads()

    def own_batch(batch_id: str) -> BatchRecord | None:
        batch = store.batches.get(batch_id)
        return batch if batch is not None and batch.api == PROVIDER else None

    async def output_of(batch: BatchRecord, base: str) -> dict[str, Any] | None:
        if not batch.terminal or batch.status == "failed":
            return None
        if batch.extra.get("inline"):
            return await anyio.to_thread.run_sync(_inline_output, store, batch)
        name = batch.extra.get("responses_file")
        if name is None:
            file_id, path = store.new_file_path()
            await anyio.to_thread.run_sync(_write_responses, store, batch, path)
            store.add_file(
                file_id, f"batch-{batch.id}-responses.jsonl", "batch_output",
                counted=False, api=PROVIDER,
            )  # fmt: skip
            name = f"files/{file_id.removeprefix('file-')}"
            batch.extra["responses_file"] = name
            store.save_batch(batch)
        return {"responsesFile": name}

    def base_of(request: Request, version: str) -> str:
        return str(request.base_url).rstrip("/") + "/" + version

    async def create(request: Request) -> Response:
        version = request.path_params["version"]
        model = request.path_params["model"]
        declared = int(request.headers.get("content-length") or 0)
        if declared > INLINE_LIMIT_BYTES:
            return _error(
                400, f"Request payload size exceeds the limit: {INLINE_LIMIT_BYTES} bytes."
            )
        try:
            body = json.loads(await request.body())
        except ValueError as err:
            return _error(400, f"Invalid JSON payload received. {err}")
        batch_spec = body.get("batch") if isinstance(body, dict) else None
        if not isinstance(batch_spec, dict):
            return _error(400, "Invalid JSON payload received. Missing 'batch'.")
        display_name = str(batch_spec.get("displayName") or batch_spec.get("display_name") or "")
        if not display_name:
            return _error(400, "* GenerateContentBatch.display_name: display_name is required.")
        config = batch_spec.get("inputConfig") or batch_spec.get("input_config") or {}
        file_name = config.get("fileName") or config.get("file_name")
        inline = (config.get("requests") or {}).get("requests")
        extra: dict[str, Any] = {"model": model, "display_name": display_name}
        if file_name:
            record = store.files.get(_file_id(str(file_name)))
            if record is None or record.api != PROVIDER:
                return _error(404, f"File {file_name} not found.")
            requests: Any = _file_requests(model, store.file_path(record.id))
            extra["input_config"] = {"fileName": file_name}
            extra["thoughts"] = False
        elif isinstance(inline, list) and inline:
            requests = [
                (
                    (item.get("metadata") or {}).get("key", str(n)),
                    chat_body(model, item.get("request")),
                )
                if isinstance(item, dict)
                else (str(n), None)
                for n, item in enumerate(inline)
            ]
            extra["inline"] = True
            extra["input_config"] = {"requests": {"requests": []}}  # not echoed back in full
            extra["thoughts"] = any(
                wants_thoughts(item.get("request")) for item in inline if isinstance(item, dict)
            )
        else:
            return _error(400, "* GenerateContentBatch.input_config: requests or file_name needed.")
        assert ctx.task_group is not None, "the app runs inside its lifespan"
        batch = await starter.start(
            PROVIDER,
            requests,
            batch_id=secrets.token_hex(10),
            metadata=display_metadata(display_name) or {"display_name": display_name},
            extra=extra,
            task_group=ctx.task_group,
        )
        return JSONResponse(
            batch_resource(batch, await output_of(batch, base_of(request, version)))
        )

    async def get_batch(request: Request) -> Response:
        batch = own_batch(request.path_params["batch_id"])
        if batch is None:
            return _error(404, f"Batch batches/{request.path_params['batch_id']} not found.")
        output = await output_of(batch, base_of(request, request.path_params["version"]))
        return JSONResponse(batch_resource(batch, output))

    async def list_batches(request: Request) -> Response:
        try:
            size = int(request.query_params.get("pageSize") or _PAGE)
            start = int(request.query_params.get("pageToken") or 0)
        except ValueError:
            return _error(400, "Invalid pageSize or pageToken.")
        size = max(1, min(size, 1000))
        mine = [b for b in reversed(store.batches.values()) if b.api == PROVIDER]
        page = mine[start : start + size]
        # A listing shows where each batch stands; results are read one batch at a time.
        body: dict[str, Any] = {"operations": [batch_resource(b, None) for b in page]}
        if start + size < len(mine):
            body["nextPageToken"] = str(start + size)
        return JSONResponse(body)

    async def cancel_batch(request: Request) -> Response:
        batch = own_batch(request.path_params["batch_id"])
        if batch is None:
            return _error(404, f"Batch batches/{request.path_params['batch_id']} not found.")
        if batch.terminal:
            return _error(400, f"Batch batches/{batch.id} is already in a terminal state.")
        store.cancel_batch(batch)
        return JSONResponse({})

    async def delete_batch(request: Request) -> Response:
        batch = own_batch(request.path_params["batch_id"])
        if batch is None:
            return _error(404, f"Batch batches/{request.path_params['batch_id']} not found.")
        if not batch.terminal:
            return _error(400, f"Batch batches/{batch.id} is still running: cancel it first.")
        del store.batches[batch.id]
        return JSONResponse({})

    async def upload(request: Request) -> Response:
        version = request.path_params["version"]
        command = request.headers.get("x-goog-upload-command", "").replace(" ", "")
        if command == "start":
            return await _start_upload(request, version)
        session = uploads.sessions.get(request.query_params.get("upload_id", ""))
        if session is None:
            return _error(404, "No such upload session.")
        offset = int(request.headers.get("x-goog-upload-offset") or 0)
        if offset != session.received:
            return _error(400, f"Upload offset {offset} != {session.received} bytes received.")
        chunk = await request.body()
        with session.path.open("ab") as out:
            out.write(chunk)
        session.received += len(chunk)
        if "finalize" not in command.split(","):
            return JSONResponse({}, headers={"x-goog-upload-status": "active"})
        del uploads.sessions[request.query_params["upload_id"]]
        if session.received != session.size:
            session.path.unlink(missing_ok=True)
            return _error(400, f"Upload size {session.received} != declared {session.size}.")
        record = store.add_file(
            session.file_id, session.display_name, "batch", counted=True, api=PROVIDER
        )
        resource = file_resource(record, base_of(request, version))
        return JSONResponse({"file": resource}, headers={"x-goog-upload-status": "final"})

    async def _start_upload(request: Request, version: str) -> Response:
        try:
            body = json.loads(await request.body() or b"{}")
        except ValueError as err:
            return _error(400, f"Invalid JSON payload received. {err}")
        spec = (body.get("file") if isinstance(body, dict) else None) or {}
        size = int(request.headers.get("x-goog-upload-header-content-length") or -1)
        if size < 0:
            return _error(400, "X-Goog-Upload-Header-Content-Length is required.")
        if size > ctx.limits.file_bytes(PROVIDER):
            return _error(400, f"File is over the {ctx.limits.file_bytes(PROVIDER)}-byte limit.")
        file_id, path = store.new_file_path()
        path.write_bytes(b"")
        token = secrets.token_hex(12)
        name = spec.get("displayName") or spec.get("display_name") or path.name
        uploads.sessions[token] = _Upload(str(name), size, path, file_id)
        url = f"{str(request.base_url).rstrip('/')}/upload/{version}/files?upload_id={token}"
        return JSONResponse(
            {}, headers={"x-goog-upload-url": url, "x-goog-upload-status": "active"}
        )

    def own_file(name: str) -> Any:
        record = store.files.get(_file_id(name))
        return record if record is not None and record.api == PROVIDER else None

    async def list_files(request: Request) -> Response:
        try:
            size = int(request.query_params.get("pageSize") or 10)
            start = int(request.query_params.get("pageToken") or 0)
        except ValueError:
            return _error(400, "Invalid pageSize or pageToken.")
        size = max(1, min(size, 100))
        mine = [
            f for f in reversed(store.files.values()) if f.api == PROVIDER and f.purpose == "batch"
        ]
        base = base_of(request, request.path_params["version"])
        body: dict[str, Any] = {
            "files": [file_resource(f, base) for f in mine[start : start + size]]
        }
        if start + size < len(mine):
            body["nextPageToken"] = str(start + size)
        return JSONResponse(body)

    async def get_file(request: Request) -> Response:
        name = request.path_params["name"]
        if name.endswith(":download"):
            return await download(request, name.removesuffix(":download"))
        record = own_file(name)
        if record is None:
            return _error(404, f"File files/{name} not found.")
        generated = record.purpose == "batch_output"
        base = base_of(request, request.path_params["version"])
        return JSONResponse(file_resource(record, base, generated=generated))

    async def download(request: Request, name: str) -> Response:
        record = own_file(name)
        if record is None:
            return _error(404, f"File files/{name} not found.")
        if record.purpose != "batch_output":
            return _error(400, "Only generated files can be downloaded.")
        return FileResponse(store.file_path(record.id), media_type="application/octet-stream")

    async def delete_file(request: Request) -> Response:
        record = own_file(request.path_params["name"])
        if record is None:
            return _error(404, f"File files/{request.path_params['name']} not found.")
        store.delete_file(record.id)
        return JSONResponse({})

    routes: list[Route] = []
    for version in GEMINI_VERSIONS:
        prefix = f"/{version}"
        routes += [
            Route(prefix + "/models/{model}:batchGenerateContent", create, methods=["POST"]),
            Route(prefix + "/batches", list_batches, methods=["GET"]),
            Route(prefix + "/batches/{batch_id}:cancel", cancel_batch, methods=["POST"]),
            Route(prefix + "/batches/{batch_id}", get_batch, methods=["GET"]),
            Route(prefix + "/batches/{batch_id}", delete_batch, methods=["DELETE"]),
            Route(f"/upload/{version}/files", upload, methods=["POST"]),
            Route(prefix + "/files", list_files, methods=["GET"]),
            Route(prefix + "/files/{name}", get_file, methods=["GET"]),
            Route(prefix + "/files/{name}", delete_file, methods=["DELETE"]),
        ]
    return [_with_version(route) for route in routes]


def _with_version(route: Route) -> Route:
    """The route, its handler told which API version the path used (``v1beta`` or ``v1``)."""
    handler = route.endpoint
    version = next(v for v in GEMINI_VERSIONS if f"/{v}/" in route.path + "/")

    async def endpoint(request: Request) -> Response:
        request.path_params["version"] = version
        response: Response = await handler(request)
        return response

    return Route(route.path, endpoint, methods=list(route.methods or ()))
