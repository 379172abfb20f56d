"""What a driver is and what it is given: the protocol and the context, a leaf module.

The drivers (:mod:`aeval.engine.batch_driver`, :mod:`aeval.engine.direct.driver`)
and the factory that opens them (:mod:`aeval.engine.drivers`) all import this;
it imports neither.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from aeval.config import RunConfig
from aeval.errors import AevalError
from aeval.events import Event
from aeval.scoring.pipeline import Scoring
from aeval.store import RunStore, ShardRecord
from aeval.store.hold import Submit
from aeval.verdicts import Verdict

__all__ = ["Driver", "DriverContext"]


@dataclass(frozen=True, kw_only=True, slots=True)
class DriverContext:
    """What a driver works with during a run, and how it reports back to the run.

    :param config: the run's configuration, pinned to its data.
    :param store: the run directory.
    :param scoring: where every answer goes (:meth:`Scoring.submit`), and the
        verdicts made without the verifier.
    :param emit: gives the run's subscribers an event.
    :param submit: the run's submit policy *now*: ``Submit.CREATE`` (create
        batches, send requests) or ``Submit.COLLECT`` (only collect what exists).
        Ask it at each decision: a live run's policy turns to ``COLLECT`` when
        ``cancel`` puts its directory on hold.
    :param stop: ends the whole run with an error no job can get past (a damaged
        run directory, an unreachable endpoint).
    :param job_failed: a job (model, trial) did not finish cleanly: why (one line).
    :param provisional: a verdict for this run's result only, never the store (a
        resume replaces it), with the shard it belongs to.
    """

    config: RunConfig
    store: RunStore
    scoring: Scoring[RunStore]
    emit: Callable[[Event], None]
    submit: Callable[[], Submit]
    stop: Callable[[AevalError], None]
    job_failed: Callable[[str, int, str], None]
    provisional: Callable[[Verdict, int], None]


class Driver(Protocol):
    """One way a run's answers arrive: every job's answers obtained and handed to
    ``ctx.scoring``. A driver serves one run; :func:`open_driver` makes it."""

    def announce(self, ctx: DriverContext, records: list[ShardRecord]) -> None:
        """Tell subscribers where the jobs stand before anything is awaited."""

    async def run_jobs(self, ctx: DriverContext, records: list[ShardRecord]) -> None:
        """Every job of ``records`` to its end, concurrently: each answer given to
        ``ctx.scoring``, each job's end emitted as a ``JobFinished`` (a failed one
        reported to ``ctx.job_failed`` first)."""

    async def on_hold(self, ctx: DriverContext) -> None:
        """The run directory was put on hold (``ctx.submit()`` already says
        ``COLLECT``): whatever else a hold asks of this driver. May run until
        cancelled (when the run ends)."""
