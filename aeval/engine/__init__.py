"""The engine: every job's answers obtained, verified and stored, concurrently.

One :class:`Run` is one run directory. The package is cut along its seams:

- :mod:`aeval.engine.run`: the :class:`Run` handle (configuration, directory,
  lock, events, provenance) and how it ended (:class:`RunResult`);
- :mod:`aeval.engine.planning`: the run's rows and truth table, its shards'
  request files, the ``--dry-run`` plan (:func:`plan_run`);
- :mod:`aeval.engine.drivers`: the seam between a run and the way its answers
  arrive: the ``Driver`` protocol, the ``DriverContext`` a driver is given,
  ``open_driver`` (the driver ``RunConfig.api`` names, with the client it owns)
  and the one watch for a hold put on a live run;
- :mod:`aeval.engine.batch_driver`: the batch driver, which obtains answers
  through the batch API (:mod:`aeval.batch`) shard by shard;
- :mod:`aeval.engine.direct`: the direct driver, which asks for each answer with
  one request to a completion route, under one AIMD concurrency limit, each
  answer written as a Batch-API output line before it is scored.

Every answer, however it was obtained, goes through the scoring pipeline
(:mod:`aeval.scoring.pipeline`, ``Scoring.submit``: verifier → verdict → store
and events), which ``rescore`` shares.
"""

from __future__ import annotations

from aeval.engine.planning import DryRunPlan, plan_run
from aeval.engine.run import Run, RunResult, evaluate

__all__ = ["DryRunPlan", "Run", "RunResult", "evaluate", "plan_run"]
