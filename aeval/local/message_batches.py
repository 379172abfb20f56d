"""Anthropic's Message Batches API on the local server: the real paths, the same batches.

``POST /v1/messages/batches`` (requests inline), ``GET /v1/messages/batches``
(newest first, ``after_id``/``before_id`` pages), ``GET …/{id}``, ``POST
…/{id}/cancel``, ``GET …/{id}/results`` (JSONL, one line per request, not in
request order) and ``DELETE …/{id}``, with Anthropic's shapes and error bodies
(``{"type": "error", "error": {"type", "message"}}``).

A created Message Batch becomes one of the server's batches (a
:class:`~aeval.local.state.BatchRecord` with ``api="anthropic"``): its requests
are written as an OpenAI-style input file (the ``system`` text as a system
message), so the same responders, lifecycle timing and batch-level faults
apply, and the fault layer's HTTP faults (``drop`` after a create included)
match these paths like any other. What differs is only the view: counts stay
in ``processing`` until the batch ends (as the real API's do), and results are
converted to ``succeeded``/``errored``/``canceled``/``expired`` lines when read.
A Message Batch carries no metadata, so the responders cannot tell a run's
trials apart: every trial is answered as an item's usual answer.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio.to_thread
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from aeval.local.state import BatchRecord, Store, new_id
from aeval.local.wire import random_hex

__all__ = ["ANTHROPIC_API", "MAX_BATCH_BYTES", "MAX_BATCH_REQUESTS", "message_batch_routes"]

ANTHROPIC_API = "anthropic"
MAX_BATCH_REQUESTS = 100_000
MAX_BATCH_BYTES = 256 * 1000 * 1000
_CUSTOM_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_AEVAL_TAG = re.compile(r"[0-9a-f]{12}_")
_ENDPOINT = "/v1/chat/completions"  # what the internal batch answers
_STOP = {"stop": "end_turn", "length": "max_tokens", "content_filter": "refusal"}
# An HTTP status of a failed request, as the error type Anthropic names it.
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
}


def anthropic_error(status: int, type_: str, message: str) -> JSONResponse:
    body = {"type": "error", "error": {"type": type_, "message": message}}
    return JSONResponse(body, status_code=status, headers={"request-id": f"req_{random_hex(24)}"})


class _Invalid(Exception):
    """A create request the API refuses (400 invalid_request_error)."""


def _rfc3339(epoch: float | None) -> str | None:
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z")


def _ended_at(batch: BatchRecord) -> int | None:
    return batch.completed_at or batch.expired_at or batch.cancelled_at or batch.failed_at


def message_batch(batch: BatchRecord, root: str) -> dict[str, Any]:
    """The MessageBatch object of one of the server's batches."""
    counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
    if not batch.terminal:
        counts["processing"] = batch.total
    elif batch.status == "failed":  # refused as a whole: every request errored
        counts["errored"] = batch.total
    else:
        counts["succeeded"], counts["errored"] = batch.completed, batch.failed
        rest = max(0, batch.total - batch.completed - batch.failed)
        counts["canceled" if batch.status == "cancelled" else "expired"] = rest
    if batch.terminal:
        status = "ended"
    elif batch.status == "cancelling":
        status = "canceling"
    else:
        status = "in_progress"
    ended = batch.terminal
    return {
        "id": batch.id,
        "type": "message_batch",
        "processing_status": status,
        "request_counts": counts,
        "ended_at": _rfc3339(_ended_at(batch)) if ended else None,
        "created_at": _rfc3339(batch.created_exact or batch.created_at),
        "expires_at": _rfc3339(batch.expires_at),
        "archived_at": None,
        "cancel_initiated_at": _rfc3339(batch.cancelling_at),
        "results_url": f"{root}/v1/messages/batches/{batch.id}/results" if ended else None,
    }


