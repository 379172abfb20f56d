"""Mistral's batch jobs API through the ``mistralai`` SDK.

Requests are uploaded (purpose ``batch``) as ``{"custom_id", "body"}`` lines,
the model named once on the job; always a file, never inline ``requests``: a
file keeps a shard's size unbounded by a request body's and lets a stray
upload be found by name like on every other provider. A job keeps metadata,
by which a lost create is found (``jobs.list``, filtered here, since the SDK
sends a metadata filter as loose query parameters). Result files hold OpenAI
output lines, passed through. The SDK retries nothing unless told to
(``retry_config``): every call is sent once and aeval's retry policy decides.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio.to_thread
from mistralai.client import Mistral
from mistralai.client import errors as mistral_errors

from aeval.api_settings import Credentials, RetrySettings
from aeval.batch.providers.base import BatchInput, BatchTag, RemoteBatch, RemoteBatchError
from aeval.batch.providers.request_lines import first_model, rewritten
from aeval.batch.providers.sdk_errors import guard_lines, http_failure, transport_failure
from aeval.batch.shard import URL
from aeval.errors import ApiError

__all__ = ["MistralBatchProvider"]

DEFAULT_ENDPOINT = "https://api.mistral.ai"
_CHECK = "MISTRAL_API_KEY and MISTRAL_BASE_URL"
_PAGE = 100
_STATUSES = {
    "QUEUED": "validating",
    "RUNNING": "in_progress",
    "SUCCESS": "completed",
    "FAILED": "failed",
    "TIMEOUT_EXCEEDED": "expired",
    "CANCELLATION_REQUESTED": "cancelling",
    "CANCELLED": "cancelled",
}


def _fail(err: Exception, what: str) -> Exception:
    if isinstance(err, mistral_errors.MistralError):
        return http_failure(
            what, err.status_code, err.message or err.body, headers=err.headers, check=_CHECK
        )
    if isinstance(err, mistral_errors.NoResponseError):
        return transport_failure(ConnectionError(str(err)), what) or err
    transport = transport_failure(err, what)
    if transport is not None:
        return transport
    if isinstance(err, mistral_errors.ResponseValidationError):
        return ApiError(f"{what}: the API sent a response we cannot read: {err}")
    return err


def _input_line(line: dict[str, Any]) -> dict[str, Any]:
    body = {k: v for k, v in line["body"].items() if k != "model"}
    return {"custom_id": line["custom_id"], "body": body}


def _to_remote(job: Any) -> RemoteBatch:
    status = _STATUSES.get(str(job.status), "in_progress")
    errors: tuple[RemoteBatchError, ...] = ()
    if status == "failed":
        errors = tuple(RemoteBatchError("batch_failed", e.message) for e in job.errors or []) or (
            RemoteBatchError("batch_failed", "the Mistral batch job failed"),
        )
    metadata = job.metadata if isinstance(job.metadata, dict) else {}
    return RemoteBatch(
        id=job.id,
        status=status,
        completed=job.succeeded_requests or 0,
        failed=job.failed_requests or 0,
        total=job.total_requests or 0,
        created_at=float(job.created_at) if job.created_at else None,
        output_file_id=job.output_file or None,
        error_file_id=job.error_file or None,
        errors=errors,
        metadata={str(k): str(v) for k, v in metadata.items()},
    )


class MistralBatchProvider:
    """Batch calls through ``mistralai.client.Mistral``; one per run, closed at the end."""

    name = "mistral"
    serial_creates = False

    def __init__(self, credentials: Credentials, retry: RetrySettings | None = None) -> None:
        retry = retry or RetrySettings()
        self._client = Mistral(
            api_key=credentials.api_key,
            server_url=credentials.base_url,
            timeout_ms=int(retry.request_timeout_s * 1000),
        )
        self._endpoint = (credentials.base_url or DEFAULT_ENDPOINT).rstrip("/")

    @property
    def endpoint(self) -> str:
        return self._endpoint

    def wants_upload(self, size_bytes: int) -> bool:
        return True

    async def upload(self, path: Path, *, filename: str | None = None) -> str:
        name = filename or Path(path).name
        async with rewritten(Path(path), name, _input_line) as converted:
            try:
                with converted.open("rb") as handle:
                    uploaded = await self._client.files.upload_async(
                        file={"file_name": name, "content": handle}, purpose="batch"
                    )
            except Exception as err:
                raise _fail(err, f"uploading {name}") from err
        return uploaded.id

    async def find_files(self, filename: str) -> list[str]:
        ids: list[str] = []
        page = 0
        try:
            while True:
                listed = await self._client.files.list_async(
                    page=page, page_size=_PAGE, purpose="batch"
                )
                ids += [f.id for f in listed.data if f.filename == filename]
                if len(listed.data) < _PAGE:
                    return ids
                page += 1
        except Exception as err:
            raise _fail(err, f"listing files named {filename}") from err

    async def delete_file(self, file_id: str) -> None:
        try:
            await self._client.files.delete_async(file_id=file_id)
        except mistral_errors.MistralError as err:
            if err.status_code == 404:
                return
            raise _fail(err, f"deleting file {file_id}") from err
        except Exception as err:
            raise _fail(err, f"deleting file {file_id}") from err

    async def create(self, source: BatchInput, tag: BatchTag) -> RemoteBatch:
        if source.file_id is None:
            raise ApiError(f"{tag.shard}: Mistral batches are created from an uploaded file here")
        model = await anyio.to_thread.run_sync(first_model, source.path)
        if model is None:
            raise ApiError(f"{tag.shard}: the request file names no Mistral model")
        try:
            job = await self._client.batch.jobs.create_async(
                input_files=[source.file_id],
                model=model,
                endpoint=URL,
                metadata=tag.metadata,
                timeout_hours=24,
            )
        except Exception as err:
            raise _fail(err, f"creating a batch job for {source.file_id}") from err
        return _to_remote(job)

    async def retrieve(self, batch_id: str) -> RemoteBatch:
        try:
            return _to_remote(await self._client.batch.jobs.get_async(job_id=batch_id))
        except Exception as err:
            raise _fail(err, f"polling batch job {batch_id}") from err

    async def find(self, tag: BatchTag) -> RemoteBatch | None:
        listed: list[RemoteBatch] = []
        page = 0
        try:
            while True:
                jobs = await self._client.batch.jobs.list_async(page=page, page_size=_PAGE)
                listed += [_to_remote(job) for job in jobs.data or []]
                if len(jobs.data or []) < _PAGE:
                    return tag.newest_labelled(listed)
                page += 1
        except Exception as err:
            raise _fail(err, "listing batch jobs") from err

    async def cancel(self, batch_id: str) -> RemoteBatch:
        try:
            return _to_remote(await self._client.batch.jobs.cancel_async(job_id=batch_id))
        except Exception as err:
            raise _fail(err, f"cancelling batch job {batch_id}") from err

    @asynccontextmanager
    async def open_lines(
        self, file_id: str, tag: BatchTag | None = None
    ) -> AsyncIterator[AsyncIterator[str]]:
        what = f"downloading file {file_id}"
        try:
            response = await self._client.files.download_async(file_id=file_id)
        except Exception as err:
            raise _fail(err, what) from err
        try:
            yield guard_lines(response.aiter_lines(), what)
        finally:
            await response.aclose()

    async def aclose(self) -> None:
        await self._client.__aexit__(None, None, None)
