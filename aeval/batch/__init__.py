"""The batch API lifecycle: shard, upload, create, poll, download.

Provider-agnostic parts (sharding, the polling schedule, the retry policy) are
written once here; a provider (:mod:`aeval.batch.openai_api`) implements the small
:class:`~aeval.batch.provider.BatchProvider` protocol and nothing else.
"""

from __future__ import annotations

from aeval.batch.provider import (
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
