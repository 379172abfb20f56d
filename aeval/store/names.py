"""What a run's shards and the run itself are called (the files: :mod:`aeval.store.layout`)."""

from __future__ import annotations

import hashlib
import os
import re
import time

__all__ = ["new_run_id", "shard_key", "shard_stem"]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def shard_key(model: str, trial: int, shard: int) -> str:
    """The shard's name in the manifest and in the batch metadata (``aeval_shard``)."""
    return f"{model}|t{trial}|s{shard}"


def shard_stem(model: str, trial: int, shard: int) -> str:
    """A filesystem-safe file stem for a shard's request and output files.

    The model name is sanitised for the filesystem and followed by a short hash
    of the exact name: ``m/x`` and ``m_x`` (or ``M`` and ``m`` on a
    case-insensitive disk) would otherwise share one request file, and so each
    other's answers.
    """
    tag = hashlib.sha256(model.encode()).hexdigest()[:8]
    return f"{_UNSAFE.sub('_', model)}-{tag}-t{trial}-s{shard}"


def new_run_id(now: float | None = None) -> str:
    """A sortable, readable run id: ``20260122-061500-3fa2``."""
    now = time.time() if now is None else now
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    return f"{stamp}-{os.urandom(2).hex()}"
