"""The live view's estimate of the time a run has left.

A run ends when its last answer is verified. Answers arrive a shard at a time
(a batch delivers its whole output at once) and the verifier pool works through
them at its own pace, so the time left is found by playing that forward: first
the answers already in hand, then each unfinished shard's answers from the
moment they are expected, earliest first. On the offline demo all three batches
deliver within a second of each other and verifying them takes a sixth of the
run; an estimate that stopped at the API's part read about half the truth.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["spread", "time_left"]


def time_left(
    arrivals: Iterable[tuple[float, int]], in_hand: int, rate: float | None
) -> float | None:
    """Seconds until the last answer is verified.

    :param arrivals: for each shard still with the API, (seconds until its answers
        arrive, how many).
    :param in_hand: answers that have arrived and wait for their verdict.
    :param rate: answers the verifier pool scores per second; ``None`` when not
        known yet (then only the API's part can be told, and nothing once the
        API is done).
    """
    pending = sorted(arrivals)
    if rate is None or rate <= 0:
        if not pending:
            return None if in_hand else 0.0
        return pending[-1][0]
    clock = in_hand / rate
    for at, answers in pending:
        clock = max(clock, at) + answers / rate
    return clock


def spread(until: float, answers: int, parts: int = 10) -> list[tuple[float, int]]:
    """``answers`` arriving evenly from now to ``until`` (a direct job's), as ``parts``
    arrivals: verification overlaps them, and only the last part's tail is left."""
    if answers <= 0:
        return []
    parts = min(parts, answers)
    base, extra = divmod(answers, parts)
    return [(until * (k + 1) / parts, base + (k < extra)) for k in range(parts)]
