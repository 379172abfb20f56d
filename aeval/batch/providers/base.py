"""The one protocol every provider's batch API is driven through, and the values it speaks.

The lifecycle (:mod:`aeval.batch.lifecycle`) is written once against
:class:`BatchProvider`; an adapter (``openai_api``, ``anthropic_api``, …) holds
only what differs between APIs: how a request file reaches the provider (an
upload, or inline in the create call), how a batch is created, described,
found again after a lost create response, cancelled, and how its results are
read back, always as OpenAI Batch-API-style output lines
(:mod:`aeval.batch.providers.lines`), so nothing downstream learns the provider.

A provider turns its SDK's failures into two kinds: :class:`TransientApiError`
(worth retrying: connection errors, timeouts, and the statuses
:func:`aeval.batch.retry.retryable_status` names) and :class:`aeval.errors.ApiError`
(retrying will not help: auth, bad request, unknown id). What is retryable, and
how, is decided in :mod:`aeval.batch.retry` only. :class:`TransientApiError` lives in
:mod:`aeval.batch.transient`, below both this protocol and the policy.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from aeval.errors import ApiError

__all__ = [
    "CLOCK_SKEW_S",
    "TERMINAL_STATUSES",
    "BatchInput",
    "BatchProvider",
    "BatchTag",
    "ForeignBatchError",
    "RemoteBatch",
    "RemoteBatchError",
]

# The statuses a batch ends in, in OpenAI's words: every adapter maps its API's onto
# these and onto "validating", "in_progress", "finalizing", "cancelling".
TERMINAL_STATUSES: frozenset[str] = frozenset({"completed", "failed", "expired", "cancelled"})

# How far a provider's clock (a batch's creation time) may be from ours (an intent's time)
# when a lost create is looked up: a batch created earlier than this before the intent was
# not created for it.
CLOCK_SKEW_S = 120.0


class ForeignBatchError(ApiError):
    """A batch's results hold requests that are not the shard's: the batch found for it
    by listing (:meth:`BatchProvider.find`) belonged to someone else."""


@dataclass(frozen=True, slots=True)
class RemoteBatchError:
    """One reason a batch failed as a whole (OpenAI: an entry of ``errors.data``)."""

    code: str | None
    message: str
    line: int | None = None

    def describe(self) -> str:
        where = f" (line {self.line})" if self.line is not None else ""
        return f"{self.code or 'error'}{where}: {self.message}"


@dataclass(frozen=True, slots=True)
class RemoteBatch:
    """A batch as the API last described it, in OpenAI's terms.

    ``output_file_id`` / ``error_file_id`` are whatever the adapter's
    :meth:`BatchProvider.open_lines` opens (a file id, or the batch's own id
    where results are fetched per batch); ``None`` while there is nothing to read.
    """

    id: str
    status: str
    completed: int = 0
    failed: int = 0
    total: int = 0
    created_at: float | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: tuple[RemoteBatchError, ...] = ()
    metadata: Mapping[str, str] = field(default_factory=dict)

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES

    @property
    def error_codes(self) -> frozenset[str]:
        return frozenset(e.code for e in self.errors if e.code)


@dataclass(frozen=True, slots=True)
class BatchTag:
    """What names one attempt of one shard's batch: given to ``create`` (to label the
    batch), to ``find`` (to recognise it after a lost create response or a crash) and
    to ``open_lines`` (to confirm the results are the shard's).

    :param run_id: the run directory's name.
    :param shard: the shard's key in the manifest (``model|tTRIAL|sSHARD``).
    :param attempt: the shard's attempt (a batch the token limit refused is re-created).
    :param requests: request lines in the shard's file (what the batch's counts total).
    :param intent_at: when the intent to create this attempt was recorded (epoch s);
        ``None`` in run directories written before it was recorded.
    :param claimed: batch ids the run already recorded for any shard: never "found"
        for another one.
    :param input_file_id: the shard's recorded upload, where it has one: what a lost
        create is found by on an API that keeps neither metadata nor a name (Together).
    """

    run_id: str
    shard: str
    attempt: int
    requests: int = 0
    intent_at: float | None = None
    claimed: frozenset[str] = frozenset()
    input_file_id: str | None = None

    @property
    def metadata(self) -> dict[str, str]:
        """Key-value labels, for APIs that keep them on the batch (OpenAI's ``metadata``)."""
        return {
            "aeval_run": self.run_id,
            "aeval_shard": self.shard,
            "aeval_attempt": str(self.attempt),
        }

    def since_intent(self, created_at: float | None) -> bool:
        """Whether a batch created at ``created_at`` (epoch s) may be this intent's: not
        earlier than the intent less :data:`CLOCK_SKEW_S`. A label names (run id, shard,
        attempt), and another run under the same ``--run-id`` (another output directory,
        or one deleted and run again) labels its batches alike, earlier."""
        if self.intent_at is None or created_at is None:
            return True
        return created_at >= self.intent_at - CLOCK_SKEW_S

    def newest_labelled(self, batches: Iterable[RemoteBatch]) -> RemoteBatch | None:
        """The newest of ``batches`` that carries this tag's :attr:`metadata`, that no
        shard of the run claimed and that was created since the intent
        (:meth:`since_intent`): the lost-create rule of APIs that keep metadata."""
        wanted = self.metadata
        return self.newest_unclaimed(
            b for b in batches if all(b.metadata.get(k) == v for k, v in wanted.items())
        )

    def newest_unclaimed(self, batches: Iterable[RemoteBatch]) -> RemoteBatch | None:
        """The newest of ``batches`` (the ones the API lists under this tag's label or
        :attr:`display_name`) that no shard of the run claimed and that was created
        since the intent (:meth:`since_intent`); the first listed of equals."""
        best: RemoteBatch | None = None
        for batch in batches:
            if batch.id in self.claimed or not self.since_intent(batch.created_at):
                continue  # another shard's, or another run's under the same --run-id
            if best is None or (batch.created_at or 0) > (best.created_at or 0):
                best = batch
        return best

    @property
    def digest(self) -> str:
        """12 hex digits naming (run, shard, attempt): short enough for any label."""
        raw = f"{self.run_id}\0{self.shard}\0{self.attempt}".encode()
        return hashlib.sha256(raw).hexdigest()[:12]

    @property
    def display_name(self) -> str:
        """One label for APIs that keep a name but no metadata (at most 128 characters,
        letters, digits, ``-`` and ``_``)."""
        return f"aeval-{self.digest}"


@dataclass(frozen=True, slots=True)
class BatchInput:
    """A shard's request file, as the provider receives it.

    :param path: aeval's request lines (``{custom_id, method, url, body}``, the body
        already in the provider's own shape).
    :param file_id: the uploaded copy's id, for a provider that wanted it uploaded
        (:meth:`BatchProvider.wants_upload`); ``None`` otherwise.
    """

    path: Path
    file_id: str | None
    requests: int
    bytes: int


class BatchProvider(Protocol):
    """The calls the lifecycle, ``status`` and ``cancel`` make; one open instance per
    provider per run. Every call may raise TransientApiError or ApiError."""

    name: str  # the registry's name: "openai", "anthropic", …
    # True: the lost-create rule (:meth:`find`) needs this run's creates on this
    # provider made one at a time (the lifecycle holds a lock from intent to id).
    serial_creates: bool

    @property
    def endpoint(self) -> str:
        """Where the calls go (a base URL), for messages."""
        ...

    def wants_upload(self, size_bytes: int) -> bool:
        """Whether a request file of this size is uploaded before ``create`` (else the
        adapter reads ``BatchInput.path`` itself, e.g. to send the requests inline)."""
        ...

    async def upload(self, path: Path, *, filename: str | None = None) -> str:
        """Upload a request file (named ``filename``, default its own name); returns its
        file id. Must not retry by itself: a lost response would leave an unknown file."""
        ...

    async def find_files(self, filename: str) -> list[str]:
        """The ids of the uploaded request files named ``filename``."""
        ...

    async def delete_file(self, file_id: str) -> None:
        """Delete an uploaded file, or the results behind an ``output_file_id`` /
        ``error_file_id`` this adapter gave (``cancel --delete-files``); an id already
        gone is no error."""
        ...

    async def create(self, source: BatchInput, tag: BatchTag) -> RemoteBatch:
        """Create the batch. Must not retry by itself: the lifecycle calls :meth:`find`
        before it creates again."""
        ...

    async def retrieve(self, batch_id: str) -> RemoteBatch: ...

    async def find(self, tag: BatchTag) -> RemoteBatch | None:
        """The batch created for ``tag`` whose id was never recorded, if it exists.

        The lost-create hook: by metadata or display name where the API keeps one;
        otherwise by the adapter's documented rule (docs/engine.md). Never a batch
        in ``tag.claimed``.
        """
        ...

    async def cancel(self, batch_id: str) -> RemoteBatch: ...

    def open_lines(
        self, file_id: str, tag: BatchTag | None = None
    ) -> AbstractAsyncContextManager[AsyncIterator[str]]:
        """Stream a batch's results as OpenAI Batch-API output lines, one at a time
        (without holding them in memory).

        :param tag: the shard the results are for, where the adapter can confirm it
            (raising :class:`ForeignBatchError` on a line that is not the shard's).
        """
        ...

    async def aclose(self) -> None: ...
