"""Fitting the live view to the terminal it is drawn on, whatever its size.

Rich shrinks a table that is too wide by squeezing columns, down to nothing
(at 80 columns, five columns of zero width and two models shown as
``gpt-4o…``). Here the view decides itself, for the width and
height it is given: columns are dropped or abbreviated by priority (never
squeezed), model names are shortened only as far as they stay unambiguous, and
when there are more rows than lines the jobs collapse to one row per model,
so the footer is always on screen.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, JustifyMethod
from rich.table import Table
from rich.text import Text

__all__ = ["Column", "fit_table", "pack", "short_names"]

# A snapshot suffix that names a version of the same model: -2024-11-20, -0125.
_SNAPSHOT = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{4})$")
_ELLIPSIS = "…"


def short_names(names: Sequence[str], width: int) -> dict[str, str]:
    """Each name in at most ``width`` cells where possible, no two alike.

    First the snapshot suffix goes (``gpt-4o-2024-11-20`` → ``gpt-4o``) if the
    names stay distinct; then the middle is elided (``gpt-4o-m…07-18``), widened
    until every name is distinct. Names are never made ambiguous to fit: a
    name keeps the width it needs to differ from the others.
    """
    unique = list(dict.fromkeys(names))
    if all(cell_len(n) <= width for n in unique):
        return {n: n for n in unique}
    stripped = {n: _SNAPSHOT.sub("", n) for n in unique}
    base = stripped if len(set(stripped.values())) == len(unique) else {n: n for n in unique}
    if all(cell_len(v) <= width for v in base.values()):
        return base
    longest = max(cell_len(v) for v in base.values())
    for w in range(max(width, 5), longest + 1):
        cut = {n: _elide(v, w) for n, v in base.items()}
        if len(set(cut.values())) == len(unique):
            return cut
    return base


def _elide(text: str, width: int) -> str:
    if cell_len(text) <= width:
        return text
    head = (width - 1 + 1) // 2
    tail = width - 1 - head
    return text[:head] + _ELLIPSIS + (text[-tail:] if tail else "")


@dataclass(slots=True)
class Column:
    """One column of the live table.

    :param priority: lower numbers go first when the table does not fit; 0 never goes.
    :param short: the header when space is short (``None``: same as ``header``).
    :param spare: says nothing the other columns do not (a Trial column of only 1s):
        the first to go.
    """

    header: str
    priority: int
    justify: JustifyMethod = "left"
    short: str | None = None
    spare: bool = False
    cells: list[Text] = field(default_factory=list)


@dataclass(slots=True)
class Fitted:
    table: Table
    dropped: tuple[str, ...]


def fit_table(
    title: Text | str,
    columns: Sequence[Column],
    names: Sequence[str],
    width: int,
    console: Console,
    options: ConsoleOptions,
    *,
    bar: Callable[[int], list[Text]],
    suffixes: Sequence[str] = (),
) -> Fitted:
    """The widest table of ``columns`` that fits ``width`` without squeezing any column.

    ``names`` are the first column's cells (model names, shortened here if need
    be), each followed by its ``suffixes`` entry (`` #2``) once a column that
    told the rows apart (Trial) is dropped; ``bar(width)`` builds the progress
    bar column's cells at a given bar width.
    Steps, in order, until the table fits: short headers, a shorter bar, then
    columns dropped from the lowest priority up, then shorter model names, then
    the bar itself (its counts stay).
    """
    short_headers = False
    bar_width = 20
    kept = list(columns)
    unique = list(dict.fromkeys(names))
    name_width = max((cell_len(n) for n in unique), default=5)
    stripped = {_SNAPSHOT.sub("", n) for n in unique}
    lossless = (
        max(cell_len(n) for n in stripped) if unique and len(stripped) == len(unique) else None
    )

    def set_short() -> None:
        nonlocal short_headers
        short_headers = True

    def set_bar(width: int) -> Callable[[], None]:
        def step() -> None:
            nonlocal bar_width
            bar_width = width

        return step

    def set_names(width: int | None) -> Callable[[], None]:
        def step() -> None:
            nonlocal name_width
            if width is not None:
                name_width = min(name_width, width)

        return step

    def drop(col: Column) -> Callable[[], None]:
        return lambda: kept.remove(col)

    by_priority = sorted((c for c in columns if c.priority > 0), key=lambda c: c.priority)
    spare = [c for c in by_priority if c.spare]
    steps: list[Callable[[], None]] = [
        set_short,
        set_names(lossless),  # gpt-4o-2024-11-20 → gpt-4o, when that stays unambiguous
        *(drop(c) for c in spare),  # e.g. a Trial column that only ever says 1
        set_bar(10),
        *(drop(c) for c in by_priority if not c.spare and c.priority < 5),
        set_names(12),
        *(drop(c) for c in by_priority if not c.spare and c.priority >= 5),
        set_names(8),
        set_bar(0),
    ]
    while True:
        dropped_spare = any(c.spare and c not in kept for c in columns)
        shown = suffixes if dropped_spare and suffixes else ("",) * len(names)
        table = _build(title, kept, names, shown, name_width, short_headers, bar(bar_width))
        # Measured unconstrained: Rich clamps a measurement to the width it is given.
        natural = console.measure(table, options=options.update_width(1_000_000)).maximum
        if natural <= width or not steps:
            dropped = tuple(c.header for c in columns if c not in kept)
            return Fitted(table, dropped)
        steps.pop(0)()


def pack(parts: Sequence[Text], width: int, sep: str = "  ") -> list[Text]:
    """``parts`` in as few lines of ``width`` as fit, never breaking a part
    (``elapsed 3s`` stays whole), a part wider than a line on its own line."""
    lines: list[Text] = []
    line = Text()
    for part in parts:
        if line.cell_len and line.cell_len + len(sep) + part.cell_len > width:
            lines.append(line)
            line = Text()
        if line.cell_len:
            line.append(sep)
        line.append_text(part)
    if line.cell_len:
        lines.append(line)
    return lines


def _build(
    title: Text | str,
    columns: Sequence[Column],
    names: Sequence[str],
    suffixes: Sequence[str],
    name_width: int,
    short_headers: bool,
    bar_cells: list[Text],
) -> Table:
    table = Table(
        title=title,
        title_justify="left",
        header_style="bold",
        expand=False,
        box=box.HEAVY_HEAD,
    )
    shown = short_names(names, name_width)
    for col in columns:
        header = (col.short or col.header) if short_headers else col.header
        table.add_column(header, justify=col.justify, no_wrap=True)
    for i, name in enumerate(names):
        cells: list[Text] = []
        for col in columns:
            if col.header == "Model":
                cells.append(Text(shown[name] + suffixes[i], style="bold"))
            elif col.header == "Verified":
                cells.append(bar_cells[i])
            else:
                cells.append(col.cells[i])
        table.add_row(*cells)
    return table
