"""The Gemini Batch API (Developer API) through google-genai.

Every shard is uploaded through the Files API's resumable upload as
``{"key", "request"}`` lines and named by ``fileName``, whatever its size: the
lines of the responses file carry each request's ``key``, while inline
results are matched to their requests only by an echoed ``metadata.key`` that
the service is reported to leave out, in an order it is reported not to keep
(googleapis/python-genai #2008, #1909; googleapis/js-genai #1191), which would
leave every row of a billed batch without its answer (docs/providers/gemini.md).
A batch is labelled with the shard's display name
(:attr:`~aeval.batch.providers.base.BatchTag.display_name`), by which a lost
create is found again (``batches.list``). Results come inline
(``inlinedResponses``, read again through ``batches.get``) or as a responses
file (downloaded to a temporary file, then read a line at a time; inline
results only for a batch an older aeval created inline), and become
OpenAI output lines: the answer is the text parts the model wrote; thought
parts (summaries of its thinking, sent only when asked for) are left out, as
they are not the answer; thought tokens count as output tokens (Google bills
them so) and are kept apart as reasoning tokens.

google-genai retries nothing by default (no ``retry_options``): every call,
``create`` included, is sent once, and aeval's retry policy decides. The
SDK's async transport is pinned to an httpx client (with aiohttp installed it
would use aiohttp, which runs under asyncio only; aeval also runs under trio).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio.to_thread
import httpx
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from aeval.api_settings import Credentials, RetrySettings
from aeval.batch.providers.base import (
    BatchInput,
    BatchTag,
    RemoteBatch,
    RemoteBatchError,
)
from aeval.batch.providers.cloud_storage import paced
from aeval.batch.providers.lines import answer_line, error_line
from aeval.batch.providers.request_lines import first_model, rewritten
from aeval.batch.providers.sdk_errors import guard_lines, http_failure, transport_failure
from aeval.errors import ApiError

__all__ = ["FINISH_REASONS", "GeminiBatchProvider", "finish_reason", "gemini_result_line"]

DEFAULT_ENDPOINT = "https://generativelanguage.googleapis.com"
_CHECK = "GEMINI_API_KEY (or GOOGLE_API_KEY) and GOOGLE_GEMINI_BASE_URL"
_STATES = {
    "JOB_STATE_PENDING": "validating",
    "JOB_STATE_QUEUED": "validating",
    "JOB_STATE_RUNNING": "in_progress",
    "JOB_STATE_SUCCEEDED": "completed",
    "JOB_STATE_PARTIALLY_SUCCEEDED": "completed",
    "JOB_STATE_FAILED": "failed",
    "JOB_STATE_CANCELLING": "cancelling",
    "JOB_STATE_CANCELLED": "cancelled",
    "JOB_STATE_EXPIRED": "expired",
}
# Every google-genai FinishReason (3.6.1, types.FinishReason, each value's docstring) as what
# it means in a chat finish_reason: OpenAI's word where the meaning is OpenAI's ("stop";
# "length" for an answer cut by a token limit, CONTINUATION included; "content_filter" for
# an answer withheld by a safety, policy or blocklist filter), else Gemini's own reason in
# lower case, so a verdict says what happened (an unsupported language, a malformed
# function call, a reason Gemini leaves unsaid) and never calls it a filter.
# tests/test_conformance.py holds this table against the SDK's enum.
FINISH_REASONS: dict[str, str] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "CONTINUATION": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",  # withheld: it may recite a source
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "IMAGE_PROHIBITED_CONTENT": "content_filter",
    "IMAGE_RECITATION": "content_filter",
    "MODEL_ARMOR": "content_filter",
    "ESCALATION": "content_filter",  # "filtered by an escalation rule"
    "PUP_LIMITED_DISABLED": "account_disabled",
    "LANGUAGE": "language",
    "OTHER": "other",
    "FINISH_REASON_UNSPECIFIED": "unspecified",
    "MALFORMED_FUNCTION_CALL": "malformed_function_call",
    "UNEXPECTED_TOOL_CALL": "unexpected_tool_call",
    "TOO_MANY_TOOL_CALLS": "too_many_tool_calls",
    "MISSING_THOUGHT_SIGNATURE": "missing_thought_signature",
    "MALFORMED_RESPONSE": "malformed_response",
    "IMAGE_OTHER": "image_other",
    "NO_IMAGE": "no_image",
}


def finish_reason(raw: str) -> str:
    """A Gemini finishReason as a chat finish_reason; one newer than this table, in lower
    case as Gemini names it (a reason of its own, not taken for a filter)."""
    return FINISH_REASONS.get(raw.upper(), raw.lower() or "unspecified")


# google.rpc.Code of a failed request -> (aeval's error code, the HTTP status it stands for).
# The statuses are code.proto's "HTTP Mapping" (googleapis google/rpc/code.proto); whether
# --retry-failed sends the request again follows from them (aeval.batch.retry: 408, 409,
# 429, 5xx), but for the codes code.proto and Gemini's troubleshooting guide
# (https://ai.google.dev/gemini-api/docs/troubleshooting) say a retry will not mend:
# ALREADY_EXISTS, UNIMPLEMENTED and DATA_LOSS (aeval.batch.retry.FINAL_REQUEST_CODES).
# FAILED_PRECONDITION (billing not enabled), PERMISSION_DENIED (the key's rights) and
# UNAUTHENTICATED want the account fixed first; ABORTED is retried "at a higher level", a
# new request; DEADLINE_EXCEEDED and CANCELLED in a batch's results are its requests that
# the batch never ran (it expired; it was cancelled). An error without a code (proto3 leaves
# 0 = OK out of the JSON) is read as UNKNOWN.
_RPC: dict[int, tuple[str, int]] = {
    0: ("server_error", 500),  # OK, as UNKNOWN: an error that says nothing
    1: ("batch_cancelled", 499),  # CANCELLED
    2: ("server_error", 500),  # UNKNOWN
    3: ("invalid_request", 400),  # INVALID_ARGUMENT
    4: ("batch_expired", 504),  # DEADLINE_EXCEEDED
    5: ("not_found", 404),  # NOT_FOUND
    6: ("already_exists", 409),  # ALREADY_EXISTS
    7: ("permission_denied", 403),  # PERMISSION_DENIED
    8: ("rate_limit_exceeded", 429),  # RESOURCE_EXHAUSTED
    9: ("failed_precondition", 400),  # FAILED_PRECONDITION
    10: ("aborted", 409),  # ABORTED
    11: ("out_of_range", 400),  # OUT_OF_RANGE
    12: ("not_implemented", 501),  # UNIMPLEMENTED
    13: ("server_error", 500),  # INTERNAL
    14: ("server_error", 503),  # UNAVAILABLE
    15: ("data_loss", 500),  # DATA_LOSS
    16: ("unauthenticated", 401),  # UNAUTHENTICATED
}


def _translate(err: Exception, what: str) -> Exception:
    if isinstance(err, genai_errors.APIError):
        response = getattr(err, "response", None)
        headers = getattr(response, "headers", None)
        message = err.message or str(err.status or "")
        return http_failure(what, int(err.code or 0), message, headers=headers, check=_CHECK)
    transport = transport_failure(err, what)
    if transport is not None:
        return transport
    if isinstance(err, (ValueError, KeyError)):  # the SDK refusing an answer it cannot read
        return ApiError(f"{what}: {err}")
    return err


def _text(parts: list[Mapping[str, Any]]) -> str | None:
    """The text the model wrote (thought parts left out); ``None`` when it wrote none."""
    text = "".join(
        str(p.get("text") or "") for p in parts if isinstance(p, Mapping) and not p.get("thought")
    )
    return text or None


def gemini_result_line(record: Mapping[str, Any], model: str | None = None) -> str:
    """One Gemini result (a responses-file line, or an inline response as JSON) as an
    OpenAI output line.

    :raises ValueError: the result carries no key (an inline response whose metadata
        was not echoed): it cannot be matched to a request.
    """
    key = record.get("key") or (record.get("metadata") or {}).get("key")
    if key is None:  # nothing says which request it answers: no row to land on
        raise ValueError("a Gemini result without a key")
    custom_id = str(key)
    response = record.get("response")
    if isinstance(response, Mapping):
        candidates = response.get("candidates") or []
        usage = response.get("usageMetadata") or {}
        thoughts = int(usage.get("thoughtsTokenCount") or 0)
        answer = int(usage.get("candidatesTokenCount") or 0)
        version = str(response.get("modelVersion") or model or "") or None
        if not candidates:  # the prompt was blocked (promptFeedback.blockReason)
            # Blocked before any answer, but billed for its prompt and named by its model
            # version: both are kept, as for any answer.
            return answer_line(
                custom_id, text=None, model=version, finish_reason="content_filter",
                prompt_tokens=int(usage.get("promptTokenCount") or 0),
                completion_tokens=answer + thoughts,
                reasoning_tokens=thoughts if thoughts else None,
                response_id=response.get("responseId"),
            )  # fmt: skip
        first = candidates[0]
        content = first.get("content") or {}
        finish = str(first.get("finishReason") or "STOP")
        return answer_line(
            custom_id,
            text=_text(content.get("parts") or []),
            model=version,
            finish_reason=finish_reason(finish),
            prompt_tokens=int(usage.get("promptTokenCount") or 0),
            completion_tokens=answer + thoughts,
            reasoning_tokens=thoughts if thoughts else None,
            response_id=response.get("responseId"),
        )
    raw = record.get("error")
    error: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    code, status = _RPC.get(int(error.get("code") or 0), ("server_error", 500))
    return error_line(custom_id, code=code, message=error.get("message"), status_code=status)


def _file_request(line: dict[str, Any]) -> dict[str, Any]:
    """One request as the Batch API's JSONL input has it."""
    return {"key": line["custom_id"], "request": line["body"]}


