"""Anthropic's Message Batches API as a :class:`~aeval.batch.providers.base.BatchProvider`.

Through the official SDK's async client (``anthropic.AsyncAnthropic``), with its
own retries on for calls that are safe to repeat (reads, cancel, delete) and
off for the create call (``max_retries=0``): a re-sent create whose response
was lost would be a second paid batch. What differs from OpenAI:

- **no upload**: the shard's requests go inline in ``messages.batches.create``
  (at most 100,000 requests or 256 MB per batch: checked before sending);
- **no metadata**: a lost create is recognised by the rule of :meth:`find`
  (docs/engine.md, "Anthropic: finding a lost create"): this run's creates on
  Anthropic are made one at a time (``serial_creates``), and the batch is the
  one created closest to the intent, in its window, whose request count is the
  shard's and that no shard of the run has claimed; its results confirm it (before
  it is taken if it has ended, else at download), as every custom id is sent with
  a tag of (run, shard, attempt): ``<12 hex digits>_<row id>``;
- **results** stream as JSONL in any order, one line per request, of type
  ``succeeded``, ``errored``, ``canceled`` or ``expired``: each becomes an
  OpenAI Batch-API output line (:mod:`aeval.batch.providers.lines`), so nothing
  downstream learns the provider. The response is the text blocks the model
  wrote, in order; thinking blocks are left out (they are the model's working,
  not its answer, and an answer extractor must not read a candidate formula
  out of them), while their tokens stay in ``completion_tokens``, since
  Anthropic bills thinking as output, and are counted apart in
  ``completion_tokens_details.reasoning_tokens`` from ``usage.output_tokens_details
  .thinking_tokens`` (anthropic 2.14, ``types/output_tokens_details.py``: "Always ≤
  ``output_tokens``"), where the API gives it.

Statuses map onto OpenAI's: ``in_progress``; ``canceling`` → ``cancelling``;
``ended`` → ``cancelled`` (a cancel was initiated), ``expired`` (some requests
expired) or ``completed``. Request counts only move when the batch ends.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anthropic
import anyio.to_thread
from anthropic.resources.messages import AsyncBatches
from anthropic.types.messages.batch_create_params import Request

from aeval.api_settings import Credentials, RetrySettings
from aeval.batch.providers.anthropic_limits import MAX_BATCH_BYTES, MAX_BATCH_REQUESTS
from aeval.batch.providers.base import (
    CLOCK_SKEW_S,
    BatchInput,
    BatchTag,
    ForeignBatchError,
    RemoteBatch,
)
from aeval.batch.providers.lines import answer_line, error_line
from aeval.batch.providers.sdk_errors import (
    failing_as,
    guard_lines,
    opened_as,
    stainless_failure,
)
from aeval.batch.providers.stainless import StainlessBatchProvider
from aeval.batch.shard import read_request_lines
from aeval.errors import ApiError

__all__ = [
    "CLOCK_SKEW_S",
    "AnthropicBatchProvider",
    "result_line",
    "translate_error",
    "wire_custom_id",
]

_CUSTOM_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_TAG = re.compile(r"[0-9a-f]{12}_")
_TAG_LEN = 13
LIST_PAGE = 100
_CHECK = "ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL"

# Anthropic's error types inside a batch, as aeval's error codes (and the HTTP status
# each stands for): what aeval.batch.retry decides a resubmission on.
_ERROR_CODES: dict[str, tuple[str, int]] = {
    "invalid_request_error": ("invalid_request", 400),
    "authentication_error": ("authentication_error", 401),
    "billing_error": ("billing_error", 402),
    "permission_error": ("permission_error", 403),
    "not_found_error": ("model_not_found", 404),
    "request_too_large": ("request_too_large", 413),
    "rate_limit_error": ("rate_limit_exceeded", 429),
    "api_error": ("server_error", 500),
    "overloaded_error": ("server_error", 529),
    "timeout_error": ("server_error", 504),
    "conflict_error": ("conflict", 409),
    # Preconditions of the memory tool (anthropic.types.shared.ErrorType): asking again
    # meets the same state, so not worth a retry.
    "memory_precondition_failed_error": ("invalid_request", 412),
    "memory_path_conflict_error": ("invalid_request", 400),
}
_FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    # Cut short by the context window: an unfinished answer, as OpenAI's "length".
    "model_context_window_exceeded": "length",
    "refusal": "content_filter",
    "tool_use": "tool_calls",
}


def wire_custom_id(tag: BatchTag, custom_id: str) -> str:
    """The custom id a request of ``tag``'s shard is sent with."""
    return f"{tag.digest}_{custom_id}"


def translate_error(err: Exception, what: str) -> Exception:
    """Map an anthropic SDK exception to TransientApiError (retry) or ApiError (stop)."""
    return stainless_failure(err, what, anthropic, _CHECK, hint_404=_missing_batches_route)


