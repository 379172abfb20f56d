"""Groq's Batch API through the ``groq`` SDK (OpenAI's wire format under ``/openai/v1``).

Groq keeps OpenAI's metadata on a batch, so a lost create is found by it, as
on OpenAI. The ``groq`` SDK rather than ``openai`` with a base URL: it is
Groq's own client, reads Groq's own variables (``GROQ_API_KEY``,
``GROQ_BASE_URL``) and knows Groq's paths and types (completion windows of
24 h to 7 d); the wire format is the same either way.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import groq

from aeval.batch.providers.base import BatchInput, BatchTag, RemoteBatch, RemoteBatchError
from aeval.batch.providers.sdk_errors import guard_lines, stainless_failure
from aeval.batch.shard import URL
from aeval.config import Credentials, RetrySettings
from aeval.errors import ApiError

__all__ = ["COMPLETION_WINDOW", "GroqBatchProvider"]

DEFAULT_ENDPOINT = "https://api.groq.com"
COMPLETION_WINDOW = "24h"  # Groq's shortest; its longest is 7d
_CHECK = "GROQ_API_KEY and GROQ_BASE_URL"


def _fail(err: Exception, what: str) -> Exception:
    return stainless_failure(err, what, groq, _CHECK)


def _to_remote(batch: Any) -> RemoteBatch:
    counts = batch.request_counts
    errors = tuple(
        RemoteBatchError(code=e.code, message=e.message or "", line=e.line)
        for e in ((batch.errors.data or []) if batch.errors is not None else [])
    )
    metadata = batch.metadata if isinstance(batch.metadata, dict) else {}
    return RemoteBatch(
        id=batch.id,
        status=batch.status,
        completed=counts.completed if counts else 0,
        failed=counts.failed if counts else 0,
        total=counts.total if counts else 0,
        created_at=float(batch.created_at) if batch.created_at else None,
        output_file_id=batch.output_file_id,
        error_file_id=batch.error_file_id,
        errors=errors,
        metadata={str(k): str(v) for k, v in metadata.items()},
    )


class GroqBatchProvider:
    """Batch calls through ``groq.AsyncGroq``; one per run, closed at the end."""

    name = "groq"
    serial_creates = False

    def __init__(self, credentials: Credentials, retry: RetrySettings | None = None) -> None:
        retry = retry or RetrySettings()
        self._client = groq.AsyncGroq(
            api_key=credentials.api_key,
            base_url=credentials.base_url,
            max_retries=retry.sdk_max_retries,
            timeout=retry.request_timeout_s,
        )
        self._once = self._client.with_options(max_retries=0)
        self._endpoint = (credentials.base_url or DEFAULT_ENDPOINT).rstrip("/")

    @property
    def endpoint(self) -> str:
        return self._endpoint

    def wants_upload(self, size_bytes: int) -> bool:
        return True

    async def upload(self, path: Path, *, filename: str | None = None) -> str:
        name = filename or Path(path).name
        try:
            with Path(path).open("rb") as fh:
                created = await self._once.files.create(
                    file=(name, fh, "application/jsonl"), purpose="batch"
                )
        except Exception as err:
            raise _fail(err, f"uploading {name}") from err
        if not created.id:
            raise ApiError(f"uploading {name}: the API answered without a file id")
        return created.id

    async def find_files(self, filename: str) -> list[str]:
        try:
            listed = await self._client.files.list()
        except Exception as err:
            raise _fail(err, f"listing files named {filename}") from err
        return [f.id for f in listed.data if f.filename == filename and f.id]

    async def delete_file(self, file_id: str) -> None:
        try:
            await self._client.files.delete(file_id)
        except groq.NotFoundError:
            return
        except Exception as err:
            raise _fail(err, f"deleting file {file_id}") from err

    async def create(self, source: BatchInput, tag: BatchTag) -> RemoteBatch:
        if source.file_id is None:
            raise ApiError(f"{tag.job}: Groq batches need an uploaded input file")
        try:
            batch = await self._once.batches.create(
                input_file_id=source.file_id,
                endpoint=URL,
                completion_window=COMPLETION_WINDOW,
                metadata=tag.metadata,
            )
        except Exception as err:
            raise _fail(err, f"creating a batch for {source.file_id}") from err
        return _to_remote(batch)

    async def retrieve(self, batch_id: str) -> RemoteBatch:
        try:
            return _to_remote(await self._client.batches.retrieve(batch_id))
        except Exception as err:
            raise _fail(err, f"polling batch {batch_id}") from err

    async def find(self, tag: BatchTag) -> RemoteBatch | None:
        wanted = tag.metadata
        try:
            listed = await self._client.batches.list()
        except Exception as err:
            raise _fail(err, "listing batches") from err
        best: RemoteBatch | None = None
        for batch in listed.data or []:
            remote = _to_remote(batch)
            if remote.id in tag.claimed:
                continue
            if all(remote.metadata.get(k) == v for k, v in wanted.items()) and (
                best is None or (remote.created_at or 0) > (best.created_at or 0)
            ):
                best = remote
        return best

    async def cancel(self, batch_id: str) -> RemoteBatch:
        try:
            return _to_remote(await self._client.batches.cancel(batch_id))
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
