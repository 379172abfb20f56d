"""xAI's Batch API through the openai SDK at xAI's base URL.

xAI takes the request file as OpenAI's Files API does (``POST /v1/files``, multipart,
the JSONL of OpenAI batch lines), but its batches are its own
(https://docs.x.ai/developers/advanced-api-usage/batch-api; the shapes as litellm's xAI
batch adapter reads them, ``litellm/llms/xai/batches/transformation.py``, MIT):

- ``POST /v1/batches`` ``{name, input_file_id}`` creates one; a batch is
  ``{batch_id, name, create_time, expire_time, cancel_time, cancel_by_xai_message,
  state: {num_requests, num_pending, num_success, num_error, num_cancelled},
  input_file_id}``: counters, not a status;
- ``GET /v1/batches`` lists them (``{batches, pagination_token}``), ``GET
  /v1/batches/{id}`` shows one, ``POST /v1/batches/{id}:cancel`` cancels one;
- results are read a page at a time from ``GET /v1/batches/{id}/results``
  (``{results: [{batch_request_id, batch_result: {response: {chat_get_completion:
  …}} | {error: …}}], pagination_token}``), not from a file.

These go through the SDK's own low-level calls (``client.get``/``client.post``), so
they keep its authentication, timeouts, retries (off for the creates) and error
classes; what comes back is read by the models below, and a body that is not of their
shape is an :class:`~aeval.errors.ApiError`, not a crash.

A batch is named with the shard's display name, by which a lost create is found again.
Its status is read from its counters (:func:`batch_status`); its results are its own
id (``output_file_id``), read page by page into OpenAI output lines, a request's
``batch_request_id`` being the line's ``custom_id``.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

import openai
from pydantic import BaseModel, ConfigDict, ValidationError

from aeval.api_settings import Credentials
from aeval.batch.providers.base import BatchInput, BatchTag, RemoteBatch, RemoteBatchError
from aeval.batch.providers.lines import error_line
from aeval.batch.providers.sdk_errors import failing_as, stainless_failure
from aeval.batch.providers.stainless import OpenAIShapedBatchProvider
from aeval.batch.providers.xai_limits import RESULTS_PAGE
from aeval.errors import ApiError

__all__ = ["DEFAULT_ENDPOINT", "XaiBatch", "XaiBatchProvider", "batch_status", "result_line"]

DEFAULT_ENDPOINT = "https://api.x.ai/v1"
_CHECK = "XAI_API_KEY and XAI_BASE_URL"
# Listings are read to their end, a page at a time, but never past this many pages
# (a server whose token never ends must not hold a run).
_MAX_PAGES = 1000


class _Shape(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class XaiState(_Shape):
    num_requests: int = 0
    num_pending: int = 0
    num_success: int = 0
    num_error: int = 0
    num_cancelled: int = 0


class XaiBatch(_Shape):
    batch_id: str
    name: str = ""
    create_time: str | None = None
    expire_time: str | None = None
    cancel_time: str | None = None
    cancel_by_xai_message: str | None = None
    state: XaiState = XaiState()
    input_file_id: str | None = None


class _BatchPage(_Shape):
    batches: list[XaiBatch] = []
    pagination_token: str | None = None


class _File(_Shape):
    id: str
    filename: str = ""


class _FilePage(_Shape):
    data: list[_File] = []
    pagination_token: str | None = None


class _ResultError(_Shape):
    code: int | str | None = None
    message: str = ""


class _ResultData(_Shape):
    response: dict[str, dict[str, Any]] | None = None
    error: _ResultError | None = None


class _Result(_Shape):
    batch_request_id: str
    batch_result: _ResultData = _ResultData()


class _ResultPage(_Shape):
    results: list[_Result] = []
    pagination_token: str | None = None


def _epoch(value: str | None, *, exact: bool = False) -> float | None:
    """An RFC 3339 time as epoch seconds. ``exact``: a bare date (which xAI's REST API
    is reported to give) is ``None``, too coarse to say which of a day's batches is
    the newer."""
    if not value:
        return None
    if exact and len(value) <= 10:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def batch_status(batch: XaiBatch, now: float | None = None) -> str:
    """The batch's status in OpenAI's words, from what xAI shows (counters, times):

    - cancelled: by xAI, whose message says why (``failed``: its input was refused), or
      by the caller: ``cancelling`` while requests are still pending, then ``cancelled``;
    - no requests yet: its input file is still being read (``validating``);
    - requests pending: ``in_progress``, or ``expired`` once its expiry time passed;
    - nothing pending: ``completed``.
    """
    if batch.cancel_time:
        if batch.cancel_by_xai_message:
            return "failed"
        return "cancelling" if batch.state.num_pending > 0 else "cancelled"
    if batch.state.num_requests == 0:
        return "validating"
    if batch.state.num_pending > 0:
        expires = _epoch(batch.expire_time)
        moment = time.time() if now is None else now
        return "expired" if expires is not None and moment > expires else "in_progress"
    return "completed"


def to_remote(batch: XaiBatch, now: float | None = None) -> RemoteBatch:
    status = batch_status(batch, now)
    state = batch.state
    ended = status in ("completed", "expired", "cancelled")
    errors: tuple[RemoteBatchError, ...] = ()
    if status == "failed":
        errors = (RemoteBatchError("batch_failed", batch.cancel_by_xai_message or ""),)
    return RemoteBatch(
        id=batch.batch_id,
        status=status,
        completed=state.num_success,
        failed=state.num_error,
        total=state.num_requests,
        created_at=_epoch(batch.create_time, exact=True),
        # The results are read by the batch's id; what an ended batch finished is kept.
        output_file_id=batch.batch_id if ended else None,
        errors=errors,
        metadata={"name": batch.name, "input_file_id": batch.input_file_id or ""},
    )


def _dump(obj: Mapping[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def result_line(result: _Result) -> str:
    """One xAI result as an OpenAI output line: the chat completion xAI wraps in a one-key
    map named for the endpoint (``chat_get_completion``) as the line's body, or the
    request's error."""
    data = result.batch_result
    body = next(iter(data.response.values()), None) if data.response else None
    custom_id = result.batch_request_id
    if body is None:
        error = data.error or _ResultError(message="xAI answered this request with nothing")
        code = "server_error" if error.code is None else f"xai_{error.code}"
        return error_line(custom_id, code=code, message=error.message)
    response = {"status_code": 200, "request_id": body.get("id"), "body": body}
    return _dump({"id": f"batch_req_{custom_id}", "custom_id": custom_id,
                  "response": response, "error": None})  # fmt: skip


