"""The Gemini Developer API's Batch and Files routes on the local server (as google-genai
calls them), under ``/v1beta`` and ``/v1`` (google-genai 3.x's default); the routes are
:attr:`GeminiCodec.operations`, described in docs/local-server.md.

A batch's requests come inline (``inputConfig.requests.requests``, under 20 MB a call) or in a file
uploaded resumably (``inputConfig.fileName``, lines ``{"key", "request"}``). A
``GenerateContentRequest`` (camelCase on the wire; snake_case accepted too, as the API's JSON
parser does) becomes the chat body the responders read; an answer becomes a
``GenerateContentResponse``; an error a ``google.rpc.Status``. A batch of inline requests answers
inline (``inlinedResponses``); one of a file answers with a responses file of ``{"key",
"response"}`` or ``{"key", "error"}`` lines. Neither keeps the requests' order, and inline
responses carry no ``metadata``: what the service is reported to do (googleapis/python-genai #1909,
#2008; googleapis/js-genai #1191), though its reference promises the metadata back, so a client
that leans on either fails here.
"""

from __future__ import annotations

import json
import random
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio.to_thread
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from aeval.http_guard import header_int
from aeval.local import batch_api
from aeval.local.batch_api import ApiError, Codec, NewBatch, Outcome, iso_time
from aeval.local.context import ServerContext
from aeval.local.state import BatchRecord, FileRecord, Store

__all__ = ["GEMINI_STATES", "GEMINI_VERSIONS", "INLINE_LIMIT_BYTES", "GeminiCodec"]

GEMINI_VERSIONS = ("v1beta", "v1")
INLINE_LIMIT_BYTES = 20 * 1024 * 1024  # a batchGenerateContent call's body
GEMINI_STATES = {
    "validating": "BATCH_STATE_PENDING", "in_progress": "BATCH_STATE_RUNNING",
    "finalizing": "BATCH_STATE_RUNNING", "cancelling": "BATCH_STATE_RUNNING",
    "completed": "BATCH_STATE_SUCCEEDED", "failed": "BATCH_STATE_FAILED",
    "expired": "BATCH_STATE_EXPIRED", "cancelled": "BATCH_STATE_CANCELLED",
}  # fmt: skip
_NOT_JSON = "Invalid JSON payload received."
_BATCH_TYPE = "type.googleapis.com/google.ai.generativelanguage.v1beta.GenerateContentBatch"
# google.rpc.Code by number (googleapis google/rpc/code.proto); HTTP status -> its code, of an
# API error or a per-request one (whose error code may name another: FAILED_PRECONDITION is 400
# too); the code of a request the batch never ran.
_RPC_NAMES = ("OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
              "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
              "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
              "UNAUTHENTICATED")  # fmt: skip
_RPC_CODES = {400: 3, 401: 16, 403: 7, 404: 5, 409: 6, 413: 3, 429: 8, 500: 13, 501: 12, 503: 14,
              504: 4}  # fmt: skip
_NOT_RUN = {"expired": 4, "cancelled": 1}


class _Wire(BaseModel):
    # camelCase on the wire; snake_case accepted too, as the API's JSON parser does.
    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True)


class _Content(_Wire):
    role: str | None = None
    parts: list[dict[str, Any]]

    def text(self) -> str:  # a thought summary (google-genai types.Part.thought) is no answer
        return "".join(t for p in self.parts
                       if isinstance(t := p.get("text"), str) and not p.get("thought"))  # fmt: skip


class _Thinking(_Wire):
    include_thoughts: bool = False
    thinking_level: str | None = None
    thinking_budget: int | None = None


class _Generation(_Wire):
    temperature: float | None = None
    top_p: float | None = None
    max_output_tokens: int | None = None
    seed: int | None = None
    stop_sequences: list[str] | None = None
    thinking_config: _Thinking = _Thinking()


class _Request(_Wire):
    """The part of a ``GenerateContentRequest`` the responders read."""

    contents: Annotated[list[_Content], Field(min_length=1)]
    system_instruction: _Content | None = None
    generation_config: _Generation = _Generation()


class _Inlined(_Wire):
    request: Any = None
    metadata: dict[str, Any] = {}


