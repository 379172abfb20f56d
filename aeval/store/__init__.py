"""The run directory: the one place a run's facts are written, and the only code
that knows its file names.

Layout (``<out>/<run-id>/``, named in :mod:`~aeval.store.layout`)::

    config.json             the resolved RunConfig (never the API key) and the provenance
    manifest.json           every shard: request file and hash, remote ids, last status
    run.lock                flock'ed by the one process driving the run (store.lock)
    submit-hold.json        while present, no batch is created (store.hold: dry run, cancel)
    cancel-failures.json    batches whose cancel the provider refused or never answered
                            (store.cancel_failures), until a cancel of them succeeds
    requests/<stem>.jsonl   a shard's request file, exactly as uploaded
    outputs/<stem>-a<N>.output.jsonl
    outputs/<stem>-a<N>.error.jsonl
                            attempt N's output and error files, exactly as downloaded
    outputs/<job>-direct.jsonl
                            direct mode: one (model, trial)'s answers, in the output format
    verdicts.jsonl          one Verdict.to_record() per line, appended and flushed
    verdicts.parquet        at the end: the verdict frame
    summary.json            at the end: aeval.report.summarize of that frame, with the provenance
    verdict-cache.jsonl     verdicts of distinct (truth, extracted answer, limits) checked so
                            far (aeval.verify.cache; also in a rescore's --out)
    local-server/           an offline run: the local server's state, for its resume
    report.html, samples.html, wrong-<status>.html, report-by-<grouping>.html
                            written by ``report`` and ``view`` when asked (``compare.html``,
                            ``compare-by-<grouping>.html`` into the second of two runs compared)

``<stem>`` is :func:`~aeval.store.names.shard_stem` (``<model>-<hash>-t<T>-s<S>``);
``<job>`` is the same without ``-s<S>``.

One module per concern: :mod:`~aeval.store.layout` (``RunLayout``: the paths),
:mod:`~aeval.store.run_store` (``RunStore``), :mod:`~aeval.store.shards`
(``ShardRecord``), :mod:`~aeval.store.names` (shard names, run ids),
:mod:`~aeval.store.atomic_files` (atomic writes, hashes), :mod:`~aeval.store.results`
(the end files), :mod:`~aeval.store.lock` (one driver at a time),
:mod:`~aeval.store.hold` (the submit hold), :mod:`~aeval.store.cancel_failures`
(cancels not confirmed), :mod:`~aeval.store.provenance` (what a
result was made from, kept in ``config.json`` and ``summary.json``) and
:mod:`~aeval.store.failures` (a directory that cannot be written, said in one line).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aeval._lazy import lazy_exports
from aeval.store.atomic_files import atomic_write_text, file_sha256
from aeval.store.layout import (
    CONFIG_FILE,
    MANIFEST_FILE,
    SUMMARY_FILE,
    VERDICT_CACHE_FILE,
    VERDICTS_FILE,
    VERDICTS_PARQUET,
    RunLayout,
    parse_output_name,
)
from aeval.store.names import new_run_id, shard_key, shard_stem

# The writers load on first use (PEP 562): a reader of a run directory (a report, the
# viewer, provenance) needs the layout and must not import anyio and the manifest's
# machinery for it.
_LAZY: dict[str, str] = {
    "MANIFEST_VERSION": "aeval.store.run_store",
    "RunStore": "aeval.store.run_store",
    "ShardRecord": "aeval.store.shards",
    "empty_verdicts": "aeval.store.results",
    "write_results": "aeval.store.results",
}

__all__ = [
    "CONFIG_FILE",
    "MANIFEST_FILE",
    "MANIFEST_VERSION",
    "SUMMARY_FILE",
    "VERDICTS_FILE",
    "VERDICTS_PARQUET",
    "VERDICT_CACHE_FILE",
    "RunLayout",
    "RunStore",
    "ShardRecord",
    "atomic_write_text",
    "empty_verdicts",
    "file_sha256",
    "new_run_id",
    "parse_output_name",
    "shard_key",
    "shard_stem",
    "write_results",
]


if not TYPE_CHECKING:  # the checker reads the typed imports below, never `Any`
    __getattr__, __dir__ = lazy_exports(__name__, globals(), _LAZY)


if TYPE_CHECKING:  # static checkers and IDEs see the real names
    from aeval.store.results import empty_verdicts, write_results
    from aeval.store.run_store import MANIFEST_VERSION, RunStore
    from aeval.store.shards import ShardRecord
