"""What the Gemini, Together and Mistral routes share: one simulated batch under each wire format.

Every provider's batch runs through the same :class:`~aeval.local.simulated_batch.BatchRunner`
(responders, lifecycle timing, batch-level faults), which reads an OpenAI batch
input file and writes OpenAI output and error files. A provider route turns
its own requests into such an input file (:func:`start_batch`), keeps what its
API shows besides (a display name, whether the requests came inline) in
:attr:`BatchRecord.extra`, and turns the runner's result lines back into its
own shapes (:func:`result_lines`). The converted input is an internal file:
no provider's file listing shows it, and it is not counted as an upload.

Each API sees only its own files and batches in the shared store
(:class:`ProviderRecords`); Together's and Mistral's, both modelled on OpenAI's
Files API, answer a file's ``GET``, ``DELETE`` and ``/content`` alike
(:func:`file_routes`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio.to_thread
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from aeval.local.simulated_batch import BatchRunner, new_batch
from aeval.local.state import BatchRecord, FileRecord, Store

__all__ = [
    "INTERNAL_PURPOSE",
    "BatchStarter",
    "ProviderRecords",
    "file_routes",
    "iso_time",
    "json_object",
    "jsonl_objects",
    "provider_app",
    "result_lines",
    "write_input",
]

ErrorResponse = Callable[[int, str], Response]

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


@dataclass(frozen=True, slots=True)
class ProviderRecords:
    """One provider's view of the shared store: its own files and batches, no one else's."""

    store: Store
    provider: str

    def file(self, file_id: str) -> FileRecord | None:
        record = self.store.files.get(file_id)
        return record if record is not None and record.api == self.provider else None

    def batch(self, batch_id: str) -> BatchRecord | None:
        batch = self.store.batches.get(batch_id)
        return batch if batch is not None and batch.api == self.provider else None


def file_routes(
    records: ProviderRecords,
    describe: Callable[[FileRecord], dict[str, Any]],
    error: ErrorResponse,
) -> list[Route]:
    """``GET`` and ``DELETE /v1/files/{file_id}`` and ``GET /v1/files/{file_id}/content``
    (the provider's file object by ``describe``, its errors by ``error``)."""
    store = records.store

    async def get_file(request: Request) -> Response:
        record = records.file(request.path_params["file_id"])
        return JSONResponse(describe(record)) if record else error(404, "File not found.")

    async def delete_file(request: Request) -> Response:
        file_id = request.path_params["file_id"]
        if records.file(file_id) is None:
            return error(404, "File not found.")
        store.delete_file(file_id)
        return JSONResponse({"id": file_id, "object": "file", "deleted": True})

    async def content(request: Request) -> Response:
        record = records.file(request.path_params["file_id"])
        if record is None:
            return error(404, "File not found.")
        return FileResponse(store.file_path(record.id), media_type="application/octet-stream")

    return [
        Route("/v1/files/{file_id}", get_file, methods=["GET"]),
        Route("/v1/files/{file_id}", delete_file, methods=["DELETE"]),
        Route("/v1/files/{file_id}/content", content, methods=["GET"]),
    ]


def provider_app(routes: list[Route], error: ErrorResponse) -> Starlette:
    """A provider's routes as one app that answers an unknown URL or method with a 404 in
    the provider's error shape (``error``)."""

    async def not_found(request: Request, exc: Exception) -> Response:
        return error(404, f"Invalid URL ({request.method} {request.url.path})")

    return Starlette(routes=routes, exception_handlers={404: not_found, 405: not_found})


async def json_object(
    request: Request, error: ErrorResponse, *, not_an_object: int
) -> dict[str, Any] | Response:
    """The request's JSON object body, or the error response: 400 for a body that is not
    JSON, ``not_an_object`` for JSON that is not an object."""
    try:
        body = json.loads(await request.body())
    except ValueError as err:
        return error(400, f"The request body is not valid JSON: {err}")
    if not isinstance(body, dict):
        return error(not_an_object, "The request body must be a JSON object.")
    return body
