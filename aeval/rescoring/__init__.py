"""Rescoring: verdicts for batch output and error files that already exist.

``aeval rescore`` is given files, not a run: each line is attributed to a
model and a trial (:mod:`~aeval.scoring.attribution`), read and deduplicated,
then scored by the same pipeline as a live run (:mod:`~aeval.rescoring.rescore`,
which feeds :class:`aeval.scoring.pipeline.Scoring`).

Each name imports from its module.
"""
