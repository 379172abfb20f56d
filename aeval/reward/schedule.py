"""One reward call's checks in the pool, under a per-call deadline that stuck checks cannot stretch.

The pool bounds each check (hard budget, memory cap), but a handful of
hostile completions that each run to that budget would still hold every
worker in turn while the rest of the step waits behind them. So the checks
are run in rounds: in the first, each check gets a short budget
(``first_budget_s``, far above what a real answer needs), counted from when
a worker begins it, never while it waits; the few that outlive it are set
aside, so they never hold up the others, and retried when everything else is
done, with the budget doubled each round, until the call's deadline. A check
still undecided then gets the ``timeout`` verdict. The first round is never
cut short, so only a check that outlived its first budget can end at the
deadline. A verdict, when it comes, is the pool's, so it is the evaluation's.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import anyio

from aeval.errors import AevalError
from aeval.verdicts import CheckResult, Status
from aeval.verify.checker import Checker
from aeval.verify.pool import PIPELINE_DEPTH

__all__ = ["Check", "Schedule", "check_all"]

Check = tuple[str | None, str, str]  # (response text, truth, constants)


@dataclass(frozen=True, slots=True)
class Schedule:
    """How a call spends its time.

    :param deadline_s: the call's deadline, from its start: checks that
        outlived their first budget and are still undecided then are ``timeout``.
    :param first_budget_s: the first round's budget per check.
    """

    deadline_s: float
    first_budget_s: float = 0.5


@dataclass
class Outcome:
    results: list[CheckResult]
    retried: int = 0  # checks that outlived the first round's budget
    past_deadline: int = 0  # checks given ``timeout`` because the deadline passed
    rounds: int = 0
    statuses: Counter[str] = field(default_factory=Counter)


async def _round(
    pool: Checker,
    checks: list[Check],
    indices: list[int],
    budget: float,
    results: list[CheckResult | None],
    deadline: float = math.inf,
) -> list[int]:
    """Run ``indices``, each for ``budget`` seconds from when a worker begins it, all by
    ``deadline``; return those that ran out of time."""
    late: list[int] = []
    send, receive = anyio.create_memory_object_stream[int](len(indices))
    for index in indices:
        send.send_nowait(index)
    send.close()

    async def runner() -> None:
        async for index in receive:
            # The budget runs from when a worker begins the check, never while
            # it waits behind another one (a check queued behind a stuck one is
            # not a straggler). Cancelling a check kills the worker that holds
            # it: the pool replaces it and re-sends the checks queued on it.
            with anyio.CancelScope(deadline=deadline) as scope:

                def started(at: float, scope: anyio.CancelScope = scope) -> None:
                    scope.deadline = min(deadline, at + budget)

                # A reward needs the status, not the direction or counterexample.
                results[index] = await pool.check(*checks[index], on_start=started, details=False)
            if results[index] is None:
                late.append(index)

    # As many checks in flight as the workers' pipes hold.
    try:
        async with anyio.create_task_group() as tg:
            for _ in range(min(len(indices), pool.workers * PIPELINE_DEPTH)):
                tg.start_soon(runner)
    except BaseExceptionGroup as group:
        # The pool raises AevalError only when no worker can start: say that, not a group.
        failed = group.subgroup(AevalError)
        if failed is not None:
            raise failed.exceptions[0] from None
        raise
    return sorted(late)


async def check_all(pool: Checker, checks: list[Check], schedule: Schedule) -> Outcome:
    """Verify ``checks`` in ``pool`` (entered in this event loop), in order, within the deadline."""
    start = anyio.current_time()
    deadline = start + schedule.deadline_s
    results: list[CheckResult | None] = [None] * len(checks)
    pending = list(range(len(checks)))
    budget = schedule.first_budget_s
    outcome = Outcome(results=[])
    while pending:
        if outcome.rounds and anyio.current_time() >= deadline:
            break
        # The first round is never cut: every check gets its first budget, so
        # only a check that outlived it can end at the deadline.
        cutoff = deadline if outcome.rounds else math.inf
        pending = await _round(pool, checks, pending, budget, results, cutoff)
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
