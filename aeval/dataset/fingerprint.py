"""A dataset's fingerprint: which rows a run was scored against, whatever file held them.

:class:`DatasetFingerprint` (the record, kept by the store:
:mod:`aeval.store.dataset_fingerprint`) names the data by the file's sha256 (of every file,
for a ``save_to_disk`` directory; or the hub commit it was loaded at) and by a
digest of the rows' content (:func:`content_sha256`), equal for the same rows in
any format. :func:`aeval.dataset.load_dataset_fingerprinted` makes one; the
provenance record (:mod:`aeval.store.provenance`) keeps it, and ``resume`` and
``report A B`` compare two of them.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

from aeval.store.atomic_files import file_sha256
from aeval.store.dataset_fingerprint import DatasetFingerprint, SourceKind

if TYPE_CHECKING:
    import polars as pl

__all__ = ["DatasetFingerprint", "SourceKind", "content_sha256", "directory_sha256"]

# Rows hashed per step (the digest does not depend on it): bounds the copy in memory.
_CHUNK = 2048
_HASHED_COLUMNS = ("id", "question", "answer", "constants", "tier")


def content_sha256(frame: pl.DataFrame) -> str:
    """A digest of a validated benchmark frame's rows (see :class:`DatasetFingerprint`).

    Per column (id, question, answer, constants, tier, in that order): its name,
    the sha256 of every value's length in bytes (int64, little-endian) and the
    sha256 of the values' UTF-8 bytes back to back; a null is written as one
    NUL. The lengths make the split between values unambiguous. The bytes come
    straight from Arrow buffers, a slice of rows at a time: a Python string per
    row would be several times slower, and a whole column at once would cost
    its size again in memory (half a gigabyte for 100,000 synthetic rows).
    """
    import pyarrow as pa  # deferred, as polars: only a run or rescore fingerprints data
    import pyarrow.compute as pc

    digest = hashlib.sha256()
    for name in _HASHED_COLUMNS:
        column = frame.get_column(name)
        if column.null_count():
            column = column.fill_null("\x00")
        lengths, data = hashlib.sha256(), hashlib.sha256()
        for start in range(0, column.len(), _CHUNK):
            chunk = column.slice(start, _CHUNK).to_arrow()
            if isinstance(chunk, pa.ChunkedArray):
                chunk = chunk.combine_chunks()
            values = chunk.cast(pa.large_string())  # contiguous UTF-8, int64 offsets
            sizes = pc.binary_length(values).cast(pa.int64())
            lengths.update(memoryview(sizes.buffers()[1])[: 8 * len(sizes)])
            offsets = memoryview(values.buffers()[1]).cast("q")
            first, last = offsets[values.offset], offsets[values.offset + len(values)]
            data.update(memoryview(values.buffers()[2])[first:last])
        digest.update(name.encode() + b"\x1f" + lengths.digest() + data.digest())
    return digest.hexdigest()


def directory_sha256(path: Path) -> str:
    """Every file under ``path`` (relative name and bytes), in name order."""
    digest = hashlib.sha256()
    for item in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(str(item.relative_to(path)).encode() + b"\x00")
        digest.update(file_sha256(item).encode())
    return digest.hexdigest()
