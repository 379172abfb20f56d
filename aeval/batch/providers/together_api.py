"""Together's Batch API through the ``together`` SDK.

Uploads go through the SDK's own three-step upload (a presigned ``PUT``
between two API calls) as ``{"custom_id", "body"}`` lines, purpose
``batch-api``; Together answers an upload whose sha256 it already has with
that file's id (the SDK reads the ``409``'s ``file_id``), so re-uploading after
a lost response makes no second file. The bytes of every upload are the
shard's own: its first line opens with JSON whitespace spelled from the upload
name (which the lifecycle records, with a random part, before uploading), so
the same requests uploaded by another run, or another shard, are another file.

A Together batch carries no metadata and no display name: a lost create is
found by its input file (a batch of the shard's recorded upload that no shard
of the run recorded; ``BatchTag.input_file_id``), created no earlier than the
intent to create it was recorded (less :data:`CLOCK_SKEW_S`). Statuses are
upper-case; progress is a percentage, turned into counts with the shard's
request count. Result files hold OpenAI output lines, passed through as they are.
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path
from typing import Any

import anyio.to_thread
import together

from aeval.api_settings import Credentials, RetrySettings
from aeval.batch.providers.base import (
    CLOCK_SKEW_S,
    BatchInput,
    BatchTag,
    RemoteBatch,
    RemoteBatchError,
)
from aeval.batch.providers.request_lines import rewrite_lines
from aeval.batch.providers.sdk_errors import failing_as, stainless_failure
from aeval.batch.providers.stainless import OpenAIShapedBatchProvider
from aeval.batch.shard import URL
from aeval.errors import ApiError

__all__ = ["CLOCK_SKEW_S", "MAX_CUSTOM_ID_CHARS", "TogetherBatchProvider", "spelled_name"]

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


# Together's limit on a custom_id (docs.together.ai/docs/inference/batch/tutorial).
MAX_CUSTOM_ID_CHARS = 64


def _input_line(line: dict[str, Any]) -> dict[str, Any]:
    custom_id = str(line["custom_id"])
    if len(custom_id) > MAX_CUSTOM_ID_CHARS:
        raise ApiError(
            f"row id {custom_id[:40]!r}… is {len(custom_id)} characters: Together takes custom "
            f"ids of at most {MAX_CUSTOM_ID_CHARS}; shorten the dataset's ids"
        )
    return {"custom_id": custom_id, "body": line["body"]}


def spelled_name(name: str) -> str:
    """48 characters of JSON whitespace (spaces and tabs) that spell a digest of
    ``name``: insignificant to any JSON reader (RFC 8259, section 2), but they make
    the bytes, and so Together's checksum, the upload's own."""
    digest = int.from_bytes(hashlib.sha256(name.encode()).digest()[:6], "big")
    return "".join("\t" if digest >> bit & 1 else " " for bit in range(48))


def _write_upload(source: Path, dest: Path) -> None:
    """The shard's requests as Together's input lines, the first opened by the
    upload's own whitespace (:func:`spelled_name` of ``dest``'s name)."""
    rewrite_lines(source, dest, _input_line)
    with dest.open("rb") as handle:
        data = handle.read()
    if data.startswith(b"{"):
        dest.write_bytes(b"{" + spelled_name(dest.name).encode() + data[1:])


class TogetherBatchProvider(OpenAIShapedBatchProvider[together.AsyncTogether]):
    """Batch calls through ``together.AsyncTogether``; one per run, closed at the end."""

    name = "together"
    title = "Together"
    # Every shard uploads bytes of its own (spelled_name), so a batch's input file
    # names its shard: the lost-create rule needs no creates made one at a time.
    serial_creates = False
    sdk = together
    client_class = together.AsyncTogether
    default_endpoint = DEFAULT_ENDPOINT

    def __init__(self, credentials: Credentials, retry: RetrySettings | None = None) -> None:
        super().__init__(credentials, retry)
        self._requests: dict[str, int] = {}  # batch id -> request count, from create

    def _fail(self, err: Exception, what: str) -> Exception:
        return stainless_failure(err, what, together, _CHECK)

    async def upload(self, path: Path, *, filename: str | None = None) -> str:
        name = filename or Path(path).name
        # The SDK names the upload after the file: the copy carries the shard's name.
        with tempfile.TemporaryDirectory(prefix="aeval-upload-") as tmp:
            converted = Path(tmp) / name
            await anyio.to_thread.run_sync(_write_upload, Path(path), converted)
            with failing_as(self._fail, f"uploading {name}"):
                uploaded = await self._once.files.upload(file=converted, purpose="batch-api")
        return str(uploaded.id)

    async def find_files(self, filename: str) -> list[str]:
        with failing_as(self._fail, f"listing files named {filename}"):
            listed = await self._client.files.list()
        return [f.id for f in listed.data if f.filename == filename and f.purpose == "batch-api"]

    async def create(self, source: BatchInput, tag: BatchTag) -> RemoteBatch:
        if source.file_id is None:
            raise ApiError(f"{tag.shard}: Together batches need an uploaded input file")
        with failing_as(self._fail, f"creating a batch for {source.file_id}"):
            created = await self._once.batches.create(
                endpoint=URL, input_file_id=source.file_id, completion_window="24h"
            )
        if created.job is None or not created.job.id:
            raise ApiError(f"creating a batch for {source.file_id}: Together returned no job")
        self._requests[created.job.id] = source.requests
        return self._to_remote(created.job)

    async def find(self, tag: BatchTag) -> RemoteBatch | None:
        if tag.input_file_id is None:
            return None  # nothing was uploaded, so nothing was created from it
        with failing_as(self._fail, "listing batches"):
            jobs = await self._client.batches.list()
        since = None if tag.intent_at is None else tag.intent_at - CLOCK_SKEW_S
        mine = [
            j
            for j in jobs
            if j.input_file_id == tag.input_file_id
            and j.id
            and j.id not in tag.claimed
            and (since is None or (j.created_at is not None and j.created_at.timestamp() >= since))
        ]
        if not mine:
            return None
        newest = max(mine, key=lambda j: j.created_at.timestamp() if j.created_at else 0.0)
        self._requests.setdefault(str(newest.id), tag.requests)
        return self._to_remote(newest)

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
