"""The words the views show for the state (the state holds only data).

A job's phase label and style (:func:`phase_label`) and a direct job's one-line
progress (:func:`direct_label`, :func:`direct_lines`), each given the time to
tell it at, as the view's clock says.
"""

from __future__ import annotations

from aeval.display.shard_state import ShardState
from aeval.display.state import BAD_PHASES, JobState, ProgressState

__all__ = ["PHASE_STYLE", "direct_label", "direct_lines", "phase_label"]

# Order in which a batch moves forward; a job shows its least advanced shard.
_PHASE_ORDER: dict[str, int] = {
    "pending": 0,
    "uploading": 1,
    "validating": 2,
    "in_progress": 3,
    "finalizing": 4,
    "cancelling": 4,
    "downloading": 5,
    "completed": 6,
    "expired": 6,
    "cancelled": 6,
    "failed": 6,
    "done": 7,
}
PHASE_STYLE: dict[str, str] = {
    "pending": "dim",
    "uploading": "cyan",
    "validating": "yellow",
    "in_progress": "blue",
    "finalizing": "cyan",
    "downloading": "cyan",
    "verifying": "cyan",
    "completed": "green",
    "done": "bold green",
    "failed": "bold red",
    "expired": "magenta",
    "cancelling": "red",
    "cancelled": "red",
}


def phase_label(job: JobState, now: float) -> tuple[str, str]:
    """(label, style) summing up the job's shards."""
    if job.ok is not None and (
        not job.shards or all(s.phase == "done" for s in job.shards.values())
    ):
        return ("done", PHASE_STYLE["done"]) if job.ok else ("failed", PHASE_STYLE["failed"])
    if not job.shards:
        return "pending", PHASE_STYLE["pending"]
    phases = [s.phase for s in job.shards.values()]
    bad = [p for p in phases if p in BAD_PHASES]
    lead: str = bad[0] if bad else min(phases, key=_PHASE_ORDER.__getitem__)
    if (
        job.ok is None
        and not bad
        and _PHASE_ORDER[lead] >= _PHASE_ORDER["downloading"]
        and job.verified < job.requests
    ):
        # The batch is over but its answers are still being checked: say so,
        # rather than "done" beside a bar that is not full.
        lead = "verifying"
    direct = next(iter(job.shards.values()))
    if lead == "in_progress" and direct.in_flight is not None and len(phases) == 1:
        return f"sending: {direct_label(direct, now)}", PHASE_STYLE[lead]
    if len(phases) > 1:
        done = sum(p == "done" for p in phases)
        return f"{lead} ({done}/{len(phases)} shards done)", PHASE_STYLE[lead]
    return lead, PHASE_STYLE[lead]


def direct_label(shard: ShardState, now: float) -> str:
    """What a direct job is doing, in one line: in flight, pace and time left."""
    rps, tps = shard.direct_rates()
    pace = f", {rps:.1f} req/s, {tps:.0f} tok/s" if rps is not None and tps is not None else ""
    left = shard.remaining_s(now)
    eta = f", ETA {round(left)}s" if left is not None else ""
    return f"{shard.in_flight} in flight{pace}{eta}"


def direct_lines(state: ProgressState) -> list[str]:
    """One line per direct job still sending (the plain mode prints these)."""
    now = state.clock()
    lines = []
    for job in state.jobs.values():
        for s in job.shards.values():
            if s.in_flight is not None and s.phase == "in_progress":
                lines.append(
                    f"{job.model} trial {job.trial}: answered {s.completed}, failed "
                    f"{s.failed} of {s.total}, {direct_label(s, now)}"
                )
    return lines
