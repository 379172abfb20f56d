"""RunStore: one run directory, its manifest written atomically and its verdicts appended.

The manifest is only ever replaced atomically (write to a temporary file,
fsync, rename, fsync the directory), so a crash at any moment leaves either the
old or the new manifest, never a torn one. ``verdicts.jsonl`` is append-only;
a line torn by a crash (no trailing newline) is cut off when the run is opened
again, and its verdict is simply produced again.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from io import FileIO
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from aeval.errors import RunDirError
from aeval.json_values import JsonObject
from aeval.store.atomic_files import atomic_write_text
from aeval.store.layout import MANIFEST_FILE, RunLayout
from aeval.store.lock import RunLock
from aeval.store.results import concat_sorted, write_results
from aeval.store.shards import ShardRecord
from aeval.store.summary_record import Summary
from aeval.store.verdict_file import read_verdict_frames, read_verdict_records, verdict_key_of
from aeval.verdicts import Verdict, verdicts_frame

if TYPE_CHECKING:  # polars is imported where a frame is built: the CLI's start-up skips it
    import polars as pl

__all__ = ["MANIFEST_VERSION", "RunStore"]

MANIFEST_VERSION = 1


def _verdict_key(model: str, trial: int, custom_id: str) -> str:
    return f"{model}\x1f{trial}\x1f{custom_id}"


class RunStore:
    """One run directory. Create with :meth:`create`, reopen with :meth:`open`.

    One engine task owns it. The one exception is the manifest: :meth:`save_shards`
    writes it from a worker thread, so a 5,000-shard manifest's rewrite never
    blocks the event loop; writes are serialised, and a stale snapshot never
    replaces a newer one.
    """

    def __init__(self, run_dir: Path, *, run_id: str, config: Mapping[str, object]) -> None:
        self.run_dir = run_dir
        self.layout = RunLayout(run_dir)
        self.run_id = run_id
        self.config = config
        self.shards: dict[str, ShardRecord] = {}
        self.created = time.time()
        self._verdict_keys: set[str] = set()
        self._verdicts_fh: FileIO | None = None
        self._verdict_count = 0
        self._lock: RunLock | None = None  # released by close() only when this store took it
        # Manifest versions: the shards' state counts up on every change; a write
        # records the version it holds. One writer at a time (loop or thread).
        self._version = 0
        self._written = 0
        self._write_lock = threading.Lock()
        self._write_turn = anyio.Lock()
        self.manifest_writes = 0

    # -- opening -----------------------------------------------------------------

    @classmethod
    def create(cls, out_dir: Path, run_id: str, config: Mapping[str, object]) -> RunStore:
        """Make a new run directory; refuses to reuse one that already holds a run."""
        if {"api_key", "credentials"} & set(config):
            raise RunDirError("refusing to write a config that contains an API key")
        run_dir = Path(out_dir) / run_id
        layout = RunLayout(run_dir)
        if layout.manifest.exists():
            raise RunDirError(
                f"{run_dir} already holds a run: resume it with "
                f"'python -m aeval resume {run_dir}' or pick another --run-id"
            )
        for sub in (layout.requests_dir, layout.outputs_dir):
            sub.mkdir(parents=True, exist_ok=True)
        store = cls(run_dir, run_id=run_id, config=config)
        store._lock = RunLock.acquire(run_dir)
        if layout.manifest.exists():  # created meanwhile by the lock's last holder
            store.close()
            raise RunDirError(f"{run_dir} already holds a run: pick another --run-id")
        atomic_write_text(layout.config, json.dumps(config, indent=2, sort_keys=True))
        store.write_manifest()
        store._open_verdicts()
        return store

    @classmethod
    def open(
        cls, run_dir: Path, *, read_only: bool = False, lock: RunLock | None = None
    ) -> RunStore:
        """Reopen a run directory.

        :param read_only: only read the manifest and count verdicts (``status``):
            safe while another process runs the directory.
        :param lock: the caller's claim on ``run_dir`` (the caller releases it);
            without one (and unless read-only) the store claims the directory
            before reading anything and releases it on :meth:`close`.
        :raises RunDirError: not a run directory, damaged, or (unless read-only)
            in use by another process.
        """
        run_dir = Path(run_dir)
        if not RunLayout(run_dir).manifest.exists():
            raise RunDirError(
                f"{run_dir} is not a run directory (no {MANIFEST_FILE}); "
                "give the directory that 'python -m aeval run' printed"
            )
        if read_only:
            return cls._read(run_dir, read_only=True)
        owned = None
        if lock is None:
            lock = owned = RunLock.acquire(run_dir)
        elif not lock.held or lock.run_dir.resolve() != run_dir.resolve():
            raise RunDirError(f"{run_dir}: the lock given is not a claim on this directory")
        try:
            store = cls._read(run_dir, read_only=False)
        except BaseException:
            if owned is not None:
                owned.release()
            raise
        store._lock = owned
        try:
            for sub in (store.layout.requests_dir, store.layout.outputs_dir):
                sub.mkdir(parents=True, exist_ok=True)
            store._load_verdict_keys()
            store._open_verdicts()
        except BaseException:
            store.close()
            raise
        return store

    @classmethod
    def _read(cls, run_dir: Path, *, read_only: bool) -> RunStore:
        layout = RunLayout(run_dir)
        manifest_path = layout.manifest
        try:
            manifest = layout.read_json(manifest_path)
            config = layout.read_json(layout.config)
        except (OSError, ValueError) as err:  # not JSON, or not an object
            raise RunDirError(f"{run_dir}: cannot read the run files: {err}") from err
        if manifest.get("version") != MANIFEST_VERSION:
            raise RunDirError(
                f"{manifest_path}: manifest version {manifest.get('version')!r} "
                f"is not {MANIFEST_VERSION}"
            )
        run_id, created, shards = (manifest.get(k) for k in ("run_id", "created", "shards"))
        if not isinstance(run_id, str) or not isinstance(shards, dict | None):
            raise RunDirError(f"{manifest_path}: no run id or no shard table")
        store = cls(run_dir, run_id=run_id, config=config)
        if isinstance(created, int | float):
            store.created = created
        try:
            for key, rec in (shards or {}).items():
                if not isinstance(rec, dict):
                    raise TypeError(f"{key}: not an object")
                store.shards[key] = ShardRecord.from_json(rec)
        except (TypeError, KeyError) as err:
            raise RunDirError(f"{manifest_path}: a shard record is malformed: {err}") from err
        if read_only:
            store._count_verdicts()
        return store

    def close(self) -> None:
        try:
            if self._verdicts_fh is not None:
                fh, self._verdicts_fh = self._verdicts_fh, None
                fh.close()
        finally:
            if self._lock is not None:
                self._lock.release()
                self._lock = None

    def _count_verdicts(self) -> None:
        if self.verdicts_path.exists():
            with self.verdicts_path.open("rb") as fh:
                self._verdict_count = sum(1 for line in fh if line.endswith(b"\n"))

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- manifest ----------------------------------------------------------------

    def write_manifest(self) -> None:
        self._version += 1
        self._write_snapshot(dict(self.shards), self._version)

    def _write_snapshot(self, shards: dict[str, ShardRecord], version: int) -> None:
        """Write ``shards`` (state ``version``) as the manifest, unless a newer one is written."""
        with self._write_lock:
            if version <= self._written:
                return
            doc = {
                "version": MANIFEST_VERSION,
                "run_id": self.run_id,
                "created": self.created,
                "shards": {k: r.to_json() for k, r in shards.items()},
            }
            atomic_write_text(self.layout.manifest, json.dumps(doc, indent=1))
            self._written = version
            self.manifest_writes += 1

    def put_shard(self, record: ShardRecord) -> ShardRecord:
        """Record a shard's new state durably (atomic manifest replacement), blocking."""
        self.shards[record.key] = record
        self.write_manifest()
        return record

    def put_shards(self, records: Iterable[ShardRecord]) -> None:
        for record in records:
            self.shards[record.key] = record
        self.write_manifest()

    async def save_shards(self, records: Iterable[ShardRecord]) -> None:
        """Record shards' new states durably, the manifest written in a worker thread.

        Returns once a manifest holding them is on disk. Saves that arrive while
        a write is under way share the next one (one write serves them all), and a
        save once begun finishes even if its caller is cancelled meanwhile.
        """
        for record in records:
            self.shards[record.key] = record
        self._version += 1
        mine = self._version
        with anyio.CancelScope(shield=True):
            async with self._write_turn:
                if self._written >= mine:
                    return  # the write before ours already held our records
                snapshot, version = dict(self.shards), self._version
                await anyio.to_thread.run_sync(self._write_snapshot, snapshot, version)

    def path(self, relative: str) -> Path:
        return self.run_dir / relative

    def request_path(self, record_stem: str) -> Path:
        return self.layout.request(record_stem)

    def output_path(self, record: ShardRecord, kind: str) -> Path:
        """Where the downloaded ``output`` or ``error`` file of the shard's current batch goes."""
        return self.layout.output(record.stem, record.attempt, kind)

    # -- verdicts ----------------------------------------------------------------

    @property
    def verdicts_path(self) -> Path:
        return self.layout.verdicts

    def _load_verdict_keys(self) -> None:
        path = self.verdicts_path
        if not path.exists():
            return
        data_end = 0
        for end, rec in read_verdict_records(path):
            self._verdict_keys.add(_verdict_key(*verdict_key_of(rec)))
            data_end = end
        with path.open("rb+") as fh:
            fh.truncate(data_end)  # a torn last line, produced again on resume
        self._verdict_count = len(self._verdict_keys)

    def _open_verdicts(self) -> None:
        # Unbuffered: a line the disk refused is not kept in a buffer to be tried
        # again (and fail again) when the store closes; a torn line is cut on resume.
        self._verdicts_fh = self.verdicts_path.open("ab", buffering=0)

    def has_verdict(self, model: str, trial: int, custom_id: str) -> bool:
        return _verdict_key(model, trial, custom_id) in self._verdict_keys

    @property
    def verdict_count(self) -> int:
        return self._verdict_count

    def append_verdict(self, verdict: Verdict) -> bool:
        """Append and flush one verdict; ``False`` (and nothing written) if it already exists."""
        key = _verdict_key(verdict.model, verdict.trial, verdict.custom_id)
        if key in self._verdict_keys:
            return False
        if self._verdicts_fh is None:
            raise RunDirError(f"{self.run_dir}: the run store is closed")
        line = (json.dumps(verdict.to_record(), ensure_ascii=False) + "\n").encode()
        _append_whole(self._verdicts_fh, line)
        self._verdict_keys.add(key)
        self._verdict_count += 1
        return True

    def iter_verdict_records(self) -> Iterator[JsonObject]:
        if self.verdicts_path.exists():
            for _, rec in read_verdict_records(self.verdicts_path):
                yield rec

    def verdicts_frame(self, chunk: int = 2_000) -> pl.DataFrame:
        """All verdicts written so far, as the canonical frame (sorted for stable output)."""
        parts = (
            list(read_verdict_frames(self.verdicts_path, chunk))
            if self.verdicts_path.exists()
            else []
        )
        return concat_sorted(parts or [verdicts_frame([])], ["model", "trial", "custom_id"])

    def finish(self, summary: Summary | None, frame: pl.DataFrame | None = None) -> pl.DataFrame:
        """Write ``verdicts.parquet`` (and ``summary.json`` when given); returns the frame."""
        frame = self.verdicts_frame() if frame is None else frame
        write_results(self.run_dir, frame, summary)
        return frame


def _append_whole(fh: FileIO, data: bytes) -> None:
    """Write all of ``data`` at the end of ``fh`` or, failing, leave the file as it was
    (a torn line would run into the next verdict appended)."""
    start = fh.tell()
    view = memoryview(data)
    try:
        while view:  # a raw write may take only part of it
            view = view[fh.write(view) or 0 :]
    except OSError:
        with contextlib.suppress(OSError):
            fh.truncate(start)
        raise
