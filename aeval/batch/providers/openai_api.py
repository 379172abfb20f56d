"""The OpenAI Files + Batches API as a :class:`~aeval.batch.providers.base.BatchProvider`.

Uses the official SDK's async client (which runs under asyncio and trio). The
SDK's own retries stay on (a few quick ones) for calls that are safe to repeat
(reads, cancels, deletes); our tenacity policy wraps them for the long haul.
The two calls that *create* something remote, ``files.create`` and
``batches.create``, are sent exactly once per call (``max_retries=0``): the SDK
sends no idempotency key, so its silent retry of a POST whose response was lost
would create a second file or a second paid batch that nothing records. The
lifecycle retries them instead, after recording the attempt and, for a batch,
after looking it up by metadata (the lost-create rule: a batch carries the
shard's ``aeval_run``/``aeval_shard``/``aeval_attempt``). Any OpenAI-compatible server works:
the base URL is just configuration; Azure OpenAI goes through the SDK's Azure client.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, Final, Literal

import httpx
import openai

from aeval.batch.providers.base import (
    BatchInput,
    BatchTag,
    RemoteBatch,
    RemoteBatchError,
    TransientApiError,
)
from aeval.batch.retry import retry_after_seconds, retryable_status
from aeval.batch.shard import URL
from aeval.config import Credentials, RetrySettings
from aeval.errors import ApiError

# The HTTP library under the openai SDK: its httpx fork ``httpx2`` in openai 3.x,
# httpx itself before. The transport errors the SDK chains come from that one
# (an ``httpx.ConnectTimeout`` check alone never matched under openai 3.x).
sdk_http: ModuleType
try:
    import httpx2 as sdk_http  # type: ignore[import-not-found,unused-ignore]  # openai<3 lacks it
except ImportError:  # an SDK from before the fork
    sdk_http = httpx

__all__ = ["ENDPOINT", "OpenAIBatchProvider", "translate_error"]

# The endpoint every request line of the batch input names.
ENDPOINT: Final[Literal["/v1/chat/completions"]] = "/v1/chat/completions"
assert ENDPOINT == URL
COMPLETION_WINDOW: Final[Literal["24h"]] = "24h"
LIST_PAGE = 100


def translate_error(err: Exception, what: str) -> Exception:
    """Map an SDK exception to TransientApiError (retry) or ApiError (stop)."""
    if isinstance(err, openai.APIConnectionError):  # includes timeouts
        # The SDK says only "Connection error."; the transport's reason is the cause.
        cause = err.__cause__
        reason = f"{err} ({type(cause).__name__}: {cause})" if cause else str(err)
        # A read or write timeout means the server was reached (a slow upload, a
        # busy API): only a failure to connect counts towards the connect deadline.
        reached = isinstance(err, openai.APITimeoutError) and not isinstance(
            cause, (httpx.ConnectTimeout, sdk_http.ConnectTimeout)
        )
        return TransientApiError(f"{what}: connection problem: {reason}", connection=not reached)
    if isinstance(err, openai.APIStatusError):
        status = err.status_code
        detail = f"{what}: HTTP {status}: {_message(err)}"
        if retryable_status(status):
            return TransientApiError(
                detail, retry_after=retry_after_seconds(err.response.headers), status=status
            )
        if status in (401, 403):
            return ApiError(
                f"{detail} — check OPENAI_API_KEY (or OPENAI_KEY) and OPENAI_BASE_URL "
                "(Azure: AZURE_OPENAI_API_KEY and AZURE_OPENAI_ENDPOINT)"
            )
        missing = _missing_batch_route(err) if status == 404 else None
        if missing is not None:
            return ApiError(
                f"{detail} — this server has no Batch API (404 on {missing}): use a server "
                "that has one, or direct mode ('run --api direct'); docs/providers.md "
                "says which servers have it"
            )
        return ApiError(detail)
    if isinstance(err, openai.APIResponseValidationError):
        return ApiError(f"{what}: the API sent a response we cannot read: {err}")
    return err


def _missing_batch_route(err: openai.APIStatusError) -> str | None:
    """The path when a 404 answers a Files/Batches collection route (``…/files``,
    ``…/batches``): the route itself is missing (vLLM, SGLang, Ollama, llama.cpp),
    unlike a 404 on ``…/batches/{id}``, an id the server does not know."""
    try:
        path = err.response.request.url.path.rstrip("/")
    except RuntimeError:  # a response built without its request
        return None
    return path if path.endswith(("/files", "/batches")) else None


def _message(err: openai.APIStatusError) -> str:
    body = err.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
    return str(err.message)


def _to_remote(batch: Any) -> RemoteBatch:
    counts = batch.request_counts
    errors: list[RemoteBatchError] = []
    if batch.errors is not None and batch.errors.data:
        for e in batch.errors.data:
            errors.append(RemoteBatchError(code=e.code, message=e.message or "", line=e.line))
    return RemoteBatch(
        id=batch.id,
        status=batch.status,
        completed=counts.completed if counts else 0,
        failed=counts.failed if counts else 0,
        total=counts.total if counts else 0,
        created_at=float(batch.created_at) if batch.created_at else None,
        output_file_id=batch.output_file_id,
        error_file_id=batch.error_file_id,
        errors=tuple(errors),
        metadata=dict(batch.metadata or {}),
    )


def sdk_client(credentials: Credentials, *, max_retries: int, timeout: float) -> openai.AsyncOpenAI:
    """The openai SDK's async client for ``credentials``: Azure's when they name an
    Azure endpoint (the SDK builds its URLs, ``{endpoint}/openai/files?api-version=…``,
    and sends the key as the ``api-key`` header), else OpenAI's at ``base_url``."""
    if credentials.azure_endpoint is not None:
        return openai.AsyncAzureOpenAI(
            api_key=credentials.api_key,
            azure_endpoint=credentials.azure_endpoint,
            api_version=credentials.api_version,
            max_retries=max_retries,
            timeout=timeout,
        )
    return openai.AsyncOpenAI(
        api_key=credentials.api_key,
        base_url=credentials.base_url,
        max_retries=max_retries,
        timeout=timeout,
    )


