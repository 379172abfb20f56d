"""The batch API every provider has, written once: files, batches, listings, cancels, errors.

A provider's wire is a :class:`Codec`: which paths run which operation, how its objects, listings
and errors read, and how a create call names its requests. Everything else is here once: a create
turns the provider's requests into the runner's input file (OpenAI batch lines,
:func:`write_input`) and starts the batch; the runner (:mod:`aeval.local.simulated_batch`) answers
into OpenAI output and error lines, which a codec reads back through :func:`outcomes`. Each API
sees only its own files and batches in the shared store.
"""

from __future__ import annotations

import json
import re
import shutil
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import IO, Any, Literal, TypeVar

import anyio.to_thread
from pydantic import BaseModel, ValidationError
from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Route, compile_path

from aeval.http_guard import loads
from aeval.local.context import ServerContext
from aeval.local.state import BatchRecord, FileRecord, Store, new_id
from aeval.local.wire import error_body

__all__ = ["CHAT_URL", "ApiError", "Codec", "Kind", "NewBatch", "Outcome",
           "batch_operations", "cursor_page", "file_operations", "file_requests",
           "int_param", "iso_time", "json_body", "jsonl_objects", "offset_page",
           "outcome_of", "outcomes", "validated"]  # fmt: skip

CHAT_URL = "/v1/chat/completions"
INTERNAL_PURPOSE = "aeval_converted_input"  # a provider's requests as the runner's input
Kind = Literal["file", "batch"]
Model = TypeVar("Model", bound=BaseModel)


