"""Match a request's text to the benchmark row it asks about."""

from __future__ import annotations

import re
from collections.abc import Iterable

import polars as pl

from aeval.errors import DatasetError
from aeval.local.chat import Row

__all__ = ["QuestionIndex"]


class QuestionIndex:
    """Find the benchmark row a user message asks about.

    The engine sends ``question + "\\n" + instruction`` (or, under the ``warp-2025`` protocol,
    ``instruction + "\\n" + question``) and the instruction may be customised, so a message matches
    the row whose question is the message itself or the message with some trailing lines removed
    (longest first), else with some leading lines removed (shortest first). When several rows share
    a question, the one whose id is the request's ``custom_id`` wins (the engine uses row ids as
    custom ids), else the first.
    """

    def __init__(self, rows: Iterable[Row]) -> None:
        self._by_question: dict[str, Row] = {}
        self._by_id: dict[str, Row] = {}
        self._by_first_line: dict[str, list[Row]] = {}
        for row in rows:
            if row.question not in self._by_question:
                self._by_question[row.question] = row
                first = row.question.split("\n", 1)[0]
                self._by_first_line.setdefault(first, []).append(row)
            self._by_id.setdefault(row.id, row)

    @classmethod
    def from_frame(cls, frame: pl.DataFrame | None) -> QuestionIndex:
        if frame is None:
            return cls(())
        missing = [c for c in ("question", "answer", "constants") if c not in frame.columns]
        if missing:
            raise DatasetError(
                f"the local server's dataset lacks column(s) {', '.join(missing)}: it needs "
                "question, answer and constants (as aeval.dataset.load_dataset returns)"
            )
        has_id = "id" in frame.columns
        rows = frame.select(
            pl.col("id").cast(pl.String) if has_id else pl.int_range(pl.len()).cast(pl.String),
            "question", "answer", "constants",
        )  # fmt: skip
        return cls(Row(*row) for row in rows.iter_rows())

    def match(self, text: str, custom_id: str | None = None) -> Row | None:
        found, end, start = self._by_question.get(text), len(text), 0
        # Trailing lines dropped, longest first.
        while found is None and (end := text.rfind("\n", 0, end)) >= 0:
            found = self._by_question.get(text[:end])
        # An instruction before the question (``--protocol warp-2025``): leading lines
        # dropped instead, shortest first.
        while found is None and (start := text.find("\n", start) + 1) > 0:
            found = self._by_question.get(text[start:])
        return None if found is None else self._prefer(found, custom_id)

    def match_inside(self, text: str, custom_id: str | None = None) -> Row | None:
        """The row whose question sits anywhere in ``text`` on whole lines.

        For a base model's prompt, where a template wraps the question (and instruction)
        in lines of its own. The earliest question wins, the longest at that line; then
        ``custom_id`` as in :meth:`match`.
        """
        for start in (0, *(m.end() for m in re.finditer("\n", text))):
            end = text.find("\n", start)
            found = [
                row
                for row in self._by_first_line.get(text[start : None if end < 0 else end], ())
                if text.startswith(row.question, start)
                and text[start + len(row.question) : start + len(row.question) + 1] in ("", "\n")
            ]
            if found:
                return self._prefer(max(found, key=lambda row: len(row.question)), custom_id)
        return None

    def _prefer(self, found: Row, custom_id: str | None) -> Row:
        if custom_id is not None and found.id != custom_id:
            same = self._by_id.get(custom_id)
            if same is not None and same.question == found.question:
                return same
        return found