def _missing_batches_route(err: anthropic.APIStatusError) -> str | None:
    path = err.response.request.url.path
    if not path.rstrip("/").endswith("/batches"):
        return None
    return f"this server has no Message Batches API (404 on {path}); check ANTHROPIC_BASE_URL"


def _total(batch: Any) -> int:
    c = batch.request_counts
    return int(c.processing + c.succeeded + c.errored + c.canceled + c.expired)


def _to_remote(batch: Any) -> RemoteBatch:
    c = batch.request_counts
    if batch.processing_status == "ended":
        if batch.cancel_initiated_at is not None:
            status = "cancelled"
        elif c.expired:
            status = "expired"
        else:
            status = "completed"
    elif batch.processing_status == "canceling":
        status = "cancelling"
    else:
        status = "in_progress"
    ended = batch.processing_status == "ended"
    return RemoteBatch(
        id=batch.id,
        status=status,
        completed=int(c.succeeded),
        failed=int(c.errored + c.canceled + c.expired),
        total=_total(batch),
        created_at=batch.created_at.timestamp(),
        # Results are read per batch: the batch's own id stands for its "output file".
        output_file_id=batch.id if ended else None,
    )


def _read_requests(source: BatchInput, tag: BatchTag) -> list[Request]:
    """The create call's ``requests`` from the shard's request file, checked against
    the API's limits and custom-id rule first.

    :raises ApiError: the batch would be refused (said before anything is sent).
    """
    if source.requests > MAX_BATCH_REQUESTS or source.bytes > MAX_BATCH_BYTES:
        raise ApiError(
            f"{tag.shard}: {source.requests:,} requests, {source.bytes:,} bytes: over one "
            f"Message Batch's limits ({MAX_BATCH_REQUESTS:,} requests, {MAX_BATCH_BYTES:,} "
            "bytes); lower RunConfig.shard_limits"
        )
    requests: list[Request] = []
    for line in read_request_lines(source.path):
        sent = wire_custom_id(tag, str(line["custom_id"]))
        if not _CUSTOM_ID.fullmatch(sent):
            raise ApiError(
                f"{tag.shard}: request {line['custom_id']!r} cannot be sent to Anthropic: its "
                f"custom id must be 1-{64 - _TAG_LEN} letters, digits, '_' or '-' "
                "(aeval adds a 13-character tag)"
            )
        requests.append({"custom_id": sent, "params": line["body"]})
    return requests


