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
from typing import Protocol, runtime_checkable

import anyio

from aeval.errors import AevalError
from aeval.exception_groups import first_of
from aeval.verdicts import CheckResult, Status
from aeval.verify.cache import VerdictCache
from aeval.verify.checker import Checker
from aeval.verify.limits import VerifyLimits
from aeval.verify.pool import PIPELINE_DEPTH

__all__ = ["Check", "Schedule", "SchedulingPool", "check_all", "run_schedule"]

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
    late: list[int] = field(default_factory=list)  # which outlived the first budget
    undecided: list[int] = field(default_factory=list)  # which were past the deadline


@runtime_checkable
class SchedulingPool(Protocol):
    """A pool that runs a reward call's whole schedule itself: the machine's shared pool
    (:class:`aeval.reward.node_pool.NodePool`), whose server holds the processes."""

    @property
    def limits(self) -> VerifyLimits: ...

    async def run_schedule(self, checks: list[Check], schedule: Schedule) -> Outcome: ...


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
        failed = first_of(group, AevalError)
        if failed is not None:
            raise failed from None
        raise
    return sorted(late)


async def check_all(
    pool: Checker | SchedulingPool,
    checks: list[Check],
    schedule: Schedule,
    cache: VerdictCache | None = None,
) -> Outcome:
    """Verify ``checks`` in ``pool`` (entered in this event loop), in order, within the deadline.

    Each distinct check is verified once: a check whose extracted answer repeats an
    earlier one's for the same row (a group's identical completions) gets the
    first one's result, and one found in ``cache`` (earlier calls) is not sent
    to a worker at all; new results that do not depend on the machine go into
    ``cache``.
    """
    keys = [
        VerdictCache.check_key(text, truth, constants, pool.limits, details=False)
        for text, truth, constants in checks
    ]
    known: dict[int, CheckResult] = {}
    first: dict[bytes, int] = {}
    todo: list[int] = []
    for index, key in enumerate(keys):
        if key is not None:
            hit = cache.get(key) if cache is not None else None
            if hit is not None:
                assert isinstance(hit, CheckResult)
                known[index] = hit
                continue
            if key in first:
                continue  # resolved from the first of its kind below
            first[key] = index
        todo.append(index)
    distinct = [checks[i] for i in todo]
    outcome: Outcome
    if isinstance(pool, SchedulingPool):  # the machine's shared pool runs the schedule itself
        outcome = await pool.run_schedule(distinct, schedule)
    else:
        outcome = await run_schedule(pool, distinct, schedule)
    # The call's counts are per completion: a check stands for its duplicates too.
    copies = Counter(
        first[key] if key is not None and i not in known else i for i, key in enumerate(keys)
    )
    outcome.retried = sum(copies[todo[j]] for j in outcome.late)
    outcome.past_deadline = sum(copies[todo[j]] for j in outcome.undecided)
    for index, result in zip(todo, outcome.results, strict=True):
        known[index] = result
        key = keys[index]
        if cache is not None and key is not None:
            cache.put(key, result)
    results: list[CheckResult] = []
    for index, key in enumerate(keys):
        if index not in known:
            assert key is not None  # only a keyed check is left out as a duplicate
            index = first[key]
        results.append(known[index])
    outcome.results = results
    outcome.statuses = Counter(r.status.value for r in outcome.results)
    return outcome


async def run_schedule(pool: Checker, checks: list[Check], schedule: Schedule) -> Outcome:
    """Verify distinct ``checks`` in rounds of growing budgets, in order, within the deadline."""
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
            outcome.late = list(pending)
        outcome.rounds += 1
        budget *= 2
    for index in pending:
        results[index] = CheckResult(
            Status.TIMEOUT,
            f"undecided at the reward call's deadline ({schedule.deadline_s:g} s)",
            elapsed_ms=(anyio.current_time() - start) * 1000.0,
        )
    outcome.undecided = list(pending)
    outcome.retried, outcome.past_deadline = len(outcome.late), len(pending)
    outcome.results = [r for r in results if r is not None]
    outcome.statuses.update(r.status.value for r in outcome.results)
    return outcome
