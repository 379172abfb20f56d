"""What the manifest knows about one shard: its files, its batches, its last status."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict, Unpack

from aeval.json_values import JsonObject

__all__ = ["ShardRecord"]


class ShardChanges(TypedDict, total=False):
    """What :meth:`ShardRecord.evolve` may change: any field but ``updated_at`` (it sets it)."""

    key: str
    model: str
    trial: int
    shard: int
    requests: int
    input_path: str
    sha256: str
    bytes: int
    parent: str | None
    round: int
    repair_round: int
    input_file_id: str | None
    upload_name: str | None
    upload_attempts: int
    stray_uploads_cleared: bool
    attempt: int
    intent_attempt: int | None
    intent_at: float | None
    batch_id: str | None
    previous_batch_ids: tuple[str, ...]
    status: str
    completed: int
    failed: int
    total: int
    created_at: float | None
    output_file_id: str | None
    error_file_id: str | None
    output_downloaded: bool
    error_downloaded: bool
    errors: tuple[JsonObject, ...]
    message: str
    retry_shard: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardRecord:
    """What the manifest knows about one shard (one request file, one batch at a time).

    ``attempt`` counts batch creations for this shard (a batch refused for the
    enqueued-token limit is resubmitted as attempt + 1). ``intent_attempt`` is
    set *before* ``batches.create`` is called for that attempt and ``batch_id``
    after it returns, so a crash in between is detected on resume and resolved
    through the provider's lost-create rule (``batches.list`` by metadata, or
    the rule of an API without metadata, which reads ``intent_at``: when the
    intent was recorded), never by creating a second batch.

    ``upload_attempts`` is counted up *before* each upload of the request file
    (named ``upload_name``): an upload whose response was lost leaves a file
    the API has and the manifest does not, so once the shard has its batch,
    files of that name other than ``input_file_id`` are deleted
    (``stray_uploads_cleared``).
    """

    key: str
    model: str
    trial: int
    shard: int
    requests: int
    input_path: str  # relative to the run directory
    sha256: str
    bytes: int
    parent: str | None = None  # for shards that resubmit failed requests of another
    round: int = 0  # how many retry shards deep (--retry-failed), not a repair round
    # The repair round (--rounds) whose requests the shard holds, 1-based.
    repair_round: int = 1
    input_file_id: str | None = None
    upload_name: str | None = None
    upload_attempts: int = 0
    stray_uploads_cleared: bool = False
    attempt: int = 0
    intent_attempt: int | None = None
    intent_at: float | None = None  # epoch s, set with intent_attempt
    batch_id: str | None = None
    previous_batch_ids: tuple[str, ...] = ()
    status: str = "pending"
    completed: int = 0
    failed: int = 0
    total: int = 0
    created_at: float | None = None
    output_file_id: str | None = None
    error_file_id: str | None = None
    output_downloaded: bool = False
    error_downloaded: bool = False
    errors: tuple[JsonObject, ...] = ()
    message: str = ""
    retry_shard: str | None = None  # key of the shard resubmitting this one's failures
    updated_at: float = field(default_factory=time.time)

    def to_json(self) -> JsonObject:
        rec = dataclasses.asdict(self)
        rec["previous_batch_ids"] = list(self.previous_batch_ids)
        rec["errors"] = [dict(e) for e in self.errors]
        if self.repair_round == 1:
            del rec["repair_round"]  # a one-round run's manifest as before repair rounds
        return rec

    @classmethod
    def from_json(cls, rec: Mapping[str, object]) -> ShardRecord:
        names = {f.name for f in dataclasses.fields(cls)}
        kwargs: dict[str, Any] = {k: v for k, v in rec.items() if k in names}
        kwargs["previous_batch_ids"] = tuple(kwargs.get("previous_batch_ids") or ())
        kwargs["errors"] = tuple(kwargs.get("errors") or ())
        return cls(**kwargs)

    def evolve(self, **changes: Unpack[ShardChanges]) -> ShardRecord:
        return dataclasses.replace(self, updated_at=time.time(), **changes)

    def without_batch(self, **changes: Unpack[ShardChanges]) -> ShardRecord:
        """The shard back to ``pending``, its batch (if any) kept among
        ``previous_batch_ids``: that batch's status, counts, files, downloads and errors
        cleared, and ``changes`` made."""
        previous = self.previous_batch_ids
        if self.batch_id:
            previous = (*previous, self.batch_id)
        cleared: ShardChanges = {
            "batch_id": None,
            "previous_batch_ids": previous,
            "status": "pending",
            "completed": 0,
            "failed": 0,
            "output_file_id": None,
            "error_file_id": None,
            "output_downloaded": False,
            "error_downloaded": False,
            "errors": (),
        }
        cleared.update(changes)
        return self.evolve(**cleared)

    @property
    def stem(self) -> str:
        """The file stem of this shard's files: its request file's, the one name the
        manifest records, so every file of the shard is found from the record alone."""
        return Path(self.input_path).stem
