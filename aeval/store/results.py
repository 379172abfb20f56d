"""The end files of a run or a rescore: ``verdicts.parquet`` and ``summary.json``."""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aeval.store.atomic_files import atomic_write_text
from aeval.store.layout import SUMMARY_FILE, VERDICTS_PARQUET

if TYPE_CHECKING:  # polars is imported where a frame is built: the CLI's start-up skips it
    import polars as pl

__all__ = ["empty_verdicts", "write_results"]

_OS_ERROR = re.compile(r"\(os error (\d+)\)")


def write_results(out_dir: Path, frame: pl.DataFrame, summary: Mapping[str, Any] | None) -> None:
    """The end files of a run or a rescore: ``verdicts.parquet`` and ``summary.json``.

    Each replaces its previous version atomically (temporary sibling, rename).
    """
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
    os.replace(tmp, out_dir / VERDICTS_PARQUET)
    if summary is not None:
        atomic_write_text(
            out_dir / SUMMARY_FILE, json.dumps(summary, indent=2, sort_keys=True, default=str)
        )


def empty_verdicts() -> pl.DataFrame:
    import polars as pl

    from aeval.verdicts import verdict_schema

    return pl.DataFrame(schema=verdict_schema())
