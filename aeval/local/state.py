"""The server's state: files on disk, batch records, creation counters.

File contents always live on disk (``<root>/files/<id>``) so a 200 MB upload never sits in memory.
Metadata of files and batches is kept in memory and, when the store is *persistent* (the server was
given a ``state_dir``), written next to them as JSON on every change of phase, so that a restarted
server finds its files and batches again and resumes unfinished batches.

Everything here is touched from the server's event loop only, except
:meth:`Store.counters`, which other threads may call (hence the lock).
"""

from __future__ import annotations

import json
import os
import secrets
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

__all__ = ["BatchRecord", "Counters", "FileRecord", "Store", "new_id"]


def new_id(prefix: str) -> str:
    return f"{prefix}{secrets.token_hex(12)}"


@dataclass(slots=True)
class FileRecord:
    id: str
    bytes: int
    created_at: int
    filename: str
    purpose: str
    # Whose Files API holds it ("openai" also serves Azure; "groq", "google",
    # "together", "mistral", "anthropic"): each API lists and serves only its own.
    api: str = "openai"


@dataclass(slots=True)
class BatchRecord:
    """A batch as the API shows it (plus the cancel request flag)."""

    id: str
    input_file_id: str
    endpoint: str
    completion_window: str
    created_at: int
    seq: int = 0  # creation order (created_at has one-second resolution)
    metadata: dict[str, str] | None = None
    status: str = "validating"
    model: str | None = None
    total: int = 0
    completed: int = 0
    failed: int = 0
    errors: list[dict[str, Any]] | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    in_progress_at: int | None = None
    finalizing_at: int | None = None
    completed_at: int | None = None
    failed_at: int | None = None
    expired_at: int | None = None
    cancelling_at: int | None = None
    cancelled_at: int | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    # The API it was created through, as FileRecord.api; ``extra``: what that API shows
    # besides the OpenAI fields (a display name, an inline-requests flag…: aeval.local.wire_*).
    api: str = "openai"
    created_exact: float | None = None  # a Message Batch's created_at, to the microsecond
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def expires_at(self) -> int:
        return self.created_at + 24 * 3600

    @property
    def ended_at(self) -> int | None:
        return self.completed_at or self.failed_at or self.expired_at or self.cancelled_at

    @property
    def terminal(self) -> bool:
        return self.status in ("completed", "failed", "expired", "cancelled")


