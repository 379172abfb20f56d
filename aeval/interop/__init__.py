"""aeval where researchers already work: Jupyter notebooks, Inspect AI and the
lm-evaluation-harness.

- :mod:`aeval.interop.notebook`: ``await`` a run in a notebook cell with a
  live progress display, and results that render as tables and charts.
- :mod:`aeval.interop.inspect_task`: the ``aeval/warp`` Inspect task and its
  scorer (needs ``aeval[inspect]``).
- :mod:`aeval.interop.inspect_log`: a run's verdicts as an Inspect eval log
  (``aeval export inspect``; needs ``aeval[inspect]``).
- :mod:`aeval.interop.lm_eval_task`: the ``warp`` lm-evaluation-harness task
  files and their judge.

The other tools' logs that ``rescore`` reads (Inspect's samples, the harness's
logged samples) are parsed below rescoring, in :mod:`aeval.scoring.inspect_samples`
and :mod:`aeval.scoring.lm_eval_samples`.

Nothing here is imported by the engine: each module is loaded only when used.
"""
