"""Together's Files and Batches routes (as the ``together`` SDK calls them).

Uploads take three calls: ``POST /v1/files`` (a form naming the file, its
purpose, type and sha256 checksum) answers ``302`` with a presigned
``Location`` and ``X-Together-File-Id`` (or ``409`` with the ``file_id`` of an
already uploaded file with that checksum and purpose); the content is ``PUT``
to that location; ``POST /v1/files/{id}/preprocess`` registers it. A batch
input's lines are ``{"custom_id", "body"}`` and its file's purpose is
``batch-api``. ``POST /v1/batches`` answers the job wrapped in ``{"job"}``;
statuses are upper-case (``VALIDATING``, ``IN_PROGRESS``, ``COMPLETED``,
``FAILED``, ``EXPIRED``, ``CANCELLED``); progress is a percentage; a job
carries no metadata. Output and error files hold OpenAI batch output lines.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from aeval.local.provider_batches import (
    BatchStarter,
    ProviderRecords,
    file_routes,
    iso_time,
    json_object,
    jsonl_objects,
    provider_app,
)
from aeval.local.state import BatchRecord, FileRecord
from aeval.local.wire import error_body
from aeval.local.wire_routing import TOGETHER_UPLOADS

if TYPE_CHECKING:
    from aeval.local.context import ServerContext

__all__ = ["TOGETHER_STATUSES", "together_app"]

PROVIDER = "together"
PURPOSES = ("fine-tune", "calibration", "eval", "batch-api")
ENDPOINTS = ("/v1/chat/completions",)
TOGETHER_STATUSES = {
    "validating": "VALIDATING",
    "in_progress": "IN_PROGRESS",
    "finalizing": "IN_PROGRESS",
    "cancelling": "IN_PROGRESS",
    "completed": "COMPLETED",
    "failed": "FAILED",
    "expired": "EXPIRED",
    "cancelled": "CANCELLED",
}


def _error(status: int, message: str, **extra: Any) -> JSONResponse:
    body = error_body(message)
    body.update(extra)
    return JSONResponse(body, status_code=status)


def _file(record: FileRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "object": "file",
        "bytes": record.bytes,
        "created_at": record.created_at,
        "filename": record.filename,
        "purpose": record.purpose,
        "FileType": "jsonl",
        "processing_status": "COMPLETED",
    }


def _job(batch: BatchRecord) -> dict[str, Any]:
    done = batch.completed + batch.failed
    end = batch.completed_at or batch.failed_at or batch.expired_at or batch.cancelled_at
    error = None
    if batch.status == "failed" and batch.errors:
        error = str(batch.errors[0].get("message", ""))
    return {
        "id": batch.id,
        "user_id": "local-user",
        "input_file_id": batch.extra.get("input_file_id", ""),
        "file_size_bytes": batch.extra.get("file_size_bytes", 0),
        "status": TOGETHER_STATUSES.get(batch.status, batch.status.upper()),
        "job_deadline": iso_time(batch.expires_at),
        "created_at": iso_time(batch.created_at),
        "endpoint": batch.endpoint,
        "progress": round(100.0 * done / batch.total, 2) if batch.total else 0.0,
        "model_id": batch.model,
        "output_file_id": batch.output_file_id,
        "error_file_id": batch.error_file_id,
        "error": error,
        "completed_at": iso_time(end),
    }


def _requests(path: Path) -> Iterator[tuple[Any, Any]]:
    for _, line in jsonl_objects(path):
        if not isinstance(line, dict):
            yield None, None
        else:
            yield line.get("custom_id"), line.get("body")


def together_app(ctx: ServerContext) -> Starlette:
    """Together's API of one server (errors in its OpenAI-like shape)."""
    store = ctx.store
    starter = BatchStarter(store, ctx.runner)
    own = ProviderRecords(store, PROVIDER)
    pending: dict[str, tuple[str, str, str]] = {}  # file id -> (name, purpose, checksum)
    checksums: dict[tuple[str, str], str] = {}  # (checksum, purpose) -> file id

    async def start_upload(request: Request) -> Response:
        form = await request.form()
        try:
            name, purpose = str(form.get("file_name") or ""), str(form.get("purpose") or "")
            checksum = str(form.get("checksum") or "")
        finally:
            await form.close()
        if not name:
            return _error(400, "Missing required field 'file_name'.")
        if purpose not in PURPOSES:
            return _error(400, f"Invalid purpose '{purpose}'.")
        existing = checksums.get((checksum, purpose))
        if checksum and existing is not None and existing in store.files:
            return _error(409, "File already exists.", file_id=existing)
        file_id = f"file-{uuid.uuid4()}"
        pending[file_id] = (name, purpose, checksum)
        location = f"{str(request.base_url).rstrip('/')}{TOGETHER_UPLOADS}{file_id}"
        return Response(
            status_code=302, headers={"Location": location, "X-Together-File-Id": file_id}
        )

    async def put_content(request: Request) -> Response:
        file_id = request.path_params["file_id"]
        if file_id not in pending:
            return _error(404, f"No pending upload {file_id}.")
        path = store.file_path(file_id)
        size = 0
        with path.open("wb") as out:
            async for chunk in request.stream():
                size += len(chunk)
                if size > ctx.limits.max_file_bytes:
                    break
                out.write(chunk)
        if size > ctx.limits.max_file_bytes:
            path.unlink(missing_ok=True)
            return _error(413, f"File is over the {ctx.limits.max_file_bytes}-byte limit.")
        return Response(status_code=200)

    async def preprocess(request: Request) -> Response:
        file_id = request.path_params["file_id"]
        spec = pending.pop(file_id, None)
        if spec is None or not store.file_path(file_id).exists():
            return _error(404, f"File {file_id} was not uploaded.")
        name, purpose, checksum = spec
        record = store.add_file(file_id, name, purpose, counted=True, api=PROVIDER)
        if checksum:
            checksums[(checksum, purpose)] = file_id
        return JSONResponse(_file(record))

    async def list_files(request: Request) -> Response:
        mine = [_file(f) for f in reversed(store.files.values()) if f.api == PROVIDER]
        return JSONResponse(
            {"object": "list", "data": [f for f in mine if f["purpose"] in PURPOSES]}
        )

    async def create_batch(request: Request) -> Response:
        body = await json_object(request, _error, not_an_object=400)
        if isinstance(body, Response):
            return body
        endpoint, input_file_id = body.get("endpoint"), body.get("input_file_id")
        if endpoint not in ENDPOINTS:
            return _error(400, f"Invalid endpoint {endpoint!r}: use one of {', '.join(ENDPOINTS)}.")
        record = own.file(str(input_file_id or ""))
        if record is None:
            return _error(404, f"Input file {input_file_id} not found.")
        if record.purpose != "batch-api":
            return _error(
                400, f"The input file must have purpose 'batch-api', not '{record.purpose}'."
            )
        assert ctx.task_group is not None, "the app runs inside its lifespan"
        batch = await starter.start(
            PROVIDER,
            _requests(store.file_path(record.id)),
            batch_id=str(uuid.uuid4()),
            extra={"input_file_id": record.id, "file_size_bytes": record.bytes},
            task_group=ctx.task_group,
        )
        return JSONResponse({"job": _job(batch), "warning": None})

    async def list_batches(request: Request) -> Response:
        return JSONResponse(
            [_job(b) for b in reversed(store.batches.values()) if b.api == PROVIDER]
        )

    async def get_batch(request: Request) -> Response:
        batch = own.batch(request.path_params["batch_id"])
        return JSONResponse(_job(batch)) if batch else _error(404, "Batch job not found.")

    async def cancel_batch(request: Request) -> Response:
        batch = own.batch(request.path_params["batch_id"])
        if batch is None:
            return _error(404, "Batch job not found.")
        if batch.terminal:
            return _error(400, f"Cannot cancel a batch job in status {_job(batch)['status']}.")
        store.cancel_batch(batch)
        return JSONResponse(_job(batch))

    routes = [
        Route("/v1/files", start_upload, methods=["POST"]),
        Route(TOGETHER_UPLOADS + "{file_id}", put_content, methods=["PUT"]),
        Route("/v1/files/{file_id}/preprocess", preprocess, methods=["POST"]),
        Route("/v1/files", list_files, methods=["GET"]),
        *file_routes(own, _file, _error),
        Route("/v1/batches", create_batch, methods=["POST"]),
        Route("/v1/batches", list_batches, methods=["GET"]),
        Route("/v1/batches/{batch_id}", get_batch, methods=["GET"]),
        Route("/v1/batches/{batch_id}/cancel", cancel_batch, methods=["POST"]),
    ]
    return provider_app(routes, _error)
