"""The end files of a run or a rescore: ``verdicts.parquet`` and ``summary.json``."""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from aeval.errors import RunDirError
from aeval.store.atomic_files import atomic_write_text
from aeval.store.layout import SUMMARY_FILE, VERDICTS_PARQUET, finished_runs
from aeval.store.summary_record import Summary
from aeval.verdicts import verdict_schema

if TYPE_CHECKING:  # polars is imported where a frame is built: the CLI's start-up skips it
    import polars as pl

__all__ = [
    "concat_sorted",
    "empty_verdicts",
    "previous_output_per_request",
    "publish_results",
    "stage_verdicts",
    "write_results",
]

_OS_ERROR = re.compile(r"\(os error (\d+)\)")


def write_results(out_dir: Path, frame: pl.DataFrame, summary: Summary | None) -> None:
    """The end files of a run or a rescore: ``verdicts.parquet`` and ``summary.json``.

    Each replaces its previous version atomically (temporary sibling, rename).
    """
    publish_results(out_dir, stage_verdicts(out_dir, frame), summary)


def stage_verdicts(out_dir: Path, frame: pl.DataFrame) -> Path:
    """Write ``frame`` to ``verdicts.parquet``'s temporary sibling and return its path:
    :func:`publish_results` puts it in place. Between the two the file can be read
    (the run's summary is computed from it, with the frame let go)."""
    tmp = out_dir / f".{VERDICTS_PARQUET}.tmp"
    try:
        frame.write_parquet(tmp)
    except Exception as err:  # polars reports a full disk as ComputeError "(os error 28)"
        code = _OS_ERROR.search(str(err))
        if code is None:
            raise
        with contextlib.suppress(OSError):
            tmp.unlink()
        number = int(code.group(1))
        raise OSError(number, os.strerror(number), str(tmp)) from err
    return tmp


def publish_results(out_dir: Path, staged: Path, summary: Summary | None) -> None:
    """Put :func:`stage_verdicts`'s file in place as ``verdicts.parquet``, then write
    ``summary.json`` (when given): the order :func:`write_results` has always used."""
    os.replace(staged, out_dir / VERDICTS_PARQUET)
    if summary is not None:
        atomic_write_text(
            out_dir / SUMMARY_FILE, json.dumps(summary, indent=2, sort_keys=True, default=str)
        )


def concat_sorted(parts: list[pl.DataFrame], keys: list[str]) -> pl.DataFrame:
    """``parts`` one after another, sorted by ``keys`` (stable); ``parts`` is emptied.

    ``DataFrame.sort`` gathers every column into a new frame while the old one is
    alive: for 200,000 verdicts that is the frame's size again (~100 MB) at the
    end of a run. Here the order is found from the keys alone and the columns are
    moved four at a time, each group let go as soon as it is moved (+20 MB). That
    needs this function to hold the only reference to the unsorted frame, hence
    the parts in a list it empties rather than a frame the caller would keep.
    """
    import polars as pl

    frame = pl.concat(parts, how="vertical") if len(parts) > 1 else parts[0]
    parts.clear()
    if frame.height < 2:
        return frame
    index = frame.select(keys).with_row_index("_row").sort(keys, maintain_order=True)
    rows = index.get_column("_row")
    del index
    names, moved = list(frame.columns), []
    for start in range(0, len(names), 4):
        group = names[start : start + 4]
        moved.append(frame.select(pl.col(group).gather(rows)))
        frame = frame.drop(group)
    return pl.concat(moved, how="horizontal")


def empty_verdicts() -> pl.DataFrame:
    import polars as pl

    return pl.DataFrame(schema=verdict_schema())


def previous_output_per_request(results_dir: Path, model: str) -> float | None:
    """Mean completion tokens per answer of ``model`` in the newest finished run under
    ``results_dir`` that has it (its ``summary.json``), or ``None``."""
    for layout in finished_runs(results_dir):
        try:
            summary = layout.read_summary()
        except RunDirError:
            continue
        for group in summary.get("models") or () if summary else ():
            if not isinstance(group, dict) or group.get("model") != model:
                continue
            tokens = group.get("tokens") or {}
            answered = int(group.get("n") or 0) - int(group.get("infra_failures") or 0)
            completion = int(tokens.get("completion") or 0)
            if answered > 0 and completion > 0:
                return completion / answered
    return None