def result_line(raw: str | bytes, tag: BatchTag | None, batch_id: str) -> str:
    """One line of a batch's results, as an OpenAI Batch-API output line.

    A line that is not a readable result is passed on as it came (the parser
    downstream rejects it, and its row ends up ``missing``).

    :raises ForeignBatchError: the line's custom id carries another shard's tag.
    """
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        return text
    if not isinstance(obj, dict) or not isinstance(obj.get("custom_id"), str):
        return text
    sent: str = obj["custom_id"]
    if tag is not None:
        if not sent.startswith(f"{tag.digest}_"):
            raise ForeignBatchError(
                f"the results of batch {batch_id} hold request {sent!r}, not one of "
                f"{tag.shard}'s (attempt {tag.attempt})"
            )
        cid = sent[_TAG_LEN:]
    else:
        cid = sent[_TAG_LEN:] if _TAG.match(sent) else sent
    result = obj.get("result")
    result = result if isinstance(result, dict) else {}
    kind = result.get("type")
    if kind == "succeeded":
        return _succeeded(cid, result.get("message"))
    if kind == "canceled":
        return error_line(cid, code="batch_cancelled", message="the batch was cancelled")
    if kind == "expired":
        return error_line(cid, code="batch_expired", message="the batch expired (24 h)")
    if kind == "errored":
        outer = result.get("error")
        inner = outer.get("error") if isinstance(outer, dict) else None
        inner = inner if isinstance(inner, dict) else {}
        raw_type = inner.get("type")
        err_type = raw_type if isinstance(raw_type, str) else "api_error"
        code, status = _ERROR_CODES.get(err_type, (err_type, 500))
        message = inner.get("message") if isinstance(inner.get("message"), str) else None
        return error_line(cid, code=code, message=message, status_code=status)
    return error_line(cid, code="unknown_result", message=f"result type {kind!r}")


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _succeeded(cid: str, message: Any) -> str:
    message = message if isinstance(message, dict) else {}
    blocks = message.get("content")
    texts = [
        b["text"]
        for b in (blocks if isinstance(blocks, list) else [])
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    ]
    usage = message.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    # Billed input: fresh, cache-writing and cache-reading tokens alike.
    prompt = sum(
        _int(usage.get(k))
        for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
    details = usage.get("output_tokens_details")
    thinking = details.get("thinking_tokens") if isinstance(details, dict) else None
    stop = message.get("stop_reason")
    model = message.get("model")
    return answer_line(
        cid,
        text="".join(texts) or None,
        model=model if isinstance(model, str) else None,
        finish_reason=_FINISH.get(stop, stop) if isinstance(stop, str) else None,
        prompt_tokens=prompt,
        completion_tokens=_int(usage.get("output_tokens")),  # thinking included
        reasoning_tokens=_int(thinking) if thinking is not None else None,
        response_id=message.get("id") if isinstance(message.get("id"), str) else None,
    )


class AnthropicBatchProvider(StainlessBatchProvider[anthropic.AsyncAnthropic]):
    """Message Batches through ``anthropic.AsyncAnthropic``; one per run, closed at the end."""

    name = "anthropic"
    title = "Anthropic"
    serial_creates = True  # the lost-create rule tells batches apart by time and size
    sdk = anthropic
    client_class = anthropic.AsyncAnthropic

    def __init__(self, credentials: Credentials, retry: RetrySettings | None = None) -> None:
        retry = retry or RetrySettings()
        super().__init__(credentials, retry)
        # A create of the intent may have been sent until the lifecycle's retry
        # deadline ran out (then one request timeout more).
        self._find_span_s = retry.deadline_s + retry.request_timeout_s + CLOCK_SKEW_S

    def _fail(self, err: Exception, what: str) -> Exception:
        return translate_error(err, what)

    def _to_remote(self, batch: Any) -> RemoteBatch:
        return _to_remote(batch)

    @property
    def _batches(self) -> AsyncBatches:
        return self._client.messages.batches

    def wants_upload(self, size_bytes: int) -> bool:
        return False  # requests go inline in the create call

    async def upload(self, path: Path, *, filename: str | None = None) -> str:
        raise ApiError("Anthropic's Message Batches API takes its requests inline: no upload")

    async def find_files(self, filename: str) -> list[str]:
        return []

    async def create(self, source: BatchInput, tag: BatchTag) -> RemoteBatch:
        requests = await anyio.to_thread.run_sync(_read_requests, source, tag)
        with failing_as(self._fail, f"creating a batch of {len(requests)} requests"):
            batch = await self._once.messages.batches.create(requests=requests)
        return _to_remote(batch)

    async def find(self, tag: BatchTag) -> RemoteBatch | None:
        """The unclaimed batch of the shard's size created closest to the intent, within
        its window ([intent − clock skew, intent + the create's retry span]), passing over
        an ended batch whose results are another's; listing stops at the first batch older
        than the window (the API lists the newest first).

        A batch's results can be read only once it has ended (MessageBatch.results_url:
        "Specified only once processing ends", anthropic SDK 2.x): an ended candidate is
        confirmed by its first result's tag before it is taken, an unfinished one by its
        results at download (:func:`result_line`).
        """
        if tag.intent_at is None:
            return None
        intent = tag.intent_at
        start, end = intent - CLOCK_SKEW_S, intent + self._find_span_s
        candidates: list[Any] = []
        with failing_as(self._fail, "listing batches"):
            async for batch in self._batches.list(limit=LIST_PAGE):
                created = batch.created_at.timestamp()
                if created < start:
                    break
                if created > end or batch.id in tag.claimed or _total(batch) != tag.requests:
                    continue
                candidates.append(batch)
        candidates.sort(key=lambda b: abs(b.created_at.timestamp() - intent))
        for batch in candidates:
            if batch.processing_status != "ended" or await self._holds_shard(batch.id, tag):
                return _to_remote(batch)
        return None

    async def _holds_shard(self, batch_id: str, tag: BatchTag) -> bool:
        """Whether an ended batch's first result carries the shard's tag (results that
        cannot be read, e.g. gone with a deleted batch, leave the batch a candidate:
        the download confirms it)."""
        what = f"reading the first result of batch {batch_id}"
        results = self._batches.with_streaming_response.results(batch_id)
        try:
            async with opened_as(self._fail, what, results) as response:
                async for line in guard_lines(response.iter_lines(), what, translate_error):
                    if line.strip():
                        try:
                            result_line(line, tag, batch_id)
                        except ForeignBatchError:
                            return False
                        return True
        except ApiError:
            return True
        return True

    @asynccontextmanager
    async def open_lines(
        self, file_id: str, tag: BatchTag | None = None
    ) -> AsyncIterator[AsyncIterator[str]]:
        what = f"downloading the results of batch {file_id}"
        results = self._batches.with_streaming_response.results(file_id)
        async with opened_as(self._fail, what, results) as response:
            yield _converted(response.iter_lines(), tag, file_id)

    async def delete_file(self, file_id: str) -> None:
        """Delete an ended batch (its results with it)."""
        await self._delete(self._batches, file_id, f"deleting batch {file_id}")


async def _converted(
    lines: AsyncIterator[str], tag: BatchTag | None, batch_id: str
) -> AsyncIterator[str]:
    """The results as answer lines; a broken download is re-raised as retryable."""
    what = f"downloading the results of batch {batch_id}"
    async for line in guard_lines(lines, what, translate_error):
        if line.strip():
            yield result_line(line, tag, batch_id)
