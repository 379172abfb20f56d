"""Reports of a run: the summary (``summary.json``), tables, charts and comparisons.

Everything shown is rendered from :func:`summarize`'s dict, so a report cannot
disagree with ``summary.json``.
"""

from __future__ import annotations

from aeval.report.intervals import wilson_interval
from aeval.report.summary import SUMMARY_VERSION, load_run, load_summary, summarize
from aeval.report.tables import status_table, summary_table, tier_table, trial_table

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
