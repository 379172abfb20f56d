"""EquivalenceReward: the evaluation's Z3 judge as a reward function (TRL GRPOTrainer contract).

TRL calls a reward function as ``func(prompts=…, completions=…,
completion_ids=…, trainer_state=…, **columns)``, where ``columns`` are the
dataset's other columns, one value per completion, and logs it under
``func.__name__``. A plain function is called synchronously; one that
``asyncio.iscoroutinefunction`` recognises is awaited in TRL's own event loop
(see :meth:`EquivalenceReward.as_async`).
"""

from __future__ import annotations

import functools
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from aeval.errors import ConfigError
from aeval.reward.batcher import MicroBatcher
from aeval.reward.runtime import Pool, PoolRuntime
from aeval.reward.schedule import Check, Outcome, Schedule, check_all
from aeval.reward.scores import Reading, RewardScores, completion_text, is_correct, well_formed
from aeval.verdicts import CheckResult
from aeval.verify.cache import DEFAULT_MAX_ENTRIES, VerdictCache
from aeval.verify.limits import DEFAULT_LIMITS, VerifyLimits

__all__ = ["EquivalenceReward", "RewardStats"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RewardStats:
    """What one reward call did, for logging (``reward.last_stats`` or ``on_stats``)."""

    completions: int
    correct: int
    mean_score: float
    statuses: dict[str, int]  # verdict status -> count
    elapsed_s: float
    retried: int  # checks that outlived the first round's budget
    past_deadline: int  # completions scored as timeout because the call's deadline passed


def _column(kwargs: Mapping[str, Any], key: str, size: int) -> list[str]:
    values = kwargs.get(key)
    if values is None:
        present = ", ".join(sorted(k for k in kwargs if k not in ("trainer_state",))) or "none"
        raise ConfigError(
            f"EquivalenceReward needs the dataset column {key!r} (one value per completion); "
            f"the columns passed were: {present}"
        )
    # Lists from TRL; tuples and numpy arrays (verl) are fine too.
    if isinstance(values, str | bytes | Mapping) or not hasattr(values, "__len__"):
        raise ConfigError(
            f"EquivalenceReward: column {key!r} must be a list with one value per completion, "
            f"got {type(values).__name__}"
        )
    if len(values) != size:
        raise ConfigError(
            f"EquivalenceReward: column {key!r} has {len(values)} values for {size} completions"
        )
    return ["" if v is None else str(v) for v in values]


class EquivalenceReward:
    """A reward function that scores each completion by Z3 equivalence with its row's truth.

    :param reading: ``"strict"`` (default; an answer that needed a lenient
        repair is not correct, so a policy is not taught broken syntax) or
        ``"lenient"`` (repaired answers are correct, less ``repair_penalty``).
    :param scores: what each outcome is worth (:class:`RewardScores`).
    :param limits: per-check budgets; default: the evaluation's.
    :param workers: verifier processes; default: the CPU count.
    :param deadline_s: a call's deadline (default: the per-check hard budget,
        ``limits.timeout_s``): checks that outlived their first budget and are
        still undecided then score as timeout (``RewardScores.undecided``).
    :param first_budget_s: the first round's per-check budget (see
        :mod:`aeval.reward.schedule`).
    :param name: ``__name__``, which TRL logs the reward under.
    :param on_stats: called with each call's :class:`RewardStats`.
    :param ray_address: verify on this Ray cluster (an address or ``"auto"``;
        see :func:`aeval.verify.checker.open_checker`), ``workers`` per node;
        default: on this machine.
    :param shared_pool: check in the machine's one shared pool
        (:mod:`aeval.reward.node_pool`), started by the first reward process
        that needs it and used by every reward process of this user on the
        machine with the same ``limits`` and ``workers``, instead of a pool of
        this process's own; ignored with ``ray_address``.
    :param cache_entries: verdicts remembered across calls (each distinct answer
        to a row is checked once; least recently used go first); 0: none kept
        (a call's duplicates are still checked once).

    Call it as TRL does, ``reward(prompts=…, completions=…, answer=[…],
    constants=[…])``, from any thread, with or without a running event loop
    (it blocks the calling thread); ``await reward.score_async(…)`` in async
    code. The worker pool starts on first use and lives until :meth:`close`,
    the end of a ``with`` block, garbage collection or interpreter exit.
    """

    def __init__(
        self,
        *,
        reading: Reading = "strict",
        scores: RewardScores | None = None,
        limits: VerifyLimits = DEFAULT_LIMITS,
        workers: int | None = None,
        deadline_s: float | None = None,
        first_budget_s: float = 0.5,
        name: str = "aeval_equivalence",
        on_stats: Callable[[RewardStats], None] | None = None,
        ray_address: str | None = None,
        cache_entries: int = DEFAULT_MAX_ENTRIES,
        shared_pool: bool = False,
    ) -> None:
        if reading not in ("strict", "lenient"):
            raise ConfigError(f"reading must be 'strict' or 'lenient', got {reading!r}")
        deadline = limits.timeout_s if deadline_s is None else deadline_s
        if not deadline > 0 or not first_budget_s > 0:
            raise ConfigError(
                f"deadline_s and first_budget_s must be positive, got {deadline!r} "
                f"and {first_budget_s!r}"
            )
        if workers is not None and workers < 1:
            raise ConfigError(f"EquivalenceReward needs at least one worker, got {workers}")
        self.reading: Reading = reading
        self.scores = scores if scores is not None else RewardScores()
        self.limits = limits
        self.schedule = Schedule(deadline_s=deadline, first_budget_s=first_budget_s)
        self.__name__ = name
        self.on_stats = on_stats
        self.last_stats: RewardStats | None = None
        self._settings: dict[str, Any] = {
            "reading": reading,
            "scores": scores,
            "limits": limits,
            "workers": workers,
            "deadline_s": deadline_s,
            "first_budget_s": first_budget_s,
            "name": name,
            "on_stats": on_stats,
            "ray_address": ray_address,
            "cache_entries": cache_entries,
            "shared_pool": shared_pool,
        }
        self._runtime = PoolRuntime(limits, workers, ray_address, shared=shared_pool)
        self._cache = VerdictCache(cache_entries) if cache_entries > 0 else None
        self._batchers: dict[tuple[int, float], MicroBatcher] = {}
        self._batchers_lock = threading.Lock()
        # Kills the workers when the reward is collected or the interpreter exits,
        # without the finaliser keeping the reward alive.
        self._finalizer = weakref.finalize(self, self._runtime.close)

    # -- pickling: TRL's async GRPO trainer sends its reward functions to a spawned process

    def __getstate__(self) -> dict[str, Any]:
        # The settings only: the pool, its thread and the verdict cache belong to
        # this process; the copy starts its own on first use.
        return dict(self._settings)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(**state)  # type: ignore[misc]  # a fresh reward with the same settings

    # -- the trainer-facing contract ----------------------------------------------------

    def __call__(
        self,
        prompts: Sequence[object] | None = None,
        completions: Sequence[object] | None = None,
        **kw: object,
    ) -> list[float]:
        """Score ``completions`` (TRL's synchronous contract); blocks until done or the deadline."""
        checks, texts = self._checks(completions, kw)
        started = time.perf_counter()
        outcome = self._runtime.call(lambda pool: self._check(pool, checks))
        return self._finish(outcome, texts, started)

    async def score_async(
        self,
        prompts: Sequence[object] | None = None,
        completions: Sequence[object] | None = None,
        **kw: object,
    ) -> list[float]:
        """Score ``completions`` without blocking the calling event loop (asyncio or trio)."""
        checks, texts = self._checks(completions, kw)
        started = time.perf_counter()
        outcome = await self._runtime.call_async(lambda pool: self._check(pool, checks))
        return self._finish(outcome, texts, started)

    async def check_many_async(self, checks: Sequence[Check]) -> list[CheckResult]:
        """The verdicts of ``(response, truth, constants)`` checks, as one reward call.

        The building block of the batched entry points (verl's
        ``compute_score_async``, ``aeval serve-reward``): one deadline for all
        of them, and :attr:`last_stats` / ``on_stats`` as for any call.
        """
        batch = list(checks)
        return await self._runtime.call_async(lambda pool: self.verdicts_in_pool(pool, batch))

    async def verdicts_in_pool(self, pool: Pool, checks: list[Check]) -> list[CheckResult]:
        """The verdicts of ``checks`` as one reward call, run in the pool's own loop.

        For code that already runs there (:meth:`run_in_pool`, the batcher's
        chunks); :attr:`last_stats` / ``on_stats`` as for any call.
        """
        started = time.perf_counter()
        outcome = await self._check(pool, checks)
        self._finish(outcome, [c[0] for c in checks], started)
        return outcome.results

    async def run_in_pool(self, func: Callable[[Pool], Awaitable[T]]) -> T:
        """``await func(pool)`` in the pool's event loop (started if need be), from any loop.

        Cancelling the caller cancels ``func`` there with an anyio cancellation,
        which shielded scopes inside ``func`` hold off.
        """
        return await self._runtime.call_async(func)

    def batcher(self, max_batch: int, max_wait_s: float) -> MicroBatcher:
        """This reward's batcher for these chunk settings (one per reward and setting)."""
        with self._batchers_lock:
            batcher = self._batchers.get((max_batch, max_wait_s))
            if batcher is None:
                batcher = MicroBatcher(self, max_batch=max_batch, max_wait_s=max_wait_s)
                self._batchers[max_batch, max_wait_s] = batcher
            return batcher

    def as_async(self) -> Callable[..., Awaitable[list[float]]]:
        """A coroutine function scoring with this reward, for TRL's async reward paths.

        ``inspect.iscoroutinefunction`` recognises it (TRL awaits it in its own
        loop), it pickles with the reward's settings (TRL's async GRPO trainer
        sends reward functions to a spawned process, which then starts its own
        pool), and it carries the reward's ``__name__``. It is a
        ``functools.partial`` of a module-level coroutine function, the one
        picklable form Python 3.11 recognises as a coroutine function; TRL's
        ``get_callable_name`` unwraps a partial, so TRL logs it as
        ``aeval_equivalence`` whatever ``name`` says.
        """
        func = functools.partial(aeval_equivalence, self)
        func.__name__ = self.__name__  # type: ignore[attr-defined]  # older TRL reads __name__
        return func

    def check_one(self, response: str | None, truth: str, constants: str) -> CheckResult:
        """The verdict of one response, through the same pool and deadline."""
        outcome = self._runtime.call(lambda pool: self._check(pool, [(response, truth, constants)]))
        return outcome.results[0]

    def score_one(self, response: str | None, truth: str, constants: str) -> float:
        """The reward of one response (what verl's ``compute_score`` returns)."""
        return self.score_of(self.check_one(response, truth, constants), response)

    def score_of(self, check: CheckResult, response: str | None) -> float:
        """The reward of a verdict: the one mapping every entry point uses."""
        formatted = self.scores.format_credit != 0 and well_formed(response)
        return self.scores.score(check, self.reading, formatted)

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def worker_pids(self) -> tuple[int, ...]:
        """Process ids of the live verifier workers (empty when the pool is not running)."""
        return self._runtime.pids

    @property
    def pool_server_pid(self) -> int | None:
        """With ``shared_pool``: the process id of the machine's pool server, once connected."""
        return self._runtime.server_pid

    def close(self) -> None:
        """Kill the worker processes and stop the pool's thread. The next call starts them again."""
        self._runtime.close()

    def __enter__(self) -> EquivalenceReward:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"EquivalenceReward(name={self.__name__!r}, reading={self.reading!r}, "
            f"scores={self.scores!r}, deadline_s={self.schedule.deadline_s!r})"
        )

    # -- internals ------------------------------------------------------------------------

    def _checks(
        self, completions: Sequence[object] | None, kw: Mapping[str, object]
    ) -> tuple[list[Check], list[str | None]]:
        if completions is None or isinstance(completions, str):
            raise ConfigError(
                "EquivalenceReward needs completions=[…] (strings or chat message lists)"
            )
        texts = [completion_text(c) for c in completions]
        truths = _column(kw, "answer", len(texts))
        constants = _column(kw, "constants", len(texts))
        return list(zip(texts, truths, constants, strict=True)), texts

    async def _check(self, pool: Pool, checks: list[Check]) -> Outcome:
        return await check_all(pool, checks, self.schedule, self._cache)

    def _finish(self, outcome: Outcome, texts: list[str | None], started: float) -> list[float]:
        scores = [self.score_of(c, t) for c, t in zip(outcome.results, texts, strict=True)]
        stats = RewardStats(
            completions=len(scores),
            correct=sum(is_correct(c, self.reading) for c in outcome.results),
            mean_score=sum(scores) / len(scores) if scores else 0.0,
            statuses=dict(sorted(outcome.statuses.items())),
            elapsed_s=time.perf_counter() - started,
            retried=outcome.retried,
            past_deadline=outcome.past_deadline,
        )
        self.last_stats = stats
        if self.on_stats is not None:
            self.on_stats(stats)
        return scores


async def aeval_equivalence(
    reward: EquivalenceReward,
    prompts: Sequence[Any] | None = None,
    completions: Sequence[Any] | None = None,
    **kw: Any,
) -> list[float]:
    """``reward.score_async(…)``: what :meth:`EquivalenceReward.as_async` binds ``reward`` to."""
    return await reward.score_async(prompts, completions, **kw)