@dataclass(frozen=True, slots=True)
class Counters:
    """What a server has created, for tests that prove nothing was submitted twice.

    ``batches_by_metadata`` counts batches per ``(key, value)`` metadata item
    (e.g. ``("aeval_shard", "m|t1|s3")``); ``files_by_filename`` counts uploads per
    file name; ``faults_injected`` counts injected faults per kind.
    """

    batches: int = 0
    files: int = 0
    batches_by_metadata: Mapping[tuple[str, str], int] = field(default_factory=dict)
    files_by_filename: Mapping[str, int] = field(default_factory=dict)
    files_by_purpose: Mapping[str, int] = field(default_factory=dict)
    cancels: int = 0
    faults_injected: Mapping[str, int] = field(default_factory=dict)

    def batches_with(self, key: str, value: str) -> int:
        return self.batches_by_metadata.get((key, value), 0)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form (metadata items become ``[key, value, count]`` triples)."""
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data = {k: dict(v) if isinstance(v, Mapping) else v for k, v in data.items()}
        by_metadata = self.batches_by_metadata.items()
        return {**data, "batches_by_metadata": [[k, v, n] for (k, v), n in by_metadata]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Counters:
        known = {f.name: data[f.name] for f in fields(cls)}
        triples = known["batches_by_metadata"]
        return cls(**{**known, "batches_by_metadata": {(k, v): int(n) for k, v, n in triples}})


class Store:
    """Files and batches of one server (see the module docstring)."""

    def __init__(self, root: Path, *, persistent: bool) -> None:
        self.root = root
        self.persistent = persistent
        self.files: dict[str, FileRecord] = {}
        self.batches: dict[str, BatchRecord] = {}
        self._lock = threading.Lock()
        self._batches_by_metadata: Counter[tuple[str, str]] = Counter()
        self._files_by_filename: Counter[str] = Counter()
        self._files_by_purpose: Counter[str] = Counter()
        self._batch_count = 0
        self._file_count = 0
        self._cancels = 0
        (root / "files").mkdir(parents=True, exist_ok=True)
        if persistent:
            (root / "batches").mkdir(exist_ok=True)
            self._load()

    # files

    def file_path(self, file_id: str) -> Path:
        return self.root / "files" / file_id

    def new_file_path(self) -> tuple[str, Path]:
        file_id = new_id("file-")
        return file_id, self.file_path(file_id)

    def add_file(self, file_id: str, filename: str, purpose: str, *, counted: bool,
                 api: str = "openai") -> FileRecord:  # fmt: skip
        """Register content already written at :meth:`file_path`."""
        size = self.file_path(file_id).stat().st_size
        record = FileRecord(file_id, size, int(time.time()), filename, purpose, api)
        self.files[file_id] = record
        if counted:
            with self._lock:
                self._file_count += 1
                self._files_by_filename[filename] += 1
                self._files_by_purpose[purpose] += 1
        self._write_json(self.root / "files" / f"{file_id}.json", asdict(record))
        return record

    def delete_file(self, file_id: str) -> None:
        self.files.pop(file_id, None)
        for path in (self.file_path(file_id), self.root / "files" / f"{file_id}.json"):
            path.unlink(missing_ok=True)

    # batches

    def add_batch(self, batch: BatchRecord) -> None:
        batch.seq = len(self.batches) + 1
        self.batches[batch.id] = batch
        with self._lock:
            self._batch_count += 1
            for item in (batch.metadata or {}).items():
                self._batches_by_metadata[item] += 1
        self.save_batch(batch)

    def delete_batch(self, batch_id: str) -> None:
        """Forget a batch, with its input and result files."""
        batch = self.batches.pop(batch_id, None)
        if batch is None:
            return
        for file_id in (batch.input_file_id, batch.output_file_id, batch.error_file_id):
            if file_id is not None:
                self.delete_file(file_id)
        (self.root / "batches" / f"{batch_id}.json").unlink(missing_ok=True)

    def save_batch(self, batch: BatchRecord) -> None:
        self._write_json(self.root / "batches" / f"{batch.id}.json", asdict(batch))

    def cancel_batch(self, batch: BatchRecord) -> None:
        """Ask a running batch to stop (the runner ends it); a repeated ask is not
        counted again."""
        if batch.status == "cancelling":
            return
        batch.status, batch.cancelling_at = "cancelling", int(time.time())
        self.save_batch(batch)
        with self._lock:
            self._cancels += 1

    def counters(self, faults_injected: Mapping[str, int]) -> Counters:
        with self._lock:
            return Counters(self._batch_count, self._file_count, dict(self._batches_by_metadata),
                            dict(self._files_by_filename), dict(self._files_by_purpose),
                            self._cancels, dict(faults_injected))  # fmt: skip

    # persistence

    def _write_json(self, path: Path, data: dict[str, Any]) -> None:
        if not self.persistent:
            return
        # Rename without aeval.store.atomic_write_text's fsyncs: a restart must find
        # whole records after a killed process, not after a power cut.
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        os.replace(tmp, path)

    def _load(self) -> None:
        """Read back what a previous server left in ``root`` (counters start afresh)."""
        for path in sorted((self.root / "files").glob("*.json")):
            record = FileRecord(**json.loads(path.read_text(encoding="utf-8")))
            if self.file_path(record.id).exists():
                self.files[record.id] = record
        batches = (self.root / "batches").glob("*.json")
        loaded = [BatchRecord(**json.loads(p.read_text(encoding="utf-8"))) for p in batches]
        for batch in sorted(loaded, key=lambda b: b.seq):
            self.batches[batch.id] = batch