def _read(model: type[_Shape], data: Any, what: str) -> Any:
    try:
        return model.model_validate(data)
    except ValidationError as err:
        first = err.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise ApiError(
            f"{what}: xAI answered a body aeval cannot read ({where}: {first['msg']})"
        ) from None


class XaiBatchProvider(OpenAIShapedBatchProvider[openai.AsyncOpenAI]):
    """Batch calls through ``openai.AsyncOpenAI`` at xAI's base URL; one per run."""

    name = "xai"
    title = "xAI"
    serial_creates = False  # a lost create is found by its name, whatever ran meanwhile
    sdk = openai
    client_class = openai.AsyncOpenAI
    default_endpoint = DEFAULT_ENDPOINT

    def _connect(
        self, credentials: Credentials, *, max_retries: int, timeout: float
    ) -> openai.AsyncOpenAI:
        # The base URL is always given: the SDK would otherwise read OPENAI_BASE_URL.
        return openai.AsyncOpenAI(
            api_key=credentials.api_key,
            base_url=credentials.base_url or DEFAULT_ENDPOINT,
            max_retries=max_retries,
            timeout=timeout,
        )

    def _fail(self, err: Exception, what: str) -> Exception:
        return stainless_failure(err, what, openai, _CHECK)

    async def _get(self, path: str, what: str, **params: Any) -> Any:
        query = {k: v for k, v in params.items() if v is not None}
        with failing_as(self._fail, what):
            return await self._client.get(path, cast_to=object, options={"params": query})

    async def _post(self, path: str, what: str, body: Mapping[str, Any] | None = None) -> Any:
        with failing_as(self._fail, what):
            return await self._once.post(path, cast_to=object, body=body or {})

    async def find_files(self, filename: str) -> list[str]:
        found, token = [], None
        for _ in range(_MAX_PAGES):
            what = f"listing files named {filename}"
            page = _read(_FilePage, await self._get("/files", what, pagination_token=token), what)
            found += [f.id for f in page.data if f.filename == filename]
            token = page.pagination_token
            if not token or not page.data:
                break
        return found

    async def create(self, source: BatchInput, tag: BatchTag) -> RemoteBatch:
        if source.file_id is None:
            raise ApiError(f"{tag.shard}: xAI's Batch API needs the request file uploaded")
        what = f"creating a batch for {source.file_id}"
        body = {"name": tag.display_name, "input_file_id": source.file_id}
        return to_remote(_read(XaiBatch, await self._post("/batches", what, body), what))

    async def retrieve(self, batch_id: str) -> RemoteBatch:
        what = f"polling batch {batch_id}"
        return to_remote(_read(XaiBatch, await self._get(f"/batches/{batch_id}", what), what))

    async def cancel(self, batch_id: str) -> RemoteBatch:
        what = f"cancelling batch {batch_id}"
        # A cancel is safe to repeat: sent with the SDK's retries, like a read.
        with failing_as(self._fail, what):
            raw = await self._client.post(f"/batches/{batch_id}:cancel", cast_to=object, body={})
        return to_remote(_read(XaiBatch, raw, what))

    async def find(self, tag: BatchTag) -> RemoteBatch | None:
        named: list[RemoteBatch] = []
        token = None
        for _ in range(_MAX_PAGES):
            what = "listing batches"
            raw = await self._get("/batches", what, limit=100, pagination_token=token)
            page = _read(_BatchPage, raw, what)
            named += [to_remote(b) for b in page.batches if b.name == tag.display_name]
            token = page.pagination_token
            if not token or not page.batches:
                break
        return tag.newest_unclaimed(named)

    @asynccontextmanager
    async def open_lines(
        self, file_id: str, tag: BatchTag | None = None
    ) -> AsyncIterator[AsyncIterator[str]]:
        yield self._result_lines(file_id)

    async def _result_lines(self, batch_id: str) -> AsyncIterator[str]:
        what = f"reading the results of {batch_id}"
        token = None
        for _ in range(_MAX_PAGES * 100):
            raw = await self._get(
                f"/batches/{batch_id}/results", what, limit=RESULTS_PAGE, pagination_token=token
            )
            page = _read(_ResultPage, raw, what)
            for result in page.results:
                yield result_line(result)
            token = page.pagination_token
            if not token or not page.results:
                return
