"""The batch API lifecycle: shard, upload, create, poll, download.

Provider-agnostic parts (sharding, the polling schedule, the retry policy) are
written once here; each provider's adapter (:mod:`aeval.batch.providers`) implements
the small :class:`~aeval.batch.providers.base.BatchProvider` protocol and nothing else.
"""

from __future__ import annotations

from aeval.batch.providers.base import (
    TERMINAL_STATUSES,
    BatchProvider,
    RemoteBatch,
    RemoteBatchError,
    TransientApiError,
)

__all__ = [
    "TERMINAL_STATUSES",
    "BatchProvider",
    "RemoteBatch",
    "RemoteBatchError",
    "TransientApiError",
]
