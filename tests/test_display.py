from __future__ import annotations

import io
import re
import time
from typing import get_args

import pytest
from display_events import retry_scheduled, run_started, shard_updated, verdict_produced
from rich.console import Console

from aeval.display import ProgressState, progress_view, render_progress
from aeval.display.labels import phase_label
from aeval.events import (
    BatchPhase,
    Event,
    JobFinished,
    OutputDownloaded,
    RetryScheduled,
    RunFinished,
    ShardUpdated,
)
from aeval.report import summarize, summary_table
from aeval.verdicts import Status, Verdict, verdicts_frame

# Every phase the engine can report: the display must render each one.
PHASES = list(get_args(BatchPhase))


VERIFYING_AFTER = ("downloading", "completed", "done")


def run_events(models: list[str], n: int = 10, *, full_after_download: bool = False) -> list[Event]:
    """A run where job i sits in phase PHASES[i] and has verified half its items
    (all of them, for a batch over, when ``full_after_download``)."""
    events: list[Event] = [
        run_started(tuple(models), requests=n, run_id="run-x", run_dir="/tmp/run-x")
    ]
    created = time.time() - 125
    for i, m in enumerate(models):
        phase = PHASES[i % len(PHASES)]
        events.append(
            shard_updated(
                phase,
                model=m,
                batch_id=f"batch_{i}",
                completed=n // 2,
                failed=1,
                total=n,
                created_at=created,
            )
        )
        verified = n if full_after_download and phase in VERIFYING_AFTER else n // 2
        for k in range(verified):
            status = Status.EQUIVALENT if k % 2 == 0 else Status.PARSE_ERROR
            events.append(verdict_produced(f"item-{k}", status, model=m))
    return events


def recording_console(width: int = 200) -> Console:
    return Console(record=True, width=width, force_terminal=True, file=io.StringIO())


def test_live_view_renders_every_batch_phase() -> None:
    models = [f"job{i:02d}" for i in range(len(PHASES))]
    console = recording_console()
    with progress_view(console, mode="live", refresh_per_second=20) as subscriber:
        for event in run_events(models, full_after_download=True):
            subscriber(event)
        subscriber(retry_scheduled("poll", "HTTP 503", attempt=3, delay_s=8.0, model="job00"))
    text = console.export_text()
    # The final frame (drawn when the block exits) has one row per model × trial.
    final = text[text.rindex("aeval run run-x") :]
    rows = {
        line.split("│")[1].strip(): line.split("│")
        for line in final.splitlines()
        if "│ job" in line
    }
    for model, phase in zip(models, PHASES, strict=True):
        cells = rows[model]
        assert cells[3].strip() == phase, (phase, cells)
        done = phase in VERIFYING_AFTER
        assert ("10/10" if done else "5/10") in cells[5]  # verification progress
        assert cells[6].strip() == ("50.0%" if done else "60.0%")  # running accuracy
    # Waiting batches show their age (created 125 s ago): 2m05s or a second more.
    waiting = "│".join(rows["job03"])
    assert re.search(r"2m0[5-7]s", waiting)
    assert "5/1/10" in waiting  # the API's own request counts
    assert "retries 1" in final and "poll retry 3" in final
    assert "verified 75/120" in final


def test_state_folds_events_without_rendering() -> None:
    state = ProgressState()
    for e in run_events(["a", "b"], n=4):
        state.apply(e)
    state.apply(verdict_produced("item-9", Status.API_ERROR, model="a"))
    state.apply(OutputDownloaded(model="a", trial=1, shard=0, output_lines=3, error_lines=1))
    state.apply(JobFinished(model="b", trial=1, ok=False, message="batch expired"))
    a, b = state.jobs[("a", 1)], state.jobs[("b", 1)]
    assert (a.verified, a.correct, a.infra) == (3, 1, 1)
    assert a.accuracy == pytest.approx(0.5)  # infra failures are not scored
    assert a.shards[0].output_lines == 3
    assert b.ok is False and phase_label(b, state.clock())[0] == "uploading"
    assert state.totals() == (8, 5, 2, 1)
    # A verdict of a job no event announced still gets its row.
    state.apply(verdict_produced("x", model="late", trial=2))
    assert state.jobs[("late", 2)].correct == 1 and state.verified == 6


