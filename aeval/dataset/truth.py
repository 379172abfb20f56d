"""Ground truth by row id: what each answer of a run (or a rescore) is checked against."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

from aeval.dataset.extrapolation import item_facts
from aeval.dataset.programs import PROGRAM_COLUMN, program_series

if TYPE_CHECKING:
    from collections.abc import Callable

    from aeval.verdicts import Verdict

__all__ = ["Truth", "TruthTable"]


@dataclass(frozen=True, slots=True)
class Truth:
    """One row's ground truth: what an answer to it is checked against."""

    answer: str
    constants: str
    tier: str | None
    # What the item is (aeval.dataset.programs, aeval.dataset.extrapolation):
    # carried by each of its verdicts so reports can group by them.
    program: str | None = None
    examples: int | None = None
    target_n: int | None = None
    distance: int | None = None
    answer_chars: int | None = None

    def stamp(self, verdict: Verdict) -> Verdict:
        """``verdict`` with this item's program and extrapolation facts."""
        return dataclasses.replace(
            verdict,
            program=self.program,
            examples=self.examples,
            target_n=self.target_n,
            distance=self.distance,
            answer_chars=self.answer_chars,
        )


class TruthTable:
    """Ground truth by row id, kept in the dataset's own columns (the run and rescore share it).

    A dict of Python strings would copy every answer and declaration block
    (~125 MB more for 50,000 synthetic rows); a row's strings are made only
    when its answer is checked. Ids are the ``id`` column, else the 0-based row
    index; a null answer or declaration block is empty text (the verifier's
    ``bad_ground_truth``), a missing ``tier`` is ``None``.

    Each row's program is its ``program`` column, else looked up by its ground
    truth (:mod:`aeval.dataset.programs`); its question is parsed once, here
    (:mod:`aeval.dataset.extrapolation`), when the frame has a ``question``.
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
        program = (
            frame.get_column(PROGRAM_COLUMN).cast(pl.String)
            if PROGRAM_COLUMN in frame.columns
            else program_series(self._answer)
        )
        self._program = program.to_list() if program is not None else None
        facts = item_facts(frame)
        self._facts = list(
            zip(
                *(facts.get_column(c).to_list() for c in facts.columns),
                strict=True,
            )
        )

    def get(self, cid: str) -> Truth | None:
        i = self._index.get(cid)
        if i is None:
            return None
        return Truth(
            self._answer[i],
            self._constants[i],
            self._tier[i],
            self._program[i] if self._program is not None else None,
            *self._facts[i],
        )

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

    def constants_lookup(self) -> Callable[[str], str | None]:
        """A row's declarations by id (None: no such row); it outlives
        :meth:`release`: the answers' classes at a run's end need no more."""
        index, constants = self._index, self._constants

        def lookup(cid: str) -> str | None:
            i = index.get(cid)
            return None if i is None else constants[i]

        return lookup

    def release(self) -> None:
        """Let go of every row: the table is empty after. A run's end needs no ground
        truth once every answer is checked, and its texts are most of what a large
        run holds (the answers of 50,000 synthetic rows: ~90 MB)."""
        self._index = {}
        self._answer = self._answer.clear()
        self._constants = self._constants.clear()
        self._tier = self._tier.clear()
        self._program = [] if self._program is not None else None
        self._facts = []
