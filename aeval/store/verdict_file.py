"""``verdicts.jsonl`` read back: the one reader of the file, with its one torn-line rule.

The run appends one :meth:`~aeval.verdicts.Verdict.to_record` line at a time,
newline included. A last line without its newline is a write the process died
in: that verdict never existed (a resume produces it again), so it is passed
over. Any other line that is not a verdict record is an error naming the file
and the line.

The frame (:func:`read_verdict_frames`) is read by polars' own NDJSON reader
wherever the lines are as :meth:`~aeval.verdicts.Verdict.to_record` and
``json.dumps`` write them; any other block of lines (a file of an older version
that mixes formats, an edited line, a value of an unexpected type) goes the way
every line once went, one record at a time through Python, which gives the same
frame and names a bad line. The two ways give equal frames
(tests/test_verdict_file.py).
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from aeval.errors import RunDirError
from aeval.json_values import JsonObject
from aeval.study_reasons import STUDY_CATEGORIES
from aeval.verdicts import Status, verdict_schema, verdicts_frame

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
    with path.open("rb") as fh:
        yield from _records(path, fh, 1)


def _records(path: Path, fh: IO[bytes], first_line: int) -> Iterator[tuple[int, JsonObject]]:
    """The records of the lines of ``fh`` (the first is line ``first_line`` of ``path``),
    each with the byte offset in ``fh`` after it."""
    end = 0
    for lineno, raw in enumerate(fh, start=first_line):
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


# Bytes of the file read at a time: a block's frame is read by polars, a block
# that is not as to_record writes it goes through Python 2,000 records at a time.
_BLOCK_BYTES = 8 << 20


def read_verdict_frames(path: Path, block_bytes: int = _BLOCK_BYTES) -> Iterator[pl.DataFrame]:
    """The verdicts of ``path`` as frames, in file order (one or more a block of
    ``block_bytes`` of whole lines).

    Read by polars' NDJSON reader, not through Python dicts: 2,000 dicts at a time
    and frames built from them lifted a run's end by +203 MB for 79 MB of
    verdicts (bench/README.md "The end of the run cut").

    :raises RunDirError: an unreadable line, or records of an unexpected shape.
    """
    first_line = 1
    for block in _blocks_of_lines(path, block_bytes):
        frame = _canonical_frame(block)
        if frame is not None:
            # One chunk a column: polars' reader leaves a block's frame in chunks of
            # its own with room to spare (+96 MB at the end of a 319,050-verdict run
            # when sorted unpacked, bench/README.md "The verdict file read by polars").
            yield frame.rechunk()
        else:
            yield from _frames_through_records(path, block, first_line)
        first_line += block.count(b"\n")


def _blocks_of_lines(path: Path, block_bytes: int) -> Iterator[bytes]:
    """``path``'s whole lines, about ``block_bytes`` at a time; a last line without its
    newline (torn) is left out."""
    rest = b""
    with path.open("rb") as fh:
        while data := fh.read(block_bytes):
            data = rest + data if rest else data
            cut = data.rfind(b"\n") + 1
            rest = data[cut:]
            if cut:
                yield data[:cut] if rest else data


def _frames_through_records(path: Path, block: bytes, first_line: int) -> Iterator[pl.DataFrame]:
    """The block's verdicts one record at a time, as frames of up to 2,000 (the dicts
    are ~4 KB each: 20,000 at a time lifted a run's end by ~80 MB)."""
    batch: list[dict[str, Any]] = []

    def frame() -> pl.DataFrame:
        try:
            return verdicts_frame(batch)
        except Exception as err:  # a field of the wrong type somewhere: polars says which
            raise RunDirError(f"{path}: verdict records of an unexpected shape ({err})") from err

    for _, rec in _records(path, io.BytesIO(block), first_line):
        batch.append(rec)
        if len(batch) >= 2_000:
            yield frame()
            batch = []
    if batch:
        yield frame()


