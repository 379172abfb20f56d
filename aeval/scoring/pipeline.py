"""The scoring pipeline: answer lines → verifier → verdicts → store and events.

Knows nothing of batches or files. Whatever obtains an answer (a batch shard's
result file, a direct request, a line of a file given to ``rescore``) hands it
to :meth:`Scoring.submit`; the pipeline checks it against its row's ground
truth in the verifier pool and appends the verdict to the store the moment it
exists: a run's :class:`~aeval.store.RunStore`, or whatever else keeps
verdicts (:class:`VerdictStore`; ``rescore`` keeps them in memory). Per job
(model, trial) it counts the verdicts still on their way, so a job is reported
finished only after all of them are written.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import anyio
from anyio.abc import ObjectReceiveStream, ObjectSendStream

from aeval.dataset import Truth, TruthTable
from aeval.events import Event, VerdictProduced, VerifierPace
from aeval.feedback import split_round
from aeval.scoring.responses import (
    Response,
    api_error_verdict,
    published_unanswered,
    score_response,
)
from aeval.verdicts import Status, Verdict
from aeval.verify.checker import Checker

__all__ = ["Scoring", "VerdictStore"]

# Checkers per verifier worker (the pool bounds real concurrency): twice as many
# keeps every worker busy while results travel back.
_CHECKERS_PER_WORKER = 2


def _one_round(request_id: str) -> tuple[str, int]:
    return request_id, 1


class VerdictStore(Protocol):
    """Where the pipeline's verdicts go (a run's :class:`~aeval.store.RunStore` is one)."""

    def has_verdict(self, model: str, trial: int, custom_id: str) -> bool: ...

    def append_verdict(self, verdict: Verdict) -> bool:
        """Keep ``verdict``; ``False`` (nothing kept) when its answer has one already."""
        ...


StoreT = TypeVar("StoreT", bound=VerdictStore)


@dataclass(frozen=True, slots=True)
class _Work:
    response: Response
    truth: Truth
    model: str
    trial: int
    shard: int


class _Pending:
    """How many verdicts of one job are still on their way to the store."""

    def __init__(self) -> None:
        self.count = 0
        self._drained = anyio.Condition()

    def add(self) -> None:
        self.count += 1

    async def done(self) -> None:
        self.count -= 1
        # Only reaching zero wakes anyone, so only then is the lock taken (1.7 µs a
        # verdict when taken on every one, against 0.05 µs). A waiter holds the lock
        # from its check until wait() releases it, so this notify cannot miss it.
        if self.count <= 0:
            async with self._drained:
                self._drained.notify_all()

    async def drained(self) -> None:
        async with self._drained:
            while self.count > 0:
                await self._drained.wait()


class Scoring(Generic[StoreT]):
    """One run's (or rescore's) pipeline from answers to stored verdicts.

    :param queue: answers (and verdicts) waiting at most between the stages.
    :param measure_pace: measure the verifier's pace at the start (False when
        nothing is left to verify, e.g. a resume of a run whose verdicts are all in).
    :param checkers_per_worker: answers checked at once per verifier worker.
    :param rounds: the run's repair rounds; with more than one, a request id ``ID_rR``
        is item ``ID``'s round R (:func:`aeval.feedback.split_round`), and with one
        every id is an item's own.
    """

    def __init__(
        self,
        store: StoreT,
        truth: TruthTable,
        *,
        emit: Callable[[Event], None],
        published: bool,
        queue: int,
        measure_pace: bool = True,
        checkers_per_worker: int = _CHECKERS_PER_WORKER,
        rounds: int = 1,
    ) -> None:
        self.store = store
        self._split: Callable[[str], tuple[str, int]] = split_round if rounds > 1 else _one_round
        self.truth = truth
        self._emit = emit
        self._published = published
        self._queue = queue
        self._measure = measure_pace
        self._checkers_per_worker = checkers_per_worker
        self._pending: dict[tuple[str, int], _Pending] = {}
        self._work: ObjectSendStream[_Work] | None = None
        self._verdicts: ObjectSendStream[tuple[Verdict, int]] | None = None
        # Told every verdict stored (before its job's count goes down): direct mode's
        # repair rounds send an item's next request the moment its verdict is known.
        self.on_verdict: Callable[[Verdict], None] | None = None

    # -- what a driver calls ------------------------------------------------------

    def wants(self, model: str, trial: int, custom_id: str) -> bool:
        """Whether an answer to ``custom_id`` would be scored (a known row with no verdict yet)."""
        return self._split(custom_id)[0] in self.truth and not self.store.has_verdict(
            model, trial, custom_id
        )

    async def submit(self, response: Response, model: str, trial: int, shard: int) -> None:
        """Score one answer of ``model``'s trial: an error reply becomes its ``api_error``
        verdict, any other is checked in the verifier pool. An answer to an unknown row,
        or to one that has its verdict already, is ignored."""
        cid = response.custom_id
        item, rnd = self._split(cid)  # a repair round's request id names its item
        truth = self.truth.get(item)
        if truth is None or self.store.has_verdict(model, trial, cid):
            return
        if response.is_error:
            verdict = truth.stamp(
                api_error_verdict(response, model=model, trial=trial, tier=truth.tier)
            )
            if rnd != 1:
                verdict = dataclasses.replace(verdict, round=rnd)
            if self._published:
                # An error line has no answer, so the study's evaluator counted it
                # incorrect (as score_response does); left empty, the published rate
                # would leave the error rows out.
                verdict = dataclasses.replace(verdict, **published_unanswered())
            await self.record(verdict, shard)
            return
        assert self._work is not None, "submit() is only called while run() runs"
        self.pending(model, trial).add()
        await self._work.send(_Work(response, truth, model, trial, shard))

    async def record(self, verdict: Verdict, shard: int) -> None:
        """Store a verdict made without the verifier (an error, a missing answer)."""
        assert self._verdicts is not None, "record() is only called while run() runs"
        self.pending(verdict.model, verdict.trial).add()
        await self._verdicts.send((verdict, shard))

    def unanswered(
        self, model: str, trial: int, ids: frozenset[str], status: Status, reason: str
    ) -> Iterator[Verdict]:
        """A ``status`` verdict for each of ``ids`` (in order) that has none in the store yet.

        Lazy: the store is asked about each id only when its turn comes.
        """
        published = published_unanswered() if self._published else {}
        for cid in sorted(ids):
            if not self.store.has_verdict(model, trial, cid):
                item, rnd = self._split(cid)
                truth = self.truth.get(item)
                verdict = Verdict(
                    model=model,
                    trial=trial,
                    custom_id=cid,
                    round=rnd,
                    status=status,
                    reason=reason,
                    tier=truth.tier if truth else None,
                    **published,
                )
                yield truth.stamp(verdict) if truth else verdict

    def pending(self, model: str, trial: int) -> _Pending:
        return self._pending.setdefault((model, trial), _Pending())

    async def drained(self, model: str, trial: int) -> None:
        """Wait until every verdict of the job submitted so far is written."""
        await self.pending(model, trial).drained()

    # -- running ------------------------------------------------------------------

    async def run(
        self,
        pool: Checker,
        drive: Callable[[], Awaitable[None]],
        *,
        pace_pool: Checker | None = None,
    ) -> None:
        """Run ``drive`` (which submits answers) with the pipeline open; return once
        every verdict it caused is written.

        :param pace_pool: where the start-up pace is measured (default ``pool``):
            the pool itself when ``pool`` answers from a verdict cache, whose hits
            would make the verifier look faster than it is.

        drive → (bounded) work stream → checkers → (bounded) verdict stream → writer.
        """
        work_send, work_recv = anyio.create_memory_object_stream[_Work](self._queue)
        verdict_send, verdict_recv = anyio.create_memory_object_stream[tuple[Verdict, int]](
            self._queue
        )
        checkers = max(1, pool.workers * self._checkers_per_worker)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._write_verdicts, verdict_recv)
            if self._measure:
                tg.start_soon(self._measure_pace, pace_pool or pool, checkers)
            async with verdict_send, anyio.create_task_group() as checks:
                for _ in range(checkers):
                    checks.start_soon(self._check, pool, work_recv.clone(), verdict_send.clone())
                work_recv.close()
                async with work_send:
                    self._work, self._verdicts = work_send, verdict_send
                    try:
                        await drive()
                    finally:
                        self._work = self._verdicts = None

    async def _measure_pace(self, pool: Checker, checkers: int) -> None:
        """Score some of the run's ground truths, each against itself, as the checkers
        would score answers, and tell the subscribers the pool's steady pace
        (:class:`VerifierPace`).

        The pool sits idle while a batch runs, so this costs the run next to nothing,
        and it is the only way to know before the first answer how long verifying
        will take (on the offline demo, a sixth of the run, all of it at the end).
        The first ``checkers`` completions warm the workers and are not counted;
        the pace is the next ``3 * checkers`` over the time they took. Rows are
        spread evenly over the dataset; an answer that arrives meanwhile waits for
        at most a few of these checks. Never cancelled (a check cancelled mid-way
        kills its worker).
        """
        ids = self.truth.ids()
        if not ids:
            return
        count = 4 * checkers
        rows = iter([ids[i * len(ids) // count] for i in range(count)])
        done: list[float] = []

        async def checker() -> None:
            for cid in rows:  # one shared iterator: each row is scored once
                truth = self.truth[cid]
                answer = Response(custom_id=cid, content=f"<answer>{truth.answer}</answer>")
                await score_response(
                    pool, answer, truth=truth.answer, constants=truth.constants, trial=1
                )
                done.append(time.perf_counter())

        async with anyio.create_task_group() as tg:
            for _ in range(checkers):
                tg.start_soon(checker)
        if len(done) > checkers:
            span = done[-1] - done[checkers - 1]
            self._emit(VerifierPace(answers_per_s=(len(done) - checkers) / max(span, 1e-6)))

    async def _write_verdicts(self, verdicts: ObjectReceiveStream[tuple[Verdict, int]]) -> None:
        async with verdicts:
            async for verdict, shard in verdicts:
                if self.store.append_verdict(verdict):
                    self._emit(VerdictProduced(verdict=verdict, shard=shard))
                    if self.on_verdict is not None:
                        self.on_verdict(verdict)
                await self.pending(verdict.model, verdict.trial).done()

    async def _check(
        self,
        pool: Checker,
        work: ObjectReceiveStream[_Work],
        verdicts: ObjectSendStream[tuple[Verdict, int]],
    ) -> None:
        async with work, verdicts:
            async for item in work:
                verdict = await score_response(
                    pool,
                    item.response,
                    truth=item.truth.answer,
                    constants=item.truth.constants,
                    trial=item.trial,
                    model=item.model,
                    tier=item.truth.tier,
                )
                rnd = self._split(verdict.custom_id)[1]
                if rnd != 1:
                    verdict = dataclasses.replace(verdict, round=rnd)
                await verdicts.send((item.truth.stamp(verdict), item.shard))
