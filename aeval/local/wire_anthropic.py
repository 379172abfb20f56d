"""Anthropic's Message Batches API on the local server (as the ``anthropic`` SDK calls it).

Requests come inline in the create call; results are JSONL, not in request order; the routes are
:attr:`AnthropicCodec.operations`. Shapes from the anthropic SDK's types (2.14 installed):
``types/messages/message_batch.py`` (``processing_status``, ``request_counts``, RFC 3339 times),
``message_batch_individual_response.py`` and its ``succeeded``/``errored``/``canceled``/``expired``
results, and ``types/shared/error_response.py`` (``{"type": "error", "error": {"type",
"message"}}``). Counts stay in ``processing`` until the batch ends, as the real API's do. A Message
Batch carries no metadata, so the responders cannot tell a run's trials apart.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Annotated, Any

import anyio.to_thread
from pydantic import BaseModel, Field, StrictInt
from starlette.requests import Request
from starlette.responses import StreamingResponse

from aeval.batch.providers.anthropic_limits import MAX_BATCH_BYTES, MAX_BATCH_REQUESTS
from aeval.local import batch_api
from aeval.local.batch_api import ApiError, Codec, NewBatch, Outcome, iso_time
from aeval.local.chat import content_text
from aeval.local.context import ServerContext
from aeval.local.state import BatchRecord, Store
from aeval.local.wire import random_hex

__all__ = ["AnthropicCodec"]

_AEVAL_TAG = re.compile(r"[0-9a-f]{12}_")
_STOP = {"stop": "end_turn", "length": "max_tokens", "content_filter": "refusal"}
_ERROR_TYPES = {
    400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
    404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
    503: "overloaded_error", 529: "overloaded_error",
}  # fmt: skip


class _Params(BaseModel):
    model: Annotated[str, Field(min_length=1)]
    max_tokens: Annotated[StrictInt, Field(ge=1)]
    messages: Annotated[list[dict[str, Any]], Field(min_length=1)]
    system: Any = None
    temperature: Annotated[float, Field(ge=0, le=1)] | None = None
    top_p: float | None = None
    output_config: dict[str, Any] = {}
    thinking: dict[str, Any] = {}


class _Request(BaseModel):
    custom_id: Annotated[str, Field(pattern=r"^[a-zA-Z0-9_-]{1,64}$")]
    params: _Params


class _Create(BaseModel):
    requests: Annotated[list[_Request], Field(min_length=1, max_length=MAX_BATCH_REQUESTS)]


def _lines(requests: list[_Request]) -> Iterator[dict[str, Any]]:
    """The runner's lines for a create call's requests."""
    for request in requests:
        params, custom_id = request.params, request.custom_id
        system = [] if params.system is None else [("system", params.system)]
        asked = system + [(m.get("role", "user"), m.get("content")) for m in params.messages]
        messages = [{"role": role, "content": content_text(said)} for role, said in asked]
        body = {"model": params.model, "messages": messages, "max_tokens": params.max_tokens}
        body |= params.model_dump(include={"temperature", "top_p"}, exclude_none=True)
        if "effort" in params.output_config:  # as synthetic.thinking_tokens reads a chat body
            body["reasoning_effort"] = params.output_config["effort"]
        if params.thinking.get("type") == "enabled":
            body["thinking_budget"] = params.thinking.get("budget_tokens")
        # The row the responders answer: the id after the tag aeval's adapter puts in front.
        row_id = custom_id[13:] if _AEVAL_TAG.match(custom_id) else custom_id
        yield {"custom_id": custom_id, "row_id": row_id, "body": body}


def _check_create(body: dict[str, Any]) -> list[_Request]:
    requests = batch_api.validated(_Create, body).requests
    seen: set[str] = set()
    for number, request in enumerate(requests):
        if request.custom_id in seen:
            raise ApiError(400, f"requests.{number}.custom_id: Duplicate custom_id "
                           f"'{request.custom_id}'")  # fmt: skip
        seen.add(request.custom_id)
    return requests


def _errored(type_: str, message: str) -> dict[str, Any]:
    error = {"type": type_, "message": message}
    return {"type": "errored", "error": {"type": "error", "error": error}}


def _result(outcome: Outcome) -> dict[str, Any]:
    if outcome.kind in ("expired", "cancelled"):
        return {"type": "expired" if outcome.kind == "expired" else "canceled"}
    if outcome.kind == "failed":
        return _errored(_ERROR_TYPES.get(outcome.status, "api_error"), outcome.message or "error")
    body = outcome.completion
    choice, usage = (body.get("choices") or [{}])[0], body.get("usage") or {}
    thought = (usage.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0
    # anthropic 2.14 types/thinking_block.py: {"type": "thinking", "thinking", "signature"}
    thinking = [{"type": "thinking", "signature": random_hex(32),
                 "thinking": "I extend the largest example."}] if thought else []  # fmt: skip
    message = {
        "id": f"msg_{random_hex(24)}", "type": "message", "role": "assistant",
        "model": body.get("model"),
        "content": [*thinking, {"type": "text",
                                "text": (choice.get("message") or {}).get("content") or ""}],
        "stop_reason": _STOP.get(choice.get("finish_reason"), "end_turn"),
        "stop_sequence": None,
        "usage": {"input_tokens": usage.get("prompt_tokens", 0),
                  "output_tokens": usage.get("completion_tokens", 0),
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
                  | ({"output_tokens_details": {"thinking_tokens": thought}} if thought else {}),
    }  # fmt: skip
    return {"type": "succeeded", "message": message}


def _results(store: Store, batch: BatchRecord) -> Iterator[bytes]:
    """A batch's results, line by line; refused as a whole, every request errored with why."""
    if batch.status == "failed":
        why = "; ".join(str(e.get("message")) for e in batch.errors or ()) or "batch failed"
        asked = batch_api.jsonl_objects(store.file_path(batch.input_file_id))
        results = ((line["custom_id"], _errored("api_error", why)) for line in asked)
    else:
        results = ((o.custom_id, _result(o)) for o in batch_api.outcomes(store, batch))
    for custom_id, result in results:
        yield (json.dumps({"custom_id": custom_id, "result": result}) + "\n").encode()


