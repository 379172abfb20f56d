"""The live view of a run: a subscriber that folds engine events into a small state
object and renders it at a bounded rate.

:func:`progress_view` is the one entry point. It yields a cheap synchronous
callable that the engine (or an embedding application) calls with every
:mod:`aeval.events` event. Folding an event is a few dict look-ups and integer
increments; frames are drawn by Rich's ``Live`` refresh thread twice a second
from that state, never once per verdict, so the cost per event does not grow
with the size of the run.

When the console is not a terminal (CI, ``| tee``, ``nohup``), the view prints
plain timestamped lines instead: notable events at once (run started, a batch
failed, a job finished, run finished) and a progress line every ``interval``
seconds while something changes.

The engine never imports this module; the display is a subscriber, never a
participant.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Literal

from rich.console import Console
from rich.live import Live

from aeval.display.live import render_progress
from aeval.display.plain import PlainLog
from aeval.display.state import ProgressState
from aeval.events import Event, VerdictProduced

__all__ = [
    "DisplayMode",
    "ProgressState",
    "progress_view",
    "render_progress",
    "stdout_console",
]

DisplayMode = Literal["auto", "live", "plain", "quiet"]

# Tables printed into a pipe or a file (CI logs, `| tee`) would otherwise wrap
# at Rich's 80-column default and cut model names.
PIPED_WIDTH = 160


def stdout_console() -> Console:
    """A console for tables on stdout: the terminal's width, or 160 columns when piped."""
    console = Console()
    return console if console.is_terminal else Console(width=PIPED_WIDTH)


@contextmanager
def progress_view(
    console: Console | None = None,
    *,
    mode: DisplayMode = "auto",
    refresh_per_second: float = 2.0,
    interval: float = 20.0,
) -> Iterator[Callable[[Event], None]]:
    """Show a run's progress while the ``with`` block runs; yields the event subscriber.

    :param console: where to draw (default: a new Rich console on stdout).
    :param mode: ``"live"`` a Rich ``Live`` table redrawn ``refresh_per_second``
        times a second; ``"plain"`` timestamped lines (notable events at once, a
        progress line every ``interval`` seconds while something changes);
        ``"quiet"`` nothing at all (the caller prints the final summary);
        ``"auto"`` live on a terminal, plain otherwise.
    :returns: a synchronous callable taking any :mod:`aeval.events` event: it only
        folds the event into the view's state (a few hundred nanoseconds) and never
        draws or raises for a well-formed event.

    Leaving the block stops the background thread and draws the final state once.
    """
    if mode == "quiet":
        yield _ignore
        return
    console = console or Console()
    if mode == "auto":
        mode = "live" if console.is_terminal and not console.is_dumb_terminal else "plain"
    state = ProgressState()
    if mode == "live":
        # Rich draws from its own refresh thread; the frame is built from the state
        # at that moment, so the subscriber is the fold itself.
        with Live(
            get_renderable=lambda: render_progress(state),
            console=console,
            refresh_per_second=refresh_per_second,
            redirect_stdout=False,
            redirect_stderr=False,
        ):
            yield state.apply
        return
    if mode != "plain":
        raise ValueError(f"unknown display mode {mode!r} (auto, live, plain or quiet)")
    log = PlainLog(state, console, interval)
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(interval):
            log.progress()

    def subscriber(event: Event) -> None:
        state.apply(event)
        if type(event) is not VerdictProduced:
            log.notable(event)

    ticker = threading.Thread(target=tick, name="aeval-plain-progress", daemon=True)
    ticker.start()
    try:
        yield subscriber
    finally:
        stop.set()
        ticker.join()


def _ignore(event: Event) -> None:
    """The quiet subscriber."""
