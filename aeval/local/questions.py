"""Match a request's text to the benchmark row it asks about."""

from __future__ import annotations

from collections.abc import Iterable

import polars as pl

from aeval.errors import DatasetError
from aeval.local.chat import Row

__all__ = ["QuestionIndex"]


class QuestionIndex:
    """Find the benchmark row a user message asks about.

    The engine sends ``question + "\\n" + instruction`` (or, under the
    ``warp-2025`` protocol, ``instruction + "\\n" + question``) and the
    instruction may be customised, so a message matches the row whose question
    is the message itself or the message with some trailing lines removed
    (longest first), else with some leading lines removed (shortest first).
    When several rows share a question, the one whose id is the request's
    ``custom_id`` wins (the engine uses row ids as custom ids), else the first.
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
        has = frame.columns.__contains__
        rows = frame.select(
            pl.col("id").cast(pl.String) if has("id") else pl.int_range(pl.len()).cast(pl.String),
            "question", "answer", "constants",
            pl.col("tier") if has("tier") else pl.lit(None, pl.String).alias("tier"),
        )  # fmt: skip
        return cls(Row(*row) for row in rows.iter_rows())

    def __len__(self) -> int:
        return len(self._by_question)

    def match(self, text: str, custom_id: str | None = None) -> Row | None:
        found = self._by_question.get(text)
        end = len(text)
        while found is None and end > 0:
            end = text.rfind("\n", 0, end)
            if end < 0:
                break
            found = self._by_question.get(text[:end])
        # An instruction placed before the question (``--protocol warp-2025``):
        # drop leading lines instead, shortest first.
        start = 0
        while found is None:
            start = text.find("\n", start) + 1
            if start <= 0:
                return None
            found = self._by_question.get(text[start:])
        return self._prefer(found, custom_id)

    def match_inside(self, text: str, custom_id: str | None = None) -> Row | None:
        """The row whose question sits anywhere in ``text`` on whole lines.

        For a base model's prompt, where a template wraps the question (and
        instruction) in lines of its own. The earliest question wins, the
        longest at that line; then ``custom_id`` as in :meth:`match`.
        """
        start = 0
        while start <= len(text):
            end = text.find("\n", start)
            line = text[start:] if end < 0 else text[start:end]
            found: Row | None = None
            for row in self._by_first_line.get(line, ()):
                stop = start + len(row.question)
                if (
                    text.startswith(row.question, start)
                    and (stop == len(text) or text[stop] == "\n")
                    and (found is None or len(row.question) > len(found.question))
                ):
                    found = row
            if found is not None:
                return self._prefer(found, custom_id)
            if end < 0:
                return None
            start = end + 1
        return None

    def _prefer(self, found: Row, custom_id: str | None) -> Row:
        if custom_id is not None and found.id != custom_id:
            same = self._by_id.get(custom_id)
            if same is not None and same.question == found.question:
                return same
        return found
