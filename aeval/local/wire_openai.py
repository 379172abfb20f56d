"""OpenAI's Files and Batches API on the local server, and its Azure and Groq shapes.

Objects follow the openai SDK's models field for field (``openai.types.Batch``,
``openai.types.FileObject``, ``openai.types.FileDeleted``; openai 3.57 installed); listings are the
cursor pages its ``AsyncCursorPage`` follows (``after`` = the last id seen, ``has_more``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, TypeAlias

from pydantic import BaseModel, Field
from starlette.requests import Request

from aeval.local import batch_api
from aeval.local.batch_api import ApiError, Codec, NewBatch
from aeval.local.context import ServerContext
from aeval.local.state import BatchRecord, FileRecord

__all__ = ["AzureCodec", "GroqCodec", "OpenAICodec", "openai_batch"]

FILE_PURPOSES = ("assistants", "batch", "fine-tune", "vision", "user_data", "evals",
                 "batch_output")  # fmt: skip
_OPERATIONS = batch_api.file_operations("/files") + batch_api.batch_operations("/batches")


# The fields an ``openai.types.Batch`` shares with the server's batch record, by name.
_SAME = ("id", "endpoint", "model", "input_file_id", "completion_window", "status",
         "output_file_id", "error_file_id", "created_at", "in_progress_at", "expires_at",
         "finalizing_at", "completed_at", "failed_at", "expired_at", "cancelling_at",
         "cancelled_at", "metadata")  # fmt: skip


def openai_batch(batch: BatchRecord) -> dict[str, Any]:
    """A batch as ``openai.types.Batch``."""
    errors = {"object": "list", "data": batch.errors} if batch.errors is not None else None
    usage = {"input_tokens": batch.input_tokens, "input_tokens_details": {"cached_tokens": 0},
             "output_tokens": batch.output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": batch.input_tokens + batch.output_tokens}  # fmt: skip
    counts = {"total": batch.total, "completed": batch.completed, "failed": batch.failed}
    return {"object": "batch", **{name: getattr(batch, name) for name in _SAME},
            "errors": errors, "request_counts": counts, "usage": usage}  # fmt: skip


_Key: TypeAlias = Annotated[str, Field(max_length=64)]
_Value: TypeAlias = Annotated[str, Field(max_length=512)]


class _Create(BaseModel):
    """A create call's body and its limits (openai 3.57 ``types/batch_create_params.py``)."""

    input_file_id: Annotated[str, Field(min_length=1)]
    endpoint: Literal["/v1/chat/completions", "/v1/responses"]
    completion_window: str
    metadata: Annotated[dict[_Key, _Value], Field(max_length=16)] | None = None


class OpenAICodec(Codec):
    """``/v1/files`` and ``/v1/batches``; a batch reads its uploaded file as it is."""

    api = "openai"
    prefix = "/v1"
    operations = _OPERATIONS
    purposes = FILE_PURPOSES
    not_found = "No such {kind}: '{id}'"
    id_prefixes = ("file-", "batch_")
    windows = "'24h'"

    def window_ok(self, window: str) -> bool:
        return window == "24h"

    def file(self, record: FileRecord, base: str) -> dict[str, Any]:
        return {**super().file(record, base), "status": "processed", "status_details": None,
                "expires_at": None}  # fmt: skip

    def batch(self, batch: BatchRecord, base: str) -> dict[str, Any]:
        return openai_batch(batch)

    def listed(self, record: FileRecord, query: Mapping[str, str]) -> bool:
        return query.get("purpose") in (None, record.purpose)

    def page(self, kind: str, items: list[dict[str, Any]], query: Mapping[str, str]) -> Any:
        if kind == "file":
            limit = batch_api.int_param(query, "limit", 10000, 10000)
            if query.get("order", "desc") != "desc":
                items.reverse()
        else:
            limit = batch_api.int_param(query, "limit", 20, 100)
        return {"object": "list", **batch_api.cursor_page(items, query.get("after"), None, limit)}

    async def new_batch(self, ctx: ServerContext, request: Request) -> NewBatch:
        spec = batch_api.validated(_Create, await batch_api.json_body(request))
        if not self.window_ok(spec.completion_window):
            raise ApiError(400, f"Invalid value for 'completion_window': "
                           f"'{spec.completion_window}'. Supported values are: {self.windows}.",
                           param="completion_window")  # fmt: skip
        record = self.own_file(ctx, spec.input_file_id)
        if record.purpose != "batch":
            raise ApiError(400, f"The input file {record.id} must have purpose 'batch', not "
                           f"'{record.purpose}'.", param="input_file_id")  # fmt: skip
        return NewBatch(input_file_id=record.id, metadata=spec.metadata,
                        window=spec.completion_window, endpoint=spec.endpoint)  # fmt: skip


class AzureCodec(OpenAICodec):
    """Azure OpenAI's shape of the same API (the same files and batches), as the SDK's
    Azure client sends it: under ``/openai``, with an ``api-version`` query parameter."""

    prefix = "/openai"

    def admit(self, request: Request) -> None:
        if not request.query_params.get("api-version"):
            raise ApiError(400, "Missing required query parameter 'api-version'.",
                           param="api-version", code="MissingApiVersionParameter")  # fmt: skip


class GroqCodec(OpenAICodec):
    """Groq's OpenAI-compatible Batch API under ``/openai/v1``, whose completion windows
    run from 24 h to 7 d (``"24h"``, ``"36h"``, ``"7d"``)."""

    api = "groq"
    prefix = "/openai/v1"
    windows = "'24h' to '7d'"

    def window_ok(self, window: str) -> bool:
        unit, count = window[-1:], window[:-1]
        if unit not in ("h", "d") or not count.isdigit():
            return False
        return 24 <= int(count) * (24 if unit == "d" else 1) <= 7 * 24
