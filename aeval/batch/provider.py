"""What the engine needs from a batch API, and the values it gets back.

A provider turns its SDK's failures into two kinds: :class:`TransientApiError`
(worth retrying: connection errors, timeouts, and the statuses
:func:`aeval.batch.retry.retryable_status` names) and :class:`aeval.errors.ApiError`
(retrying will not help: auth, bad request, unknown id). What is retryable, and
how, is decided in :mod:`aeval.batch.retry` only.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

__all__ = [
    "TERMINAL_STATUSES",
    "BatchProvider",
    "RemoteBatch",
    "RemoteBatchError",
    "TransientApiError",
]

TERMINAL_STATUSES: frozenset[str] = frozenset({"completed", "failed", "expired", "cancelled"})


class TransientApiError(Exception):
    """A failure that may go away if the same call is made again later."""

    def __init__(
        self,
        message: str,
        *,
        retry_after: float | None = None,
        connection: bool = False,
        status: int | None = None,
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.connection = connection  # no HTTP answer at all (refused, DNS, timeout)
        self.status = status  # the HTTP status, when there was an answer


@dataclass(frozen=True, slots=True)
class RemoteBatchError:
    """One entry of a failed batch's ``errors.data``."""

    code: str | None
    message: str
    line: int | None = None

    def describe(self) -> str:
        where = f" (line {self.line})" if self.line is not None else ""
        return f"{self.code or 'error'}{where}: {self.message}"


@dataclass(frozen=True, slots=True)
class RemoteBatch:
    """A batch as the API last described it."""

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


class BatchProvider(Protocol):
    """The calls the engine makes. Every method may raise TransientApiError or ApiError."""

    async def upload(self, path: Path, *, filename: str | None = None) -> str:
        """Upload a JSONL request file (named ``filename``, default its own name); returns
        its file id. Must not retry by itself: a lost response would leave an unknown file."""
        ...

    async def find_files(self, filename: str) -> list[str]:
        """The ids of the uploaded batch input files named ``filename``."""
        ...

    async def create(self, input_file_id: str, metadata: Mapping[str, str]) -> RemoteBatch:
        """Create a batch. Must not retry by itself: the caller looks a batch whose
        response was lost up by ``metadata`` before it creates again."""
        ...

    async def retrieve(self, batch_id: str) -> RemoteBatch: ...

    async def find(self, metadata: Mapping[str, str]) -> RemoteBatch | None:
        """The most recent batch whose metadata contains all of ``metadata``, if any."""
        ...

    async def cancel(self, batch_id: str) -> RemoteBatch: ...

    def open_lines(self, file_id: str) -> AbstractAsyncContextManager[AsyncIterator[str]]:
        """Stream a result file line by line (without holding it in memory)."""
        ...

    async def delete_file(self, file_id: str) -> None: ...

    async def aclose(self) -> None: ...