def test_jobs_with_several_shards_show_the_least_advanced() -> None:
    state = ProgressState()
    state.apply(run_started(requests=5, shards=3))
    state.apply(ShardUpdated(model="m", trial=1, shard=0, phase="done"))
    state.apply(ShardUpdated(model="m", trial=1, shard=1, phase="in_progress"))
    state.apply(ShardUpdated(model="m", trial=1, shard=2, phase="finalizing"))
    assert phase_label(state.jobs[("m", 1)], state.clock())[0] == "in_progress (1/3 shards done)"
    assert state.jobs[("m", 1)].requests == 15
    state.apply(ShardUpdated(model="m", trial=1, shard=2, phase="expired"))
    assert phase_label(state.jobs[("m", 1)], state.clock())[0].startswith("expired")


def test_plain_mode_prints_timestamped_lines_never_escape_codes() -> None:
    out = io.StringIO()
    console = Console(file=out, width=120)  # not a terminal
    assert not console.is_terminal
    with progress_view(console, mode="auto", interval=0.05) as subscriber:
        for e in run_events(["m1", "m2"], n=4):
            subscriber(e)
        time.sleep(0.3)
        subscriber(
            ShardUpdated(
                model="m2", trial=1, shard=0, phase="expired", completed=2, failed=0, total=4
            )
        )
        subscriber(JobFinished(model="m1", trial=1, ok=True))
        subscriber(RunFinished(outcome="finished", run_dir="/tmp/run-x"))
    text = out.getvalue()
    assert "\x1b" not in text and "\r" not in text
    lines = text.splitlines()
    stamp = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ ")
    assert all(stamp.match(line) for line in lines), lines
    assert "run run-x started" in lines[0]
    assert any("m2 trial 1 shard 0: batch expired" in line for line in lines)
    assert any("m1 trial 1 finished: 2 verdicts, accuracy 50.0%" in line for line in lines)
    assert any("progress: verified 4/8" in line for line in lines)
    assert lines[-1].endswith("run finished → /tmp/run-x")
    # The ticker prints only when something changed: a few lines, not one per tick.
    assert len(lines) < 10


def test_plain_mode_does_not_print_per_verdict() -> None:
    out = io.StringIO()
    with progress_view(Console(file=out), mode="plain", interval=60) as subscriber:
        for e in run_events(["m"], n=2000):
            subscriber(e)
    assert len(out.getvalue().splitlines()) == 1  # just "run started"


def test_quiet_prints_nothing() -> None:
    out = io.StringIO()
    with progress_view(Console(file=out, force_terminal=True), mode="quiet") as subscriber:
        for e in run_events(["m"]):
            subscriber(e)
        subscriber(RunFinished(outcome="finished", run_dir="/tmp/x"))
    assert out.getvalue() == ""


def test_render_is_bounded_by_jobs_not_verdicts() -> None:
    state = ProgressState()
    for e in run_events(["m"], n=20_000):
        state.apply(e)
    console = recording_console()
    console.print(render_progress(state))
    assert "10000/20000" in console.export_text()


def test_final_summary_table_renders() -> None:
    verdicts = [
        Verdict(
            model="gpt-x",
            trial=t,
            custom_id=f"i{k}",
            status=Status.EQUIVALENT if k < 7 else Status.MISSING,
        )
        for t in (1, 2)
        for k in range(10)
    ]
    summary = summarize(verdicts_frame(verdicts))
    console = recording_console(width=160)
    console.print(summary_table(summary))
    text = console.export_text()
    row = next(line for line in text.splitlines() if "gpt-x" in line)
    # 14/14 scored correct (the 6 missing are infra): 100 %; the two trials answered
    # the same 7 items, so the interval is Wilson's for 7/7, not for 14/14.
    assert "100.0% [64.6, 100.0]" in row
    assert "14/14" in row
    assert " 6 " in row  # infra failures shown apart


def test_unknown_mode_is_an_error() -> None:
    with (
        pytest.raises(ValueError, match="unknown display mode"),
        progress_view(
            Console(file=io.StringIO()),
            mode="fancy",  # type: ignore[arg-type]
        ),
    ):
        pass


