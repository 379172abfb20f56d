"""What the adapters over Stainless-generated SDKs share: ``openai``, ``groq``,
``together`` and ``anthropic`` are generated from one template, so their clients,
resources and exception classes have the same shapes, each in the SDK's own module.

:class:`StainlessBatchProvider` holds the SDK's client, with its own retries on for
the calls that are safe to repeat (reads, cancels, deletes; aeval's tenacity policy
wraps them for the long haul), and a copy of it with retries off for the calls that
create something (``_once``): the SDKs send no idempotency key, so a silent re-POST
whose response was lost would make a second file or a second paid batch that nothing
records; the lifecycle retries those, after recording the attempt and looking the
batch up (:meth:`~aeval.batch.providers.base.BatchProvider.find`). It polls, cancels,
deletes and downloads through the SDK's ``batches`` and ``files`` resources, and
uploads and creates as OpenAI's Batch API does (OpenAI, Groq); a provider overrides
what its API does otherwise, and says how its batch object reads (:meth:`_to_remote`)
and how its SDK's failures read (:meth:`_fail`, usually
:func:`~aeval.batch.providers.sdk_errors.stainless_failure` with its own hints).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar

from aeval.api_settings import Credentials, RetrySettings
from aeval.batch.providers.base import BatchInput, BatchTag, RemoteBatch, RemoteBatchError
from aeval.batch.providers.sdk_errors import failing_as, guard_lines, opened_as
from aeval.batch.shard import request_url
from aeval.errors import ApiError

__all__ = [
    "OpenAIShapedBatchProvider",
    "OpenAIShapedClient",
    "StainlessBatchProvider",
    "StainlessClient",
    "openai_shaped_batch",
]


def openai_shaped_batch(batch: Any) -> RemoteBatch:
    """A batch object of OpenAI's shape (OpenAI, Groq) as a :class:`RemoteBatch`."""
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


class StainlessClient(Protocol):
    """What the shared code asks of a Stainless SDK's async client (openai.AsyncOpenAI,
    anthropic.AsyncAnthropic, groq.AsyncGroq, together.AsyncTogether): each subclass
    holds its own SDK's client type, so its calls are checked against that SDK."""

    @property
    def base_url(self) -> Any: ...

    def with_options(self, *, max_retries: int) -> Self: ...

    async def close(self) -> None: ...


ClientT = TypeVar("ClientT", bound=StainlessClient)


class StainlessBatchProvider(Generic[ClientT]):
    """A :class:`~aeval.batch.providers.base.BatchProvider` over a Stainless SDK's async
    client; one per run, closed at the end.

    A subclass names its SDK's module (``sdk``: its exception classes) and client class
    (``client_class``), and, where the API's documented base URL is not the SDK's own
    default, ``default_endpoint`` (what :attr:`endpoint` says when none is configured).
    """

    name: str
    serial_creates: bool = False
    title: ClassVar[str]  # for messages: "OpenAI", "Groq", …
    sdk: ModuleType  # the SDK itself: its exception classes
    client_class: Callable[..., ClientT]  # the SDK's async client class
    default_endpoint: ClassVar[str | None] = None
    completion_window: ClassVar[str] = "24h"

    def __init__(self, credentials: Credentials, retry: RetrySettings | None = None) -> None:
        retry = retry or RetrySettings()
        self._client: ClientT = self._connect(
            credentials, max_retries=retry.sdk_max_retries, timeout=retry.request_timeout_s
        )
        # For the calls that create something: one POST per call, never a silent re-POST.
        self._once: ClientT = self._client.with_options(max_retries=0)
        where = credentials.base_url or self.default_endpoint or str(self._client.base_url)
        self._endpoint = where.rstrip("/")

    def _connect(self, credentials: Credentials, *, max_retries: int, timeout: float) -> ClientT:
        return self.client_class(
            api_key=credentials.api_key,
            base_url=credentials.base_url,
            max_retries=max_retries,
            timeout=timeout,
        )

    def _fail(self, err: Exception, what: str) -> Exception:
        """``err`` in aeval's two kinds (TransientApiError or ApiError), or ``err`` itself
        when it is neither the SDK's nor the transport's."""
        raise NotImplementedError

    def _to_remote(self, batch: Any) -> RemoteBatch:
        return openai_shaped_batch(batch)

    @property
    def _batches(self) -> Any:
        """The SDK resource a batch is polled, cancelled and deleted through."""
        raise NotImplementedError

    @property
    def endpoint(self) -> str:
        return self._endpoint

    async def retrieve(self, batch_id: str) -> RemoteBatch:
        with failing_as(self._fail, f"polling batch {batch_id}"):
            return self._to_remote(await self._batches.retrieve(batch_id))

    async def cancel(self, batch_id: str) -> RemoteBatch:
        with failing_as(self._fail, f"cancelling batch {batch_id}"):
            return self._to_remote(await self._batches.cancel(batch_id))

    async def _delete(self, resource: Any, some_id: str, what: str) -> None:
        """Delete through ``resource``; an id already gone is no error."""
        with failing_as(self._fail, what):
            try:
                await resource.delete(some_id)
            except self.sdk.NotFoundError:
                return

    async def aclose(self) -> None:
        await self._client.close()