class _InputConfig(_Wire):
    file_name: str | None = None
    requests: dict[Literal["requests"], Annotated[list[_Inlined], Field(min_length=1)]] = {}


class _Batch(_Wire):
    display_name: Annotated[str, Field(min_length=1)]
    input_config: _InputConfig = _InputConfig()


class _Create(_Wire):
    batch: _Batch  # a batchGenerateContent call's body


_CHAT_NAMES = {"max_output_tokens": "max_tokens", "stop_sequences": "stop"}


def chat_body(model: str, request: object) -> tuple[dict[str, Any] | None, bool]:
    """The chat body for one ``GenerateContentRequest`` (``None`` when it is not one), and
    whether it asks for thought summaries (``thinkingConfig.includeThoughts``)."""
    try:
        asked = _Request.model_validate(request)
    except ValidationError:
        return None, False
    system = asked.system_instruction.text() if asked.system_instruction else ""
    messages = [{"role": "system", "content": system}] if system else []
    messages += [{"role": "assistant" if c.role == "model" else "user", "content": c.text()}
                 for c in asked.contents]  # fmt: skip
    config = asked.generation_config
    chosen = config.model_dump(exclude_none=True, exclude={"thinking_config"})
    body: dict[str, Any] = {"model": model, "messages": messages}
    thinks = config.thinking_config  # read as synthetic.thinking_tokens reads a chat body
    if thinks.thinking_level is not None:
        body["reasoning_effort"] = thinks.thinking_level.lower()
    if thinks.thinking_budget is not None and thinks.thinking_budget >= 0:
        body["thinking_budget"] = thinks.thinking_budget
    return body | {_CHAT_NAMES.get(k, k): v for k, v in chosen.items()}, (
        config.thinking_config.include_thoughts
    )


