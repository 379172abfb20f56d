"""Running aeval from a Jupyter notebook: ``await`` a run in a cell.

A notebook kernel already runs an asyncio event loop, so a cell awaits the run
directly (no ``asyncio.run``, no nested-loop patching)::

    from aeval.interop import notebook

    result = await notebook.run(config)   # a live progress table in this cell's output
    result                                 # the summary, as an HTML table
    result.verdicts                        # a polars frame, one row per answer
    result.chart("tier")                   # accuracy per tier, inline
    result.wrong("gpt-4o-2024-11-20")      # that model's wrong answers, with answer and truth

Progress is drawn into the cell's output and replaced in place (IPython's
``display(..., display_id=True)`` and ``update``), from the same state and
layout as the terminal's live view, twice a second and once at the end; the
engine never waits on it.

Interrupting the kernel (the stop button, ``I I``) cancels the cell's task,
which stops the run as Ctrl-C stops ``python -m aeval``: every verdict already
written stays, remote batches keep running, the progress output says so, and
``await notebook.resume(run_dir)`` carries on. The cell then ends with a
one-line error instead of a traceback, so "run all" stops there as usual.
"""

from __future__ import annotations

import html
import io
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import polars as pl
from rich.console import Console, RenderableType

from aeval.config import Credentials, RunConfig
from aeval.display import ProgressState, render_progress
from aeval.engine import Run, RunResult
from aeval.events import Event, RunOutcome
from aeval.report import figures, summarize
from aeval.report.html import figure_html
from aeval.report.provenance import provenance_html
from aeval.report.samples import load_samples
from aeval.report.wrong import with_answers, wrong_answers, wrong_blocks
from aeval.summary.tables import grid_html, summary_grid, tier_grid

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["Chart", "NotebookResult", "Rendered", "resume", "run"]

# Wide enough for the live table's every column; notebooks scroll wider output.
DISPLAY_WIDTH = 110

# The report's chart and table styles, scoped to aeval's own output: a notebook
# page must not be restyled by it.
_CSS = """
.aeval table.grid { border-collapse: collapse; margin: .4em 0 .8em;
  font-variant-numeric: tabular-nums; }
.aeval table.grid caption { text-align: left; font-weight: 600; padding-bottom: .3em; }
.aeval table.grid th, .aeval table.grid td { padding: .2em .6em; border-bottom: 1px solid #ddd; }
.aeval table.grid td.num { text-align: right; }
.aeval table.grid td.alert { color: #b00; font-weight: 600; }
.aeval figure.chart { margin: .5em 0 .6em; }
.aeval figure.chart img { max-width: 100%; height: auto; }
"""


def _wrap(body: str) -> str:
    return f'<div class="aeval"><style>{_CSS}</style>{body}</div>'


class Rendered:
    """A Rich renderable shown in a notebook: HTML (colours kept) with a plain-text twin."""

    def __init__(self, renderable: RenderableType, width: int = DISPLAY_WIDTH) -> None:
        self.renderable = renderable
        self.width = width

    def _console(self) -> Console:
        return Console(
            file=io.StringIO(),
            width=self.width,
            record=True,
            force_terminal=True,
            force_jupyter=False,
            color_system="truecolor",
        )

    def text(self) -> str:
        console = self._console()
        console.print(self.renderable)
        return console.export_text()

    def _repr_mimebundle_(self, **_: Any) -> dict[str, str]:
        console = self._console()
        console.print(self.renderable)
        text = console.export_text(clear=False)
        code = console.export_html(
            inline_styles=True,
            code_format="<pre style=\"font-family:Menlo,'DejaVu Sans Mono',consolas,"
            'monospace;line-height:1.25;white-space:pre;overflow-x:auto">{code}</pre>',
        )
        return {"text/plain": text, "text/html": code}

    def __repr__(self) -> str:
        return self.text()


@dataclass(frozen=True)
class Chart:
    """A figure of the report (:mod:`aeval.report.figures`), shown inline by a
    notebook as a PNG; :meth:`figure` gives the matplotlib figure itself (e.g. to
    ``savefig`` it as a PDF)."""

    title: str
    chart_id: str
    draw: Callable[[], Figure] = field(repr=False)

    def figure(self) -> Figure:
        figures.require()
        return self.draw()

    def _repr_html_(self) -> str:
        shown = figure_html(self.chart_id, self.title, self.draw)
        note = f"<p>{html.escape(figures.PLOTS_HINT)}</p>"
        return _wrap(f"<h4>{html.escape(self.title)}</h4>{shown or note}")

    def __repr__(self) -> str:
        return f"<aeval chart: {self.title}>"


