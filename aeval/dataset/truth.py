"""Ground truth by row id: what each answer of a run (or a rescore) is checked against."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

__all__ = ["Truth", "TruthTable"]


@dataclass(frozen=True, slots=True)
class Truth:
    """One row's ground truth: what an answer to it is checked against."""

    answer: str
    constants: str
    tier: str | None


class TruthTable:
    """Ground truth by row id, kept in the dataset's own columns (the run and rescore share it).

    A dict of Python strings would copy every answer and declaration block
    (~125 MB more for 50,000 synthetic rows); a row's strings are made only
    when its answer is checked. Ids are the ``id`` column, else the 0-based row
    index; a null answer or declaration block is empty text (the verifier's
    ``bad_ground_truth``), a missing ``tier`` is ``None``.
    """

    def __init__(self, frame: pl.DataFrame) -> None:
        ids = (
            frame.get_column("id").cast(pl.String).to_list()
            if "id" in frame.columns
            else [str(i) for i in range(frame.height)]
        )
        self._index = {cid: i for i, cid in enumerate(ids)}
        self._answer = frame.get_column("answer").cast(pl.String).fill_null("")
        self._constants = frame.get_column("constants").cast(pl.String).fill_null("")
        self._tier = (
            frame.get_column("tier").cast(pl.String)
            if "tier" in frame.columns
            else pl.Series("tier", [None] * frame.height, dtype=pl.String)
        )

    def get(self, cid: str) -> Truth | None:
        i = self._index.get(cid)
        if i is None:
            return None
        return Truth(self._answer[i], self._constants[i], self._tier[i])

    def __getitem__(self, cid: str) -> Truth:
        truth = self.get(cid)
        if truth is None:
            raise KeyError(cid)
        return truth

    def __contains__(self, cid: object) -> bool:
        return cid in self._index

    def ids(self) -> list[str]:
        """Every row id, in the dataset's order."""
        return list(self._index)

    def __len__(self) -> int:
        return len(self._index)
