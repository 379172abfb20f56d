"""Together's Batch API through the ``together`` SDK.

Uploads go through the SDK's own three-step upload (a presigned ``PUT``
between two API calls) as ``{"custom_id", "body"}`` lines, purpose
``batch-api``; Together answers an upload whose sha256 it already has with
that file's id, so re-uploading after a lost response makes no second file.
A Together batch carries no metadata and no display name: a lost create is
found by its input file (a batch of the shard's recorded upload that no shard
of the run recorded; ``BatchTag.input_file_id``), with this run's creates on
Together made one at a time, since shards with identical requests share one
uploaded file. Statuses are
upper-case; progress is a percentage, turned into counts with the shard's
request count. Result files hold OpenAI output lines, passed through as they are.
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio.to_thread
import together

from aeval.batch.providers.base import BatchInput, BatchTag, RemoteBatch, RemoteBatchError
from aeval.batch.providers.request_lines import rewrite_lines
from aeval.batch.providers.sdk_errors import guard_lines, stainless_failure
from aeval.batch.shard import URL
from aeval.config import Credentials, RetrySettings
from aeval.errors import ApiError

__all__ = ["TogetherBatchProvider"]

DEFAULT_ENDPOINT = "https://api.together.ai"
_CHECK = "TOGETHER_API_KEY and TOGETHER_BASE_URL"
_STATUSES = {
    "VALIDATING": "validating",
    "IN_PROGRESS": "in_progress",
    "FINALIZING": "finalizing",
    "COMPLETED": "completed",
    "FAILED": "failed",
    "EXPIRED": "expired",
    "CANCELLING": "cancelling",
    "CANCELLED": "cancelled",
}


def _fail(err: Exception, what: str) -> Exception:
    return stainless_failure(err, what, together, _CHECK)


def _input_line(line: dict[str, Any]) -> dict[str, Any]:
    return {"custom_id": line["custom_id"], "body": line["body"]}


class TogetherBatchProvider:
    """Batch calls through ``together.AsyncTogether``; one per run, closed at the end."""

    name = "together"
    # Two shards with the same requests (trials without a seed) upload the same bytes,
    # which Together keeps as one file: their batches share an input file, so the
    # lost-create rule needs this run's creates on Together made one at a time.
    serial_creates = True

    def __init__(self, credentials: Credentials, retry: RetrySettings | None = None) -> None:
        retry = retry or RetrySettings()
        self._client = together.AsyncTogether(
            api_key=credentials.api_key,
            base_url=credentials.base_url,
            max_retries=retry.sdk_max_retries,
            timeout=retry.request_timeout_s,
        )
        # For the calls that create something: one POST per call, never a silent re-POST.
        self._once = self._client.with_options(max_retries=0)
        self._endpoint = (credentials.base_url or DEFAULT_ENDPOINT).rstrip("/")
        self._requests: dict[str, int] = {}  # batch id -> request count, from create

    @property
    def endpoint(self) -> str:
        return self._endpoint

    def wants_upload(self, size_bytes: int) -> bool:
        return True

    async def upload(self, path: Path, *, filename: str | None = None) -> str:
        name = filename or Path(path).name
        with tempfile.TemporaryDirectory(prefix="aeval-together-") as tmp:
            # The SDK names the upload after the file: the copy carries the shard's name.
            converted = Path(tmp) / name
            await anyio.to_thread.run_sync(rewrite_lines, Path(path), converted, _input_line)
            try:
                uploaded = await self._once.files.upload(file=converted, purpose="batch-api")
            except Exception as err:
                raise _fail(err, f"uploading {name}") from err
        return uploaded.id

    async def find_files(self, filename: str) -> list[str]:
        try:
            listed = await self._client.files.list()
        except Exception as err:
            raise _fail(err, f"listing files named {filename}") from err
        return [f.id for f in listed.data if f.filename == filename and f.purpose == "batch-api"]

    async def delete_file(self, file_id: str) -> None:
        try:
            await self._client.files.delete(file_id)
        except together.NotFoundError:
            return
        except Exception as err:
            raise _fail(err, f"deleting file {file_id}") from err

    async def create(self, source: BatchInput, tag: BatchTag) -> RemoteBatch:
        if source.file_id is None:
            raise ApiError(f"{tag.job}: Together batches need an uploaded input file")
        try:
            created = await self._once.batches.create(
                endpoint=URL, input_file_id=source.file_id, completion_window="24h"
            )
        except Exception as err:
            raise _fail(err, f"creating a batch for {source.file_id}") from err
        if created.job is None or not created.job.id:
            raise ApiError(f"creating a batch for {source.file_id}: Together returned no job")
        self._requests[created.job.id] = source.requests
        return self._to_remote(created.job)

    async def retrieve(self, batch_id: str) -> RemoteBatch:
        try:
            return self._to_remote(await self._client.batches.retrieve(batch_id))
        except Exception as err:
            raise _fail(err, f"polling batch {batch_id}") from err

    async def find(self, tag: BatchTag) -> RemoteBatch | None:
        if tag.input_file_id is None:
            return None  # nothing was uploaded, so nothing was created from it
        try:
            jobs = await self._client.batches.list()
        except Exception as err:
            raise _fail(err, "listing batches") from err
        mine = [
            j
            for j in jobs
            if j.input_file_id == tag.input_file_id and j.id and j.id not in tag.claimed
        ]
        if not mine:
            return None
        newest = max(mine, key=lambda j: j.created_at.timestamp() if j.created_at else 0.0)
        self._requests.setdefault(str(newest.id), tag.requests)
        return self._to_remote(newest)

    async def cancel(self, batch_id: str) -> RemoteBatch:
        try:
            return self._to_remote(await self._client.batches.cancel(batch_id))
        except Exception as err:
            raise _fail(err, f"cancelling batch {batch_id}") from err

    @asynccontextmanager
    async def open_lines(
        self, file_id: str, tag: BatchTag | None = None
    ) -> AsyncIterator[AsyncIterator[str]]:
        what = f"downloading file {file_id}"
        try:
            async with self._client.files.with_streaming_response.content(file_id) as response:
                yield guard_lines(response.iter_lines(), what)
        except Exception as err:
            raise _fail(err, what) from err

    async def aclose(self) -> None:
        await self._client.close()

    def _to_remote(self, job: Any) -> RemoteBatch:
        status = _STATUSES.get(str(job.status or "VALIDATING"), "in_progress")
        total = self._requests.get(str(job.id), 0)
        done = round((job.progress or 0.0) / 100.0 * total) if total else 0
        errors: tuple[RemoteBatchError, ...] = ()
        if status == "failed":
            errors = (RemoteBatchError("batch_failed", str(job.error or "the batch failed")),)
        return RemoteBatch(
            id=str(job.id),
            status=status,
            completed=total if status == "completed" else done,
            total=total,
            created_at=job.created_at.timestamp() if job.created_at else None,
            output_file_id=job.output_file_id or None,
            error_file_id=job.error_file_id or None,
            errors=errors,
            metadata={"input_file_id": str(job.input_file_id or "")},
        )
