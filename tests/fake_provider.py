"""An in-memory :class:`~aeval.batch.providers.base.BatchProvider`: the engine's logic without HTTP.

Each request of an uploaded file is answered by a ``reply`` function (what the
model said, or how the request failed), so a test states exactly what each row
gets. Every call is counted, so a test can assert what was paid for. The engine
tests over HTTP (the local server) pin the wire; these pin the engine's
decisions, in a fraction of the time.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import anyio

from aeval.batch.providers.base import BatchInput, BatchTag, RemoteBatch, RemoteBatchError
from aeval.errors import ApiError


@dataclass(frozen=True, slots=True)
class Answer:
    """The model's reply text."""

    text: str


@dataclass(frozen=True, slots=True)
class Failure:
    """A request that failed inside the batch (an error-file line)."""

    status_code: int
    code: str = "server_error"


# (custom_id, request body, the batch's 0-based number among this request's batches) -> reply
Reply = Callable[[str, Mapping[str, Any], int], Answer | Failure | None]


@dataclass
class _Batch:
    remote: RemoteBatch
    requests: list[dict[str, Any]]
    polls_left: int


@dataclass
class FakeBatchProvider:
    """A batch API in memory.

    :param reply: each request's fate; ``None`` leaves it out of both files (``missing``).
    :param polls: how many polls a batch stays ``in_progress`` before it completes.
    :param refuse: batch creations (1-based, counted over the run) that fail with
        these error codes instead of running (e.g. ``token_limit_exceeded``).
    :param lost_files: file ids whose download fails (the API no longer has them).
    """

    reply: Reply
    polls: int = 1
    name: str = "openai"
    serial_creates: bool = False
    refuse: dict[int, str] = field(default_factory=dict)
    lost_files: set[str] = field(default_factory=set)
    calls: Counter[str] = field(default_factory=Counter)
    files: dict[str, bytes] = field(default_factory=dict)
    batches: dict[str, _Batch] = field(default_factory=dict)
    _ids: itertools.count[int] = field(default_factory=itertools.count)
    _asked: Counter[str] = field(default_factory=Counter)  # batches per custom_id so far

    @property
    def endpoint(self) -> str:
        return "memory://fake"

    def wants_upload(self, size_bytes: int) -> bool:
        return True

    def _id(self, prefix: str) -> str:
        return f"{prefix}-{next(self._ids)}"

    async def upload(self, path: Path, *, filename: str | None = None) -> str:
        self.calls["upload"] += 1
        file_id = self._id("file")
        self.files[file_id] = Path(path).read_bytes()
        return file_id

    async def find_files(self, filename: str) -> list[str]:
        self.calls["find_files"] += 1
        return []

    async def create(self, source: BatchInput, tag: BatchTag) -> RemoteBatch:
        self.calls["create"] += 1
        batch_id = self._id("batch")
        assert source.file_id is not None
        metadata = tag.metadata
        requests = [json.loads(line) for line in self.files[source.file_id].splitlines()]
        code = self.refuse.get(self.calls["create"])
        status, errors = "in_progress", ()
        if code is not None:
            status, errors = "failed", (RemoteBatchError(code, f"refused: {code}"),)
        remote = RemoteBatch(
            batch_id,
            status,
            total=len(requests),
            created_at=float(self.calls["create"]),
            errors=errors,
            metadata=dict(metadata),
        )
        self.batches[batch_id] = _Batch(remote, requests, self.polls)
        return remote

    async def retrieve(self, batch_id: str) -> RemoteBatch:
        self.calls["retrieve"] += 1
        batch = self.batches[batch_id]
        if batch.remote.terminal:
            return batch.remote
        if batch.polls_left > 0:
            batch.polls_left -= 1
            return batch.remote
        batch.remote = self._finish(batch)
        return batch.remote

    def _finish(self, batch: _Batch) -> RemoteBatch:
        output: list[str] = []
        errors: list[str] = []
        for request in batch.requests:
            cid = request["custom_id"]
            fate = self.reply(cid, request["body"], self._asked[cid])
            self._asked[cid] += 1
            if isinstance(fate, Answer):
                body = {"model": request["body"]["model"], "choices": [_choice(fate.text)]}
                line = {"custom_id": cid, "response": {"status_code": 200, "body": body}}
                output.append(json.dumps(line))
            elif isinstance(fate, Failure):
                body = {"error": {"message": "try again later", "code": fate.code}}
                line = {
                    "custom_id": cid,
                    "response": {"status_code": fate.status_code, "body": body},
                }
                errors.append(json.dumps(line))
        changes: dict[str, Any] = {"status": "completed"}
        changes["completed"], changes["failed"] = len(output), len(errors)
        if output:
            changes["output_file_id"] = file_id = self._id("file")
            self.files[file_id] = "\n".join(output).encode()
        if errors:
            changes["error_file_id"] = file_id = self._id("file")
            self.files[file_id] = "\n".join(errors).encode()
        return replace(batch.remote, **changes)

    async def find(self, tag: BatchTag) -> RemoteBatch | None:
        self.calls["find"] += 1
        found = [
            b.remote
            for b in self.batches.values()
            if b.remote.id not in tag.claimed
            and all(b.remote.metadata.get(k) == v for k, v in tag.metadata.items())
        ]
        return max(found, key=lambda r: r.created_at or 0, default=None)

    async def cancel(self, batch_id: str) -> RemoteBatch:
        self.calls["cancel"] += 1
        batch = self.batches[batch_id]
        batch.remote = replace(batch.remote, status="cancelled")
        return batch.remote

    @asynccontextmanager
    async def open_lines(
        self, file_id: str, tag: BatchTag | None = None
    ) -> AsyncIterator[AsyncIterator[str]]:
        self.calls["download"] += 1
        if file_id in self.lost_files:
            raise ApiError(f"downloading file {file_id}: HTTP 404: no such file")
        yield _lines(self.files[file_id])

    async def delete_file(self, file_id: str) -> None:
        self.calls["delete_file"] += 1
        self.files.pop(file_id, None)

    async def aclose(self) -> None:
        pass


def _choice(text: str) -> dict[str, Any]:
    return {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}


async def _lines(data: bytes) -> AsyncIterator[str]:
    for line in data.decode().splitlines():
        await anyio.lowlevel.checkpoint()
        yield line
