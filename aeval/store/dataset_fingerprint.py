"""The fingerprint of a dataset as a run records it: which rows a run was scored against.

:class:`DatasetFingerprint` names the data by the file's sha256 (of every file,
for a ``save_to_disk`` directory; or the hub commit it was loaded at) and by a
digest of the rows' content, equal for the same rows in any format. It is part of
the run directory's provenance record (:mod:`aeval.store.provenance`), so it lives
with the store, below :mod:`aeval.dataset`, which computes one
(:func:`aeval.dataset.load_dataset_fingerprinted`); ``resume`` and ``report A B``
compare two of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal, cast

from aeval.store.summary_record import DatasetRecord

__all__ = ["DatasetFingerprint", "SourceKind"]

SourceKind = Literal["file", "directory", "hub"]


@dataclass(frozen=True, slots=True)
class DatasetFingerprint:
    """Which data a run was scored against.

    :param ref: the path or hub id as given.
    :param kind: ``file``, ``directory`` (``save_to_disk``) or ``hub``.
    :param sha256: of the file's bytes (of every file, for a directory); ``None`` for the hub.
    :param revision: the hub commit the rows were loaded at; ``None`` for local data.
    :param content_sha256: of the rows' id, question, answer, constants and tier,
        in order, before any selection: equal for the same rows in any format.
    :param total_rows: rows in the dataset; ``rows``: rows the run selected.
    """

    ref: str
    kind: SourceKind
    sha256: str | None
    revision: str | None
    content_sha256: str
    total_rows: int
    rows: int

    def to_dict(self) -> DatasetRecord:
        return cast(DatasetRecord, asdict(self))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DatasetFingerprint | None:
        """The fingerprint recorded in a provenance dict; ``None`` if absent or malformed."""
        try:
            return cls(**{k: data[k] for k in cls.__dataclass_fields__})
        except (KeyError, TypeError):
            return None

    def same_data(self, other: DatasetFingerprint) -> bool:
        return self.content_sha256 == other.content_sha256

    def describe(self) -> str:
        """One line naming the data: ``warp.parquet (sha256 3fa2…, 671 rows, content 9b1c…)``."""
        where = f"{self.ref}@{self.revision[:12]}" if self.revision else self.ref
        parts = [f"sha256 {self.sha256[:12]}"] if self.sha256 else []
        parts += [f"{self.total_rows} rows", f"content {self.content_sha256[:12]}"]
        return f"{where} ({', '.join(parts)})"