def _text(content: Any) -> str:
    """A message's content (a string, or blocks of which the text ones count)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            b["text"]
            for b in content
            if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
        )
    return ""


def _check_request(number: int, request: Any, seen: set[str]) -> tuple[str, dict[str, Any]]:
    where = f"requests.{number}"
    if not isinstance(request, dict):
        raise _Invalid(f"{where}: Input should be an object")
    custom_id = request.get("custom_id")
    if not isinstance(custom_id, str) or not _CUSTOM_ID.fullmatch(custom_id):
        raise _Invalid(f"{where}.custom_id: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'")
    if custom_id in seen:
        raise _Invalid(f"{where}.custom_id: Duplicate custom_id '{custom_id}'")
    seen.add(custom_id)
    params = request.get("params")
    if not isinstance(params, dict):
        raise _Invalid(f"{where}.params: Field required")
    for name in ("model", "max_tokens", "messages"):
        if name not in params:
            raise _Invalid(f"{where}.params.{name}: Field required")
    max_tokens = params["max_tokens"]
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise _Invalid(f"{where}.params.max_tokens: Input should be a positive integer")
    if not isinstance(params["model"], str) or not params["model"]:
        raise _Invalid(f"{where}.params.model: Input should be a string")
    if not isinstance(params["messages"], list) or not params["messages"]:
        raise _Invalid(f"{where}.params.messages: List should have at least 1 item")
    temperature = params.get("temperature")
    if temperature is not None and not (
        isinstance(temperature, int | float) and 0 <= temperature <= 1
    ):
        raise _Invalid(f"{where}.params.temperature: Input should be between 0 and 1")
    return custom_id, params


def _row_id(custom_id: str) -> str:
    """The dataset row a custom id names, for the responders: the id after the tag aeval's
    Anthropic adapter puts in front (12 hex digits and ``_``), else the id itself."""
    return custom_id[13:] if _AEVAL_TAG.match(custom_id) else custom_id


def _internal_body(params: dict[str, Any]) -> dict[str, Any]:
    """The chat-completions body the responders read, from Messages API params."""
    messages: list[dict[str, Any]] = []
    system = params.get("system")
    if system is not None:
        messages.append({"role": "system", "content": _text(system)})
    for m in params["messages"]:
        if isinstance(m, dict):
            messages.append({"role": m.get("role", "user"), "content": _text(m.get("content"))})
    body: dict[str, Any] = {"model": params["model"], "messages": messages}
    body["max_tokens"] = params["max_tokens"]
    for name in ("temperature", "top_p"):
        if name in params:
            body[name] = params[name]
    return body


def _write_input(raw: bytes, path: Path) -> tuple[int, str]:
    """Check a create call's body and write its requests as the internal input file;
    (requests, model). Runs in a worker thread: a 100,000-request body is parsed here.

    :raises _Invalid: what the API would say in its 400.
    """
    try:
        doc = json.loads(raw)
    except ValueError as err:
        raise _Invalid(f"The request body is not valid JSON: {err}") from err
    requests = doc.get("requests") if isinstance(doc, dict) else None
    if not isinstance(requests, list):
        raise _Invalid("requests: Field required")
    if not requests:
        raise _Invalid("requests: List should have at least 1 item")
    if len(requests) > MAX_BATCH_REQUESTS:
        raise _Invalid(f"requests: a batch may hold at most {MAX_BATCH_REQUESTS:,} requests")
    seen: set[str] = set()
    model = ""
    with path.open("w", encoding="utf-8") as out:
        for number, request in enumerate(requests):
            custom_id, params = _check_request(number, request, seen)
            model = model or params["model"]
            line = {
                "custom_id": custom_id,
                "row_id": _row_id(custom_id),
                "method": "POST",
                "url": _ENDPOINT,
                "body": _internal_body(params),
            }
            out.write(json.dumps(line, ensure_ascii=False))
            out.write("\n")
    return len(requests), model


def _result(raw: bytes) -> str | None:
    """One internal output or error line as a Message Batch result line."""
    try:
        obj = json.loads(raw)
    except ValueError:
        return None
    custom_id = obj.get("custom_id")
    error = obj.get("error")
    response = obj.get("response") or {}
    result: dict[str, Any]
    if error is not None:
        code = error.get("code") if isinstance(error, dict) else None
        if code == "batch_expired":
            result = {"type": "expired"}
        elif code == "batch_cancelled":
            result = {"type": "canceled"}
        else:
            message = error.get("message") if isinstance(error, dict) else str(error)
            result = _errored("api_error", message or "error")
    elif response.get("status_code") == 200:
        body = response.get("body") or {}
        choice = (body.get("choices") or [{}])[0]
        usage = body.get("usage") or {}
        text = (choice.get("message") or {}).get("content") or ""
        result = {
            "type": "succeeded",
            "message": {
                "id": f"msg_{random_hex(24)}",
                "type": "message",
                "role": "assistant",
                "model": body.get("model"),
                "content": [{"type": "text", "text": text}],
                "stop_reason": _STOP.get(choice.get("finish_reason"), "end_turn"),
                "stop_sequence": None,
                "usage": {
                    "input_tokens": usage.get("prompt_tokens", 0),
                    "output_tokens": usage.get("completion_tokens", 0),
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                },
            },
        }
    else:
        status = response.get("status_code") or 500
        inner = ((response.get("body") or {}).get("error")) or {}
        result = _errored(_ERROR_TYPES.get(status, "api_error"), inner.get("message") or "error")
    return json.dumps({"custom_id": custom_id, "result": result})


def _errored(type_: str, message: str) -> dict[str, Any]:
    return {
        "type": "errored",
        "error": {"type": "error", "error": {"type": type_, "message": message}},
    }


def _results(store: Store, batch: BatchRecord) -> Iterator[bytes]:
    """A batch's results, streamed line by line from its output and error files."""
    if batch.status == "failed":  # refused as a whole: every request errored with why
        why = "; ".join(str(e.get("message")) for e in batch.errors or ()) or "batch failed"
        with store.file_path(batch.input_file_id).open("rb") as fh:
            for raw in fh:
                if raw.strip():
                    cid = json.loads(raw).get("custom_id")
                    line = {"custom_id": cid, "result": _errored("api_error", why)}
                    yield (json.dumps(line) + "\n").encode()
        return
    for file_id in (batch.output_file_id, batch.error_file_id):
        if file_id is None or file_id not in store.files:
            continue
        with store.file_path(file_id).open("rb") as fh:
            for raw in fh:
                if raw.strip():
                    converted = _result(raw)
                    if converted is not None:
                        yield (converted + "\n").encode()


