"""aeval: evaluate LLM-written SMT-LIB constraints on the invaR1ant / WARP benchmark.

This module is the whole public API; everything else may change. Names load
on first use (PEP 562) because every verification worker process imports this
package first, and must not pay for openai, polars or the engine at start-up.

A run from Python::

    from aeval import Run, RunConfig

    run = Run(RunConfig(models=("gpt-4o-mini-2024-07-18",), trials=2))
    result = await run.run()          # asyncio or trio
    result.verdicts                   # polars frame, one row per answer

See docs/embedding.md and examples/.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aeval import errors as _errors  # no imports of its own: nothing to defer
from aeval._lazy import lazy_exports
from aeval.version import __version__ as __version__

# The public API, by the module that defines each name: what loads on first use.
# Static checkers and IDEs read the TYPE_CHECKING block below instead, which
# tests/test_public_api.py holds equal to this table.
_MODULES: dict[str, tuple[str, ...]] = {
    # running
    "aeval.engine": ("Run", "RunResult", "evaluate", "plan_run"),
    "aeval.store.hold": ("Submit",),
    "aeval.config": ("RunConfig", "Credentials", "PollSettings", "RetrySettings", "ShardLimits"),
    # inputs
    "aeval.dataset": ("load_dataset", "demo_dataset_path", "DEFAULT_DATASET"),
    "aeval.prompts": ("PromptSettings", "GenerationSettings", "DEFAULT_INSTRUCTION"),
    # verification
    "aeval.verify": ("VerifyLimits", "VerifierPool", "check_response"),
    "aeval.verdicts": ("CheckResult", "Status", "Verdict", "INFRA_STATUSES"),
    # RL reward (TRL, verl)
    "aeval.reward": ("EquivalenceReward", "RewardScores", "RewardStats"),
    # local batch server
    "aeval.local": ("LocalBatchServer",),
    # reports and display
    "aeval.report": ("summarize", "summary_table", "load_run"),
    "aeval.display": ("progress_view",),
    # events
    "aeval.events": (
        "Event",
        "RunStarted",
        "ShardUpdated",
        "OutputDownloaded",
        "VerdictProduced",
        "RetryScheduled",
        "VerifierPace",
        "JobFinished",
        "RunFinished",
    ),
    # errors: every one is public, so that a library user can catch it by type
    "aeval.errors": tuple(_errors.__all__),
}

# public name -> module that defines it
_EXPORTS: dict[str, str] = {name: module for module, names in _MODULES.items() for name in names}

__all__ = [
    "DEFAULT_DATASET",
    "DEFAULT_INSTRUCTION",
    "INFRA_STATUSES",
    "AevalError",
    "ApiError",
    "CheckResult",
    "ConfigError",
    "Credentials",
    "DatasetError",
    "EquivalenceReward",
    "Event",
    "GenerationSettings",
    "InputFileError",
    "JobFinished",
    "LocalBatchServer",
    "OutputDownloaded",
    "PollSettings",
    "PromptSettings",
    "RetryScheduled",
    "RetrySettings",
    "RewardScores",
    "RewardStats",
    "Run",
    "RunConfig",
    "RunDirError",
    "RunFinished",
    "RunResult",
    "RunStarted",
    "ShardLimits",
    "ShardUpdated",
    "Status",
    "Submit",
    "UnreachableError",
    "Verdict",
    "VerdictProduced",
    "VerifierPace",
    "VerifierPool",
    "VerifyLimits",
    "check_response",
    "demo_dataset_path",
    "evaluate",
    "load_dataset",
    "load_run",
    "plan_run",
    "progress_view",
    "summarize",
    "summary_table",
]

if not TYPE_CHECKING:  # the checker reads the typed imports below, never `Any`
    __getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)


if TYPE_CHECKING:  # static checkers and IDEs see the real names
    from aeval.config import Credentials, PollSettings, RetrySettings, RunConfig, ShardLimits
    from aeval.dataset import DEFAULT_DATASET, demo_dataset_path, load_dataset
    from aeval.display import progress_view
    from aeval.engine import Run, RunResult, evaluate, plan_run
    from aeval.errors import (
        AevalError,
        ApiError,
        ConfigError,
        DatasetError,
        InputFileError,
        RunDirError,
        UnreachableError,
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
        VerifierPace,
    )
    from aeval.local import LocalBatchServer
    from aeval.prompts import DEFAULT_INSTRUCTION, GenerationSettings, PromptSettings
    from aeval.report import load_run, summarize, summary_table
    from aeval.reward import EquivalenceReward, RewardScores, RewardStats
    from aeval.store.hold import Submit
    from aeval.verdicts import INFRA_STATUSES, CheckResult, Status, Verdict
    from aeval.verify import VerifierPool, VerifyLimits, check_response
