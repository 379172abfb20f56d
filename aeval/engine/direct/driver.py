"""The direct driver: one request per answer to a completion route, answers to scoring.

One of the two :class:`~aeval.engine.drivers.Driver` implementations, beside
:class:`~aeval.engine.batch_driver.BatchDriver`, and sharing everything but how
an answer arrives: the same request files (:func:`plan_shards`), the same
:meth:`Scoring.submit <aeval.scoring.pipeline.Scoring.submit>` pipeline, the same
events, store and hold (:func:`aeval.engine.drivers.watch_hold`). Each request
is sent by :class:`~aeval.engine.direct.client.DirectClient`; its answer (or
failure) is appended to the job's answer file
(:mod:`aeval.engine.direct.answer_files`) and flushed before it is scored.

- **Fair and bounded.** Twice ``max_connections`` senders take requests from one
  queue that interleaves every job (model × trial) in turn, and every request
  holds a slot of one shared :class:`~aeval.engine.direct.aimd.AimdLimiter`: no job
  waits for another to finish, and the server never sees more than the limit. A
  slot is given back as soon as its answer is in; a spare sender, its request in
  hand, takes it at once, while the answer's own sender writes it down.
- **Generation never waits for verification** (up to :data:`AHEAD` answers): the
  answers go to scoring through a buffer, in the order they came.
- **Never asked twice.** A request is sent only when its job's answer file has
  no line for it and the store no verdict; a line already there without a
  verdict (killed in between) is scored without asking again. Only requests in
  flight when the process died are sent again.
- **Cancel.** ``Run.cancel()`` stops at once (in-flight requests are sent again
  on resume). ``python -m aeval cancel`` puts the directory on hold: the live
  run sends nothing new, lets its in-flight requests finish and record their
  answers, and gives every request it did not send a provisional ``api_error``
  (not in ``verdicts.jsonl``: ``resume --submit`` sends them).
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import ObjectReceiveStream, ObjectSendStream

from aeval.batch.providers.registry import missing_key_error
from aeval.batch.shard import read_request_lines
from aeval.config import RunConfig, resolve_credentials
from aeval.engine.direct.aimd import AimdLimiter
from aeval.engine.direct.answer_files import AnswerFile
from aeval.engine.direct.client import DirectClient, NoAnswer
from aeval.engine.planning import JobContinue, job_continuer, request_ids
from aeval.engine.rounds import feedback_of, slim_record, verdict_feedback
from aeval.errors import UnreachableError
from aeval.events import BatchPhase, Event, JobFinished, RetryScheduled, ShardUpdated
from aeval.feedback import Turn, is_repairable, round_custom_id, split_round
from aeval.scoring.responses import Response
from aeval.store import ShardRecord
from aeval.store.hold import Submit
from aeval.verdicts import Status, Verdict

if TYPE_CHECKING:
    from aeval.engine.driver_context import DriverContext

__all__ = ["PROGRESS_EVERY_S", "DirectDriver", "open_client"]

# How often a job's progress event goes out while answers arrive (and once at its end).
PROGRESS_EVERY_S = 0.25
# Senders per slot of ``--max-connections``: with one per slot, a slot freed as its answer
# arrived stayed empty until that sender had written the answer down and fetched its next
# request (an uncapped 300 ms server held at 29.4 of 32 on average).
SENDERS_PER_SLOT = 2
# How many answers (already on disk) may wait for the verifier's queue before senders
# wait too. Generation and verification compete for the same CPUs; without this slack
# a verifier that falls behind for a moment (a burst of slow Z3 checks, the published
# reading's z3 processes) holds senders back and leaves the server idle. About 1.5 KB
# each: a few MB at most, so memory stays flat over any number of requests.
AHEAD = 2048


def open_client(
    config: RunConfig, limiter: AimdLimiter, emit: Callable[[Event], None]
) -> DirectClient:
    """The run's direct client, with its credentials (else the environment's).

    :raises ConfigError: no API key anywhere.
    """
    creds = config.given_credentials() or resolve_credentials()
    if creds is None:
        raise missing_key_error(
            "openai",
            "for the server to ask (any key works for a server that checks none)",
            "'python -m aeval run --api direct' with no key runs the offline demo",
        )
    return DirectClient(
        creds,
        endpoint=config.endpoint,
        timeout=config.request_timeout,
        retry=config.retry,
        limiter=limiter,
        on_retry=lambda n, model, trial: emit(
            RetryScheduled(
                model=model,
                trial=trial,
                shard=None,
                operation=n.operation,
                attempt=n.attempt,
                delay_s=n.delay_s,
                error=n.error,
            )
        ),
    )


@dataclass(eq=False)
class _Job:
    """One (model, trial): its answer file, what is left to send, and its counts."""

    model: str
    trial: int
    shard: int  # the first shard's number: the job's one row in the live view
    records: list[ShardRecord]
    answers: AnswerFile
    total: int
    to_send: set[str] = field(default_factory=set)
    requests: Iterator[tuple[str, dict[str, Any]]] = field(default_factory=lambda: iter(()))
    answered: int = 0  # lines with an answer (this run and before)
    failed: int = 0  # lines with an error
    in_flight: int = 0
    ahead: int = 0  # answers written, waiting to be handed to scoring
    no_answer: dict[str, str] = field(default_factory=dict)  # custom_id -> why (no HTTP answer)
    output_tokens: int = 0
    done: anyio.Event = field(default_factory=anyio.Event)
    last_event: float = 0.0
    # Repair rounds (--rounds): requests of later rounds ready to send (sent before the
    # first round's next ones), answers scored whose verdict may ask another round, the
    # text of those answers, and the body sent under each request id whose verdict may
    # ask another round (the next round's body is it with one more turn).
    ready: deque[tuple[str, dict[str, Any]]] = field(default_factory=deque)
    awaiting: int = 0
    answer_text: dict[str, str] = field(default_factory=dict)
    bodies: dict[str, dict[str, Any]] = field(default_factory=dict)

    def count(self, response: Response) -> None:
        if response.is_error:
            self.failed += 1
        else:
            self.answered += 1
            self.output_tokens += response.completion_tokens or 0

    def event(self, phase: BatchPhase = "in_progress") -> ShardUpdated:
        # The job is one synthetic shard to the display: its counts, pace and ETA
        # are shown exactly as a batch's, plus what only direct mode has.
        return ShardUpdated(
            model=self.model,
            trial=self.trial,
            shard=self.shard,
            phase=phase,
            completed=self.answered,
            failed=self.failed,
            total=self.total,
            in_flight=self.in_flight,
            output_tokens=self.output_tokens,
        )


def _read_requests(path: Path, wanted: set[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The (custom_id, body) of the request lines in ``wanted``, read lazily."""
    for line in read_request_lines(path):
        if line["custom_id"] in wanted:
            yield line["custom_id"], line["body"]


