"""Reports of a run: the summary (``summary.json``), tables, charts and comparisons.

Everything shown is rendered from :func:`summarize`'s dict, so a report cannot
disagree with ``summary.json``. The summary and its tables are computed in
:mod:`aeval.summary`, below the engine that writes ``summary.json`` at a run's end;
they are named here too because this is where a reader of a run looks for them.
"""

from __future__ import annotations

from aeval.summary.aggregate import SUMMARY_VERSION, load_run, load_summary, summarize
from aeval.summary.intervals import wilson_interval
from aeval.summary.tables import status_table, summary_table, tier_table, trial_table

__all__ = [
    "SUMMARY_VERSION",
    "load_run",
    "load_summary",
    "status_table",
    "summarize",
    "summary_table",
    "tier_table",
    "trial_table",
    "wilson_interval",
]
