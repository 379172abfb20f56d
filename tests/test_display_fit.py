"""The live view at any terminal size (Issue 12 §4), rendered and in a real terminal."""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from display_events import Clock, retry_scheduled, run_started, shard_updated, verdict_produced
from rich.console import Console

from aeval.display import ProgressState, progress_view, render_progress
from aeval.display.fit import short_names
from aeval.events import RunFinished
from aeval.verdicts import Status

MODELS = ["gpt-4o-2024-11-20", "gpt-4o-mini-2024-07-18", "gpt-3.5-turbo-0125"]
ROOT = Path(__file__).resolve().parents[1]


def busy_state(models: list[str], trials: int, clock: Clock | None = None) -> ProgressState:
    state = ProgressState(clock=clock or time.time)
    now = state.clock()
    state.apply(run_started(tuple(models), trials=trials, requests=120, run_id="run-1", time=now))
    for m in models:
        for t in range(1, trials + 1):
            state.apply(
                shard_updated(
                    "in_progress",
                    model=m,
                    trial=t,
                    completed=60,
                    failed=1,
                    total=120,
                    created_at=now,
                    time=now,
                )
            )
            for k in range(40):
                status = Status.EQUIVALENT if k % 2 else Status.PARSE_ERROR
                state.apply(verdict_produced(f"i{k}", status, model=m, trial=t, time=now))
    return state


def draw(state: ProgressState, width: int, height: int) -> list[str]:
    console = Console(
        width=width, height=height, record=True, force_terminal=True, file=io.StringIO()
    )
    console.print(render_progress(state))
    return console.export_text().splitlines()


def cells(line: str) -> list[str]:
    return [c.strip() for c in re.split(r"[│┃]", line)[1:-1]]


@pytest.mark.parametrize(("width", "height"), [(80, 24), (100, 30), (140, 40), (50, 20)])
@pytest.mark.parametrize("trials", [1, 3, 20])
def test_every_size_fits_without_empty_columns_or_lost_footer(
    width: int, height: int, trials: int
) -> None:
    lines = draw(busy_state(MODELS, trials), width, height)
    assert all(len(line.rstrip()) <= width for line in lines)
    assert len(lines) <= height, "\n".join(lines)  # the footer is on screen
    assert any(line.startswith("Total verified") for line in lines)
    header = next(line for line in lines if "Model" in line)
    assert all(cells(header)), header  # no column squeezed to nothing
    rows = [cells(line) for line in lines if line.startswith("│") and "gpt" in line]
    # every row is told apart from the others: model (shortened, never ambiguous) and trial
    keyed = [(r[0], r[1]) if "Trial" in header else (r[0],) for r in rows]
    assert len(set(keyed)) == len(keyed), "\n".join(lines)
    if trials * len(MODELS) + 10 > height:  # collapsed: one row per model, its trials
        assert len(rows) == len(MODELS) and (
            f"{trials} trials" in " ".join(lines) or f"×{trials}" in " ".join(lines)
        )


def test_wide_terminals_keep_every_column() -> None:
    header = next(line for line in draw(busy_state(MODELS, 2), 140, 40) if "Model" in line)
    for name in ("Trial", "Batch", "API done/failed/total", "Verified", "Accuracy", "Retries"):
        assert name in header


def test_short_names_stay_unambiguous() -> None:
    assert short_names(MODELS, 14) == {
        "gpt-4o-2024-11-20": "gpt-4o",
        "gpt-4o-mini-2024-07-18": "gpt-4o-mini",
        "gpt-3.5-turbo-0125": "gpt-3.5-turbo",
    }
    same_base = ["gpt-4o-2024-05-13", "gpt-4o-2024-11-20"]
    short = short_names(same_base, 8)
    assert len(set(short.values())) == 2  # never "gpt-4o…" twice
    assert short_names(["a", "b"], 1) == {"a": "a", "b": "b"}


def test_the_footer_pools_no_accuracy_across_models() -> None:
    text = "\n".join(draw(busy_state(MODELS, 1), 140, 40))
    footer = text[text.index("Total") :]
    assert "%" not in footer and "correct" not in footer


def test_a_resubmitted_shard_does_not_inflate_the_totals() -> None:
    state = ProgressState()
    state.apply(run_started(requests=120))
    state.apply(shard_updated("completed", batch_id="b0", completed=98, failed=22, total=120))
    # the retry shard
    state.apply(shard_updated("in_progress", shard=1, batch_id="b1", completed=5, total=22))
    for k in range(98):
        state.apply(verdict_produced(f"i{k}"))
    assert state.totals()[0] == 120 and state.api_done() == 120
    assert "verified 98/120" in "\n".join(draw(state, 140, 40))


def test_rates_and_eta_come_from_observed_pace() -> None:
    clock = Clock()
    state = ProgressState(clock=clock)
    state.apply(run_started(time=0))
    for second in range(0, 11):  # the API answers 5 requests a second
        clock.now = 1_000.0 + second
        state.apply(shard_updated("in_progress", completed=5 * second, total=100, time=clock.now))
        state.sample()
    # 50 left at 5/s, the last count just seen: 10 s
    assert state.eta() == pytest.approx(10.0)
    api_rate, verdict_rate = state.rates()
    assert api_rate == pytest.approx(5.0) and verdict_rate == pytest.approx(0.0)
    clock.now += 4  # no new count for 4 s: the estimate runs down, it does not jump
    assert state.eta() == pytest.approx(6.0)


