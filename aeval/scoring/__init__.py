"""Scoring: an answer becomes a verdict, the same way for a run and a rescore.

- :mod:`~aeval.scoring.responses`: one line of a batch output or error file (or
  a direct answer, written in the same format) read into a :class:`Response`,
  and a response checked against its row's truth into a :class:`Verdict`;
- :mod:`~aeval.scoring.pipeline`: :class:`Scoring`, the pipeline that answers go
  through, whoever obtained them (the engine's drivers, ``rescore``): verifier
  pool → verdict → the caller's verdict store and events;
- :mod:`~aeval.scoring.answer_classes`: once the verdicts are in, each answer's
  equivalence class among its item's trials (the votes of maj@n);
- :mod:`~aeval.scoring.inspect_samples` and :mod:`~aeval.scoring.lm_eval_samples`:
  another tool's log (an Inspect eval log, the lm-evaluation-harness's logged
  samples) read into responses for ``rescore``.

Each name imports from its module.
"""
