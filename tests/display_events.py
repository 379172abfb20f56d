"""The events the display's tests feed it, with what a test does not look at filled in
(one model ``m``, trial 1, shard 0), and a clock the test moves by hand."""

from __future__ import annotations

from typing import Any

from aeval.events import (
    BatchPhase,
    RetryScheduled,
    RunStarted,
    ShardInfo,
    ShardUpdated,
    VerdictProduced,
)
from aeval.verdicts import Status, Verdict


class Clock:
    """A clock that stands still until the test sets :attr:`now`."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def run_started(
    models: tuple[str, ...] = ("m",),
    *,
    trials: int = 1,
    requests: int = 100,
    shards: int = 1,
    run_id: str = "r",
    run_dir: str = "/tmp/r",
    offline: bool = False,
    time: float | None = None,
) -> RunStarted:
    """A run of ``models`` × ``trials`` jobs of ``shards`` shards of ``requests`` each."""
    infos = tuple(
        ShardInfo(model=m, trial=t, shard=k, requests=requests)
        for m in models
        for t in range(1, trials + 1)
        for k in range(shards)
    )
    return RunStarted(
        run_id=run_id,
        run_dir=run_dir,
        models=models,
        trials=trials,
        items=requests * shards,
        shards=infos,
        offline=offline,
        **({} if time is None else {"time": time}),
    )


def shard_updated(
    phase: BatchPhase,
    *,
    model: str = "m",
    trial: int = 1,
    shard: int = 0,
    batch_id: str | None = "b",
    **fields: Any,
) -> ShardUpdated:
    """``fields``: the rest of :class:`ShardUpdated`'s (counts, times, ``in_flight``)."""
    return ShardUpdated(
        model=model, trial=trial, shard=shard, phase=phase, batch_id=batch_id, **fields
    )


def retry_scheduled(
    operation: str,
    error: str,
    *,
    attempt: int = 1,
    delay_s: float = 2.0,
    model: str = "m",
    shard: int = 0,
    **fields: Any,
) -> RetryScheduled:
    return RetryScheduled(
        model=model,
        trial=1,
        shard=shard,
        operation=operation,
        attempt=attempt,
        delay_s=delay_s,
        error=error,
        **fields,
    )


def verdict_produced(
    custom_id: str,
    status: Status = Status.EQUIVALENT,
    *,
    model: str = "m",
    trial: int = 1,
    time: float | None = None,
) -> VerdictProduced:
    verdict = Verdict(model=model, trial=trial, custom_id=custom_id, status=status)
    return VerdictProduced(verdict=verdict, **({} if time is None else {"time": time}))
