"""Synthetic benchmark files: written atomically, chunk by chunk, in the format the name says."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal

from aeval.errors import ConfigError, InputFileError
from aeval.synth.rows import counted_chunks, generate, prepare

if TYPE_CHECKING:
    import polars as pl

    from aeval.synth.rows import SynthStats

__all__ = [
    "DEMO_ROWS",
    "DEMO_SEED",
    "output_format",
    "write_benchmark",
    "write_demo",
    "write_synthetic",
]

DEMO_ROWS = 120
DEMO_SEED = 2026

OutputFormat = Literal["parquet", "jsonl", "csv"]
_FORMATS: Mapping[str, OutputFormat] = MappingProxyType(
    {".parquet": "parquet", ".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv"}
)


def write_synthetic(
    path: str | os.PathLike[str],
    rows: int,
    *,
    seed: int = 0,
    selection: Iterable[str] | None = None,
) -> SynthStats:
    """Generate a benchmark straight into ``path`` (.parquet, .jsonl or .csv), chunk by chunk.

    Memory stays bounded by one chunk of rows whatever ``rows`` is; the file
    appears atomically when complete. Same content as :func:`generate`.

    :raises ConfigError: a bad file name, ``rows``, ``seed`` or problem name.
    """
    fmt = output_format(path)
    prepared = prepare(rows, seed, selection, verify=True)
    started = time.perf_counter()
    tiers: dict[str, int] = {}
    _write_chunks(counted_chunks(prepared, tiers), Path(path), fmt)
    return prepared.stats(time.perf_counter() - started, tiers)


def output_format(path: str | os.PathLike[str]) -> OutputFormat:
    """The file format for ``path``, from its extension.

    :raises ConfigError: the extension is not .parquet, .jsonl/.ndjson or .csv.
    """
    suffix = Path(path).suffix.lower()
    if suffix not in _FORMATS:
        raise ConfigError(
            f"cannot write a benchmark to {os.fspath(path)!r}: use a .parquet, .jsonl or .csv name"
        )
    return _FORMATS[suffix]


@contextlib.contextmanager
def _atomic(target: Path) -> Iterator[Path]:
    """A temporary path beside ``target`` that replaces it only if the block succeeds.

    :raises InputFileError: the file or its directory cannot be written.
    """
    # Same directory (so the rename is atomic), ordinary permissions (unlike mkstemp's 0600).
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        yield tmp
        os.replace(tmp, target)
    except OSError as err:
        raise InputFileError(f"cannot write {target}: {err.strerror or err}") from err
    finally:
        with contextlib.suppress(OSError):  # best effort: there may be nothing to remove
            tmp.unlink()


def _write_chunks(chunks: Iterable[pl.DataFrame], target: Path, fmt: OutputFormat) -> None:
    with _atomic(target) as tmp:
        if fmt == "parquet":
            import pyarrow.parquet as pq  # deferred, as polars (only for a parquet target)

            writer: pq.ParquetWriter | None = None
            try:
                for chunk in chunks:
                    table = chunk.to_arrow()
                    if writer is None:
                        writer = pq.ParquetWriter(tmp, table.schema, compression="zstd")
                    writer.write_table(table)
            finally:
                if writer is not None:
                    writer.close()
            return
        with tmp.open("wb") as fh:
            for index, chunk in enumerate(chunks):
                if fmt == "jsonl":
                    chunk.write_ndjson(fh)
                else:
                    chunk.write_csv(fh, include_header=index == 0)


def write_benchmark(frame: pl.DataFrame, path: str | os.PathLike[str]) -> Path:
    """Write ``frame`` to ``path`` atomically (temp file, then rename); format by extension."""
    target = Path(path)
    fmt = output_format(target)
    if fmt != "parquet":
        _write_chunks([frame], target, fmt)
        return target
    with _atomic(target) as tmp:
        frame.write_parquet(tmp)  # polars' own writer: smaller files than one pyarrow row group
    return target


def write_demo(path: str | os.PathLike[str]) -> Path:
    """Regenerate the bundled demo benchmark (``aeval/data/demo-benchmark.jsonl``) at ``path``."""
    frame, _ = generate(DEMO_ROWS, seed=DEMO_SEED)
    return write_benchmark(frame, path)