class DirectDriver:
    """Obtains a run's answers by direct requests (a :class:`~aeval.engine.drivers.Driver`).

    :param client: the run's direct client (closed by whoever opened it).
    """

    def __init__(self, client: DirectClient) -> None:
        self.client = client

    def announce(self, ctx: DriverContext, records: list[ShardRecord]) -> None:
        """Nothing yet: each job says where it stands when it opens (its answer file read)."""

    async def run_jobs(self, ctx: DriverContext, records: list[ShardRecord]) -> None:
        """Every job's requests sent (interleaved), answered, scored; then each job ends.

        While ``ctx.submit()`` is not ``CREATE`` nothing is sent (a cancelled run
        being collected, or a live one put on hold): the requests never sent get
        provisional ``api_error`` verdicts.
        """
        await _DirectJobs(self.client, ctx).run(records)

    async def on_hold(self, ctx: DriverContext) -> None:
        """Nothing more: the senders stop at ``ctx.submit()``; requests in flight finish
        and are recorded."""


class _DirectJobs:
    """One run's jobs by direct requests: one queue interleaving them, twice
    ``max_connections`` senders, the answers to scoring through a buffer."""

    def __init__(self, client: DirectClient, ctx: DriverContext) -> None:
        self.client = client
        self.scoring = ctx.scoring
        self._config = ctx.config
        self._emit = ctx.emit
        self._stop = ctx.stop
        self._ctx = ctx
        self._answered_once = False  # any HTTP answer in this process: no connect deadline
        self._queue: deque[_Job] = deque()
        self._ahead: ObjectSendStream[tuple[_Job, Response]] | None = None
        self._senders_done = False
        self._rounds = ctx.config.rounds
        self._jobs: list[_Job] = []
        self._by_job: dict[tuple[str, int], _Job] = {}
        self._extend: dict[str, JobContinue] = {}
        self._wake = anyio.Event()  # set when a repair round's request may be ready
        if self._rounds > 1:
            ctx.scoring.on_verdict = self._on_verdict

    # -- the jobs -----------------------------------------------------------------

    async def run(self, records: list[ShardRecord]) -> None:
        trials = range(1, self._config.trials + 1)
        jobs = [await self._open_job(m, t, records) for m in self._config.models for t in trials]
        try:
            self._queue = deque(j for j in jobs if j.to_send)
            send, receive = anyio.create_memory_object_stream[tuple[_Job, Response]](AHEAD)
            async with anyio.create_task_group() as tg:
                for job in jobs:
                    tg.start_soon(self._finish_job, job)
                tg.start_soon(self._forward, receive)
                async with send, anyio.create_task_group() as senders:
                    self._ahead = send
                    senders_n = SENDERS_PER_SLOT * self._config.max_connections
                    for _ in range(senders_n if self._queue or self._rounds > 1 else 0):
                        senders.start_soon(self._sender)
                self._senders_done = True  # what was not sent by now never will be
                for job in jobs:
                    self._check_done(job)
        finally:
            for job in jobs:
                job.answers.close()

    async def _open_job(self, model: str, trial: int, records: list[ShardRecord]) -> _Job:
        store = self.scoring.store
        roots = sorted(
            (r for r in records if (r.model, r.trial) == (model, trial) and r.parent is None),
            key=lambda r: r.shard,
        )
        answers = AnswerFile(store.layout.direct_answers(model, trial))

        def read() -> tuple[list[list[str]], list[Response]]:
            ids = [request_ids(store.path(r.input_path), r.sha256) for r in roots]
            return ids, list(answers.open())

        ids, earlier = await anyio.to_thread.run_sync(read)
        job = _Job(model, trial, roots[0].shard if roots else 0, roots, answers, sum(map(len, ids)))
        self._by_job[(model, trial)] = job
        self._jobs.append(job)
        if self._rounds > 1:
            self._extend.setdefault(model, job_continuer(self._config, model))
            await anyio.to_thread.run_sync(self._resume_rounds, job, earlier)
        for response in earlier:
            job.count(response)
            # Answered before a crash, not scored yet: scored now, never asked again.
            self._expect_verdict(job, response)
            await self.scoring.submit(response, model, trial, job.shard)
        scoring = self.scoring
        for rec, rec_ids in zip(roots, ids, strict=True):
            wanted = {
                c for c in rec_ids if c not in answers.answered and scoring.wants(model, trial, c)
            }
            job.to_send |= wanted
            job.requests = itertools.chain(
                job.requests, _read_requests(store.path(rec.input_path), wanted)
            )
        self.scoring.pending(model, trial)
        self._check_done(job)
        self._emit(job.event())
        return job

    def _next(self) -> tuple[_Job, str, dict[str, Any]] | None:
        """The next request, taking the jobs in turn (one each, round and round)."""
        while self._queue and self._ctx.submit() is Submit.CREATE:
            job = self._queue.popleft()
            item = job.ready.popleft() if job.ready else next(job.requests, None)
            if item is None:
                continue  # this job has sent everything (a repair round puts it back)
            self._queue.append(job)
            return job, item[0], item[1]
        return None

    def _may_grow(self) -> bool:
        """Whether a job may still get a request: a repair round's, once an answer in
        flight or a verdict on its way says the item is wrong."""
        return (
            self._rounds > 1
            and self._ctx.submit() is Submit.CREATE
            and any(j.in_flight or j.ahead or j.awaiting or j.ready for j in self._jobs)
        )

    async def _wait_for_work(self) -> bool:
        """Wait until a request may be ready; False when none will come."""
        if not self._may_grow():
            return False
        await self._wake.wait()
        return True

    def _wake_senders(self) -> None:
        self._wake.set()
        self._wake = anyio.Event()

    async def _sender(self) -> None:
        config = self._config
        while True:
            item = self._next()
            if item is None:
                if await self._wait_for_work():
                    continue
                return
            job, cid, body = item
            if self._rounds > 1 and split_round(cid)[1] < self._rounds:
                job.bodies[cid] = body  # the next round's starts from it
            job.in_flight += 1
            try:
                line = await self.client.ask(
                    cid,
                    job.trial,
                    body,
                    connect_deadline_s=None
                    if self._answered_once
                    else config.retry.connect_deadline_s,
                )
            except UnreachableError as err:
                self._stop(err)  # no request can get through: end the run with this
                return
            except NoAnswer as err:
                job.bodies.pop(cid, None)
                job.to_send.discard(cid)
                job.no_answer[cid] = str(err)
                self._check_done(job)
                continue
            finally:
                job.in_flight -= 1
                if self._rounds > 1:
                    self._wake_senders()  # a sender waiting may be the last: let it look
            self._answered_once = True
            response = job.answers.append(cid, line)  # on disk before it is scored
            job.to_send.discard(cid)
            job.count(response)
            now = time.monotonic()
            if now - job.last_event >= PROGRESS_EVERY_S or not job.to_send:
                job.last_event = now
                self._emit(job.event())
            job.ahead += 1
            assert self._ahead is not None
            await self._ahead.send((job, response))

    async def _forward(self, answers: ObjectReceiveStream[tuple[_Job, Response]]) -> None:
        """Hand the answers to scoring in the order they came (waiting while the
        verifier's queue is full), so senders never wait for the verifier."""
        async with answers:
            async for job, response in answers:
                self._expect_verdict(job, response)
                await self.scoring.submit(response, job.model, job.trial, job.shard)
                job.ahead -= 1
                self._check_done(job)
                if self._rounds > 1:
                    self._wake_senders()  # perhaps the last answer that could ask more

    def _check_done(self, job: _Job) -> None:
        """Mark ``job`` done once every answer it will get is with scoring (and, with
        repair rounds, every verdict that could ask another round is in)."""
        if (not job.to_send or self._senders_done) and not job.ahead and not job.awaiting:
            job.done.set()

    # -- repair rounds --------------------------------------------------------------

    def _expect_verdict(self, job: _Job, response: Response) -> None:
        """Before ``response`` goes to scoring: if its verdict may ask another round,
        count it and keep its text (the next round's assistant turn)."""
        if self._rounds == 1:
            return
        cid = response.custom_id
        if split_round(cid)[1] >= self._rounds or not self.scoring.wants(job.model, job.trial, cid):
            return
        job.awaiting += 1
        if not response.is_error:
            job.answer_text[cid] = response.content or ""

    def _on_verdict(self, verdict: Verdict) -> None:
        """A verdict is stored: a repairable one below the last round puts the item's
        next request in its job's queue at once (no barrier between rounds)."""
        job = self._by_job.get((verdict.model, verdict.trial))
        if job is None or verdict.round >= self._rounds:
            return
        job.awaiting -= 1
        cid = verdict.custom_id
        answer = job.answer_text.pop(cid, None)
        body = job.bodies.pop(cid, None)
        if answer is not None and body is not None and is_repairable(verdict.status):
            item, rnd = split_round(cid)
            turn = Turn(answer, verdict_feedback(self._config, verdict))
            self._ask_next(
                job, round_custom_id(item, rnd + 1), self._extend[job.model](body, (turn,))
            )
        self._check_done(job)
        self._wake_senders()

    def _ask_next(self, job: _Job, cid: str, body: dict[str, Any]) -> None:
        """Queue a repair round's request (sent before the first round's next ones)."""
        job.ready.append((cid, body))
        job.to_send.add(cid)
        job.total += 1
        if job not in self._queue:
            self._queue.append(job)

    def _resume_rounds(self, job: _Job, earlier: list[Response]) -> None:
        """A resumed job's conversations where they stopped, rebuilt from its verdicts,
        its answer file and its first round's request file: every later-round request
        that was due and never answered is queued again (never one that has its
        answer), and an answer not scored yet keeps the body it was asked with."""
        answers = {r.custom_id: r for r in earlier}
        verdicts: dict[str, dict[int, dict[str, Any]]] = {}
        for record in self.scoring.store.iter_verdict_records():
            if record.get("model") == job.model and record.get("trial") == job.trial:
                item, rnd = split_round(str(record["custom_id"]))
                verdicts.setdefault(item, {})[rnd] = slim_record(record)
        # item -> (its round now, the turns before it, ask it now?)
        plans: dict[str, tuple[int, list[Turn], bool]] = {}
        for item in {*verdicts, *(split_round(cid)[0] for cid in answers)}:
            got, turns, rnd = verdicts.get(item, {}), [], 1
            while rnd in got:
                answer = answers.get(round_custom_id(item, rnd))
                record = got[rnd]
                if (
                    rnd >= self._rounds
                    or not is_repairable(str(record["status"]))
                    or answer is None
                    or answer.is_error
                ):
                    break
                turns.append(Turn(answer.content or "", feedback_of(self._config, record)))
                rnd += 1
            else:
                if round_custom_id(item, rnd) in answers:  # its verdict comes from scoring
                    if rnd < self._rounds:
                        plans[item] = (rnd, turns, False)
                elif rnd > 1:  # due, never answered: asked now
                    plans[item] = (rnd, turns, True)
        if not plans:
            return
        extend = self._extend[job.model]
        for rec in job.records:
            for line in read_request_lines(self.scoring.store.path(rec.input_path)):
                plan = plans.get(line["custom_id"])
                if plan is None:
                    continue
                rnd, turns, ask = plan
                body = extend(line["body"], turns) if turns else line["body"]
                cid = round_custom_id(line["custom_id"], rnd)
                if ask:
                    self._ask_next(job, cid, body)
                else:
                    job.bodies[cid] = body

    async def _finish_job(self, job: _Job) -> None:
        await job.done.wait()
        scoring = self.scoring
        problems: list[str] = []
        # Both kinds are for a later resume, not final: provisional verdicts only.
        unsent = [
            # the server could not be reached
            (
                job.no_answer,
                f"{len(job.no_answer)} request(s) got no answer "
                f"({next(iter(job.no_answer.values()), '')}); 'python -m aeval resume' asks again",
            ),
            # on hold: what was never sent is for a later 'resume --submit'
            (
                job.to_send,
                f"{len(job.to_send)} request(s) not sent: the run is on hold "
                "(cancelled); 'python -m aeval resume --submit' sends them",
            ),
        ]
        for ids, why in unsent:
            if ids:
                problems.append(why)
                for verdict in scoring.unanswered(
                    job.model, job.trial, frozenset(ids), Status.API_ERROR, why
                ):
                    self._ctx.provisional(verdict, job.shard)
        problem = "; ".join(problems)
        await scoring.drained(job.model, job.trial)
        store = scoring.store
        await store.save_shards(
            rec.evolve(
                status="done" if not problem else "failed",
                completed=job.answered,
                failed=job.failed,
                total=job.total,
                message=problem,
            )
            for rec in job.records
        )
        self._emit(job.event("done" if not problem else "cancelled"))
        if problem:
            self._ctx.job_failed(job.model, job.trial, problem)
        self._emit(JobFinished(model=job.model, trial=job.trial, ok=not problem, message=problem))
