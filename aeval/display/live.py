"""Drawing the live view: one frame from a :class:`ProgressState`, laid out to fit."""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.text import Text

from aeval.display.fit import Column, fit_table, pack
from aeval.display.labels import phase_label
from aeval.display.state import WAITING_PHASES, JobState, ProgressState, accuracy_of


def fmt_duration(seconds: float | None) -> str:
    """``42s``, ``3m05s``, ``2h07m``; ``?`` when unknown."""
    if seconds is None:
        return "?"
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def _bar(done: int, total: int, width: int = 20) -> Text:
    """A progress bar as styled text: a Text is far cheaper to lay out than a nested
    ``ProgressBar`` grid, which matters because frames are drawn while the run goes on.
    """
    fraction = min(1.0, done / total) if total > 0 else 0.0
    filled = round(width * fraction)
    style = "green" if total and done >= total else "blue"
    return Text.assemble(
        ("━" * filled, style), ("━" * (width - filled), "grey23"), f" {done}/{total}"
    )


def fmt_pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def fmt_rate(value: float | None, unit: str) -> str:
    return f"{value:.1f} {unit}/s" if value is not None else f"— {unit}/s"


class _Frame:
    """One frame of the live view, laid out for the console it is drawn on."""

    def __init__(self, state: ProgressState) -> None:
        self.state = state

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        height = options.height or console.size.height
        yield from _render(self.state, console, options, width, height)


def render_progress(state: ProgressState) -> RenderableType:
    """The live view of ``state``: one row per model × trial (one per model when the
    terminal is too short) and a footer of totals, fitted to the console's size."""
    return _Frame(state)


def _render(
    state: ProgressState, console: Console, options: ConsoleOptions, width: int, height: int
) -> list[RenderableType]:
    with state.lock:
        state.sample()
        now = state.clock()
        title = f"aeval run {state.run_id or ''}".rstrip()
        if state.synthetic:
            title = f"SYNTHETIC {title}"
        if state.offline:
            title += " (offline: local server)"
        if state.resumed:
            title += " (resumed)"
        requests, verified, _, infra = state.totals()
        api_rate, verdict_rate = state.rates()
        parts = [
            Text.assemble(("Total ", "bold"), f"verified {verified}/{requests}"),
            Text(f"API {state.api_done()}/{requests}"),
            Text(fmt_rate(api_rate, "req")),
            Text(fmt_rate(verdict_rate, "verdicts")),
            *(
                [Text(fmt_rate(tokens, "tok"))]
                if (tokens := state.token_rate()) is not None
                else []
            ),
            Text(f"infra failures {infra}", style="red" if infra else "dim"),
            Text(f"retries {state.retries}"),
            Text(f"elapsed {fmt_duration(state.elapsed())}"),
            Text(
                f"run {state.outcome}"
                if state.outcome
                else f"est. left {fmt_duration(state.eta())}"
            ),
        ]
        after: list[Text] = pack(parts, max(1, width))
        after.extend(Text(note, style="yellow") for note in list(state.notes))
        if state.message:
            style = "green" if state.outcome == "finished" else "bold yellow"
            after.append(Text(state.message, style=style))
        below = sum(len(t.wrap(console, max(1, width))) for t in after)
        title_lines = len(Text(title).wrap(console, max(1, width)))
        # Heavy-head table: top border, header, rule, rows, bottom border.
        room = max(1, height - below - title_lines - 4)
        rows = _rows(state, now, room)
        multi_trial = len({t for _, t in state.jobs}) > 1
    columns = [
        Column("Model", 0),
        # The first to go: the trial then follows the model's name (gpt-4o #2).
        Column("Trial", 5, "right", spare=True),
        Column("Batch", 6, short="Phase"),
        Column("API done/failed/total", 3, "right", short="API d/f/t"),
        Column("Verified", 0),
        Column("Accuracy", 7, "right", short="Acc"),
        Column("Retries", 2, "right", short="Retr"),
        Column("Oldest batch", 1, "right", short="Oldest"),
    ]
    for row in rows:
        for col, cell in zip(columns, row.cells, strict=True):
            col.cells.append(cell)
    fitted = fit_table(
        title,
        columns,
        [r.name for r in rows],
        width,
        console,
        options,
        bar=lambda w: [_bar(r.verified, r.requests, w) for r in rows],
        suffixes=[r.suffix for r in rows] if multi_trial else (),
    )
    return [fitted.table, *after]


@dataclass(slots=True)
class _Row:
    name: str
    verified: int
    requests: int
    cells: list[Text]
    suffix: str = ""  # " #2": the trial, when the Trial column is dropped


def _rows(state: ProgressState, now: float, room: int) -> list[_Row]:
    """The table's rows: one per job, or one per model when they do not fit in ``room``
    lines; at most ``room`` rows, the last saying how many more there are."""
    jobs = list(state.jobs.values())
    by_model: dict[str, list[JobState]] = {}
    for job in jobs:
        by_model.setdefault(job.model, []).append(job)
    groups = [[j] for j in jobs] if len(jobs) <= room else list(by_model.values())
    rows = [_row(group, now) for group in groups]
    if len(rows) > room:
        hidden = rows[room - 1 :]
        more = _Row(
            f"… {len(hidden)} more",
            sum(r.verified for r in hidden),
            sum(r.requests for r in hidden),
            [Text("") for _ in range(8)],
        )
        more.cells[0] = Text(more.name, style="dim")
        rows = [*rows[: room - 1], more]
    return rows


def _row(group: list[JobState], now: float) -> _Row:
    first = group[0]
    shards = [s for j in group for s in j.shards.values()]
    counted = [s for s in shards if not s.resubmission]
    api_total = sum(s.total for s in counted)
    api = (
        f"{sum(s.completed for s in counted)}/{sum(s.failed for s in counted)}/{api_total}"
        if api_total
        else "—"
    )
    ages = [
        now - s.created_at for s in shards if s.created_at is not None and s.phase in WAITING_PHASES
    ]
    verified = sum(j.verified for j in group)
    requests = sum(j.requests for j in group)
    retries = sum(j.retries for j in group)
    if len(group) == 1:
        label, style = phase_label(first, now)
        trial = str(first.trial)
        accuracy = first.accuracy
    else:  # one model's trials together: its accuracy, never pooled across models
        labels = {phase_label(j, now) for j in group}
        label, style = labels.pop() if len(labels) == 1 else ("mixed", "cyan")
        trial = f"{len(group)} trials"
        accuracy = accuracy_of(
            sum(j.correct for j in group), sum(j.first for j in group), sum(j.infra for j in group)
        )
    return _Row(
        first.model,
        verified,
        requests,
        suffix=f" #{first.trial}" if len(group) == 1 else f" ×{len(group)}",
        cells=[
            Text(first.model),
            Text(trial),
            Text(label, style=style),
            Text(api),
            Text(""),  # the bar, drawn at the width that fits
            Text(fmt_pct(accuracy)),
            Text(str(retries), style="yellow" if retries else "dim"),
            Text(fmt_duration(max(ages)) if ages else "—"),
        ],
    )
