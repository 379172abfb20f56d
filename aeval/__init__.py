"""aeval: evaluate LLM-written SMT-LIB constraints on the invaR1ant / WARP benchmark.

This module is the whole public API; everything else may change. Names load
on first use (PEP 562) because every verification worker process imports this
package first, and must not pay for openai, polars or the engine at start-up.

A run from Python::

    from aeval import Run, RunConfig

    run = Run(RunConfig(models=("gpt-4o-mini-2024-07-18",), trials=2))
    result = await run.run()          # asyncio or trio
    result.verdicts                   # polars frame, one row per answer

See README.md ("Embedding") and examples/.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from aeval._lazy import lazy_exports

__version__ = "0.1.0"

# public name -> module that defines it
_EXPORTS: dict[str, str] = {
    # running
    "Run": "aeval.engine",
    "RunResult": "aeval.engine",
    "evaluate": "aeval.engine",
    "plan_run": "aeval.engine",
    "RunConfig": "aeval.config",
    "Credentials": "aeval.config",
    "PollSettings": "aeval.config",
    "RetrySettings": "aeval.config",
    "ShardLimits": "aeval.config",
    # inputs
    "load_dataset": "aeval.dataset",
    "demo_dataset_path": "aeval.dataset",
    "DEFAULT_DATASET": "aeval.dataset",
    "PromptSettings": "aeval.prompts",
    "GenerationSettings": "aeval.prompts",
    "DEFAULT_INSTRUCTION": "aeval.prompts",
    # verification
    "VerifyLimits": "aeval.verify",
    "VerifierPool": "aeval.verify",
    "check_response": "aeval.verify",
    "CheckResult": "aeval.verdicts",
    "Status": "aeval.verdicts",
    "Verdict": "aeval.verdicts",
    "INFRA_STATUSES": "aeval.verdicts",
    # RL reward (TRL, verl)
    "EquivalenceReward": "aeval.reward",
    "RewardScores": "aeval.reward",
    "RewardStats": "aeval.reward",
    # local batch server
    "LocalBatchServer": "aeval.local",
    # reports and display
    "summarize": "aeval.report",
    "summary_table": "aeval.report",
    "load_run": "aeval.report",
    "progress_view": "aeval.display",
    # events
    "Event": "aeval.events",
    "RunStarted": "aeval.events",
    "ShardUpdated": "aeval.events",
    "OutputDownloaded": "aeval.events",
    "VerdictProduced": "aeval.events",
    "RetryScheduled": "aeval.events",
    "JobFinished": "aeval.events",
    "RunFinished": "aeval.events",
    # errors
    "AevalError": "aeval.errors",
    "ApiError": "aeval.errors",
    "ConfigError": "aeval.errors",
    "DatasetError": "aeval.errors",
    "InputFileError": "aeval.errors",
    "RunDirError": "aeval.errors",
}

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
    "Verdict",
    "VerdictProduced",
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
    from aeval.local import LocalBatchServer
    from aeval.prompts import DEFAULT_INSTRUCTION, GenerationSettings, PromptSettings
    from aeval.report import load_run, summarize, summary_table
    from aeval.reward import EquivalenceReward, RewardScores, RewardStats
    from aeval.verdicts import INFRA_STATUSES, CheckResult, Status, Verdict
    from aeval.verify import VerifierPool, VerifyLimits, check_response
