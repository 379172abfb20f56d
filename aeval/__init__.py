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

from aeval._lazy import lazy_exports

__version__ = "0.1.0"

# The public API, by the module that defines each name: the one list. Static
# checkers see the names through __getattr__; import from the defining module
# for precise types.
_MODULES: dict[str, tuple[str, ...]] = {
    # running
    "aeval.engine": ("Run", "RunResult", "evaluate", "plan_run"),
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
    # errors
    "aeval.errors": (
        "AevalError",
        "ApiError",
        "ConfigError",
        "DatasetError",
        "InputFileError",
        "RunDirError",
    ),
}

# public name -> module that defines it
_EXPORTS: dict[str, str] = {name: module for module, names in _MODULES.items() for name in names}

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_exports(__name__, globals(), _EXPORTS)
