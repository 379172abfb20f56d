"""What the Gemini, Together and Mistral routes share: one simulated batch under each wire format.

Every provider's batch runs through the same :class:`~aeval.local.simulated_batch.BatchRunner`
(responders, lifecycle timing, batch-level faults), which reads an OpenAI batch
input file and writes OpenAI output and error files. A provider route turns
its own requests into such an input file (:func:`start_batch`), keeps what its
API shows besides (a display name, whether the requests came inline) in
:attr:`BatchRecord.extra`, and turns the runner's result lines back into its
own shapes (:func:`result_lines`). The converted input is an internal file:
no provider's file listing shows it, and it is not counted as an upload.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio.to_thread

from aeval.local.simulated_batch import BatchRunner, new_batch
from aeval.local.state import BatchRecord, Store

__all__ = [
    "INTERNAL_PURPOSE",
    "BatchStarter",
    "iso_time",
    "jsonl_objects",
    "result_lines",
    "write_input",
]

INTERNAL_PURPOSE = "aeval_converted_input"
_CHAT_URL = "/v1/chat/completions"


def iso_time(epoch: int | None) -> str | None:
    """An RFC 3339 time (how Gemini and Together write times), or ``None``."""
    if epoch is None:
        return None
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def jsonl_objects(path: Path) -> Iterator[tuple[int, Any]]:
    """``(line number, parsed line)`` of a JSONL file; a line that is not JSON is ``None``."""
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            try:
                yield number, json.loads(raw)
            except ValueError:
                yield number, None


def write_input(path: Path, requests: Iterable[tuple[Any, Any]]) -> None:
    """Write ``(custom_id, chat body)`` pairs as an OpenAI batch input file.

    A pair the provider would reject is still written as given (a ``None``
    body, a missing id), so the runner's validation fails the batch for it
    the way the provider fails a bad line.
    """
    with path.open("w", encoding="utf-8") as out:
        for custom_id, body in requests:
            line = {"custom_id": custom_id, "method": "POST", "url": _CHAT_URL, "body": body}
            out.write(json.dumps(line, ensure_ascii=False))
            out.write("\n")


def result_lines(store: Store, batch: BatchRecord) -> Iterator[dict[str, Any]]:
    """The runner's output lines, then its error lines, as parsed OpenAI batch lines."""
    for file_id in (batch.output_file_id, batch.error_file_id):
        if file_id is None or file_id not in store.files:
            continue
        for _, record in jsonl_objects(store.file_path(file_id)):
            if isinstance(record, dict):
                yield record


@dataclass(slots=True)
class BatchStarter:
    """Creates a provider's batch from its requests and sets the runner going."""

    store: Store
    runner: BatchRunner

    async def start(
        self,
        provider: str,
        requests: Iterable[tuple[Any, Any]],
        *,
        batch_id: str | None = None,
        metadata: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
        window: str = "24h",
        task_group: Any,
    ) -> BatchRecord:
        """Write ``requests`` (``(custom_id, chat body)`` pairs, read in a worker thread)
        as the batch's input and start the batch; returns its record."""
        file_id, path = self.store.new_file_path()
        await anyio.to_thread.run_sync(write_input, path, requests)
        self.store.add_file(
            file_id, f"{provider}-input.jsonl", INTERNAL_PURPOSE, counted=False, api=provider
        )
        batch = new_batch(file_id, _CHAT_URL, window, metadata)
        if batch_id is not None:
            batch.id = batch_id
        batch.api = provider
        batch.extra = dict(extra or {})
        self.store.add_batch(batch)
        task_group.start_soon(self.runner.run, batch)
        return batch
