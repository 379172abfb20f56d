"""Together's Files and Batches API on the local server (as the ``together`` SDK calls it).

Shapes from the together SDK's types (3.1 installed): ``types/file_response.py`` (``FileType``,
``processing_status``), ``types/file_list.py`` (``{"data"}`` only), ``types/batch_job.py``
(upper-case statuses, ``progress`` in percent, no metadata), ``types/batch_create_response.py``
(``{"job", "warning"}``) and ``types/batch_list_response.py`` (a bare list). An upload takes three
calls: ``POST /v1/files`` (a form naming the file, purpose and sha256 checksum) answers ``302``
with a presigned ``Location`` and ``X-Together-File-Id`` (or ``409`` with the ``file_id`` of a file
already uploaded with that checksum and purpose); the content is ``PUT`` there; ``POST
/v1/files/{id}/preprocess`` registers it. Input lines are ``{"custom_id", "body"}``; result files
hold OpenAI batch output lines.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import Response

from aeval.local import batch_api
from aeval.local.batch_api import ApiError, Codec, NewBatch, iso_time
from aeval.local.context import ServerContext
from aeval.local.state import BatchRecord, FileRecord

__all__ = ["TOGETHER_STATUSES", "TOGETHER_UPLOADS", "TogetherCodec"]

TOGETHER_UPLOADS = "/together-uploads/"  # where the presigned upload URL points
# The server's own status names, upper-cased; Together has no finalizing or cancelling.
_OWN = ("validating", "in_progress", "completed", "failed", "expired", "cancelled")
TOGETHER_STATUSES = {s: s.upper() for s in _OWN} | dict.fromkeys(
    ("finalizing", "cancelling"), "IN_PROGRESS")  # fmt: skip


class _Create(BaseModel):  # together 3.1 types/batch_create_params.py; chat only here
    endpoint: Literal["/v1/chat/completions"]
    input_file_id: str


class TogetherCodec(Codec):
    api = "together"
    statuses = TOGETHER_STATUSES
    cancel_ended = "Cannot cancel a batch job in status {status}."
    purposes = ("fine-tune", "calibration", "eval", "batch-api")
    operations = (
        ("PUT", TOGETHER_UPLOADS + "{file_id}", "put_content"),
        ("POST", "/v1/files/{file_id}/preprocess", "preprocess"),
        *batch_api.file_operations("/v1/files", upload="start_upload"),
        *batch_api.batch_operations("/v1/batches"),
    )

    def __init__(self) -> None:
        self._pending: dict[str, tuple[str, str, str]] = {}  # id -> (name, purpose, checksum)
        self._checksums: dict[tuple[str, str], str] = {}  # (checksum, purpose) -> file id

    def error(self, status: int, message: str, **fields: Any) -> dict[str, Any]:
        # The SDK reads a 409's file_id beside the error (together/lib/resources/files.py).
        file_id = fields.pop("file_id", None)
        body = super().error(status, message, **fields)
        return body if file_id is None else {**body, "file_id": file_id}

    def file(self, record: FileRecord, base: str) -> dict[str, Any]:
        # A batch's result files too carry one of the four purposes the SDK's
        # types/file_purpose.py allows ("batch_output" is OpenAI's).
        purpose = "batch-api" if record.purpose == "batch_output" else record.purpose
        return {**super().file(record, base), "purpose": purpose, "FileType": "jsonl",
                "processing_status": "COMPLETED"}  # fmt: skip

    def batch(self, batch: BatchRecord, base: str) -> dict[str, Any]:
        error = str(batch.errors[0].get("message", "")) if batch.errors else None
        done = batch.completed + batch.failed
        return {
            "id": batch.id, "user_id": "local-user",
            "input_file_id": batch.extra.get("input_file_id", ""),
            "file_size_bytes": batch.extra.get("file_size_bytes", 0),
            "status": self.statuses.get(batch.status, batch.status.upper()),
            "job_deadline": iso_time(batch.expires_at), "created_at": iso_time(batch.created_at),
            "endpoint": batch.endpoint,
            "progress": round(100.0 * done / batch.total, 2) if batch.total else 0.0,
            "model_id": batch.model, "output_file_id": batch.output_file_id,
            "error_file_id": batch.error_file_id,
            "error": error if batch.status == "failed" else None,
            "completed_at": iso_time(batch.ended_at),
        }  # fmt: skip

    def page(self, kind: str, items: list[dict[str, Any]], query: Mapping[str, str]) -> Any:
        return {"data": items} if kind == "file" else items

    def deleted(self, kind: str, object_id: str) -> Any:
        return {"id": object_id, "deleted": True}  # types/file_delete_response.py

    def created(self, shown: Any) -> Any:
        return {"job": shown, "warning": None}

    async def op_start_upload(self, ctx: ServerContext, request: Request) -> Response:
        form = await request.form()
        try:
            name, purpose = str(form.get("file_name") or ""), str(form.get("purpose") or "")
            checksum = str(form.get("checksum") or "")
        finally:
            await form.close()
        if not name:
            raise ApiError(400, "Missing required field 'file_name'.")
        if purpose not in self.purposes:
            raise ApiError(400, f"Invalid purpose '{purpose}'.")
        existing = self._checksums.get((checksum, purpose))
        if checksum and existing is not None and existing in ctx.store.files:
            raise ApiError(409, "File already exists.", file_id=existing)
        file_id = f"file-{uuid.uuid4()}"
        self._pending[file_id] = (name, purpose, checksum)
        # The server's own address, never the client's Host header: the client PUTs the file there.
        host, port = request.scope.get("server") or ("127.0.0.1", 80)
        shown = f"[{host}]" if ":" in host else host
        location = f"{request.url.scheme}://{shown}:{port}{TOGETHER_UPLOADS}{file_id}"
        headers = {"Location": location, "X-Together-File-Id": file_id}
        return Response(status_code=302, headers=headers)

    async def op_put_content(self, ctx: ServerContext, request: Request) -> Response:
        file_id, limit = request.path_params["file_id"], ctx.limits.file_bytes(self.api)
        if file_id not in self._pending:
            raise ApiError(404, f"No pending upload {file_id}.")
        path, size = ctx.store.file_path(file_id), 0
        with path.open("wb") as out:
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    break
                out.write(chunk)
        if size > limit:
            path.unlink(missing_ok=True)
            raise ApiError(413, f"File is over the {limit}-byte limit.")
        return Response(status_code=200)

    async def op_preprocess(self, ctx: ServerContext, request: Request) -> Any:
        file_id = request.path_params["file_id"]
        spec = self._pending.pop(file_id, None)
        if spec is None or not ctx.store.file_path(file_id).exists():
            raise ApiError(404, f"File {file_id} was not uploaded.")
        name, purpose, checksum = spec
        record = ctx.store.add_file(file_id, name, purpose, counted=True, api=self.api)
        if checksum:
            self._checksums[(checksum, purpose)] = file_id
        return self.file(record, "")

    async def new_batch(self, ctx: ServerContext, request: Request) -> NewBatch:
        spec = batch_api.validated(_Create, await batch_api.json_body(request))
        try:
            record = self.own_file(ctx, spec.input_file_id)
        except ApiError:
            raise ApiError(404, f"Input file {spec.input_file_id} not found.") from None
        if record.purpose != "batch-api":
            raise ApiError(
                400, f"The input file must have purpose 'batch-api', not '{record.purpose}'."
            )
        extra = {"input_file_id": record.id, "file_size_bytes": record.bytes}
        lines = batch_api.file_requests([ctx.store.file_path(record.id)], lambda line: {
            "custom_id": line.get("custom_id"), "body": line.get("body")})  # fmt: skip
        return NewBatch(lines, extra=extra)
