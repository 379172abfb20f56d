"""The summary printed at the end of a run or a rescore, fitted to the terminal.

The report's per-model table has nine columns; at 80 columns Rich used to fold
every cell (``gpt-3.`` / ``5-turb``, ``Accura`` / ``cy``). Here it goes through
the live view's fitting (:func:`aeval.display.fit.fit_table`): headers are
abbreviated, then columns are dropped from the least telling up, then model
names are shortened only as far as they stay distinct; a number or a model name
is never wrapped. What was dropped is said under the table, with where to see it.
"""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.text import Text

from aeval.display.fit import Column, fit_table
from aeval.store.provenance import synthetic_label
from aeval.store.summary_record import Summary
from aeval.summary.round_tables import most_rounds, rounds_grid
from aeval.summary.tables import Grid, summary_grid

__all__ = ["FittedGrid", "final_summary"]

# Which columns stay longest (0: never dropped). Accuracy and the infrastructure
# failures say whether the numbers can be trusted; the rest is in the report.
_PRIORITY = {
    "Model": 0,
    "Accuracy [95% CI]": 0,
    "Infra fail": 7,
    "Strict": 6,
    "Correct/scored": 5,
    "Published": 4,
    "Model fail": 3,
    "Trials mean ± std": 2,
    "Tokens": 1,
}
_UNKNOWN_PRIORITY = 2  # a column added to the report later goes before the core ones
_SHORT = {
    "Accuracy [95% CI]": "Acc [95% CI]",
    "Trials mean ± std": "Trials",
    "Correct/scored": "Corr/n",
    "Model fail": "Model f.",
    "Infra fail": "Infra f.",
    "Published": "Publ.",
}


class FittedGrid:
    """A report :class:`~aeval.summary.tables.Grid` drawn at the console's width.

    :param hint: where the dropped columns can be seen, said under the table when
        any was dropped (``"Every column: python -m aeval report DIR"``).
    """

    def __init__(self, grid: Grid, *, title: str, hint: str = "") -> None:
        self.grid = grid
        self.title = title
        self.hint = hint

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        grid = self.grid
        columns: list[Column] = []
        for i, header in enumerate(grid.columns):
            cells = [_cell(row[i], i, grid) for row in grid.rows]
            spare = header == "Trials mean ± std" and all(
                row[i].endswith("(k=1)") or row[i] == "—" for row in grid.rows
            )
            columns.append(
                Column(
                    header,
                    _PRIORITY.get(header, _UNKNOWN_PRIORITY) if i else 0,
                    "right" if i in grid.right else "left",
                    short=_SHORT.get(header),
                    spare=spare,
                    cells=cells,
                )
            )
        columns[0].header = "Model"  # fit_table shortens the names of the "Model" column
        names = [row[0] for row in grid.rows]
        fitted = fit_table(self.title, columns, names, width, console, options, bar=lambda w: [])
        yield fitted.table
        if fitted.dropped:
            yield Text(f"Not shown at {width} columns: {', '.join(fitted.dropped)}.", style="dim")
            if self.hint:
                yield Text(self.hint, style="dim")


def _cell(value: str, i: int, grid: Grid) -> Text:
    if i in grid.alert:
        return Text(value, style="bold red" if value != "0" else "dim")
    return Text(value)


def final_summary(
    summary: Summary, *, title: str = "aeval summary", run_dir: object = None
) -> RenderableType:
    """The per-model table ``run`` and ``rescore`` print at the end, fitted to the
    console it is printed on; a synthetic run's title says SYNTHETIC.

    :param run_dir: the directory ``report`` reads, named in the note when columns
        had to be dropped.
    """
    where = f"python -m aeval report {run_dir}" if run_dir is not None else "python -m aeval report"
    label = synthetic_label(summary.get("provenance"))
    table = FittedGrid(summary_grid(summary), title=label + title, hint=f"Every column: {where}")
    if most_rounds(summary) <= 1:
        return table
    # A run with repair rounds: the table above is round 1's (a one-round run's numbers);
    # the repair curve is what the rounds were for, so it is shown too.
    rounds = FittedGrid(
        rounds_grid(summary, brief=True),
        title=label + "repair rounds (accuracy@k over the round-1 answers scored)",
        hint=f"Intervals, tokens and cost per round: {where}",
    )
    return Group(table, rounds)
