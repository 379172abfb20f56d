"""``verdicts.jsonl`` read back: the one reader of the file, with its one torn-line rule.

The run appends one :meth:`~aeval.verdicts.Verdict.to_record` line at a time,
newline included. A last line without its newline is a write the process died
in: that verdict never existed (a resume produces it again), so it is passed
over. Any other line that is not a verdict record is an error naming the file
and the line.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aeval.errors import RunDirError
from aeval.json_values import JsonObject
from aeval.verdicts import Status, verdicts_frame

if TYPE_CHECKING:
    import polars as pl

__all__ = ["read_verdict_frames", "read_verdict_records", "verdict_key_of"]


def verdict_key_of(rec: dict[str, Any]) -> tuple[str, int, str]:
    """The (model, trial, custom_id) of a record, checked; ``ValueError`` says what is wrong."""
    for key in ("model", "trial", "custom_id", "status"):
        if key not in rec:
            raise ValueError(f"no {key!r}")
    model, trial, custom_id = rec["model"], rec["trial"], rec["custom_id"]
    if not isinstance(model, str) or not isinstance(custom_id, str):
        raise ValueError("'model' and 'custom_id' must be strings")
    if not isinstance(trial, int) or isinstance(trial, bool):
        raise ValueError(f"'trial' must be an integer, not {trial!r}")
    Status(rec["status"])
    return model, trial, custom_id


def read_verdict_records(path: Path) -> Iterator[tuple[int, JsonObject]]:
    """Each whole verdict record of ``path`` with its byte offset after it, in file order.

    :raises RunDirError: a line (not the torn last one) that is not a verdict record.
    """
    end = 0
    with path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            if not raw.endswith(b"\n"):
                return  # torn by a crash: never a verdict
            end += len(raw)
            if not raw.strip():
                continue
            try:
                rec = json.loads(raw)
                if not isinstance(rec, dict):
                    raise ValueError("not a JSON object")
                verdict_key_of(rec)
            except ValueError as err:
                raise RunDirError(
                    f"{path}:{lineno}: line {lineno} is not a verdict record ({err}); "
                    "the file was edited or damaged"
                ) from err
            yield end, rec


def read_verdict_frames(path: Path, chunk: int = 2_000) -> Iterator[pl.DataFrame]:
    """The verdicts of ``path`` as frames of up to ``chunk`` records, in file order.

    Built ``chunk`` records at a time: the frame is compact, the Python dicts it
    is built from are not (~4 KB each: 20,000 at a time lifted a run's peak by
    ~80 MB at its end; 2,000 by ~8 MB, in the same time).

    :raises RunDirError: an unreadable line, or records of an unexpected shape.
    """
    batch: list[dict[str, Any]] = []

    def frame() -> pl.DataFrame:
        try:
            return verdicts_frame(batch)
        except Exception as err:  # a field of the wrong type somewhere: polars says which
            raise RunDirError(f"{path}: verdict records of an unexpected shape ({err})") from err

    for _, rec in read_verdict_records(path):
        batch.append(rec)
        if len(batch) >= chunk:
            yield frame()
            batch = []
    if batch:
        yield frame()