class OpenAIShapedClient(StainlessClient, Protocol):
    """A Stainless client with OpenAI's ``files`` and ``batches`` resources (OpenAI,
    Groq, Together)."""

    @property
    def files(self) -> Any: ...

    @property
    def batches(self) -> Any: ...


ShapedT = TypeVar("ShapedT", bound=OpenAIShapedClient)


class OpenAIShapedBatchProvider(StainlessBatchProvider[ShapedT]):
    """Uploads, creates, deletes and downloads as OpenAI's Batch API does, through the
    SDK's ``files`` and ``batches`` resources.

    A subclass whose API takes more than OpenAI's parameters names them
    (``upload_extra_body``, ``create_extra_body``: sent as the SDK's ``extra_body``).
    """

    upload_extra_body: ClassVar[dict[str, Any] | None] = None
    create_extra_body: ClassVar[dict[str, Any] | None] = None

    @property
    def _batches(self) -> Any:
        """The SDK resource a batch is polled, cancelled and deleted through."""
        return self._client.batches

    def wants_upload(self, size_bytes: int) -> bool:
        return True  # an OpenAI-shaped Batch API reads its input from an uploaded file only

    async def upload(self, path: Path, *, filename: str | None = None) -> str:
        name = filename or Path(path).name
        # An open file is streamed in 64 KiB chunks; a Path would be read whole into
        # memory (up to 200 MB).
        with failing_as(self._fail, f"uploading {name}"), Path(path).open("rb") as fh:
            created = await self._once.files.create(
                file=(name, fh, "application/jsonl"),
                purpose="batch",
                **_extra(self.upload_extra_body),
            )
        if not created.id:
            raise ApiError(f"uploading {name}: the API answered without a file id")
        return str(created.id)

    async def create(self, source: BatchInput, tag: BatchTag) -> RemoteBatch:
        if source.file_id is None:
            raise ApiError(f"{tag.shard}: {self.title}'s Batch API needs the request file uploaded")
        with failing_as(self._fail, f"creating a batch for {source.file_id}"):
            batch = await self._once.batches.create(
                input_file_id=source.file_id,
                # The route the shard's lines name: /v1/chat/completions, or OpenAI's
                # /v1/responses for --endpoint responses.
                endpoint=request_url(source.path),
                completion_window=self.completion_window,
                metadata=tag.metadata,
                **_extra(self.create_extra_body),
            )
        return self._to_remote(batch)

    async def delete_file(self, file_id: str) -> None:
        await self._delete(self._client.files, file_id, f"deleting file {file_id}")

    @asynccontextmanager
    async def open_lines(
        self, file_id: str, tag: BatchTag | None = None
    ) -> AsyncIterator[AsyncIterator[str]]:
        # The lines are already in the one answer format; a batch found by its
        # metadata or input file is the shard's by construction: nothing to confirm.
        what = f"downloading file {file_id}"
        content = self._client.files.with_streaming_response.content(file_id)
        async with opened_as(self._fail, what, content) as response:
            yield guard_lines(response.iter_lines(), what, self._fail)


def _extra(body: dict[str, Any] | None) -> dict[str, Any]:
    """The SDK call's ``extra_body`` argument where there is one (none at all otherwise:
    every other call stays exactly OpenAI's)."""
    return {} if body is None else {"extra_body": body}