class AnthropicCodec(Codec):
    api = "anthropic"
    cancel_ended = "Message Batch {id} has already ended"
    delete_running = "Message Batch {id} is still processing: cancel it before deleting it"
    not_found = "No Message Batch with id '{id}'"
    id_prefixes = (None, "msgbatch_")
    create_limit = MAX_BATCH_BYTES
    operations = (
        *batch_api.batch_operations("/v1/messages/batches"),
        ("DELETE", "/v1/messages/batches/{batch_id}", "delete_batch"),
        ("GET", "/v1/messages/batches/{batch_id}/results", "results"),
    )

    def error(self, status: int, message: str, **fields: Any) -> dict[str, Any]:
        type_ = fields.get("type") or _ERROR_TYPES.get(status, "api_error")
        return {"type": "error", "error": {"type": type_, "message": message}}

    def create_too_large(self) -> ApiError:
        return ApiError(413, "Request exceeds the 256 MB limit")

    def headers(self) -> dict[str, str]:
        return {"request-id": f"req_{random_hex(24)}"}

    def batch(self, batch: BatchRecord, base: str) -> dict[str, Any]:
        counts = dict.fromkeys(("processing", "succeeded", "errored", "canceled", "expired"), 0)
        if not batch.terminal:
            counts["processing"] = batch.total
        elif batch.status == "failed":  # refused as a whole: every request errored
            counts["errored"] = batch.total
        else:
            counts["succeeded"], counts["errored"] = batch.completed, batch.failed
            rest = max(0, batch.total - batch.completed - batch.failed)
            counts["canceled" if batch.status == "cancelled" else "expired"] = rest
        status = "canceling" if batch.status == "cancelling" else "in_progress"
        return {
            "id": batch.id, "type": "message_batch",
            "processing_status": "ended" if batch.terminal else status,
            "request_counts": counts,
            "ended_at": iso_time(batch.ended_at) if batch.terminal else None,
            "created_at": iso_time(batch.created_exact or batch.created_at, exact=True),
            "expires_at": iso_time(batch.expires_at), "archived_at": None,
            "cancel_initiated_at": iso_time(batch.cancelling_at),
            "results_url": f"{base}/v1/messages/batches/{batch.id}/results"
            if batch.terminal else None,
        }  # fmt: skip

    def page(self, kind: str, items: list[dict[str, Any]], query: Mapping[str, str]) -> Any:
        limit = batch_api.int_param(query, "limit", 20, 1000)
        after, before = query.get("after_id") or None, query.get("before_id")
        return batch_api.cursor_page(items, after, before, limit)

    def deleted(self, kind: str, object_id: str) -> Any:
        return {"id": object_id, "type": "message_batch_deleted"}

    async def new_batch(self, ctx: ServerContext, request: Request) -> NewBatch:
        body = await batch_api.json_body(request)  # its size held by create_limit
        requests = await anyio.to_thread.run_sync(_check_create, body)
        return NewBatch(_lines(requests), metadata={"api": self.api})

    async def op_results(self, ctx: ServerContext, request: Request) -> StreamingResponse:
        batch = self.own_batch(ctx, request.path_params["batch_id"])
        if not batch.terminal:
            raise ApiError(400, f"Message Batch {batch.id} has not ended yet")
        return StreamingResponse(_results(ctx.store, batch), media_type="application/binary")
