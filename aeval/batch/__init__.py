"""The batch API lifecycle: shard, upload, create, poll, download.

Provider-agnostic parts (sharding, the polling schedule, the retry policy) are
written once here; each provider's adapter (:mod:`aeval.batch.providers`) implements
the small :class:`~aeval.batch.providers.base.BatchProvider` protocol and nothing else.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aeval._lazy import lazy_exports

__all__ = [
    "TERMINAL_STATUSES",
    "BatchProvider",
    "RemoteBatch",
    "RemoteBatchError",
    "TransientApiError",
]

# Every name loads on first use: importing a light submodule must not import the
# protocol's module and its dependencies.
_LAZY = {
    **dict.fromkeys(
        ("TERMINAL_STATUSES", "BatchProvider", "RemoteBatch", "RemoteBatchError"),
        "aeval.batch.providers.base",
    ),
    "TransientApiError": "aeval.batch.transient",
}

if not TYPE_CHECKING:  # the checker reads the typed imports below, never `Any`
    __getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)


if TYPE_CHECKING:  # static checkers and IDEs see the real names
    from aeval.batch.providers.base import (
        TERMINAL_STATUSES,
        BatchProvider,
        RemoteBatch,
        RemoteBatchError,
    )
    from aeval.batch.transient import TransientApiError