class ApiError(Exception):
    """An error response: its status, message and the wire's extra fields (``type``,
    ``code``, ``param``, ``file_id``…), shaped by the codec of the route that raised it."""

    def __init__(self, status: int, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.status, self.message, self.fields = status, message, fields


@dataclass(slots=True)
class NewBatch:
    """What a create call asks for: its requests (internal lines ``{custom_id, body[,
    row_id]}``, written as the runner's input) or an input file the runner reads as is."""

    requests: Iterable[dict[str, Any]] | None = None
    input_file_id: str | None = None
    metadata: dict[str, str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    window: str = "24h"
    endpoint: str = CHAT_URL


@dataclass(frozen=True, slots=True)
class Outcome:
    """One answered (or not) request, read back from the runner's result lines."""

    custom_id: Any
    kind: Literal["succeeded", "failed", "expired", "cancelled"]
    completion: Mapping[str, Any] = field(default_factory=dict)  # a chat.completion body
    status: int = 500
    error: Mapping[str, Any] = field(default_factory=dict)  # a failure's message, type, code
    line: Mapping[str, Any] = field(default_factory=dict)  # the OpenAI batch line itself

    @property
    def message(self) -> str:
        return str(self.error.get("message", ""))


def iso_time(epoch: float | None, *, exact: bool = False) -> str | None:
    """An RFC 3339 time (``exact``: to the microsecond), or ``None``."""
    if epoch is None:
        return None
    moment = datetime.fromtimestamp(epoch, UTC)
    return moment.isoformat().replace("+00:00", "Z") if exact else f"{moment:%Y-%m-%dT%H:%M:%SZ}"


def jsonl_objects(path: Path) -> Iterator[Any]:
    """The parsed lines of a JSONL file (a line that is not JSON: ``None``)."""
    with path.open("rb") as handle:
        for raw in handle:
            if raw.strip():
                try:
                    yield loads(raw)
                except ValueError:
                    yield None


def file_requests(paths: Iterable[Path], read: Callable[[dict[str, Any]], dict[str, Any]]
                  ) -> Iterator[dict[str, Any]]:  # fmt: skip
    """Internal request lines from uploaded JSONL files: each object line through ``read``;
    a line that is not an object has no id and no body (the runner fails the batch for it)."""
    for path in paths:
        for line in jsonl_objects(path):
            yield read(line) if isinstance(line, dict) else {"custom_id": None, "body": None}


def write_input(path: Path, requests: Iterable[dict[str, Any]]) -> tuple[int, str | None]:
    """Write internal request lines as the runner's OpenAI batch input; (lines, first model).

    A request the provider would reject is still written as given (a ``None`` body, a missing id),
    so the runner's validation fails the batch for it as the provider fails a bad line.
    """
    count, model = 0, None
    with path.open("w", encoding="utf-8") as out:
        for request in requests:
            body = request.get("body")
            if model is None and isinstance(body, dict):
                model = body.get("model")
            out.write(json.dumps({**request, "method": "POST", "url": CHAT_URL, "body": body}))
            out.write("\n")
            count += 1
    return count, model


def outcomes(store: Store, batch: BatchRecord) -> Iterator[Outcome]:
    """The runner's output lines, then its error lines, as outcomes."""
    for file_id in (batch.output_file_id, batch.error_file_id):
        if file_id is not None and file_id in store.files:
            for line in jsonl_objects(store.file_path(file_id)):
                if isinstance(line, dict):
                    yield outcome_of(line)


def outcome_of(line: Mapping[str, Any]) -> Outcome:
    """One OpenAI batch output or error line, read."""
    custom_id, response = line.get("custom_id"), line.get("response") or {}
    error = line.get("error") if isinstance(line.get("error"), Mapping) else {}
    code = (error or {}).get("code")
    if code in ("batch_expired", "batch_cancelled"):
        return Outcome(custom_id, "expired" if code == "batch_expired" else "cancelled", line=line)
    if response.get("status_code") == 200:
        return Outcome(custom_id, "succeeded", response.get("body") or {}, 200, line=line)
    body = response.get("body")
    inner = (body.get("error") if isinstance(body, Mapping) else None) or error or {}
    status = int(response.get("status_code") or 500)
    return Outcome(custom_id, "failed", status=status, error=inner, line=line)


def offset_page(items: list[Any], start: int, size: int) -> tuple[list[Any], int | None]:
    """One page of ``items`` from ``start``; the next page's start (``None``: the last)."""
    page = items[start : start + size]
    return page, (start + size if start + size < len(items) else None)


def int_param(query: Mapping[str, str], name: str, default: int, most: int, least: int = 1,
              status: int = 400) -> int:  # fmt: skip
    """The whole-number query parameter ``name``, from ``least`` to ``most`` (``default``
    when it is absent or empty)."""
    raw = query.get(name) or None
    if raw is None:
        return default
    value = int(raw) if raw.lstrip("-").isdigit() else least - 1
    if not least <= value <= most:
        raise ApiError(status, f"Invalid '{name}': expected an integer between {least} and "
                       f"{most}.", param=name)  # fmt: skip
    return value


def cursor_page(items: list[dict[str, Any]], after: str | None, before: str | None, limit: int
                ) -> dict[str, Any]:  # fmt: skip
    """A page of ``items`` after the id ``after`` (or before ``before``), as OpenAI's and
    Anthropic's cursor listings show it; an unknown cursor pages past the end (the start)."""
    ids = [item["id"] for item in items]
    if before is not None:
        end = ids.index(before) if before in ids else 0
        data, more = items[max(0, end - limit) : end], end - limit > 0
    else:
        start = 0 if after is None else (ids.index(after) + 1 if after in ids else len(ids))
        data, more = items[start : start + limit], start + limit < len(ids)
    return {"data": data, "has_more": more, "first_id": data[0]["id"] if data else None,
            "last_id": data[-1]["id"] if data else None}  # fmt: skip


def validated(model: type[Model], data: Any, status: int = 400) -> Model:
    """``data`` as ``model``; else an :class:`ApiError` naming the first field wrong and why
    (``requests.3.custom_id: String should match pattern …``, as pydantic and the APIs say it)."""
    try:
        return model.model_validate(data)
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        where = ".".join(str(part) for part in first["loc"])
        param = str(first["loc"][0]) if first["loc"] else None  # the body's field, as OpenAI's
        raise ApiError(status, f"{where}: {first['msg']}", param=param) from None


_NOT_JSON = "The request body is not valid JSON:"
_FORM_ROOM = 64 * 1024  # a multipart form's fields and boundaries, beside its file


async def json_body(request: Request, status: int = 400, *, not_json: str = _NOT_JSON,
                    limit: tuple[int, ApiError] | None = None) -> dict[str, Any]:  # fmt: skip
    """The request's JSON object body (``status`` for JSON that is not an object); ``limit``:
    the most bytes it may have and the error past them, by its declared length first, then
    counted as it arrives (the server's own limit on every body is enforced before this)."""
    most, too_large = limit or (1 << 62, ApiError(413, "The request body is too large."))
    if int(request.headers.get("content-length") or 0) > most:  # a number: uvicorn checked
        raise too_large
    parts, size = [], 0
    async for part in request.stream():
        size += len(part)
        if size > most:
            raise too_large
        parts.append(part)
    raw = b"".join(parts) or b"{}"
    try:  # a large body (a 100,000-request batch) is parsed off the event loop
        if len(raw) < 1 << 20:
            body = loads(raw)
        else:
            body = await anyio.to_thread.run_sync(loads, raw)
    except ValueError as err:
        raise ApiError(400, f"{not_json} {err}") from None
    if not isinstance(body, dict):
        raise ApiError(status, "The request body must be a JSON object.")
    return body


def _save_upload(source: IO[bytes], dest: Path) -> None:
    source.seek(0)
    with dest.open("wb") as out:
        shutil.copyfileobj(source, out, 1024 * 1024)


class Codec:
    """One provider's wire: the OpenAI-like defaults, overridden by each provider's codec.

    ``operations`` maps ``(method, path)`` to an operation: one of this class's
    ``op_*`` methods, which a codec may override or add to.
    """

    api = "openai"  # whose files and batches (the store's namespace)
    prefix = ""
    operations: tuple[tuple[str, str, str], ...] = ()  # (method, path under prefix, op)
    purposes: tuple[str, ...] = ("batch",)  # what a multipart upload may be for
    default_purpose: str | None = None
    invalid = 400  # the status of a request the API refuses (Mistral: 422)
    statuses: Mapping[str, str] = {}  # the server's batch status -> the wire's name for it
    # What a refused cancel of an ended batch and a refused delete of a running one say
    # ({id}; {status}: the wire's name). No ``cancel_ended``: such a cancel answers the
    # batch as it stands.
    cancel_ended: str | None = "Cannot cancel a batch with status '{status}'."
    delete_running = "Batch {id} is still running: cancel it before deleting it"
    not_found = "{Kind} {id} not found."  # {kind}: file or batch
    # A new file's and batch's id: the prefix and 24 hex digits (no prefix: a UUID).
    id_prefixes: tuple[str | None, str | None] = (None, None)
    # A create call's body limit of the provider's own (its create route answers it); the
    # server's generic one (``Limits.json_body_bytes``) otherwise.
    create_limit: int | None = None

    # shapes

    def error(self, status: int, message: str, **fields: Any) -> dict[str, Any]:
        return error_body(message, **fields)

    def headers(self) -> dict[str, str]:
        return {}

    def admit(self, request: Request) -> None:
        """Raise :class:`ApiError` for a request this wire refuses before any operation."""

    def missing(self, kind: Kind, object_id: str) -> ApiError:
        message = self.not_found.format(kind=kind, Kind=kind.title(), id=object_id)
        return ApiError(404, message, param="id")

    def file(self, record: FileRecord, base: str) -> dict[str, Any]:
        return {"id": record.id, "object": "file", "bytes": record.bytes,
                "created_at": record.created_at, "filename": record.filename,
                "purpose": record.purpose}  # fmt: skip

    def batch(self, batch: BatchRecord, base: str) -> dict[str, Any]:
        raise NotImplementedError

    async def show(self, ctx: ServerContext, batch: BatchRecord, base: str) -> Any:
        """A batch as its own ``GET`` shows it (a listing shows :meth:`batch`)."""
        return self.batch(batch, base)

    def page(self, kind: Kind, items: list[dict[str, Any]], query: Mapping[str, str]) -> Any:
        return {"object": "list", "data": items}

    def listed(self, record: FileRecord, query: Mapping[str, str]) -> bool:
        return record.purpose in self.purposes

    def base(self, request: Request) -> str:
        return str(request.base_url).rstrip("/")

    def file_key(self, param: str) -> str:
        """The store's id of the file a path names."""
        return param

    def new_id(self, kind: Kind) -> str:
        prefix = self.id_prefixes[0 if kind == "file" else 1]
        return str(uuid.uuid4()) if prefix is None else new_id(prefix)

    def deleted(self, kind: Kind, object_id: str) -> Any:
        return {"id": object_id, "object": kind, "deleted": True}

    async def new_batch(self, ctx: ServerContext, request: Request) -> NewBatch:
        raise NotImplementedError

    def created(self, shown: Any) -> Any:
        return shown

    @cached_property
    def _routes(self) -> list[tuple[str, re.Pattern[str], str]]:
        return [(method, compile_path(self.prefix + path)[0], op)
                for method, path, op in self.operations]  # fmt: skip

    def body_limit(self, ctx: ServerContext, method: str, path: str
                   ) -> tuple[int, ApiError | None] | None:  # fmt: skip
        """The most bytes a body may have on this wire's route at ``path`` (``None``: not one
        of its routes), and the error past them (``None``: the generic one): a file's limit
        on an upload route (with room for a form's fields), a create call's own limit."""
        op = next((op for m, regex, op in self._routes if m == method and regex.match(path)), None)
        if op in ("upload", "put_content"):
            limit = ctx.limits.file_bytes(self.api)
            return limit + _FORM_ROOM, self.too_large(limit)
        if op == "create_batch" and self.create_limit is not None:
            return self.create_limit, self.create_too_large()
        return None if op is None else (ctx.limits.json_body_bytes, None)

    # operations

    def own_file(self, ctx: ServerContext, file_id: str) -> FileRecord:
        record = ctx.store.files.get(self.file_key(file_id))
        if record is None or record.api != self.api:
            raise self.missing("file", file_id)
        return record

    def own_batch(self, ctx: ServerContext, batch_id: str) -> BatchRecord:
        batch = ctx.store.batches.get(batch_id)
        if batch is None or batch.api != self.api:
            raise self.missing("batch", batch_id)
        return batch

    def batches(self, ctx: ServerContext) -> list[BatchRecord]:
        """This API's batches, newest first."""
        return [b for b in reversed(ctx.store.batches.values()) if b.api == self.api]

    async def op_upload(self, ctx: ServerContext, request: Request) -> Any:
        """A multipart upload (``file``, ``purpose``): OpenAI's and Mistral's Files APIs."""
        limit = ctx.limits.file_bytes(self.api)
        if int(request.headers.get("content-length") or 0) > limit + _FORM_ROOM:
            raise self.too_large(limit)
        try:
            form = await request.form(max_files=1, max_fields=8)
        except Exception as err:  # starlette raises its own HTTPException subclasses
            raise ApiError(400, f"Could not parse the multipart form: {err}") from None
        try:
            upload, purpose = form.get("file"), form.get("purpose") or self.default_purpose
            if not isinstance(upload, UploadFile):
                raise ApiError(self.invalid, "Missing required parameter: 'file'.", param="file")
            if not isinstance(purpose, str) or not purpose:
                raise ApiError(
                    self.invalid, "Missing required parameter: 'purpose'.", param="purpose"
                )
            if purpose not in self.purposes:
                raise ApiError(
                    self.invalid, f"Invalid value for 'purpose': '{purpose}'.", param="purpose"
                )
            if (upload.size or 0) > limit:
                raise self.too_large(limit)
            file_id = self.new_id("file")
            await anyio.to_thread.run_sync(_save_upload, upload.file, ctx.store.file_path(file_id))
            record = ctx.store.add_file(file_id, upload.filename or "upload.jsonl", purpose,
                                        counted=True, api=self.api)  # fmt: skip
        finally:
            await form.close()
        return self.file(record, self.base(request))

    def create_too_large(self) -> ApiError:
        """What a create call over :attr:`create_limit` is answered."""
        return ApiError(413, f"The request body is over the {self.create_limit}-byte limit.")

    def too_large(self, limit: int) -> ApiError:
        return ApiError(413, f"File is too large: the maximum size is {limit} bytes.",
                        param="file", code="file_too_large")  # fmt: skip

    async def op_list_files(self, ctx: ServerContext, request: Request) -> Any:
        query, base = request.query_params, self.base(request)
        mine = [f for f in reversed(ctx.store.files.values()) if f.api == self.api]
        return self.page("file", [self.file(f, base) for f in mine if self.listed(f, query)], query)

    async def op_get_file(self, ctx: ServerContext, request: Request) -> Any:
        return self.file(self.own_file(ctx, request.path_params["file_id"]), self.base(request))

    async def op_delete_file(self, ctx: ServerContext, request: Request) -> Any:
        record = self.own_file(ctx, request.path_params["file_id"])
        ctx.store.delete_file(record.id)
        return self.deleted("file", request.path_params["file_id"])

    async def op_file_content(self, ctx: ServerContext, request: Request) -> Response:
        record = self.own_file(ctx, request.path_params["file_id"])
        return FileResponse(ctx.store.file_path(record.id), media_type="application/octet-stream")

    async def op_create_batch(self, ctx: ServerContext, request: Request) -> Any:
        spec = await self.new_batch(ctx, request)
        now = time.time()
        batch = BatchRecord(id=self.new_id("batch"), input_file_id=spec.input_file_id or "",
                            endpoint=spec.endpoint, completion_window=spec.window,
                            created_at=int(now), metadata=spec.metadata, api=self.api,
                            created_exact=now, extra=spec.extra)  # fmt: skip
        if spec.requests is not None:
            file_id, path = ctx.store.new_file_path()
            batch.total, batch.model = await anyio.to_thread.run_sync(
                write_input, path, spec.requests
            )
            ctx.store.add_file(file_id, f"{self.api}-input.jsonl", INTERNAL_PURPOSE,
                               counted=False, api=self.api)  # fmt: skip
            batch.input_file_id = file_id
        ctx.store.add_batch(batch)
        ctx.start(batch)
        return self.created(await self.show(ctx, batch, self.base(request)))

    async def op_list_batches(self, ctx: ServerContext, request: Request) -> Any:
        base = self.base(request)
        shown = [self.batch(b, base) for b in self.batches(ctx)]
        return self.page("batch", shown, request.query_params)

    async def op_get_batch(self, ctx: ServerContext, request: Request) -> Any:
        batch = self.own_batch(ctx, request.path_params["batch_id"])
        return await self.show(ctx, batch, self.base(request))

    async def op_cancel_batch(self, ctx: ServerContext, request: Request) -> Any:
        batch = self.own_batch(ctx, request.path_params["batch_id"])
        if batch.terminal and self.cancel_ended is not None:
            status = self.statuses.get(batch.status, batch.status)
            raise ApiError(400, self.cancel_ended.format(id=batch.id, status=status))
        if ctx.faults.for_batch("cancel_fail", batch):
            raise ApiError(500, "The batch could not be cancelled: an internal error occurred.")
        if not batch.terminal:
            ctx.store.cancel_batch(batch)
        return self.batch(batch, self.base(request))

    async def op_delete_batch(self, ctx: ServerContext, request: Request) -> Any:
        batch = self.own_batch(ctx, request.path_params["batch_id"])
        if not batch.terminal:
            raise ApiError(400, self.delete_running.format(id=batch.id))
        ctx.store.delete_batch(batch.id)
        return self.deleted("batch", batch.id)

    # serving

    def respond(self, err: ApiError) -> JSONResponse:
        body = self.error(err.status, err.message, **err.fields)
        return JSONResponse(body, status_code=err.status, headers=self.headers())

    def app(
        self, ctx: ServerContext, extra: Iterable[BaseRoute] = (), lifespan: Any = None
    ) -> Starlette:
        """This wire's routes as one app; an unknown path or method gets a 404 in its shape."""

        async def not_found(request: Request, exc: Exception) -> Response:
            return self.respond(ApiError(404, f"Invalid URL ({request.method} {request.url.path})"))

        return Starlette(
            routes=[*codec_routes(self, ctx), *extra],
            exception_handlers={404: not_found, 405: not_found},
            lifespan=lifespan,
        )


Operation = Callable[[ServerContext, Request], Awaitable[Any]]
Operations = tuple[tuple[str, str, str], ...]


def file_operations(files: str, upload: str = "upload") -> Operations:
    """The Files routes under ``files`` (an upload by the operation ``upload``)."""
    one = files + "/{file_id}"
    return (("POST", files, upload), ("GET", files, "list_files"), ("GET", one, "get_file"),
            ("DELETE", one, "delete_file"), ("GET", one + "/content", "file_content"))  # fmt: skip


def batch_operations(batches: str, cancel: str = "/cancel") -> Operations:
    """The batch routes under ``batches`` (a cancel at ``…/{batch_id}`` + ``cancel``)."""
    one = batches + "/{batch_id}"
    return (("POST", batches, "create_batch"), ("GET", batches, "list_batches"),
            ("GET", one, "get_batch"), ("POST", one + cancel, "cancel_batch"))  # fmt: skip


def codec_routes(codec: Codec, ctx: ServerContext) -> list[Route]:
    """The codec's routes: each path's operation, its answer as JSON, an :class:`ApiError`
    in the codec's error shape."""

    def endpoint(operation: Operation) -> Callable[[Request], Awaitable[Response]]:
        async def handle(request: Request) -> Response:
            try:
                codec.admit(request)
                answer = await operation(ctx, request)
            except ApiError as err:
                return codec.respond(err)
            return answer if isinstance(answer, Response) else JSONResponse(answer)

        return handle

    return [
        Route(codec.prefix + path, endpoint(getattr(codec, "op_" + op)), methods=[method])
        for method, path, op in codec.operations
    ]