# What to_record's line ends with, by json.dumps: its last key. Not found inside a
# string value (its quotes would be escaped) nor a nested object (followed by "}").
_WRITTEN_END = re.compile(rb'"published_category": (?:null|"[a-z_]+")}\n')
# A JSON number, true, false, NaN or Infinity after a key.
_SCALAR_STARTS = tuple(b'": ' + bytes([c]) for c in b"-0123456789tfNI")
# A counterexample as to_record writes it: an object of strings, each a JSON string.
_STRING = rb'"(?:[^"\\]|\\.)*"'
_COUNTEREXAMPLE = re.compile(
    rb'"counterexample": (\{(?:'
    + _STRING
    + rb": "
    + _STRING
    + rb"(?:, "
    + _STRING
    + rb": "
    + _STRING
    + rb")*)?\})"
)
# An escaped UTF-16 surrogate: polars reads a lone one otherwise than Python.
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")


def _canonical_frame(block: bytes) -> pl.DataFrame | None:
    """The frame of ``block``'s lines read by polars, or None where that could differ
    from the frame of its records through Python (:func:`_frames_through_records`).

    Each check below keeps a line polars would read otherwise than Python out of this
    way, or one Python refuses (named there); a check may also refuse lines that would
    read the same (they go through Python: slower, same frame).
    """
    import polars as pl

    lines = block.count(b"\n")
    schema = verdict_schema()
    # Each key on every line or on none: polars keeps a key's first value and Python
    # its last. (Found only as a key: inside a text its quotes are escaped.)
    keys = {name: block.count(b'"' + name.encode() + b'": ') for name in schema}
    if any(count not in (0, lines) for count in keys.values()):
        return None
    # A line without published_category has it derived from its reason, a line with it
    # keeps it: every line with its own, as to_record ends a line, or none (a file of
    # before the column).
    derive = keys["published_category"] == 0
    if not derive and sum(1 for _ in _WRITTEN_END.finditer(block)) != lines:
        return None
    # A counterexample is read as JSON text and written back sorted, as through
    # Python: an object of strings only (a string counterexample is kept as is
    # there; polars would not tell it from an object's text).
    if b'"counterexample": "' in block or _SURROGATE.search(block):
        return None
    if block.count(b'": {') + block.count(b'": [') != block.count(b'"counterexample": {'):
        return None  # an object or a list elsewhere: Python refuses it, polars writes its text
    try:
        frame = pl.read_ndjson(io.BytesIO(block), schema=schema)
    except Exception:  # polars raises several types (a value it cannot read as its column)
        return None
    if frame.height != lines:
        return None  # a blank line: Python passes over it, or names it
    unkeyed = frame.select(
        pl.any_horizontal(pl.col("model", "trial", "custom_id", "status").is_null()).any()
        | ~pl.col("status").is_in([s.value for s in Status]).all()
    ).item()
    if unkeyed:
        return None  # no model, trial, custom_id or status, or a status unknown: refused
    # Python's frame reads a number into a text column as str() does (1.0 -> "1.0"),
    # polars as it prints it ("1"), and Python refuses one as a model or custom_id:
    # every number or boolean of the block must be in a numeric or boolean column.
    numeric = [
        name for name, dtype in schema.items() if dtype.is_numeric() or dtype == pl.Boolean()
    ]
    scalars = sum(block.count(start) for start in _SCALAR_STARTS)
    if scalars != sum(frame.get_column(name).count() for name in numeric):
        return None
    try:
        counterexamples = _sorted_counterexamples(block, frame.get_column("counterexample"))
    except ValueError:
        return None
    fixed = [pl.col("round").fill_null(1), counterexamples]
    if derive:
        fixed.append(
            pl.col("published_reason")
            .replace_strict(STUDY_CATEGORIES, default=None, return_dtype=pl.String())
            .alias("published_category")
        )
    return frame.with_columns(fixed)


def _sorted_counterexamples(block: bytes, column: pl.Series) -> pl.Series:
    """The counterexamples as :func:`~aeval.verdicts.verdicts_frame` writes them
    (``json.dumps(..., sort_keys=True)`` of the object), read from the block's text:
    polars' own text of an object is not always JSON (a backslash before a quote).

    :raises ValueError: their count is not that of ``column``'s values.
    """
    import polars as pl

    if column.null_count() == column.len():
        return column
    found = [
        json.dumps(json.loads(m.group(1)), sort_keys=True) for m in _COUNTEREXAMPLE.finditer(block)
    ]
    if len(found) != column.len() - column.null_count():
        raise ValueError("a counterexample that is not an object of strings")
    values = iter(found)
    return pl.Series(
        column.name,
        [None if v is None else next(values) for v in column.to_list()],
        dtype=pl.String(),
    )