def test_plain_mode_says_why_it_retries() -> None:
    out = io.StringIO()
    with progress_view(Console(file=out, width=200), mode="plain", interval=60) as subscriber:
        subscriber(retry_scheduled("poll", "polling batch b: HTTP 429: slow"))
        subscriber(retry_scheduled("create", "HTTP 500: boom"))
        subscriber(RunFinished(outcome="finished", run_dir="/tmp/r"))
    text = out.getvalue()
    assert "HTTP 429: slow" in text and "HTTP 500: boom" in text


# -- in a real terminal -------------------------------------------------------------------


def _tmux(*args: str) -> str:
    return subprocess.run(
        ["tmux", *args], capture_output=True, text=True, check=True, timeout=30
    ).stdout


SIZES = ((80, 24), (120, 40))


@pytest.mark.skipif(
    shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)"
)
def test_the_offline_demo_in_tmux(tmp_path: Path) -> None:
    # One demo per terminal size, side by side (each mostly waits on its batches' phases).
    sessions = {size: f"aeval-{uuid.uuid4().hex[:8]}" for size in SIZES}
    frames: dict[tuple[int, int], list[str]] = {size: [] for size in SIZES}
    try:
        for (width, height), session in sessions.items():
            out = tmp_path / f"r{width}"
            script = tmp_path / f"demo{width}.sh"
            script.write_text(
                f"export PYTHONPATH={ROOT} TERM=xterm-256color\n"
                "unset OPENAI_API_KEY OPENAI_KEY OPENAI_BASE_URL\n"
                f"{sys.executable} -m aeval --limit 20 --trials 2 --out {out} "
                "--poll-initial 0.2 --poll-max 0.5\n"
                "echo EXIT=$?\n"
            )
            subprocess.run(
                ["tmux", "new-session", "-d", "-s", session, "-x", str(width), "-y", str(height)],
                check=True,
                timeout=30,
            )
            _tmux("set-option", "-t", session, "remain-on-exit", "on")
            _tmux("send-keys", "-t", session, f"clear; sh {script}", "Enter")
        running = set(SIZES)
        deadline = time.monotonic() + 150
        while running and time.monotonic() < deadline:
            for size in sorted(running):
                screen = _tmux("capture-pane", "-p", "-t", sessions[size])
                frames[size].append(screen)
                if "EXIT=" in screen:
                    running.discard(size)
            time.sleep(0.5)
        if running:
            pytest.fail(f"the demo did not finish in tmux at {sorted(running)}")
    finally:
        for session in sessions.values():
            subprocess.run(["tmux", "kill-session", "-t", session], timeout=30, check=False)
    for size in SIZES:
        _check_demo_frames(frames[size], *size)


def _check_demo_frames(frames: list[str], width: int, height: int) -> None:
    assert "EXIT=0" in frames[-1], frames[-1]
    live = [f for f in frames if "Total verified" in f and "EXIT=" not in f]
    assert live, frames[-1]
    for frame in live:
        lines = frame.splitlines()
        assert all(len(line) <= width for line in lines)
        header = next((line for line in lines if "Model" in line), None)
        assert header is not None, frame
        assert all(cells(header)), frame  # no zero-width column
        rows = [cells(line) for line in lines if line.startswith("│")]
        keyed = [(r[0], r[1]) if "Trial" in header else (r[0],) for r in rows]
        assert len(set(keyed)) == len(keyed), frame  # every row told apart
    final = frames[-1]
    check_final_summary(final, width)
    if os.environ.get("AEVAL_TMUX_FRAMES"):  # to look at them (docs screenshots)
        Path(os.environ["AEVAL_TMUX_FRAMES"], f"{width}x{height}.txt").write_text(
            "\n=====\n".join([*live, final])
        )


def check_final_summary(screen: str, width: int) -> None:
    """The summary printed at the end fits: one line per model, no cell folded, and
    what did not fit is named with where to see it."""
    lines = screen.splitlines()
    assert all(len(line) <= width for line in lines), screen
    start = next(i for i, line in enumerate(lines) if "aeval summary" in line)
    header = lines[start + 2]
    assert header.startswith("┃ Model"), screen
    body = lines[start + 4 :]
    rows = [cells(line) for line in body[: body.index(next(x for x in body if x.startswith("└")))]]
    assert len(rows) == len(MODELS), screen  # one line per model: nothing wrapped
    for row in rows:
        assert any(row[0] in m or m.startswith(row[0].split("…")[0]) for m in MODELS), row
        assert re.fullmatch(r"\d+\.\d% \[\d+\.\d, \d+\.\d\]", row[1]), row
    note = " ".join(lines[lines.index(body[len(rows)]) + 1 :])
    if len(cells(header)) < 9:
        assert f"Not shown at {width} columns:" in note, screen
        assert "Every column: python -m aeval report" in note, screen
    else:
        assert "Not shown" not in note, screen
