"""Typed progress events: what the engine tells its subscribers.

The engine emits these and never prints. The live display, the plain-line
logger and embedding applications are subscribers; none of them can change
what the engine does. All events are frozen values with a ``time`` stamp
(``time.time()`` seconds) taken when they were made.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

from aeval.verdicts import Verdict

__all__ = [
    "BatchPhase",
    "Event",
    "JobFinished",
    "OutputDownloaded",
    "RetryScheduled",
    "RunFinished",
    "RunStarted",
    "ShardInfo",
    "ShardUpdated",
    "VerdictProduced",
    "VerifierPace",
]

# Local phases (pending, uploading, downloading, done) bracket the API's own
# batch statuses so a display can show where a shard is before and after the
# API knows about it.
BatchPhase = Literal[
    "pending",
    "uploading",
    "validating",
    "in_progress",
    "finalizing",
    "downloading",
    "completed",
    "failed",
    "expired",
    "cancelling",
    "cancelled",
    "done",
]

RunOutcome = Literal["finished", "finished_with_failures", "interrupted"]


def _now() -> float:
    return time.time()


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardInfo:
    model: str
    trial: int
    shard: int
    requests: int


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStarted:
    run_id: str
    run_dir: str
    models: tuple[str, ...]
    trials: int
    items: int
    shards: tuple[ShardInfo, ...]
    offline: bool = False
    resumed: bool = False
    time: float = field(default_factory=_now)
    synthetic: bool = False  # answers come from synthetic models: a demo, not a measurement


@dataclass(frozen=True, slots=True, kw_only=True)
class ShardUpdated:
    model: str
    trial: int
    shard: int
    phase: BatchPhase
    batch_id: str | None = None
    completed: int = 0  # API request_counts
    failed: int = 0
    total: int = 0
    created_at: float | None = None  # when the remote batch was created (epoch s)
    next_poll_at: float | None = None  # when the engine asks about the batch next (epoch s)
    time: float = field(default_factory=_now)
    # Direct mode only (None for a batch): a job is one shard whose requests are
    # sent one by one; how many are on their way now, and the output tokens so far.
    in_flight: int | None = None
    output_tokens: int | None = None
    # The repair round (--rounds) the shard's requests are of: a later round's shards
    # are new requests of their job, not a resubmission of its first round's.
    repair_round: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputDownloaded:
    model: str
    trial: int
    shard: int
    output_lines: int
    error_lines: int
    time: float = field(default_factory=_now)


@dataclass(frozen=True, slots=True, kw_only=True)
class VerdictProduced:
    verdict: Verdict
    shard: int = 0
    time: float = field(default_factory=_now)


@dataclass(frozen=True, slots=True, kw_only=True)
class VerifierPace:
    """How fast the verifier pool scores answers, measured on the run's own ground
    truths (each checked against itself, in every reading the run scores) while the
    first answers are still on their way: until verdicts give a real rate, the only
    way to know how long verification will take."""

    answers_per_s: float
    time: float = field(default_factory=_now)


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryScheduled:
    model: str | None
    trial: int | None
    shard: int | None
    operation: str  # e.g. "upload", "create", "poll", "download", "resubmit"
    attempt: int
    delay_s: float
    error: str
    time: float = field(default_factory=_now)


@dataclass(frozen=True, slots=True, kw_only=True)
class JobFinished:
    model: str
    trial: int
    ok: bool
    message: str = ""
    time: float = field(default_factory=_now)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunFinished:
    outcome: RunOutcome
    run_dir: str
    message: str = ""
    time: float = field(default_factory=_now)


Event = (
    RunStarted
    | ShardUpdated
    | OutputDownloaded
    | VerdictProduced
    | RetryScheduled
    | VerifierPace
    | JobFinished
    | RunFinished
)
