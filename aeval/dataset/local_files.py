"""Read a local benchmark: .parquet, .jsonl/.ndjson/.json or .csv, or a save_to_disk directory.

polars reads the files; when it refuses one, the error path finds the line
that is broken, so the message names a place in the file.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path

import polars as pl

from aeval.dataset.source import Source, first_line, row_only
from aeval.errors import DatasetError

__all__ = ["FILE_SUFFIXES", "read_local"]

FILE_SUFFIXES = (".parquet", ".pq", ".jsonl", ".ndjson", ".json", ".csv")
_SAVE_TO_DISK_MARKERS = ("dataset_info.json", "state.json", "dataset_dict.json")


def read_local(path: Path, *, split: str) -> tuple[pl.DataFrame, Source]:
    if not path.exists():
        raise DatasetError(f"dataset file {path} does not exist")
    if path.is_dir():
        return _read_saved(path, split=split)
    if not path.is_file():
        raise DatasetError(f"dataset path {path} is not a regular file or directory")
    suffix = path.suffix.lower()
    name = str(path)
    try:
        if suffix in (".parquet", ".pq"):
            return pl.read_parquet(path), Source(name, row_only)
        if suffix == ".csv":
            return _read_csv(path)
        if suffix in (".jsonl", ".ndjson", ".json"):
            return _read_json(path)
    except DatasetError:
        raise
    except (pl.exceptions.PolarsError, OSError, ValueError) as err:
        raise DatasetError(f"cannot read dataset {path}: {first_line(err)}") from err
    raise DatasetError(
        f"dataset file {path} has an unsupported extension {suffix!r}; use .parquet, .jsonl, "
        ".json, .csv or a directory written by datasets.save_to_disk"
    )


def _read_csv(path: Path) -> tuple[pl.DataFrame, Source]:
    try:
        # No inference: every field is text, exactly as written.
        frame = pl.read_csv(path, infer_schema=False, raise_if_empty=False)
    except (pl.exceptions.PolarsError, ValueError) as err:
        raise DatasetError(f"cannot read dataset {path}: {_bad_csv_line(path, err)}") from err
    return frame, Source(str(path), _csv_locator(path))


def _bad_csv_line(path: Path, err: Exception) -> str:
    """polars does not say where a CSV is broken; find the place (error path only)."""
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as bad:
        line = raw.count(b"\n", 0, bad.start) + 1
        return f"line {line} is not UTF-8 (byte {bad.start} of the file); save the file as UTF-8"
    reader = csv.reader(text.splitlines(keepends=True), strict=True)
    try:
        header = next(reader, [])
        start = reader.line_num + 1
        for record in reader:
            if len(record) != len(header):
                return (
                    f"the record at line {start} has {len(record)} fields, "
                    f"the header has {len(header)}"
                )
            start = reader.line_num + 1
    except csv.Error as bad:
        return f"line {reader.line_num}: {bad}"
    return first_line(err)


def _read_json(path: Path) -> tuple[pl.DataFrame, Source]:
    with path.open("rb") as fh:
        head = fh.read(4096).lstrip()
    if head.startswith(b"["):
        return pl.read_json(path), Source(str(path), row_only)
    try:
        frame = pl.read_ndjson(path)
    except (pl.exceptions.PolarsError, ValueError):
        try:
            # The schema was guessed from the first lines; a type that changes
            # further down (an id that turns from integer to text) needs them all.
            frame = pl.read_ndjson(path, infer_schema_length=None)
        except (pl.exceptions.PolarsError, ValueError) as err:
            reason = _bad_json_line(path, err)
            raise DatasetError(f"cannot read dataset {path}: {reason}") from err
    return frame, Source(str(path), _jsonl_locator(path))


def _bad_json_line(path: Path, err: Exception) -> str:
    """polars does not say which line is broken; find the first one that is (error path only)."""
    with path.open("rb") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except ValueError as bad:
                return f"line {number} is not valid JSON ({bad})"
            if not isinstance(value, dict):
                return f"line {number} is not a JSON object"
    return first_line(err)


def _jsonl_locator(path: Path) -> Callable[[int], str]:
    def locate(row: int) -> str:
        seen = -1
        with path.open("rb") as fh:
            for number, line in enumerate(fh, start=1):
                if line.strip():
                    seen += 1
                    if seen == row:
                        return f"row {row} (line {number})"
        return f"row {row}"

    return locate


def _csv_locator(path: Path) -> Callable[[int], str]:
    def locate(row: int) -> str:
        # Quoted fields span lines (questions do), so count records, not lines.
        with path.open(newline="", encoding="utf-8", errors="replace") as fh:
            reader = csv.reader(fh)
            start = 1
            for index, _ in enumerate(reader):
                if index == row + 1:  # record 0 is the header
                    return f"row {row} (line {start})"
                start = reader.line_num + 1
        return f"row {row}"

    return locate


def _read_saved(path: Path, *, split: str) -> tuple[pl.DataFrame, Source]:
    if not any((path / marker).exists() for marker in _SAVE_TO_DISK_MARKERS):
        raise DatasetError(
            f"directory {path} was not written by datasets.save_to_disk (no "
            f"{' / '.join(_SAVE_TO_DISK_MARKERS)} in it); pass the directory save_to_disk "
            "wrote, or a .parquet/.jsonl/.csv file"
        )
    import datasets  # heavy: imported only when a saved dataset is loaded

    try:
        loaded = datasets.load_from_disk(str(path))
    except Exception as err:  # datasets raises many unrelated types for one broken directory
        raise DatasetError(f"cannot load saved dataset {path}: {first_line(err)}") from err
    if isinstance(loaded, datasets.DatasetDict):
        if split not in loaded:
            raise DatasetError(
                f"saved dataset {path} has no split {split!r}; it has "
                f"{', '.join(sorted(loaded))} (choose one with --split)"
            )
        loaded = loaded[split]
    return loaded.to_polars(), Source(f"{path}", row_only)