def test_a_finished_batch_still_being_verified_says_verifying() -> None:
    state = ProgressState()
    state.apply(run_started(requests=3))
    state.apply(shard_updated("done", batch_id=None, completed=3, total=3))
    state.apply(verdict_produced("a"))
    assert phase_label(state.jobs[("m", 1)], state.clock())[0] == "verifying"
    for cid in "bc":
        state.apply(verdict_produced(cid))
    assert phase_label(state.jobs[("m", 1)], state.clock())[0] == "done"
    state.apply(JobFinished(model="m", trial=1, ok=True))
    assert phase_label(state.jobs[("m", 1)], state.clock())[0] == "done"


def test_plain_mode_says_how_to_resume_an_interrupted_run() -> None:
    out = io.StringIO()
    hint = "interrupted; resume with 'python -m aeval resume results/r'"
    with progress_view(Console(file=out), mode="plain") as subscriber:
        subscriber(RunFinished(outcome="interrupted", run_dir="results/r", message=hint))
    assert out.getvalue().splitlines()[-1].endswith(f"run interrupted: {hint}")
    console = recording_console()
    state = ProgressState()
    state.apply(RunFinished(outcome="interrupted", run_dir="results/r", message=hint))
    console.print(render_progress(state))
    assert hint in console.export_text()


def test_auto_mode_draws_live_on_a_terminal() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=160)
    with progress_view(console, mode="auto", refresh_per_second=20) as subscriber:
        for e in run_events(["m"], n=4):
            subscriber(e)
    text = out.getvalue()
    assert "\x1b[?25l" in text  # Live hides the cursor while it repaints in place
    assert "━" in text and "2/4" in text
    assert not re.search(r"^\d{4}-\d\d-\d\dT", text, re.M)  # no plain lines


def test_live_view_never_draws_per_verdict() -> None:
    console = recording_console()
    events = run_events(["m"], n=40_000)
    with progress_view(console, mode="live", refresh_per_second=0.5) as subscriber:
        start = time.monotonic()
        for e in events:
            subscriber(e)
        elapsed = time.monotonic() - start
    text = console.export_text()
    frames = text.count("aeval run run-x")
    # Live draws on entry and on exit, and once per 2 s in between: 20,000 verdicts
    # folded meanwhile add no frame of their own.
    assert frames <= 2 + elapsed / 2 + 1, (frames, elapsed)
    assert "20000/40000" in text


def test_tables_piped_to_a_file_are_not_squeezed_to_80_columns() -> None:
    from aeval.display import PIPED_WIDTH, stdout_console

    # Under pytest stdout is captured, i.e. not a terminal, as in CI or `| tee`.
    assert stdout_console().width == PIPED_WIDTH > 80


def test_plain_mode_prints_each_new_retry_reason_once_a_minute() -> None:
    out = io.StringIO()
    t0 = time.time()

    def retry(shard: int, error: str, at: float) -> RetryScheduled:
        return retry_scheduled("poll", error, shard=shard, time=t0 + at)

    with progress_view(Console(file=out), mode="plain", interval=60) as subscriber:
        subscriber(retry(0, "polling batch b_0: HTTP 503: The server is overloaded", 0))
        subscriber(retry(1, "polling batch b_1: HTTP 503: The server is overloaded", 1))
        subscriber(retry(0, "polling batch b_0: connection problem: Connection error.", 2))
        subscriber(retry(0, "polling batch b_0: HTTP 503: The server is overloaded", 30))
        subscriber(retry(0, "polling batch b_0: HTTP 503: The server is overloaded", 61))
    lines = out.getvalue().splitlines()
    assert len(lines) == 3, lines
    assert "m trial 1: poll retry 1 in 2.0s: polling batch b_0: HTTP 503" in lines[0]
    assert "connection problem" in lines[1]
    assert "HTTP 503" in lines[2]


def test_plain_mode_names_a_direct_runs_jobs_not_batches() -> None:
    out = io.StringIO()
    with progress_view(Console(file=out, width=300), mode="plain", interval=60) as subscriber:
        subscriber(run_started(requests=10, offline=True))
        subscriber(shard_updated("in_progress", batch_id=None, completed=4, total=10, in_flight=3))
        subscriber(RunFinished(outcome="finished", run_dir="/tmp/r"))
    text = out.getvalue()
    assert "(offline: local server)" in text
    assert "jobs: in_progress 1" in text and "batches:" not in text
