"""What the live view knows of one shard: a batch, or (direct mode) one job's requests."""

from __future__ import annotations

from dataclasses import dataclass

from aeval.events import BatchPhase

__all__ = ["ShardState"]


@dataclass(slots=True)
class ShardState:
    phase: BatchPhase = "pending"
    batch_id: str | None = None
    requests: int = 0
    completed: int = 0
    failed: int = 0
    total: int = 0
    created_at: float | None = None
    output_lines: int | None = None
    error_lines: int | None = None
    resubmission: bool = False  # a retry shard: its requests are already counted
    # (time, done) when the API's count was first seen and last seen to change:
    # the shard's own pace, free of how stale the last poll is.
    first_count: tuple[float, int] | None = None
    last_count: tuple[float, int] | None = None
    next_poll_at: float | None = None  # when the engine looks at the batch next
    # Direct mode (None for a batch): requests on their way now, output tokens so far,
    # and the tokens when the count was first seen (for tokens/s).
    in_flight: int | None = None
    output_tokens: int = 0
    first_tokens: int = 0

    def observe(self, when: float) -> None:
        done = self.completed + self.failed
        if self.first_count is None or done < self.first_count[1]:
            self.first_count = self.last_count = (when, done)
            self.first_tokens = self.output_tokens
        elif self.last_count is None or done != self.last_count[1]:
            self.last_count = (when, done)

    def direct_rates(self) -> tuple[float | None, float | None]:
        """(requests/s, output tokens/s) of a direct job since its counts were first seen."""
        if self.first_count is None or self.last_count is None:
            return None, None
        (t0, d0), (t1, d1) = self.first_count, self.last_count
        if t1 - t0 < 0.5:
            return None, None
        span = t1 - t0
        return (d1 - d0) / span, (self.output_tokens - self.first_tokens) / span

    def remaining_s(self, now: float) -> float | None:
        """Seconds until the API has done this shard, from its own pace; None: no pace yet."""
        if self.first_count is None or self.last_count is None or not self.total:
            return None
        (t0, d0), (t1, d1) = self.first_count, self.last_count
        if d1 <= d0 or t1 <= t0:
            return None
        rate = (d1 - d0) / (t1 - t0)
        left = self.total - self.completed - self.failed
        return max(0.0, left / rate - (now - t1))

    def arrives_in(self, now: float) -> float | None:
        """Seconds until this shard's answers reach the engine: not before its
        requests are all answered (at its pace) nor before the engine next looks;
        None while there is no pace to go on."""
        poll = self.next_poll_at - now if self.next_poll_at is not None else 0.0
        if self.phase in ("finalizing", "cancelling"):
            return max(0.0, poll)
        if self.phase != "in_progress":
            return None
        pace = self.remaining_s(now)
        if pace is None:
            return None
        return max(pace, poll)