def _epoch(value: datetime | None) -> float | None:
    return value.timestamp() if value is not None else None


class GeminiBatchProvider:
    """Batch calls through ``google.genai.Client(...).aio``; one per run, closed at the end."""

    name = "google"
    serial_creates = False

    def __init__(self, credentials: Credentials, retry: RetrySettings | None = None) -> None:
        retry = retry or RetrySettings()
        self._http = httpx.AsyncClient(timeout=retry.request_timeout_s)
        options = types.HttpOptions(
            base_url=credentials.base_url,
            timeout=int(retry.request_timeout_s * 1000),
            httpx_async_client=self._http,
        )
        self._client = genai.Client(api_key=credentials.api_key, http_options=options)
        self._endpoint = (credentials.base_url or DEFAULT_ENDPOINT).rstrip("/")
        self._requests: dict[str, int] = {}  # batch name -> request count, from create

    @property
    def endpoint(self) -> str:
        return self._endpoint

    def wants_upload(self, size_bytes: int) -> bool:
        # Always: only the responses file's lines say which request each answers.
        return True

    async def upload(self, path: Path, *, filename: str | None = None) -> str:
        name = filename or Path(path).name
        async with rewritten(Path(path), name, _file_request) as converted:
            try:
                uploaded = await self._client.aio.files.upload(
                    file=str(converted),
                    config=types.UploadFileConfig(display_name=name, mime_type="application/jsonl"),
                )
            except Exception as err:
                raise _translate(err, f"uploading {name}") from err
        if not uploaded.name:
            raise ApiError(f"uploading {name}: the Files API returned no file name")
        return uploaded.name

    async def find_files(self, filename: str) -> list[str]:
        try:
            return [
                f.name
                async for f in await self._client.aio.files.list(config={"page_size": 100})
                if f.display_name == filename and f.name
            ]
        except Exception as err:
            raise _translate(err, f"listing files named {filename}") from err

    async def delete_file(self, file_id: str) -> None:
        try:
            if file_id.startswith("batches/"):  # inline results live on the batch
                await self._client.aio.batches.delete(name=file_id)
            else:
                await self._client.aio.files.delete(name=file_id)
        except genai_errors.APIError as err:
            if err.code == 404:
                return
            raise _translate(err, f"deleting {file_id}") from err
        except Exception as err:
            raise _translate(err, f"deleting {file_id}") from err

    async def create(self, source: BatchInput, tag: BatchTag) -> RemoteBatch:
        model = await anyio.to_thread.run_sync(first_model, source.path)
        if model is None:
            raise ApiError(f"{tag.shard}: the request file names no Gemini model")
        if source.file_id is None:
            raise ApiError(f"{tag.shard}: Gemini batches need an uploaded request file")
        what = f"creating a Gemini batch for {tag.shard}"
        try:
            job = await self._client.aio.batches.create(
                model=model,
                src=source.file_id,
                config=types.CreateBatchJobConfig(display_name=tag.display_name),
            )
        except Exception as err:
            raise _translate(err, what) from err
        if job.name:
            self._requests[job.name] = source.requests
        return self._to_remote(job)

    async def retrieve(self, batch_id: str) -> RemoteBatch:
        try:
            return self._to_remote(await self._client.aio.batches.get(name=batch_id))
        except Exception as err:
            raise _translate(err, f"polling batch {batch_id}") from err

    async def find(self, tag: BatchTag) -> RemoteBatch | None:
        named: list[RemoteBatch] = []
        try:
            async for job in await self._client.aio.batches.list(config={"page_size": 100}):
                if job.display_name == tag.display_name:
                    named.append(self._to_remote(job))
        except Exception as err:
            raise _translate(err, "listing batches") from err
        best = tag.newest_unclaimed(named)
        if best is None:
            return None
        # A listing need not carry a batch's results (the local server's leaves them out):
        # the batch as ``batches.get`` describes it does.
        self._requests.setdefault(best.id, tag.requests)
        return await self.retrieve(best.id)

    async def cancel(self, batch_id: str) -> RemoteBatch:
        try:
            await self._client.aio.batches.cancel(name=batch_id)
        except Exception as err:
            raise _translate(err, f"cancelling batch {batch_id}") from err
        return await self.retrieve(batch_id)

    @asynccontextmanager
    async def open_lines(
        self, file_id: str, tag: BatchTag | None = None
    ) -> AsyncIterator[AsyncIterator[str]]:
        what = f"reading the results of {file_id}"
        if file_id.startswith("batches/"):
            try:
                job = await self._client.aio.batches.get(name=file_id)
            except Exception as err:
                raise _translate(err, what) from err
            inline = (job.dest.inlined_responses if job.dest else None) or []
            records = [r.model_dump(mode="json", by_alias=True, exclude_none=True) for r in inline]
            converted = (_converted(r, job.model) for r in records)
            yield paced(line for line in converted if line is not None)
            return
        with tempfile.TemporaryDirectory(prefix="aeval-gemini-") as tmp:
            dest = Path(tmp) / "responses.jsonl"
            try:
                await self._client.aio.files.download(file=file_id, destination=str(dest))
            except Exception as err:
                raise _translate(err, what) from err
            yield guard_lines(paced(_file_lines(dest)), what)

    async def aclose(self) -> None:
        await self._http.aclose()

    def _to_remote(self, job: Any) -> RemoteBatch:
        state = job.state.name if job.state is not None else "JOB_STATE_PENDING"
        status = _STATES.get(state, "in_progress")
        total = self._requests.get(job.name or "", 0)
        output = None
        if status in ("completed", "expired", "cancelled") and job.dest is not None:
            if job.dest.file_name:
                output = job.dest.file_name
            elif job.dest.inlined_responses is not None:
                output = job.name
        errors: tuple[RemoteBatchError, ...] = ()
        if status == "failed":
            detail = job.error.message if job.error is not None and job.error.message else ""
            errors = (RemoteBatchError("batch_failed", detail or "the Gemini batch failed"),)
        return RemoteBatch(
            id=str(job.name),
            status=status,
            completed=total if status == "completed" else 0,
            total=total,
            created_at=_epoch(job.create_time),
            output_file_id=output,
            errors=errors,
            metadata={"display_name": job.display_name or ""},
        )


def _file_lines(path: Path) -> Iterator[str]:
    with path.open(encoding="utf-8") as handle:
        for raw in handle:
            if raw.strip():
                line = _converted(raw)
                if line is not None:
                    yield line


def _converted(raw: str | Mapping[str, Any], model: str | None = None) -> str | None:
    """A result as an output line; ``None`` for one that cannot be read (hostile input:
    its request then has no line, and is reported missing)."""
    try:
        record = json.loads(raw) if isinstance(raw, str) else raw
        if not isinstance(record, Mapping):
            return None
        return gemini_result_line(record, model)
    except (ValueError, TypeError, AttributeError):
        return None
