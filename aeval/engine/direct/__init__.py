"""Direct mode: each answer asked for with one request to a completion route.

- :mod:`~aeval.engine.direct.driver`: :class:`~aeval.engine.direct.driver.DirectDriver`,
  the jobs' requests interleaved in one queue, each answer written before it is scored;
- :mod:`~aeval.engine.direct.client`: one request with its retries
  (:class:`~aeval.engine.direct.client.DirectClient`, over the openai SDK);
- :mod:`~aeval.engine.direct.answer_files`: the answer files, one per job, in the
  Batch API output format;
- :mod:`~aeval.engine.direct.aimd`: the one concurrency limit every request holds a
  slot of, learned from the server's 429s.

Nothing is imported here: the client pulls in the openai SDK, the costliest import
of all, and a batch run never needs it (:func:`aeval.engine.drivers.open_driver`
imports this package only for a direct run).
"""
