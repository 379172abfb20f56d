"""Mistral's Files and batch jobs API on the local server (as the ``mistralai`` SDK calls it).

Shapes from mistralai 3.7's ``client/models``: ``batchjob.py`` (``BatchJob``: counts, ``outputs``
for inline requests), ``batchjobstatus.py`` (``QUEUED``, ``RUNNING``, ``SUCCESS``, ``FAILED``,
``TIMEOUT_EXCEEDED``, ``CANCELLATION_REQUESTED``, ``CANCELLED``), ``fileschema.py``
(``sample_type``, ``source``) and ``listbatchjobsresponse.py``/``listfilesresponse.py`` (``data``,
``object``, ``total``; ``page``/``page_size`` paging). ``POST /v1/batch/jobs`` takes
``input_files`` (uploaded with purpose ``batch``, lines ``{"custom_id", "body"}``) or inline
``requests``, and the ``model``; result files hold OpenAI batch output lines.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

import anyio.to_thread
from pydantic import BaseModel, Field, StrictInt
from starlette.requests import Request

from aeval.local import batch_api
from aeval.local.batch_api import ApiError, Codec, NewBatch
from aeval.local.context import ServerContext
from aeval.local.state import BatchRecord, FileRecord

__all__ = ["MISTRAL_STATUSES", "MistralCodec"]

MISTRAL_STATUSES = {
    "validating": "QUEUED", "in_progress": "RUNNING", "finalizing": "RUNNING",
    "cancelling": "CANCELLATION_REQUESTED", "completed": "SUCCESS", "failed": "FAILED",
    "expired": "TIMEOUT_EXCEEDED", "cancelled": "CANCELLED",
}  # fmt: skip


class _Job(BaseModel):
    """A job's create body (mistralai ``models/createbatchjobrequest.py``), naming a model."""

    endpoint: Literal["/v1/chat/completions"]
    model: Annotated[str, Field(min_length=1)]
    metadata: dict[str, Any] | None = None
    timeout_hours: Annotated[StrictInt, Field(ge=1)] = 24
    input_files: list[str] | None = None
    requests: list[Any] | None = None


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
        size = batch_api.int_param(query, "page_size", 100, 1 << 31, status=self.invalid)
        page = batch_api.int_param(query, "page", 0, 1 << 31, least=0, status=self.invalid)
        data, _ = batch_api.offset_page(items, page * size, size)
        return {"object": "list", "data": data, "total": len(items)}

    async def new_batch(self, ctx: ServerContext, request: Request) -> NewBatch:
        job = batch_api.validated(_Job, await batch_api.json_body(request, status=422), 422)
        if bool(job.input_files) == bool(job.requests):
            raise ApiError(422, "A batch job needs either input_files or requests.")
        spec = NewBatch(metadata={str(k): str(v) for k, v in (job.metadata or {}).items()},
                        extra={"model": job.model})  # fmt: skip
        if job.input_files:
            for file_id in job.input_files:
                if self.own_file(ctx, file_id).purpose != "batch":
                    raise ApiError(422, f"Input file {file_id} does not have purpose 'batch'.")
            spec.extra["input_files"] = job.input_files
            paths = [ctx.store.file_path(f) for f in job.input_files]
            spec.requests = batch_api.file_requests(paths, lambda line: _request(line, job.model))
        else:
            spec.requests = [_request(line, job.model) for line in job.requests or ()]
            spec.extra["inline"] = True
        return spec
