"""The numbers of a run: accuracy, counts and failure reasons aggregated from its verdicts.

:mod:`aeval.summary.aggregate` turns a verdict frame into ``summary.json``'s dict, with
its groupings (:mod:`~aeval.summary.groups`), intervals (:mod:`~aeval.summary.intervals`,
:mod:`~aeval.summary.bootstrap`) and pass@k / maj@n (:mod:`~aeval.summary.sampling`);
:mod:`aeval.summary.tables` draws that dict as the grids the reports and the live
display's final table both show. It sits below everyone who summarises: the engine
at a run's end, rescoring, the reports and the display (docs/architecture.md).
"""
