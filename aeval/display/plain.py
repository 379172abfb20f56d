"""Plain, timestamped progress lines for consoles that are not terminals."""

from __future__ import annotations

from datetime import UTC, datetime

from rich.console import Console

from aeval.display.labels import direct_lines
from aeval.display.live import fmt_duration, fmt_pct, fmt_rate
from aeval.display.state import BAD_PHASES, ProgressState
from aeval.events import (
    Event,
    JobFinished,
    RetryScheduled,
    RunFinished,
    RunStarted,
    ShardUpdated,
)


def _stamp(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


_RETRY_REASON_EVERY_S = 60.0


class PlainLog:
    """Plain, timestamped progress lines for consoles that are not terminals."""

    def __init__(self, state: ProgressState, console: Console, interval: float) -> None:
        self.state = state
        self.console = console
        self.interval = interval
        self._seen: tuple[int, int] = (0, 0)
        self._reasons: dict[str, float] = {}  # retry reason -> when it was last printed

    def emit(self, text: str) -> None:
        line = f"{_stamp(self.state.clock())} {text}"
        self.console.print(line, markup=False, highlight=False, soft_wrap=True, emoji=False)

    def notable(self, event: Event) -> None:
        """Lines worth printing at once; everything else waits for the periodic line."""
        if isinstance(event, RunStarted):
            mode = " (offline: local server)" if event.offline else ""
            mode += " SYNTHETIC: synthetic models answer" if event.synthetic else ""
            verb = "resumed" if event.resumed else "started"
            self.emit(
                f"run {event.run_id} {verb}{mode}: {len(event.models)} model(s) × "
                f"{event.trials} trial(s), {len(event.shards)} shard(s), "
                f"{sum(s.requests for s in event.shards)} requests → {event.run_dir}"
            )
        elif isinstance(event, ShardUpdated) and event.phase in BAD_PHASES:
            self.emit(
                f"{event.model} trial {event.trial} shard {event.shard}: batch {event.phase} "
                f"({event.completed} done, {event.failed} failed of {event.total})"
            )
        elif isinstance(event, RetryScheduled):
            self._retry(event)
        elif isinstance(event, JobFinished):
            with self.state.lock:
                job = self.state.job(event.model, event.trial)
                acc, verified = job.accuracy, job.verified
            status = "finished" if event.ok else "FAILED"
            msg = f": {event.message}" if event.message else ""
            self.emit(
                f"{event.model} trial {event.trial} {status}: {verified} verdicts, "
                f"accuracy {fmt_pct(acc)}{msg}"
            )
        elif isinstance(event, RunFinished):
            self.progress(force=True)
            if event.outcome == "finished" or not event.message:
                self.emit(f"run {event.outcome} → {event.run_dir}")
            else:  # the message says what failed, or how to resume
                self.emit(f"run {event.outcome}: {event.message}")

    def _retry(self, event: RetryScheduled) -> None:
        """Say why the run is retrying: each new reason at once, the same one again at
        most once a minute (an API that is down for hours must not flood the log)."""
        # "polling batch b_1: HTTP 503: …" and "… b_2: HTTP 503: …" are one reason.
        reason = event.error.split(": ", 1)[-1]
        last = self._reasons.get(reason)
        if last is not None and event.time - last < _RETRY_REASON_EVERY_S:
            return
        self._reasons[reason] = event.time
        where = f"{event.model} trial {event.trial}: " if event.model else ""
        self.emit(
            f"{where}{event.operation} retry {event.attempt} in {event.delay_s:.1f}s: {event.error}"
        )

    def progress(self, force: bool = False) -> None:
        with self.state.lock:
            self.state.sample()
            requests, verified, _, infra = self.state.totals()
            seen = (self.state.changes, verified)
            if seen == self._seen and not force:
                return
            self._seen = seen
            phases = ", ".join(f"{p} {n}" for p, n in sorted(self.state.phase_counts().items()))
            # Direct mode has no batches: each model × trial is one job.
            unit = "jobs" if self.state.direct else "batches"
            eta = self.state.eta()
            api_rate, verdict_rate = self.state.rates()
            # Accuracy per job is in its "finished" line: never one figure pooled over models.
            line = (
                f"progress: verified {verified}/{requests}, "
                f"API {self.state.api_done()}/{requests}, "
                f"{fmt_rate(api_rate, 'req')}, {fmt_rate(verdict_rate, 'verdicts')}, "
                f"infra failures {infra}; {unit}: {phases or 'none yet'}; "
                f"retries {self.state.retries}; elapsed {fmt_duration(self.state.elapsed())}"
                + (f", est. left {fmt_duration(eta)}" if self.state.outcome is None else "")
            )
            direct = direct_lines(self.state) if self.state.outcome is None else []
        self.emit(line)
        for text in direct:  # direct mode: each job's in flight, pace and ETA
            self.emit(text)
