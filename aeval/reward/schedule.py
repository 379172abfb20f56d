"""One reward call's checks in the pool, under a per-call deadline that stuck checks cannot stretch.

The pool bounds each check (hard budget, memory cap), but a handful of
hostile completions that each run to that budget would still hold every
worker in turn while the rest of the step waits behind them. So the checks
are run in rounds: in the first, each check gets a short budget
(``first_budget_s``, far above what a real answer needs); the few that
outlive it are set aside, so they never hold up the others, and retried
when everything else is done, with the budget doubled each round. The first
retry always runs; later rounds stop at the call's deadline, and a check
still undecided then gets the ``timeout`` verdict. A check's own verdict,
when it comes, is the pool's, so it is the evaluation's.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import anyio

from aeval.verdicts import CheckResult, Status
from aeval.verify.pool import PIPELINE_DEPTH, VerifierPool

__all__ = ["Check", "Schedule", "check_all"]

Check = tuple[str | None, str, str]  # (response text, truth, constants)


@dataclass(frozen=True, slots=True)
class Schedule:
    """How a call spends its time.

    :param deadline_s: the call's deadline, from its start: checks still
        undecided then (after their first retry) score as ``timeout``.
    :param first_budget_s: the first round's budget per check.
    """

    deadline_s: float
    first_budget_s: float = 0.25


@dataclass
class Outcome:
    results: list[CheckResult]
    retried: int = 0  # checks that outlived the first round's budget
    past_deadline: int = 0  # checks given ``timeout`` because the deadline passed
    rounds: int = 0
    statuses: Counter[str] = field(default_factory=Counter)


async def _round(
    pool: VerifierPool,
    checks: list[Check],
    indices: list[int],
    budget: float,
    results: list[CheckResult | None],
) -> list[int]:
    """Run ``indices`` with ``budget`` seconds each; return those that ran out of it."""
    late: list[int] = []
    send, receive = anyio.create_memory_object_stream[int](len(indices))
    for index in indices:
        send.send_nowait(index)
    send.close()

    async def runner() -> None:
        async for index in receive:
            # Cancelling a check kills the worker that holds it: the pool
            # replaces it, and the other checks on that worker are re-sent.
            with anyio.move_on_after(budget):
                results[index] = await pool.check(*checks[index])
            if results[index] is None:
                late.append(index)

    # As many checks in flight as the workers' pipes hold, no more: a check
    # waiting for a free worker would spend its budget waiting.
    async with anyio.create_task_group() as tg:
        for _ in range(min(len(indices), pool.workers * PIPELINE_DEPTH)):
            tg.start_soon(runner)
    return sorted(late)


async def check_all(pool: VerifierPool, checks: list[Check], schedule: Schedule) -> Outcome:
    """Verify ``checks`` in ``pool`` (entered in this event loop), in order, within the deadline."""
    start = anyio.current_time()
    deadline = start + schedule.deadline_s
    results: list[CheckResult | None] = [None] * len(checks)
    pending = list(range(len(checks)))
    budget = schedule.first_budget_s
    outcome = Outcome(results=[])
    while pending:
        remaining = deadline - anyio.current_time()
        if outcome.rounds >= 2 and remaining <= 0:
            break
        round_budget = budget if outcome.rounds < 2 else min(budget, remaining)
        pending = await _round(pool, checks, pending, round_budget, results)
        if outcome.rounds == 0:
            outcome.retried = len(pending)
        outcome.rounds += 1
        budget *= 2
    for index in pending:
        results[index] = CheckResult(
            Status.TIMEOUT,
            f"undecided at the reward call's deadline ({schedule.deadline_s:g} s)",
            elapsed_ms=(anyio.current_time() - start) * 1000.0,
        )
    outcome.past_deadline = len(pending)
    outcome.results = [r for r in results if r is not None]
    outcome.statuses.update(r.status.value for r in outcome.results)
    return outcome