def message_batch_routes(
    store: Store, start: Callable[[BatchRecord], None], root_of: Callable[[Request], str]
) -> list[Route]:
    """The Message Batches routes of one server.

    :param start: runs a new batch through its lifecycle (the server's runner).
    :param root_of: the server's root URL as a request reached it (for ``results_url``).
    """

    def _get(request: Request) -> BatchRecord | None:
        batch = store.batches.get(request.path_params["batch_id"])
        return batch if batch is not None and batch.api == ANTHROPIC_API else None

    def _missing(request: Request) -> JSONResponse:
        batch_id = request.path_params["batch_id"]
        return anthropic_error(404, "not_found_error", f"No Message Batch with id {batch_id!r}")

    async def create(request: Request) -> Response:
        declared = int(request.headers.get("content-length") or 0)
        if declared > MAX_BATCH_BYTES:
            return anthropic_error(413, "request_too_large", "Request exceeds the 256 MB limit")
        raw = await request.body()
        if len(raw) > MAX_BATCH_BYTES:
            return anthropic_error(413, "request_too_large", "Request exceeds the 256 MB limit")
        file_id, path = store.new_file_path()
        try:
            total, model = await anyio.to_thread.run_sync(_write_input, raw, path)
        except _Invalid as err:
            path.unlink(missing_ok=True)
            return anthropic_error(400, "invalid_request_error", str(err))
        store.add_file(file_id, "message_batch_requests.jsonl", "batch", counted=False)
        now = time.time()
        batch = BatchRecord(
            id=new_id("msgbatch_"),
            input_file_id=file_id,
            endpoint=_ENDPOINT,
            completion_window="24h",
            created_at=int(now),
            metadata={"api": ANTHROPIC_API},
            model=model,
            total=total,
            api=ANTHROPIC_API,
            created_exact=now,
            extra={"max_requests": MAX_BATCH_REQUESTS},
        )
        store.add_batch(batch)
        start(batch)
        return JSONResponse(message_batch(batch, root_of(request)))

    async def list_batches(request: Request) -> Response:
        try:
            limit = int(request.query_params.get("limit", "20"))
        except ValueError:
            limit = 0
        if not 1 <= limit <= 1000:
            return anthropic_error(400, "invalid_request_error", "limit: between 1 and 1000")
        root = root_of(request)
        newest_first = [
            b
            for b in sorted(store.batches.values(), key=lambda b: -b.seq)
            if b.api == ANTHROPIC_API
        ]
        ids = [b.id for b in newest_first]
        after, before = request.query_params.get("after_id"), request.query_params.get("before_id")
        if before is not None:
            end = ids.index(before) if before in ids else 0
            page = newest_first[max(0, end - limit) : end]
            more = end - limit > 0
        else:
            start_at = ids.index(after) + 1 if after in ids else (len(ids) if after else 0)
            page = newest_first[start_at : start_at + limit]
            more = start_at + limit < len(ids)
        data = [message_batch(b, root) for b in page]
        return JSONResponse(
            {
                "data": data,
                "has_more": more,
                "first_id": data[0]["id"] if data else None,
                "last_id": data[-1]["id"] if data else None,
            }
        )

    async def retrieve(request: Request) -> Response:
        batch = _get(request)
        if batch is None:
            return _missing(request)
        return JSONResponse(message_batch(batch, root_of(request)))

    async def cancel(request: Request) -> Response:
        batch = _get(request)
        if batch is None:
            return _missing(request)
        if batch.terminal:
            return anthropic_error(
                400, "invalid_request_error", f"Message Batch {batch.id} has already ended"
            )
        store.cancel_batch(batch)
        return JSONResponse(message_batch(batch, root_of(request)))

    async def results(request: Request) -> Response:
        batch = _get(request)
        if batch is None:
            return _missing(request)
        if not batch.terminal:
            return anthropic_error(
                400, "invalid_request_error", f"Message Batch {batch.id} has not ended yet"
            )
        return StreamingResponse(_results(store, batch), media_type="application/binary")

    async def delete(request: Request) -> Response:
        batch = _get(request)
        if batch is None:
            return _missing(request)
        if not batch.terminal:
            return anthropic_error(
                400,
                "invalid_request_error",
                f"Message Batch {batch.id} is still processing: cancel it before deleting it",
            )
        store.delete_batch(batch.id)
        return JSONResponse({"id": batch.id, "type": "message_batch_deleted"})

    return [
        Route("/v1/messages/batches", create, methods=["POST"]),
        Route("/v1/messages/batches", list_batches, methods=["GET"]),
        Route("/v1/messages/batches/{batch_id}", retrieve, methods=["GET"]),
        Route("/v1/messages/batches/{batch_id}", delete, methods=["DELETE"]),
        Route("/v1/messages/batches/{batch_id}/cancel", cancel, methods=["POST"]),
        Route("/v1/messages/batches/{batch_id}/results", results, methods=["GET"]),
    ]