@dataclass
class NotebookResult:
    """How a run ended, its verdicts and its summary, shaped for a notebook.

    Shown as the summary table (HTML); ``verdicts`` is the polars frame.
    """

    result: RunResult
    summary: dict[str, Any] = field(repr=False)

    @property
    def run_dir(self) -> Path:
        return self.result.run_dir

    @property
    def outcome(self) -> RunOutcome:
        return self.result.outcome

    @property
    def verdicts(self) -> pl.DataFrame:
        return self.result.verdicts

    @property
    def models(self) -> list[str]:
        return [m["model"] for m in self.summary["models"]]

    def tiers(self) -> pl.DataFrame:
        """Accuracy per model and tier, as a frame (the report's tier table)."""
        grid = tier_grid(self.summary)
        return pl.DataFrame([dict(zip(grid.columns, row, strict=True)) for row in grid.rows])

    def chart(self, kind: str = "tier") -> Chart:
        """``"tier"``: accuracy per tier; ``"accuracy"``: per model with its interval;
        ``"mix"``: the verdict statuses per model."""
        summary = self.summary
        if kind == "tier":
            return Chart("Accuracy by tier", "chart-tiers", lambda: figures.tier_figure(summary))
        if kind == "accuracy":
            return Chart(
                "Accuracy per model",
                "chart-accuracy",
                lambda: figures.accuracy_figure([("run", summary)]),
            )
        if kind == "mix":
            return Chart(
                "Verdict mix per model", "chart-mix", lambda: figures.verdict_mix_figure(summary)
            )
        raise ValueError(f"unknown chart {kind!r}: tier, accuracy or mix")

    def wrong(self, model: str) -> pl.DataFrame:
        """``model``'s wrong answers: status, direction, counterexample, the answer it
        gave and the ground truth (infrastructure failures left out)."""
        frame = wrong_answers(self.verdicts, model)
        return with_answers(frame, load_samples(self.run_dir, verdicts=self.verdicts), model)

    def explain(self, model: str, item: str, trial: int = 1) -> Rendered:
        """One answer of ``model`` beside the truth, from their first difference,
        with the counterexample Z3 confirmed (as ``report --wrong`` shows it)."""
        rows = self.wrong(model).filter((pl.col("custom_id") == item) & (pl.col("trial") == trial))
        if rows.is_empty():
            raise ValueError(f"{model} answered item {item} (trial {trial}) right, or not at all")
        return Rendered(wrong_blocks(rows, model, width=DISPLAY_WIDTH))

    def _repr_html_(self) -> str:
        message = html.escape(self.result.message)
        return _wrap(
            provenance_html(self.summary.get("provenance"))
            + grid_html(summary_grid(self.summary))
            + f"<p><code>{html.escape(self.outcome)}</code>: {message}</p>"
        )

    def __repr__(self) -> str:
        accuracies = ", ".join(
            f"{m['model']} {100 * m['accuracy']['value']:.1f}%"
            for m in self.summary["models"]
            if m["accuracy"]["value"] is not None
        )
        return f"<aeval run {self.run_dir.name}: {self.outcome}; {accuracies}>"


class _Progress:
    """The live view in a cell's output, replaced in place at a bounded rate."""

    def __init__(self, refresh_s: float) -> None:
        from IPython.display import display

        self.state = ProgressState()
        self.refresh_s = refresh_s
        self.note = ""
        self.handle = display(self._frame(), display_id=True)

    def _frame(self) -> Rendered:
        frame = render_progress(self.state)
        if not self.note:
            return Rendered(frame)
        from rich.console import Group
        from rich.text import Text

        return Rendered(Group(frame, Text(self.note, style="bold yellow")))

    def draw(self) -> None:
        if self.handle is not None:
            self.handle.update(self._frame())

    async def tick(self) -> None:
        while True:
            await anyio.sleep(self.refresh_s)
            self.draw()


async def run(
    config: RunConfig, *, refresh_s: float = 0.5, progress: bool = True
) -> NotebookResult:
    """Run ``config`` in the notebook's event loop, drawing its progress in the cell.

    :param progress: ``False``: draw nothing (the run is the same).
    :raises AevalError: bad configuration, dataset or run directory (as ``Run.run``).
    :raises CancelledError: the kernel was interrupted; the run directory is left
        resumable and the message shown says how.
    """
    return await _drive(lambda subs: Run(config, subscribers=subs), refresh_s, progress)


async def resume(
    run_dir: Path | str,
    *,
    credentials: Credentials | None = None,
    refresh_s: float = 0.5,
    progress: bool = True,
    **overrides: Any,
) -> NotebookResult:
    """Continue the run in ``run_dir`` (after an interrupt, a crash, another process).

    :param credentials: where to send requests (default: ``OPENAI_API_KEY`` and
        ``OPENAI_BASE_URL`` from the environment).
    :param overrides: settings to change on resume, as :meth:`aeval.engine.Run.resume`.
    """
    return await _drive(
        lambda subs: Run.resume(
            Path(run_dir), subscribers=subs, credentials=credentials, **overrides
        ),
        refresh_s,
        progress,
    )


async def _drive(
    make_run: Callable[[list[Callable[[Event], None]]], Run], refresh_s: float, progress: bool
) -> NotebookResult:
    view = _Progress(refresh_s) if progress else None
    subscribers: list[Callable[[Event], None]] = [view.state.apply] if view is not None else []
    the_run = make_run(subscribers)
    started = time.monotonic()
    try:
        async with anyio.create_task_group() as tg:
            if view is not None:
                tg.start_soon(view.tick)
            result = await the_run.run()
            tg.cancel_scope.cancel()
    except anyio.get_cancelled_exc_class() as exc:
        # Credentials given in the config are not saved with the run: resume needs them.
        creds = "" if the_run.config.credentials is None else ", credentials=<the same>"
        hint = (
            f"interrupted after {time.monotonic() - started:.0f} s: every verdict so far is "
            f"in {the_run.run_dir}. Carry on with: "
            f"await notebook.resume({str(the_run.run_dir)!r}{creds})"
        )
        if view is not None:
            view.note = hint
            view.draw()
        # IPython shows this line instead of a traceback through the engine.
        exc._render_traceback_ = lambda: [f"KeyboardInterrupt: {hint}"]  # type: ignore[attr-defined]
        raise
    if view is not None:
        view.draw()
    batch_prices = the_run.config.api != "direct"
    summary = {
        **summarize(result.verdicts, batch_prices=batch_prices),
        "provenance": the_run.provenance,
    }
    return NotebookResult(result, summary)
