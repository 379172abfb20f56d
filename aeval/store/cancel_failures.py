"""Batches whose cancel was not confirmed: the provider refused it, or never answered.

Such a batch keeps running and billing, so it is written down (the file
``cancel-failures.json``, atomically) by whoever tried (``cancel``, or a live
run put on hold), shown by ``status``, said in one line at the end of the
command that tried, and taken off once a cancel of it is confirmed.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import TypedDict

from aeval.store.atomic_files import atomic_write_text
from aeval.store.layout import RunLayout

__all__ = [
    "CancelFailure",
    "cancel_failures",
    "cancel_retry_command",
    "clear_cancel_failure",
    "describe_cancel_failure",
    "note_cancel_failure",
]

# One process may note failures from several tasks' threads at once.
_WRITING = threading.Lock()


class CancelFailure(TypedDict):
    shard: str
    error: str
    at: float


def cancel_failures(run_dir: Path) -> dict[str, CancelFailure]:
    """The run's unconfirmed cancels, by batch id (empty when there is none)."""
    try:
        doc = json.loads(RunLayout(Path(run_dir)).cancel_failures.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def note_cancel_failure(run_dir: Path, batch_id: str, shard: str, error: str) -> None:
    with _WRITING:
        doc = cancel_failures(run_dir)
        doc[batch_id] = CancelFailure(shard=shard, error=error, at=time.time())
        atomic_write_text(RunLayout(Path(run_dir)).cancel_failures, json.dumps(doc, indent=1))


def clear_cancel_failure(run_dir: Path, batch_id: str) -> None:
    with _WRITING:
        doc = cancel_failures(run_dir)
        if doc.pop(batch_id, None) is None:
            return
        path = RunLayout(Path(run_dir)).cancel_failures
        if doc:
            atomic_write_text(path, json.dumps(doc, indent=1))
        else:
            path.unlink(missing_ok=True)


def cancel_retry_command(run_dir: Path) -> str:
    return f"python -m aeval cancel {run_dir}"


def describe_cancel_failure(run_dir: Path, batch_id: str, failure: CancelFailure) -> str:
    """The one line that says it: the batch, its shard, why, and the command that retries."""
    return (
        f"batch {batch_id} ({failure['shard']}) was NOT cancelled and may still be running "
        f"and billing: {failure['error']}; retry with '{cancel_retry_command(run_dir)}'"
    )
