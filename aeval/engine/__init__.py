"""The engine: every job's answers obtained, verified and stored, concurrently.

One :class:`Run` is one run directory. The package is cut along its seams:

- :mod:`aeval.engine.run`: the :class:`Run` handle (configuration, directory,
  lock, events, provenance) and how it ended (:class:`RunResult`);
- :mod:`aeval.engine.planning`: the run's rows and truth table, its shards'
  request files, the ``--dry-run`` plan (:func:`plan_run`);
- :mod:`aeval.engine.batch_driver`: the batch-job driver, which obtains answers
  through the batch API (:mod:`aeval.batch`) shard by shard;
- :mod:`aeval.engine.direct` (with ``direct_client``, ``direct_files`` and
  ``aimd``): the direct driver, which asks for each answer with one request to a
  completion route, under one AIMD concurrency limit, each answer written as a
  Batch-API output line before it is scored;
- :mod:`aeval.engine.drivers`: which of the two a run uses (``RunConfig.api``);
- :mod:`aeval.engine.scoring`: the pipeline every answer goes through, however
  it was obtained (``Scoring.submit``: verifier → verdict → store and events).
"""

from __future__ import annotations

from aeval.engine.planning import DryRunPlan, plan_run
from aeval.engine.run import Run, RunResult, evaluate

__all__ = ["DryRunPlan", "Run", "RunResult", "evaluate", "plan_run"]
