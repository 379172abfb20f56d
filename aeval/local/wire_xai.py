"""xAI's Files and Batch API on the local server, under ``/xai`` (xAI's own paths, ``/v1/files``
and ``/v1/batches``, are OpenAI's on this port, with other shapes).

Shapes from xAI's Batch API guide (https://docs.x.ai/developers/advanced-api-usage/batch-api)
as litellm's xAI adapter reads them (``litellm/llms/xai/batches/transformation.py`` and
``files/transformation.py``): a multipart upload at ``/v1/files`` answers a file
``{id, bytes, created_at, filename, purpose}``; listings page by ``pagination_token``
(``{data, pagination_token}``, ``{batches, pagination_token}``); ``POST /v1/batches``
``{name, input_file_id}``; a batch shows counters, not a status (``state.num_requests``,
``num_pending``, ``num_success``, ``num_error``, ``num_cancelled``) and RFC 3339 times
(``create_time``, ``expire_time``, ``cancel_time``; ``cancel_by_xai_message`` when xAI
refused it); ``POST /v1/batches/{id}:cancel``; results page by page from ``GET
/v1/batches/{id}/results`` as ``{batch_request_id, batch_result: {response:
{chat_get_completion: …}} | {error: {code, message}}}``. Requests a batch never ran (it
expired, it was cancelled) have no result.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, Field
from starlette.requests import Request

from aeval.batch.providers.model_reasoning import always_reasons
from aeval.local import batch_api
from aeval.local.batch_api import CHAT_URL, Codec, NewBatch, iso_time
from aeval.local.context import ServerContext
from aeval.local.state import BatchRecord, FileRecord

__all__ = ["XAI_PREFIX", "XaiCodec"]

XAI_PREFIX = "/xai/v1"
_PAGE = 100  # a listing's and a results page's default size
_MOST = 1000


class _Create(BaseModel):
    name: Annotated[str, Field(min_length=1, max_length=256)]
    input_file_id: Annotated[str, Field(min_length=1)]


def _request(line: dict[str, Any]) -> dict[str, Any]:
    """An uploaded OpenAI batch line as the runner's request (a line of another route:
    no body, which fails the batch as xAI refuses the file)."""
    if line.get("url") != CHAT_URL or line.get("method", "POST") != "POST":
        return {"custom_id": line.get("custom_id"), "body": None}
    body = line.get("body")
    # Grok 4 (xAI's always-on reasoners) takes no level yet bills reasoning tokens
    # (tests/conformance/xai): the synthetic models think for it as at medium.
    if isinstance(body, dict) and always_reasons("xai", str(body.get("model"))):
        body = {"reasoning_effort": "medium", **body}
    return {"custom_id": line.get("custom_id"), "body": body}


def _token_page(items: list[Any], query: Mapping[str, str], key: str) -> dict[str, Any]:
    """A page of ``items`` from the opaque ``pagination_token`` (an offset here)."""
    size = batch_api.int_param(query, "limit", _PAGE, _MOST)
    token = query.get("pagination_token") or "0"
    start = int(token) if token.isdigit() else len(items)
    page, following = batch_api.offset_page(items, start, size)
    return {key: page, "pagination_token": None if following is None else str(following)}


class XaiCodec(Codec):
    api = "xai"
    prefix = XAI_PREFIX
    purposes = ("batch", "assistants", "")
    default_purpose = "batch"
    cancel_ended = None  # cancelling an ended batch shows it as it stands
    not_found = "{Kind} {id} not found"
    id_prefixes = ("file_", "batch_")
    operations = (
        *batch_api.file_operations("/files"),
        ("POST", "/batches", "create_batch"),
        ("GET", "/batches", "list_batches"),
        ("GET", "/batches/{batch_id}", "get_batch"),
        ("POST", "/batches/{batch_id}:cancel", "cancel_batch"),
        ("GET", "/batches/{batch_id}/results", "results"),
    )

    def error(self, status: int, message: str, **fields: Any) -> dict[str, Any]:
        # xAI answers errors as {"code", "error"} (gRPC-gateway style).
        return {"code": fields.get("code") or str(status), "error": message}

    def file(self, record: FileRecord, base: str) -> dict[str, Any]:
        return {"id": record.id, "object": "file", "bytes": record.bytes,
                "created_at": record.created_at, "filename": record.filename,
                "purpose": record.purpose}  # fmt: skip

    def batch(self, batch: BatchRecord, base: str) -> dict[str, Any]:
        total = 0 if batch.status == "validating" else batch.total
        done = batch.completed + batch.failed
        cancelled, failed = batch.status == "cancelled", batch.status == "failed"
        asked = batch.status == "cancelling"
        # Requests not yet run: pending while it runs, and still pending once it expired
        # (which only its expire_time, passed, tells); a cancelled batch counts them apart.
        # xAI serves each result as it is done; this server has them only once the batch
        # ended, so one request stays pending until then.
        running = batch.status in ("in_progress", "finalizing", "cancelling")
        pending = max(total - done, 1) if running else 0
        if batch.status == "expired":
            pending = max(total - done, 0)
        message = None
        if failed:
            message = str((batch.errors or [{}])[0].get("message") or "the input was refused")
        expire = batch.expired_at if batch.expired_at is not None else batch.expires_at
        return {
            "batch_id": batch.id, "name": batch.extra.get("name", ""),
            "create_time": iso_time(batch.created_exact or batch.created_at, exact=True),
            "expire_time": iso_time(expire, exact=True),
            "cancel_time": iso_time(
                batch.cancelled_at or batch.cancelling_at or batch.failed_at, exact=True
            ) if cancelled or failed or asked else None,
            "cancel_by_xai_message": message,
            "state": {"num_requests": total, "num_pending": pending,
                      "num_success": batch.completed, "num_error": batch.failed,
                      "num_cancelled": total - done if cancelled else 0},
            "input_file_id": batch.extra.get("input_file_id"),
        }  # fmt: skip

    def page(self, kind: str, items: list[dict[str, Any]], query: Mapping[str, str]) -> Any:
        return _token_page(items, query, "data" if kind == "file" else "batches")

    def deleted(self, kind: str, object_id: str) -> Any:
        return {"id": object_id, "deleted": True}

    async def new_batch(self, ctx: ServerContext, request: Request) -> NewBatch:
        spec = batch_api.validated(_Create, await batch_api.json_body(request))
        record = self.own_file(ctx, spec.input_file_id)
        lines = batch_api.file_requests([ctx.store.file_path(record.id)], _request)
        return NewBatch(lines, extra={"name": spec.name, "input_file_id": record.id})

    async def op_results(self, ctx: ServerContext, request: Request) -> Any:
        batch = self.own_batch(ctx, request.path_params["batch_id"])
        results = []
        for outcome in batch_api.outcomes(ctx.store, batch):
            answer: dict[str, Any]
            if outcome.kind == "succeeded":
                answer = {"response": {"chat_get_completion": dict(outcome.completion)}}
            elif outcome.kind == "failed":
                answer = {"error": {"code": outcome.status, "message": outcome.message}}
            else:  # never run: expired or cancelled before its turn
                continue
            results.append({"batch_request_id": outcome.custom_id, "batch_result": answer})
        return _token_page(results, request.query_params, "results")
