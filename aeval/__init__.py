"""aeval: evaluate LLM-written SMT-LIB constraints on the invaR1ant / WARP benchmark.

This module is the whole public API; everything else may change.
"""

from __future__ import annotations

from aeval.errors import (
    AevalError,
    ApiError,
    ConfigError,
    DatasetError,
    InputFileError,
    RunDirError,
)
from aeval.events import (
    Event,
    JobFinished,
    OutputDownloaded,
    RetryScheduled,
    RunFinished,
    RunStarted,
    ShardUpdated,
    VerdictProduced,
)
from aeval.verdicts import CheckResult, Status, Verdict

__version__ = "0.1.0"

__all__ = [
    "AevalError",
    "ApiError",
    "CheckResult",
    "ConfigError",
    "DatasetError",
    "Event",
    "InputFileError",
    "JobFinished",
    "OutputDownloaded",
    "RetryScheduled",
    "RunDirError",
    "RunFinished",
    "RunStarted",
    "ShardUpdated",
    "Status",
    "Verdict",
    "VerdictProduced",
]
