"""Mistral's Files and batch jobs API on the local server (as the ``mistralai`` SDK calls it).

Shapes from mistralai 3.7's ``client/models``: ``batchjob.py`` (``BatchJob``: counts,
``outputs`` for inline requests), ``batchjobstatus.py`` (``QUEUED``, ``RUNNING``,
``SUCCESS``, ``FAILED``, ``TIMEOUT_EXCEEDED``, ``CANCELLATION_REQUESTED``,
``CANCELLED``), ``fileschema.py`` (``sample_type``, ``source``) and
``listbatchjobsresponse.py``/``listfilesresponse.py`` (``data``, ``object``,
``total``; ``page``/``page_size`` paging). ``POST /v1/batch/jobs`` takes
``input_files`` (uploaded with purpose ``batch``, lines ``{"custom_id", "body"}``) or
inline ``requests``, and the ``model``; result files hold OpenAI batch output lines.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import anyio.to_thread
from starlette.requests import Request

from aeval.local import batch_api
from aeval.local.batch_api import CHAT_URL, ApiError, Codec, NewBatch
from aeval.local.context import ServerContext
from aeval.local.state import BatchRecord, FileRecord

__all__ = ["MISTRAL_STATUSES", "MistralCodec"]

MISTRAL_STATUSES = {
    "validating": "QUEUED", "in_progress": "RUNNING", "finalizing": "RUNNING",
    "cancelling": "CANCELLATION_REQUESTED", "completed": "SUCCESS", "failed": "FAILED",
    "expired": "TIMEOUT_EXCEEDED", "cancelled": "CANCELLED",
}  # fmt: skip


def _request(line: object, model: str) -> dict[str, Any]:
    if not isinstance(line, dict) or not isinstance(line.get("body"), dict):
        return {"custom_id": None, "body": None}
    # The job names the model; its lines need not.
    return {"custom_id": line.get("custom_id"), "body": {"model": model, **line["body"]}}


class MistralCodec(Codec):
    api = "mistral"
    statuses = MISTRAL_STATUSES
    cancel_ended = None  # cancelling an ended job answers the job as it stands
    purposes = ("fine-tune", "batch", "ocr")
    default_purpose = "fine-tune"
    invalid = 422
    operations = batch_api.file_operations("/v1/files") + batch_api.batch_operations(
        "/v1/batch/jobs"
    )

    def error(self, status: int, message: str, **fields: Any) -> dict[str, Any]:
        return {"object": "error", "message": message, "type": "invalid_request_error",
                "param": None, "code": None}  # fmt: skip

    def too_large(self, limit: int) -> ApiError:
        return ApiError(413, f"File is over the {limit}-byte limit.")

    def file(self, record: FileRecord, base: str) -> dict[str, Any]:
        output = record.purpose == "batch_output"
        kind = {"batch": "batch_request", "batch_output": "batch_result"}.get(
            record.purpose, "instruct"
        )
        if output and record.filename.endswith("_error.jsonl"):
            kind = "batch_error"
        return {**super().file(record, base), "purpose": "batch" if output else record.purpose,
                "sample_type": kind, "source": "mistral" if output else "upload",
                "num_lines": None, "mimetype": "application/jsonl"}  # fmt: skip

    def listed(self, record: FileRecord, query: Mapping[str, str]) -> bool:
        shown = "batch" if record.purpose == "batch_output" else record.purpose
        return record.purpose in (*self.purposes, "batch_output") and (
            query.get("purpose") in (None, shown)
        )

    def batch(self, batch: BatchRecord, base: str) -> dict[str, Any]:
        return {
            "id": batch.id, "object": "batch", "input_files": batch.extra.get("input_files", []),
            "metadata": batch.metadata, "endpoint": batch.endpoint,
            "model": batch.extra.get("model"), "agent_id": None,
            "output_file": batch.output_file_id, "error_file": batch.error_file_id,
            "errors": [{"message": str(e.get("message", "")), "count": 1}
                       for e in batch.errors or ()],
            "status": self.statuses.get(batch.status, batch.status.upper()),
            "created_at": batch.created_at, "total_requests": batch.total,
            "completed_requests": batch.completed + batch.failed,
            "succeeded_requests": batch.completed, "failed_requests": batch.failed,
            "started_at": batch.in_progress_at, "completed_at": batch.ended_at, "outputs": None,
        }  # fmt: skip

    async def show(self, ctx: ServerContext, batch: BatchRecord, base: str) -> Any:
        """A job's own GET answers its inline requests inline once it has ended (a
        listing leaves them out)."""
        shown = self.batch(batch, base)
        if batch.extra.get("inline") and batch.terminal:
            lines = await anyio.to_thread.run_sync(
                lambda: [o.line for o in batch_api.outcomes(ctx.store, batch)]
            )
            shown["outputs"] = lines
        return shown

    def page(self, kind: str, items: list[dict[str, Any]], query: Mapping[str, str]) -> Any:
        page, size = int(query.get("page") or 0), int(query.get("page_size") or 100)
        data, _ = batch_api.offset_page(items, page * size, size)
        return {"object": "list", "data": data, "total": len(items)}

    async def new_batch(self, ctx: ServerContext, request: Request) -> NewBatch:
        body = await batch_api.json_body(request, status=422)
        endpoint, model, metadata = body.get("endpoint"), body.get("model"), body.get("metadata")
        hours, files, inline = (
            body.get("timeout_hours", 24),
            body.get("input_files"),
            body.get("requests"),
        )
        if endpoint != CHAT_URL:
            raise ApiError(422, f"Invalid endpoint {endpoint!r}: this server runs {CHAT_URL}.")
        if not isinstance(model, str) or not model:
            raise ApiError(422, "A batch job needs a 'model' (agents are not served here).")
        if metadata is not None and not isinstance(metadata, dict):
            raise ApiError(422, "'metadata' must be an object of strings.")
        if not isinstance(hours, int) or hours < 1:
            raise ApiError(422, "'timeout_hours' must be a positive integer.")
        if files and inline:
            raise ApiError(422, "Give either input_files or requests, not both.")
        spec = NewBatch(metadata={str(k): str(v) for k, v in (metadata or {}).items()},
                        extra={"model": model})  # fmt: skip
        if isinstance(files, list) and files:
            for file_id in files:
                if self.own_file(ctx, str(file_id)).purpose != "batch":
                    raise ApiError(422, f"Input file {file_id} does not have purpose 'batch'.")
            spec.extra["input_files"] = [str(f) for f in files]
            paths = [ctx.store.file_path(f) for f in spec.extra["input_files"]]
            spec.requests = batch_api.file_requests(paths, lambda line: _request(line, model))
        elif isinstance(inline, list) and inline:
            spec.requests, spec.extra["inline"] = [_request(i, model) for i in inline], True
        else:
            raise ApiError(422, "A batch job needs input_files or requests.")
        return spec
