"""Mistral's Files and batch jobs routes (as the ``mistralai`` SDK calls them).

``POST /v1/batch/jobs`` takes ``input_files`` (uploaded with purpose
``batch``, lines ``{"custom_id", "body"}``) or inline ``requests`` (the same
objects), the ``model``, ``endpoint``, ``metadata`` and ``timeout_hours``;
``GET /v1/batch/jobs`` pages with ``page``/``page_size`` and says ``total``.
Statuses: ``QUEUED``, ``RUNNING``, ``SUCCESS``, ``FAILED``,
``TIMEOUT_EXCEEDED``, ``CANCELLATION_REQUESTED``, ``CANCELLED``. Result files
hold OpenAI batch output lines; a job given inline requests also answers
them inline (``outputs``) once it has ended.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import anyio.to_thread
from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from aeval.local.provider_batches import (
    BatchStarter,
    ProviderRecords,
    file_routes,
    json_object,
    jsonl_objects,
    provider_app,
    result_lines,
)
from aeval.local.state import BatchRecord, FileRecord, Store

if TYPE_CHECKING:
    from aeval.local.context import ServerContext

__all__ = ["MISTRAL_STATUSES", "mistral_app"]

PROVIDER = "mistral"
ENDPOINTS = ("/v1/chat/completions",)
MISTRAL_STATUSES = {
    "validating": "QUEUED",
    "in_progress": "RUNNING",
    "finalizing": "RUNNING",
    "cancelling": "CANCELLATION_REQUESTED",
    "completed": "SUCCESS",
    "failed": "FAILED",
    "expired": "TIMEOUT_EXCEEDED",
    "cancelled": "CANCELLED",
}


def _error(status: int, message: str) -> JSONResponse:
    body = {"object": "error", "message": message, "type": "invalid_request_error",
            "param": None, "code": None}  # fmt: skip
    return JSONResponse(body, status_code=status)


def _file(record: FileRecord, store: Store) -> dict[str, Any]:
    kind = {"batch": "batch_request", "batch_output": "batch_result"}.get(
        record.purpose, "instruct"
    )
    if record.purpose == "batch_output" and record.filename.endswith("_error.jsonl"):
        kind = "batch_error"
    return {
        "id": record.id,
        "object": "file",
        "bytes": record.bytes,
        "created_at": record.created_at,
        "filename": record.filename,
        "purpose": "batch" if record.purpose == "batch_output" else record.purpose,
        "sample_type": kind,
        "source": "mistral" if record.purpose == "batch_output" else "upload",
        "num_lines": None,
        "mimetype": "application/jsonl",
    }


def _job(batch: BatchRecord, store: Store) -> dict[str, Any]:
    end = batch.completed_at or batch.failed_at or batch.expired_at or batch.cancelled_at
    body: dict[str, Any] = {
        "id": batch.id,
        "object": "batch",
        "input_files": batch.extra.get("input_files", []),
        "metadata": batch.metadata,
        "endpoint": batch.endpoint,
        "model": batch.extra.get("model"),
        "agent_id": None,
        "output_file": batch.output_file_id,
        "error_file": batch.error_file_id,
        "errors": [
            {"message": str(e.get("message", "")), "count": 1} for e in (batch.errors or [])
        ],
        "status": MISTRAL_STATUSES.get(batch.status, batch.status.upper()),
        "created_at": batch.created_at,
        "total_requests": batch.total,
        "completed_requests": batch.completed + batch.failed,
        "succeeded_requests": batch.completed,
        "failed_requests": batch.failed,
        "started_at": batch.in_progress_at,
        "completed_at": end,
    }
    if batch.extra.get("inline") and batch.terminal:
        body["outputs"] = list(result_lines(store, batch))
    return body


def _save(source: IO[bytes], dest: Path) -> None:
    source.seek(0)
    with dest.open("wb") as out:
        shutil.copyfileobj(source, out, 1024 * 1024)


def _file_requests(store: Store, file_ids: list[str], model: str) -> Iterator[tuple[Any, Any]]:
    for file_id in file_ids:
        for _, line in jsonl_objects(store.file_path(file_id)):
            yield _request(line, model)


def _request(line: object, model: str) -> tuple[Any, Any]:
    if not isinstance(line, dict) or not isinstance(line.get("body"), dict):
        return None, None
    body = dict(line["body"])
    body.setdefault("model", model)  # the job names the model; lines need not
    return line.get("custom_id"), body


def mistral_app(ctx: ServerContext) -> Starlette:
    """Mistral's API of one server (errors in its shape)."""
    store = ctx.store
    starter = BatchStarter(store, ctx.runner)
    own = ProviderRecords(store, PROVIDER)

    async def upload(request: Request) -> Response:
        form = await request.form(max_files=1, max_fields=8)
        try:
            upload, purpose = form.get("file"), str(form.get("purpose") or "fine-tune")
            if not isinstance(upload, UploadFile):
                return _error(422, "Field required: 'file'.")
            if purpose not in ("fine-tune", "batch", "ocr"):
                return _error(422, f"Invalid purpose '{purpose}'.")
            if (upload.size or 0) > ctx.limits.max_file_bytes:
                return _error(413, f"File is over the {ctx.limits.max_file_bytes}-byte limit.")
            file_id = str(uuid.uuid4())
            path = store.file_path(file_id)
            await anyio.to_thread.run_sync(_save, upload.file, path)
            record = store.add_file(
                file_id, upload.filename or "upload.jsonl", purpose, counted=True,
                api=PROVIDER,
            )  # fmt: skip
        finally:
            await form.close()
        return JSONResponse(_file(record, store))

    async def list_files(request: Request) -> Response:
        purpose = request.query_params.get("purpose")
        page = int(request.query_params.get("page") or 0)
        size = int(request.query_params.get("page_size") or 100)
        mine = [
            f
            for f in reversed(store.files.values())
            if f.api == PROVIDER
            and f.purpose in ("batch", "fine-tune", "ocr", "batch_output")
            and (purpose is None or _file(f, store)["purpose"] == purpose)
        ]
        data = [_file(f, store) for f in mine[page * size : (page + 1) * size]]
        return JSONResponse({"object": "list", "data": data, "total": len(mine)})

    async def create_job(request: Request) -> Response:
        body = await json_object(request, _error, not_an_object=422)
        if isinstance(body, Response):
            return body
        endpoint, model = body.get("endpoint"), body.get("model")
        if endpoint not in ENDPOINTS:
            return _error(422, f"Invalid endpoint {endpoint!r}: this server runs {ENDPOINTS[0]}.")
        if not isinstance(model, str) or not model:
            return _error(422, "A batch job needs a 'model' (agents are not served here).")
        metadata = body.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            return _error(422, "'metadata' must be an object of strings.")
        hours = body.get("timeout_hours", 24)
        if not isinstance(hours, int) or hours < 1:
            return _error(422, "'timeout_hours' must be a positive integer.")
        files, inline = body.get("input_files"), body.get("requests")
        extra: dict[str, Any] = {"model": model}
        if files and inline:
            return _error(422, "Give either input_files or requests, not both.")
        if isinstance(files, list) and files:
            for file_id in files:
                record = own.file(str(file_id))
                if record is None:
                    return _error(404, f"Input file {file_id} not found.")
                if record.purpose != "batch":
                    return _error(422, f"Input file {file_id} does not have purpose 'batch'.")
            requests: Any = _file_requests(store, [str(f) for f in files], model)
            extra["input_files"] = [str(f) for f in files]
        elif isinstance(inline, list) and inline:
            requests = [_request(item, model) for item in inline]
            extra["inline"] = True
        else:
            return _error(422, "A batch job needs input_files or requests.")
        assert ctx.task_group is not None, "the app runs inside its lifespan"
        batch = await starter.start(
            PROVIDER,
            requests,
            batch_id=str(uuid.uuid4()),
            metadata={str(k): str(v) for k, v in (metadata or {}).items()},
            extra=extra,
            task_group=ctx.task_group,
        )
        return JSONResponse(_job(batch, store))

    async def list_jobs(request: Request) -> Response:
        page = int(request.query_params.get("page") or 0)
        size = int(request.query_params.get("page_size") or 100)
        mine = [b for b in reversed(store.batches.values()) if b.api == PROVIDER]
        # Listings leave inline outputs out; a job's own GET has them.
        data = [{**_job(b, store), "outputs": None} for b in mine[page * size : (page + 1) * size]]
        return JSONResponse({"object": "list", "data": data, "total": len(mine)})

    async def get_job(request: Request) -> Response:
        batch = own.batch(request.path_params["job_id"])
        if batch is None:
            return _error(404, "Batch job not found.")
        return JSONResponse(await anyio.to_thread.run_sync(_job, batch, store))

    async def cancel_job(request: Request) -> Response:
        batch = own.batch(request.path_params["job_id"])
        if batch is None:
            return _error(404, "Batch job not found.")
        if not batch.terminal:
            store.cancel_batch(batch)
        return JSONResponse(_job(batch, store))

    routes = [
        Route("/v1/files", upload, methods=["POST"]),
        Route("/v1/files", list_files, methods=["GET"]),
        *file_routes(own, lambda record: _file(record, store), _error),
        Route("/v1/batch/jobs", create_job, methods=["POST"]),
        Route("/v1/batch/jobs", list_jobs, methods=["GET"]),
        Route("/v1/batch/jobs/{job_id}", get_job, methods=["GET"]),
        Route("/v1/batch/jobs/{job_id}/cancel", cancel_job, methods=["POST"]),
    ]
    return provider_app(routes, _error)
