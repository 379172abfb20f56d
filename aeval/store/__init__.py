"""The run directory: the one place a run's facts are written.

Layout (``results/<run-id>/``)::

    config.json        the resolved RunConfig (never the API key)
    manifest.json      every shard: input file and hash, remote ids, last status
    requests/*.jsonl   the request files exactly as uploaded
    outputs/*.jsonl    the output and error files exactly as downloaded
    verdicts.jsonl     one Verdict.to_record() per line, appended and flushed
    verdicts.parquet   at the end: the verdict frame
    summary.json       at the end: aeval.report.summarize of that frame

One module per concern: :mod:`~aeval.store.run_store` (``RunStore``),
:mod:`~aeval.store.shards` (``ShardRecord``), :mod:`~aeval.store.names` (file
and shard names, run ids), :mod:`~aeval.store.files` (atomic writes) and
:mod:`~aeval.store.results` (the end files). Every name imports from here.
"""

from __future__ import annotations

from aeval.store.files import atomic_write_text, file_sha256
from aeval.store.names import (
    CONFIG_FILE,
    MANIFEST_FILE,
    SUMMARY_FILE,
    VERDICT_CACHE_FILE,
    VERDICTS_FILE,
    VERDICTS_PARQUET,
    new_run_id,
    shard_key,
    shard_stem,
)
from aeval.store.results import empty_verdicts, write_results
from aeval.store.run_store import MANIFEST_VERSION, RunStore
from aeval.store.shards import ShardRecord

__all__ = [
    "CONFIG_FILE",
    "MANIFEST_FILE",
    "MANIFEST_VERSION",
    "SUMMARY_FILE",
    "VERDICTS_FILE",
    "VERDICTS_PARQUET",
    "VERDICT_CACHE_FILE",
    "RunStore",
    "ShardRecord",
    "atomic_write_text",
    "empty_verdicts",
    "file_sha256",
    "new_run_id",
    "shard_key",
    "shard_stem",
    "write_results",
]