class OpenAIBatchProvider:
    """Batch calls through ``openai.AsyncOpenAI``; create one per run, close it at the end."""

    name = "openai"
    serial_creates = False  # a lost create is found by its metadata, whatever ran meanwhile

    def __init__(self, credentials: Credentials, retry: RetrySettings | None = None) -> None:
        retry = retry or RetrySettings()
        self._client = sdk_client(
            credentials, max_retries=retry.sdk_max_retries, timeout=retry.request_timeout_s
        )
        # For the calls that create something: one POST per call, never a silent re-POST.
        self._once = self._client.with_options(max_retries=0)

    @property
    def base_url(self) -> str:
        return str(self._client.base_url).rstrip("/")

    @property
    def endpoint(self) -> str:
        return self.base_url

    def wants_upload(self, size_bytes: int) -> bool:
        return True  # the Batch API reads its input from an uploaded file only

    async def upload(self, path: Path, *, filename: str | None = None) -> str:
        path = Path(path)
        name = filename or path.name
        try:
            # An open file is streamed in 64 KiB chunks; a Path would be read
            # whole into memory (up to 200 MB).
            with path.open("rb") as fh:
                created = await self._once.files.create(
                    file=(name, fh, "application/jsonl"), purpose="batch"
                )
        except openai.OpenAIError as err:
            raise translate_error(err, f"uploading {name}") from err
        return created.id

    async def find_files(self, filename: str) -> list[str]:
        ids: list[str] = []
        try:
            async for f in self._client.files.list(purpose="batch"):
                if f.filename == filename:
                    ids.append(f.id)
        except openai.OpenAIError as err:
            raise translate_error(err, f"listing files named {filename}") from err
        return ids

    async def create(self, source: BatchInput, tag: BatchTag) -> RemoteBatch:
        input_file_id = source.file_id
        if input_file_id is None:
            raise ApiError(f"{tag.job}: the OpenAI Batch API needs the request file uploaded")
        try:
            batch = await self._once.batches.create(
                input_file_id=input_file_id,
                endpoint=ENDPOINT,
                completion_window=COMPLETION_WINDOW,
                metadata=tag.metadata,
            )
        except openai.OpenAIError as err:
            raise translate_error(err, f"creating a batch for {input_file_id}") from err
        return _to_remote(batch)

    async def retrieve(self, batch_id: str) -> RemoteBatch:
        try:
            return _to_remote(await self._client.batches.retrieve(batch_id))
        except openai.OpenAIError as err:
            raise translate_error(err, f"polling batch {batch_id}") from err

    async def find(self, tag: BatchTag) -> RemoteBatch | None:
        wanted = tag.metadata
        best: RemoteBatch | None = None
        try:
            async for batch in self._client.batches.list(limit=LIST_PAGE):
                have = batch.metadata or {}
                if batch.id not in tag.claimed and all(have.get(k) == v for k, v in wanted.items()):
                    remote = _to_remote(batch)
                    if best is None or (remote.created_at or 0) > (best.created_at or 0):
                        best = remote
        except openai.OpenAIError as err:
            raise translate_error(err, "listing batches") from err
        return best

    async def cancel(self, batch_id: str) -> RemoteBatch:
        try:
            return _to_remote(await self._client.batches.cancel(batch_id))
        except openai.OpenAIError as err:
            raise translate_error(err, f"cancelling batch {batch_id}") from err

    @asynccontextmanager
    async def open_lines(
        self, file_id: str, tag: BatchTag | None = None
    ) -> AsyncIterator[AsyncIterator[str]]:
        # The lines are already in the one answer format; a batch found by metadata
        # is the shard's by construction, so ``tag`` has nothing to confirm.
        try:
            async with self._client.files.with_streaming_response.content(file_id) as response:
                yield _guard_lines(response.iter_lines(), file_id)
        except openai.OpenAIError as err:
            raise translate_error(err, f"downloading file {file_id}") from err

    async def delete_file(self, file_id: str) -> None:
        try:
            await self._client.files.delete(file_id)
        except openai.NotFoundError:
            return
        except openai.OpenAIError as err:
            raise translate_error(err, f"deleting file {file_id}") from err

    async def aclose(self) -> None:
        await self._client.close()


async def _guard_lines(lines: AsyncIterator[str], file_id: str) -> AsyncIterator[str]:
    """Re-raise a broken download (connection dropped mid-body) as retryable."""
    try:
        async for line in lines:
            yield line
    except openai.OpenAIError as err:
        raise translate_error(err, f"downloading file {file_id}") from err
    except Exception as err:
        # The HTTP layer raises its own transport errors while streaming a body.
        if type(err).__module__.split(".")[0] in {"httpx", "httpx2", "httpcore", "anyio"}:
            raise TransientApiError(f"downloading file {file_id}: {err!r}") from err
        raise