def generate_content_response(
    completion: Mapping[str, Any], model: str, *, thoughts: bool
) -> dict[str, Any]:
    """A ``GenerateContentResponse`` for a chat completion. A thinking model (2.5 and
    later) bills thought tokens in ``usageMetadata``; with ``thoughts`` the answer is
    preceded by a thought-summary part marked ``"thought": true``."""
    choice = (completion.get("choices") or [{}])[0]
    usage = completion.get("usage") or {}
    prompt, answer = int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))
    asked = int((usage.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0)
    answer -= asked
    thinks = not model.removeprefix("models/").startswith(("gemini-1", "gemini-2.0"))
    thought_tokens = asked or (max(1, answer // 3) if thinks else 0)
    parts: list[dict[str, Any]] = []
    if thoughts and thought_tokens:
        parts.append({"text": "**Weighing the loop bounds**\n\nI look for the worst case.",
                      "thought": True})  # fmt: skip
    parts.append({"text": (choice.get("message") or {}).get("content") or ""})
    usage_metadata: dict[str, Any] = {
        "promptTokenCount": prompt, "candidatesTokenCount": answer,
        "totalTokenCount": prompt + answer + thought_tokens,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}],
    }  # fmt: skip
    if thought_tokens:
        usage_metadata["thoughtsTokenCount"] = thought_tokens
    finish = "MAX_TOKENS" if choice.get("finish_reason") == "length" else "STOP"
    candidate = {"content": {"parts": parts, "role": "model"}, "finishReason": finish, "index": 0}
    return {"candidates": [candidate], "usageMetadata": usage_metadata,
            "modelVersion": model.removeprefix("models/"),
            "responseId": str(completion.get("id", ""))}  # fmt: skip


def _keyed(outcome: Outcome, model: str, thoughts: bool) -> dict[str, Any]:
    """One request's result as a responses-file line: ``{"key", "response" | "error"}``."""
    if outcome.kind == "succeeded":
        response = generate_content_response(outcome.completion, model, thoughts=thoughts)
        return {"key": outcome.custom_id, "response": response}
    if outcome.kind == "failed":
        named = str(outcome.error.get("code"))
        known = named in _RPC_NAMES
        code = _RPC_NAMES.index(named) if known else _RPC_CODES.get(outcome.status, 13)
        status = {"code": code, "message": outcome.message or "The request failed."}
    else:
        status = {"code": _NOT_RUN[outcome.kind], "message": "The request was not run."}
    return {"key": outcome.custom_id, "error": status}


def display_metadata(display_name: str | None) -> dict[str, str]:
    """``key=value`` pairs a display name carries (``a=1;b=2``), as batch metadata: the
    server learns an aeval batch's trial, matches faults and counts batches by them."""
    pairs = (item.partition("=") for item in (display_name or "").split(";"))
    return {key.strip(): value for key, sep, value in pairs if sep and key.strip()}


def _shuffled_results(store: Store, batch: BatchRecord) -> list[dict[str, Any]]:
    """Every request's result line, in no order the requests had (the module's doc says why)."""
    model, thoughts = batch.extra["model"], bool(batch.extra.get("thoughts"))
    results = [_keyed(o, model, thoughts) for o in batch_api.outcomes(store, batch)]
    random.Random(batch.id).shuffle(results)
    return results


def _write_responses(store: Store, batch: BatchRecord, path: Path) -> None:
    with path.open("w", encoding="utf-8") as out:
        out.writelines(json.dumps(result) + "\n" for result in _shuffled_results(store, batch))


def _inline_output(store: Store, batch: BatchRecord) -> dict[str, Any]:
    """The results without their keys: no ``metadata`` echoed (the module's doc says why)."""
    answers = [{k: r[k] for k in ("response", "error") if k in r}
               for r in _shuffled_results(store, batch)]  # fmt: skip
    return {"inlinedResponses": {"inlinedResponses": answers}}


@dataclass(slots=True)
class _Upload:
    display_name: str
    size: int
    file_id: str
    received: int = 0


def _header_int(request: Request, name: str) -> int | None:
    try:
        return header_int(request.headers.get(name), name)
    except ValueError as err:
        raise ApiError(400, f"Invalid {err}.") from None


def _version(request: Request) -> str:
    return request.url.path.removeprefix("/upload").split("/")[1]


class GeminiCodec(Codec):
    api = "google"
    statuses = GEMINI_STATES
    cancel_ended = "Batch batches/{id} is already in a terminal state."
    delete_running = "Batch batches/{id} is still running: cancel it first."
    not_found = "{Kind} {kind}s/{id} not found."
    id_prefixes = ("file-", "")
    create_limit = INLINE_LIMIT_BYTES
    operations = tuple(
        operation
        for v in GEMINI_VERSIONS
        for operation in (
            ("POST", f"/{v}/models/{{model}}:batchGenerateContent", "create_batch"),
            *batch_api.batch_operations(f"/{v}/batches", cancel=":cancel")[1:],
            ("DELETE", f"/{v}/batches/{{batch_id}}", "delete_batch"),
            *batch_api.file_operations(f"/{v}/files")[1:4],  # no /content: a download is :download
            ("POST", f"/upload/{v}/files", "upload"),
        )
    )

    def __init__(self) -> None:
        self._uploads: dict[str, _Upload] = {}

    def error(self, status: int, message: str, **fields: Any) -> dict[str, Any]:
        return {"error": {"code": status, "message": message,
                          "status": _RPC_NAMES[_RPC_CODES.get(status, 2)]}}  # fmt: skip

    def create_too_large(self) -> ApiError:
        return ApiError(400, f"Request payload size exceeds {INLINE_LIMIT_BYTES} bytes.")

    def base(self, request: Request) -> str:
        return f"{super().base(request)}/{_version(request)}"

    def file_key(self, param: str) -> str:
        return "file-" + param.removesuffix(":download")

    def file(self, record: FileRecord, base: str) -> dict[str, Any]:
        """A file as the Files API describes it (``base``: the server's ``…/v1beta``)."""
        name = f"files/{record.id.removeprefix('file-')}"
        generated = record.purpose == "batch_output"
        body: dict[str, Any] = {
            "name": name, "displayName": record.filename, "mimeType": "application/jsonl",
            "sizeBytes": str(record.bytes), "createTime": iso_time(record.created_at),
            "updateTime": iso_time(record.created_at),
            "expirationTime": iso_time(record.created_at + 48 * 3600), "uri": f"{base}/{name}",
            "state": "ACTIVE", "source": "GENERATED" if generated else "UPLOADED",
        }  # fmt: skip
        if generated:
            body["downloadUri"] = f"{base}/{name}:download?alt=media"
        return body

    def listed(self, record: FileRecord, query: Mapping[str, str]) -> bool:
        return record.purpose == "batch"

    def batch(self, batch: BatchRecord, base: str, output: Any = None) -> dict[str, Any]:
        """A batch as ``batches.get`` returns it (a long-running operation)."""
        name = f"batches/{batch.id}"
        end = batch.ended_at
        pending = max(0, batch.total - batch.completed - batch.failed)
        stats = {"requestCount": batch.total, "successfulRequestCount": batch.completed,
                 "failedRequestCount": batch.failed, "pendingRequestCount": pending}  # fmt: skip
        metadata: dict[str, Any] = {
            "@type": _BATCH_TYPE, "name": name,
            "model": f"models/{batch.extra.get('model', batch.model or '')}",
            "displayName": batch.extra.get("display_name", ""),
            "inputConfig": batch.extra.get("input_config", {}),
            "createTime": iso_time(batch.created_at),
            "updateTime": iso_time(end or batch.in_progress_at or batch.created_at),
            "batchStats": {key: str(value) for key, value in stats.items()},
            "state": self.statuses.get(batch.status, "BATCH_STATE_UNSPECIFIED"),
        }  # fmt: skip
        if end is not None:
            metadata["endTime"] = iso_time(end)
        operation: dict[str, Any] = {"name": name, "metadata": metadata, "done": batch.terminal}
        if output is not None:
            metadata["output"] = output
            operation["response"] = {"@type": _BATCH_TYPE + "Output", **output}
        if batch.status == "failed" and batch.errors:
            operation["error"] = {"code": 3, "message": str(batch.errors[0].get("message", ""))}
        return operation

    async def show(self, ctx: ServerContext, batch: BatchRecord, base: str) -> Any:
        """With its results once it has ended: inline, or a responses file written once."""
        if not batch.terminal or batch.status == "failed":
            return self.batch(batch, base)
        if batch.extra.get("inline"):
            output = await anyio.to_thread.run_sync(_inline_output, ctx.store, batch)
            return self.batch(batch, base, output)
        if "responses_file" not in batch.extra:
            file_id, path = ctx.store.new_file_path()
            await anyio.to_thread.run_sync(_write_responses, ctx.store, batch, path)
            ctx.store.add_file(file_id, f"batch-{batch.id}-responses.jsonl", "batch_output",
                               counted=False, api=self.api)  # fmt: skip
            batch.extra["responses_file"] = f"files/{file_id.removeprefix('file-')}"
            ctx.store.save_batch(batch)
        return self.batch(batch, base, {"responsesFile": batch.extra["responses_file"]})

    def page(self, kind: str, items: list[dict[str, Any]], query: Mapping[str, str]) -> Any:
        # A pageSize over the most is taken as the most, not refused.
        size = min(batch_api.int_param(query, "pageSize", 50 if kind == "batch" else 10, 1 << 31),
                   1000 if kind == "batch" else 100)  # fmt: skip
        start = batch_api.int_param(query, "pageToken", 0, 1 << 62, least=0)
        data, following = batch_api.offset_page(items, start, size)
        body: dict[str, Any] = {"operations" if kind == "batch" else "files": data}
        if following is not None:
            body["nextPageToken"] = str(following)
        return body

    def deleted(self, kind: str, object_id: str) -> Any:
        return {}

    async def op_cancel_batch(self, ctx: ServerContext, request: Request) -> Any:
        await super().op_cancel_batch(ctx, request)
        return {}

    async def op_get_file(self, ctx: ServerContext, request: Request) -> Any:
        if not request.path_params["file_id"].endswith(":download"):
            return await super().op_get_file(ctx, request)
        if self.own_file(ctx, request.path_params["file_id"]).purpose != "batch_output":
            raise ApiError(400, "Only generated files can be downloaded.")
        return await self.op_file_content(ctx, request)

    async def new_batch(self, ctx: ServerContext, request: Request) -> NewBatch:
        body = await batch_api.json_body(request, not_json=_NOT_JSON)  # held by create_limit
        spec = batch_api.validated(_Create, body).batch
        model, config = request.path_params["model"], spec.input_config
        extra: dict[str, Any] = {"model": model, "display_name": spec.display_name}
        metadata = display_metadata(spec.display_name) or {"display_name": spec.display_name}
        if config.file_name:
            record = self.own_file(ctx, config.file_name.removeprefix("files/"))
            extra["input_config"] = {"fileName": config.file_name}
            lines = batch_api.file_requests([ctx.store.file_path(record.id)], lambda line: {
                "custom_id": line.get("key"), "body": chat_body(model, line.get("request"))[0]
            })  # fmt: skip
            return NewBatch(lines, metadata=metadata, extra=extra)
        if not config.requests:
            raise ApiError(400, "batch.inputConfig: requests or fileName needed.")
        read = [(i.metadata.get("key", str(n)), *chat_body(model, i.request))
                for n, i in enumerate(config.requests["requests"])]  # fmt: skip
        # The input config is not echoed back in full.
        extra.update(inline=True, input_config={"requests": {"requests": []}},
                     thoughts=any(thoughts for *_, thoughts in read))  # fmt: skip
        requests = [{"custom_id": key, "body": body} for key, body, _ in read]
        return NewBatch(requests, metadata=metadata, extra=extra)

    async def op_upload(self, ctx: ServerContext, request: Request) -> Response:
        command = request.headers.get("x-goog-upload-command", "").replace(" ", "")
        if command == "start":
            return await self._start_upload(ctx, request)
        token = request.query_params.get("upload_id", "")
        session = self._uploads.get(token)
        if session is None:
            raise ApiError(404, "No such upload session.")
        offset = _header_int(request, "x-goog-upload-offset") or 0
        if offset != session.received:
            raise ApiError(400, f"Upload offset {offset} != {session.received} bytes received.")
        path = ctx.store.file_path(session.file_id)
        with path.open("ab") as out:  # counted as it arrives: no chunk passes the declared size
            async for chunk in request.stream():
                session.received += len(chunk)
                if session.received > session.size:
                    del self._uploads[token]
                    path.unlink(missing_ok=True)
                    raise ApiError(400, f"Upload passes its declared size of {session.size} "
                                   "bytes.")  # fmt: skip
                out.write(chunk)
        if "finalize" not in command.split(","):
            return JSONResponse({}, headers={"x-goog-upload-status": "active"})
        del self._uploads[token]
        if session.received != session.size:
            path.unlink(missing_ok=True)
            raise ApiError(400, f"Upload size {session.received} != declared {session.size}.")
        record = ctx.store.add_file(session.file_id, session.display_name, "batch", counted=True,
                                    api=self.api)  # fmt: skip
        resource = {"file": self.file(record, self.base(request))}
        return JSONResponse(resource, headers={"x-goog-upload-status": "final"})

    async def _start_upload(self, ctx: ServerContext, request: Request) -> Response:
        most = ctx.limits.json_body_bytes
        limit = (most, ApiError(400, f"Request payload size exceeds {most} bytes."))
        spec = (await batch_api.json_body(request, not_json=_NOT_JSON, limit=limit)).get("file")
        spec = spec if isinstance(spec, dict) else {}
        size = _header_int(request, "x-goog-upload-header-content-length")
        if size is None:
            raise ApiError(400, "X-Goog-Upload-Header-Content-Length is required.")
        if size > ctx.limits.file_bytes(self.api):
            raise ApiError(400, f"File is over the {ctx.limits.file_bytes(self.api)}-byte limit.")
        file_id, token = self.new_id("file"), secrets.token_hex(12)
        ctx.store.file_path(file_id).write_bytes(b"")
        name = spec.get("displayName") or spec.get("display_name") or file_id[5:]
        self._uploads[token] = _Upload(str(name), size, file_id)
        url = f"{super().base(request)}/upload/{_version(request)}/files?upload_id={token}"
        headers = {"x-goog-upload-url": url, "x-goog-upload-status": "active"}
        return JSONResponse({}, headers=headers)
