"""The live view's time-left estimate: answers arriving shard by shard, then verified.

The estimate's accuracy on a real run is measured, not asserted, in
bench/display_eta.py (it depends on the machine's load); these pin its logic.
"""

from __future__ import annotations

import pytest
from display_events import Clock, run_started, shard_updated, verdict_produced

from aeval.display import ProgressState
from aeval.display.eta import time_left
from aeval.events import VerifierPace


def test_answers_that_arrive_together_are_verified_one_after_another() -> None:
    # Three shards of 100 arrive within a second; 50 answers/s: the last verdict comes
    # 6 s after the first arrival, not 2 s after the last.
    assert time_left([(10.0, 100), (10.5, 100), (11.0, 100)], 0, 50.0) == pytest.approx(16.0)


def test_verification_that_keeps_up_leaves_only_the_last_shards_tail() -> None:
    assert time_left([(10.0, 100), (30.0, 100)], 0, 50.0) == pytest.approx(32.0)


def test_answers_in_hand_are_verified_first() -> None:
    assert time_left([], 100, 50.0) == pytest.approx(2.0)
    assert time_left([(1.0, 50)], 100, 50.0) == pytest.approx(3.0)


def test_without_a_verifier_pace_only_the_apis_part_is_told() -> None:
    assert time_left([(10.0, 100), (12.0, 5)], 0, None) == pytest.approx(12.0)
    assert time_left([], 10, None) is None  # the API is done, verification unknown
    assert time_left([], 0, None) == 0.0


def test_the_estimate_adds_the_verifier_pace_to_the_batches_pace() -> None:
    clock = Clock()
    state = ProgressState(clock=clock)
    state.apply(run_started(time=clock.now))
    state.apply(VerifierPace(answers_per_s=20.0))
    for second in range(0, 11):  # the API answers 5 requests a second
        clock.now = 1_000.0 + second
        state.apply(shard_updated("in_progress", completed=5 * second, total=100, time=clock.now))
    # 50 requests left at 5/s (10 s), then 100 answers at 20/s (5 s)
    assert state.eta() == pytest.approx(15.0)


def test_the_next_poll_bounds_when_a_finalizing_batch_delivers() -> None:
    clock = Clock()
    state = ProgressState(clock=clock)
    state.apply(run_started(time=clock.now))
    state.apply(VerifierPace(answers_per_s=50.0))
    state.apply(
        shard_updated(
            "finalizing",
            completed=100,
            total=100,
            next_poll_at=clock.now + 3.0,
            time=clock.now,
        )
    )
    assert state.eta() == pytest.approx(3.0 + 2.0)  # seen at the next poll, then 2 s of checks
    clock.now += 5.0  # the poll is late: it can come any moment now
    assert state.eta() == pytest.approx(2.0)


def test_a_shard_with_no_pace_yet_is_assumed_to_end_with_the_slowest_known_one() -> None:
    clock = Clock()
    state = ProgressState(clock=clock)
    state.apply(run_started(shards=2, time=clock.now))
    state.apply(VerifierPace(answers_per_s=100.0))
    state.apply(
        shard_updated("validating", shard=1, batch_id="b1", completed=0, total=100, time=clock.now)
    )
    assert state.eta() is None  # nothing to go on
    for second in range(0, 3):
        clock.now = 1_000.0 + second
        state.apply(
            shard_updated(
                "in_progress", batch_id="b0", completed=10 * second, total=100, time=clock.now
            )
        )
    # shard 0: 80 left at 10/s = 8 s; shard 1 assumed the same; 200 answers at 100/s
    assert state.eta() == pytest.approx(8.0 + 2.0)


def test_the_verdicts_own_rate_replaces_the_measured_pace() -> None:
    clock = Clock()
    state = ProgressState(clock=clock)
    state.apply(run_started(time=clock.now))
    state.apply(VerifierPace(answers_per_s=1_000.0))  # measured on easy checks
    state.apply(shard_updated("done", completed=100, total=100, time=clock.now))
    for k in range(20):  # then the real answers come at 10/s
        clock.now = 1_000.0 + k * 0.1
        state.apply(verdict_produced(f"i{k}", time=clock.now))
        state.sample()
    assert state.eta() == pytest.approx(80 / 10.0, rel=0.15)


def test_a_direct_jobs_answers_are_verified_as_they_arrive() -> None:
    clock = Clock()
    state = ProgressState(clock=clock)
    state.apply(run_started(time=clock.now))
    state.apply(VerifierPace(answers_per_s=100.0))
    for second in range(0, 11):  # 5 answers a second, each verified at once
        clock.now = 1_000.0 + second
        state.apply(
            shard_updated(
                "in_progress",
                batch_id=None,
                completed=5 * second,
                total=100,
                in_flight=8,
                time=clock.now,
            )
        )
        for k in range(5 * second, 5 * second + 5 if second < 10 else 5 * second):
            state.apply(verdict_produced(f"i{k}", time=clock.now))
        state.sample()
    # 50 requests left at 5/s: 10 s, then the last answers' checks (at the verdicts'
    # own rate, 5/s: at most a second) -- not 50 answers' 10 s, as if they came at once.
    assert 10.0 <= state.eta() <= 11.0
