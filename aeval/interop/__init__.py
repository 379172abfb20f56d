"""aeval where researchers already work: Jupyter notebooks and Inspect AI.

- :mod:`aeval.interop.notebook`: ``await`` a run in a notebook cell with a
  live progress display, and results that render as tables and charts.
- :mod:`aeval.interop.inspect_task`: the ``aeval/warp`` Inspect task and its
  scorer (needs ``aeval[inspect]``).
- :mod:`aeval.interop.inspect_log`: a run's verdicts as an Inspect eval log
  (``aeval export inspect``; needs ``aeval[inspect]``).

Nothing here is imported by the engine: each module is loaded only when used.
"""
