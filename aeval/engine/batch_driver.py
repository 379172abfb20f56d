"""The batch driver: every job's shards through the batch API, their lines to scoring.

One of the two :class:`~aeval.engine.drivers.Driver` implementations
(:func:`~aeval.engine.drivers.open_driver` opens it with the run's providers).

Each (model, trial) job runs its shards concurrently. A shard is driven by
:class:`~aeval.batch.lifecycle.ShardLifecycle` (upload, create exactly once,
poll, download); each downloaded line is matched to its request and handed to
:meth:`aeval.scoring.pipeline.Scoring.submit`, or, when it failed for a reason
worth retrying (:func:`aeval.batch.retry.retryable_request`) and
``--retry-failed`` allows, set aside for a retry shard. Rows with no line at all
become ``missing``; a shard that cannot finish gives its rows ``api_error``.
Once ``cancel`` holds a live run, no batch is created and those this run
created meanwhile are cancelled, then collected like any terminal batch.
"""

from __future__ import annotations

import functools
import random
import typing
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from aeval.batch.lifecycle import BatchSetAside, ShardFailed, ShardLifecycle
from aeval.batch.providers.base import (
    TERMINAL_STATUSES,
    BatchProvider,
    RemoteBatch,
)
from aeval.batch.providers.registry import ProviderSet, open_providers
from aeval.batch.retry import RetryNotice, call_with_retries, retryable_request
from aeval.batch.shard import read_request_lines
from aeval.batch.transient import TransientApiError
from aeval.config import RunConfig
from aeval.engine.planning import job_continuer, request_ids, write_job_shards, write_subset
from aeval.engine.rounds import add_answers, round_feedback
from aeval.errors import (
    ApiError,
    ConfigError,
    InputFileError,
    RunDirError,
    UnreachableError,
)
from aeval.events import (
    BatchPhase,
    JobFinished,
    OutputDownloaded,
    RetryScheduled,
    ShardUpdated,
)
from aeval.feedback import Turn, round_custom_id, split_round
from aeval.scoring.responses import parse_batch_line
from aeval.store import RunStore, ShardRecord, shard_key, shard_stem
from aeval.store.cancel_failures import clear_cancel_failure, note_cancel_failure
from aeval.store.hold import HOLD_CHECK_S, Submit
from aeval.verdicts import Status

if TYPE_CHECKING:
    from aeval.engine.driver_context import DriverContext

__all__ = ["BatchDriver", "open_provider", "retry_event", "shard_event"]

# Batches a shard's lost-create search may take, and its results then show are another's,
# before the shard fails (a resume looks again): each is set aside, never taken again.
FOREIGN_LOOKS = 3

_PHASES: frozenset[str] = frozenset(typing.get_args(BatchPhase))


def shard_event(rec: ShardRecord, *, next_poll_at: float | None = None) -> ShardUpdated:
    """The event that tells subscribers where a shard is now (and when it is polled next)."""
    phase = typing.cast(BatchPhase, rec.status) if rec.status in _PHASES else "pending"
    return ShardUpdated(
        model=rec.model,
        trial=rec.trial,
        shard=rec.shard,
        phase=phase,
        batch_id=rec.batch_id,
        completed=rec.completed,
        failed=rec.failed,
        total=rec.total or rec.requests,
        created_at=rec.created_at,
        next_poll_at=next_poll_at,
        repair_round=rec.repair_round,
    )


def retry_event(rec: ShardRecord, notice: RetryNotice) -> RetryScheduled:
    """The event that tells subscribers a call of the shard is being retried."""
    return RetryScheduled(
        model=rec.model,
        trial=rec.trial,
        shard=rec.shard,
        operation=notice.operation,
        attempt=notice.attempt,
        delay_s=notice.delay_s,
        error=notice.error,
    )


def open_provider(config: RunConfig, provider: BatchProvider | None = None) -> ProviderSet:
    """The batch API of every provider the run's models name, with the run's credentials
    (else each provider's environment variables); ``provider``, when given, answers
    for every model instead.

    :raises ConfigError: a provider's key is missing (naming its variable).
    """
    if provider is not None:
        return ProviderSet({}, default=provider)
    try:
        return open_providers(config.models, config.credentials, config.retry)
    except ConfigError as err:
        raise ConfigError(
            f"{err}; 'python -m aeval' with no key at all runs the offline demo"
        ) from None


class _ShardLines:
    """A shard's result lines as they stream in: each request's first line is scored
    (or set aside for a retry shard); what never got a line is known at the end."""

    def __init__(
        self,
        jobs: _BatchJobs,
        rec: ShardRecord,
        expected: frozenset[str],
        handed_over: frozenset[str],
        may_retry: bool,
    ) -> None:
        self._jobs = jobs
        self.rec = rec  # the shard's latest record (its attempt names the output files)
        self.expected = expected
        self.handed_over = handed_over  # already given to a retry shard: scored there
        self._may_retry = may_retry
        self.seen: set[str] = set()
        self.to_retry: list[str] = []
        self.counts = {"output": 0, "error": 0}
        self._sources: dict[tuple[int, str], str] = {}  # the file's name, made once

    @property
    def unanswered(self) -> frozenset[str]:
        return self.expected - self.seen - self.handed_over

    async def __call__(self, line: str, lineno: int, kind: str) -> None:
        self.counts[kind] += 1
        rec = self.rec
        ctx = self._jobs.ctx
        source = self._sources.get((rec.attempt, kind))
        if source is None:
            source = str(ctx.store.output_path(rec, kind))
            self._sources[rec.attempt, kind] = source
        try:
            response = parse_batch_line(line, source=source, lineno=lineno)
        except InputFileError:
            return  # hostile or torn line: its row ends up 'missing', never lost silently
        cid = response.custom_id
        if cid not in self.expected or cid in self.seen:
            return
        self.seen.add(cid)
        if cid in self.handed_over:
            return
        scoring = ctx.scoring
        if (
            response.is_error
            and self._may_retry
            and ctx.submit() is Submit.CREATE  # no new batch once the run is on hold
            and retryable_request(response.error_code, response.status_code)
            and scoring.wants(rec.model, rec.trial, cid)
        ):
            self.to_retry.append(cid)
            return
        await scoring.submit(response, rec.model, rec.trial, rec.shard)


class BatchDriver:
    """Obtains a run's answers through the batch API of each model's provider
    (a :class:`~aeval.engine.drivers.Driver`).

    :param providers: the run's open batch providers (closed by whoever opened them).
    """

    def __init__(self, providers: ProviderSet) -> None:
        self.providers = providers
        self._rng = random.Random()  # the poll schedule's jitter

    def announce(self, ctx: DriverContext, records: list[ShardRecord]) -> None:
        """Every shard's phase as the manifest has it (a resumed run's are under way)."""
        for rec in records:
            ctx.emit(shard_event(rec))

    async def run_jobs(self, ctx: DriverContext, records: list[ShardRecord]) -> None:
        """Every job to its end, concurrently (retry shards start from their parents)."""
        lifecycle = ShardLifecycle(
            providers=self.providers,
            store=ctx.store,
            poll=ctx.config.poll,
            retry=ctx.config.retry,
            rng=self._rng,
            on_change=lambda rec: ctx.emit(
                shard_event(rec, next_poll_at=lifecycle.next_poll.get(rec.key))
            ),
            on_retry=lambda rec, notice: ctx.emit(retry_event(rec, notice)),
            submit=ctx.submit,
        )
        await _BatchJobs(lifecycle, ctx).run(records)

    async def on_hold(self, ctx: DriverContext) -> None:
        """Cancel every batch this run created that ``cancel`` could not see yet (no
        new one is created: ``ctx.submit()`` says so). The cancelled batches are
        then collected like any other terminal batch."""
        cancelled: set[str] = set()  # confirmed by the provider
        while True:
            for rec in list(ctx.store.shards.values()):
                batch_id = rec.batch_id
                if batch_id is None or batch_id in cancelled or rec.status in TERMINAL_STATUSES:
                    continue
                if rec.status in ("downloading", "done", "failed"):
                    continue
                if await self._cancel(ctx, rec.model, rec.key, batch_id):
                    cancelled.add(batch_id)
            await anyio.sleep(HOLD_CHECK_S)  # an unconfirmed cancel is tried again then

    async def _cancel(self, ctx: DriverContext, model: str, shard: str, batch_id: str) -> bool:
        """Cancel one batch; True once the provider confirms it (cancelling, or an end
        it reached meanwhile). Otherwise the failure is written down for ``status``
        and the run's end (:mod:`aeval.store.cancel_failures`)."""
        provider = self.providers.for_model(model)
        remote: RemoteBatch | None
        try:
            remote = await call_with_retries(
                "cancel",
                functools.partial(provider.cancel, batch_id),
                ctx.config.retry,
                deadline_s=HOLD_CHECK_S * 60,
            )
        except (ApiError, TransientApiError) as err:
            try:  # refused, perhaps because it finished meanwhile: ask
                remote = await provider.retrieve(batch_id)
            except (ApiError, TransientApiError):
                remote = None
            if remote is None or not remote.terminal:
                await anyio.to_thread.run_sync(
                    note_cancel_failure, ctx.store.run_dir, batch_id, shard, str(err)
                )
                return False
        assert remote is not None
        if not (remote.terminal or remote.status == "cancelling"):
            why = f"the provider still reports it {remote.status}"
            await anyio.to_thread.run_sync(
                note_cancel_failure, ctx.store.run_dir, batch_id, shard, why
            )
            return False
        await anyio.to_thread.run_sync(clear_cancel_failure, ctx.store.run_dir, batch_id)
        return True


class _BatchJobs:
    """One run's jobs through the batch API: each job's shards driven concurrently."""

    def __init__(self, lifecycle: ShardLifecycle, ctx: DriverContext) -> None:
        self.lifecycle = lifecycle
        self.ctx = ctx
        # One job plans its next round at a time: a plan holds the job's conversations
        # (its wrong items' answers and feedback), and jobs whose rounds end together
        # would otherwise hold all of theirs at once. A plan takes seconds; a round, the
        # batch's hours.
        self._planning = anyio.Lock()

    async def run(self, records: list[ShardRecord]) -> None:
        config = self.ctx.config
        async with anyio.create_task_group() as jobs:
            for model in config.models:
                for trial in range(1, config.trials + 1):
                    roots = [
                        r
                        for r in records
                        if (r.model, r.trial) == (model, trial) and r.parent is None
                    ]
                    jobs.start_soon(self._job, model, trial, roots)

    async def _job(self, model: str, trial: int, roots: list[ShardRecord]) -> None:
        """The job's rounds one after the other: round r + 1's requests are written and
        sent as soon as every verdict of round r is stored (``--rounds``), whatever the
        other jobs are doing."""
        problems: list[str] = []
        scoring = self.ctx.scoring
        scoring.pending(model, trial)
        rounds = self.ctx.config.rounds
        current = 1
        while True:
            async with anyio.create_task_group() as tg:
                for rec in roots:
                    if rec.repair_round == current:
                        tg.start_soon(self._shard, rec, problems)
            await scoring.drained(model, trial)
            if problems or current >= rounds:
                break
            later = [r for r in roots if r.repair_round == current + 1]
            if not later:  # not planned yet (a resume planned it already otherwise)
                if self.ctx.submit() is not Submit.CREATE:
                    problems.append(
                        f"round {current + 1} not sent: the run is on hold (cancelled); "
                        "'python -m aeval resume --submit' sends it"
                    )
                    break
                later = await self._plan_round(model, trial, current + 1)
                roots = [*roots, *later]
            if not later:
                break  # every item of the job is solved or ended
            current += 1
        ok = not problems
        if not ok:
            self.ctx.job_failed(model, trial, problems[0])
        self.ctx.emit(JobFinished(model=model, trial=trial, ok=ok, message="; ".join(problems)))

    async def _plan_round(self, model: str, trial: int, round: int) -> list[ShardRecord]:
        """Write and record the job's round-``round`` request files (none: nothing to ask).

        Each request is the item's round-``round - 1`` request with that round's answer
        and feedback appended (:mod:`aeval.engine.rounds`), in the dataset's order; a
        function of the run directory, so killed before the records are saved, a
        resume writes the same files under the same names.
        """
        ctx = self.ctx
        store = ctx.store
        job_shards = [r for r in store.shards.values() if (r.model, r.trial) == (model, trial)]
        previous = [r for r in job_shards if r.repair_round == round - 1]

        def plan() -> list[ShardRecord]:
            feedback = round_feedback(
                ctx.config, store.iter_verdict_records(), model, trial, round - 1
            )
            if not feedback:
                return []
            wanted = {round_custom_id(item, round - 1) for item in feedback}
            answers: dict[str, str] = {}
            for rec in previous:  # retry shards too: an answer may be in one
                path = store.output_path(rec, "output")
                if path.exists():
                    add_answers(answers, wanted, path)
            extend = job_continuer(ctx.config, model)

            def requests() -> Iterator[tuple[str, dict[str, Any]]]:
                for rec in sorted(previous, key=lambda r: r.shard):
                    if rec.parent is not None:
                        continue  # a retry shard's lines are its parent's
                    for line in read_request_lines(store.path(rec.input_path)):
                        cid = line["custom_id"]
                        item = split_round(cid)[0]
                        if item not in feedback:
                            continue
                        if cid not in answers:
                            raise RunDirError(
                                f"{store.run_dir}: {model} trial {trial}: the answer to "
                                f"{cid} is in no output file; round {round} cannot be asked"
                            )
                        turn = Turn(answers.pop(cid), feedback.pop(item))
                        yield round_custom_id(item, round), extend(line["body"], (turn,))

            first = max((r.shard for r in job_shards), default=0) + 1
            return write_job_shards(
                ctx.config, store, model, trial, requests(), first_shard=first, repair_round=round
            )

        async with self._planning:
            records = await anyio.to_thread.run_sync(plan)
        if records:
            await store.save_shards(records)
            for rec in records:
                ctx.emit(shard_event(rec))
        return records

    async def _shard(self, rec: ShardRecord | None, problems: list[str]) -> None:
        while rec is not None:
            try:
                rec = await self._drive_shard(rec, problems)
            except (RunDirError, UnreachableError) as err:
                self.ctx.stop(err)  # no shard can go on: end the whole run with this error
                return

    async def _drive_shard(self, rec: ShardRecord, problems: list[str]) -> ShardRecord | None:
        """Run one shard to the end; returns the retry shard to run next, if any."""
        lifecycle, scoring = self.lifecycle, self.ctx.scoring
        store = self.ctx.store
        expected = frozenset(
            await anyio.to_thread.run_sync(request_ids, store.path(rec.input_path), rec.sha256)
        )
        child = store.shards.get(rec.retry_shard) if rec.retry_shard else None
        handed_over = (
            frozenset(
                await anyio.to_thread.run_sync(
                    request_ids, store.path(child.input_path), child.sha256
                )
            )
            if child is not None
            else frozenset()
        )
        may_retry = child is None and rec.round < self.ctx.config.retry_failed
        lines = _ShardLines(self, rec, expected, handed_over, may_retry)
        failure: str | None = None
        remote: RemoteBatch | None = None
        try:
            for looks in range(1, FOREIGN_LOOKS + 1):
                rec, remote = await lifecycle.run_batch(rec)
                lines.rec = rec
                if remote.status == "failed":
                    described = "; ".join(e.describe() for e in remote.errors) or "no reason given"
                    failure = f"batch {remote.id} failed: {described}"
                    break
                rec = lines.rec = await lifecycle.save(rec.evolve(status="downloading"))
                try:
                    rec = lines.rec = await lifecycle.download(rec, "output", lines)
                    rec = lines.rec = await lifecycle.download(rec, "error", lines)
                except BatchSetAside as err:
                    if looks == FOREIGN_LOOKS:
                        raise ShardFailed(
                            f"{err}: after {looks} batches set aside the shard stops here; "
                            "'resume' looks again"
                        ) from err
                    # Not one of its lines was scored; the search and the batch it
                    # gives are the shard's again (the set-aside one is claimed).
                    rec = lines.rec = store.shards.get(rec.key, rec)
                    remote = None
                    continue
                self.ctx.emit(
                    OutputDownloaded(
                        model=rec.model,
                        trial=rec.trial,
                        shard=rec.shard,
                        output_lines=lines.counts["output"],
                        error_lines=lines.counts["error"],
                    )
                )
                break
        except ShardFailed as err:
            failure = str(err)
        if failure is not None:
            problems.append(failure)
            # Only a batch the API failed is final. A shard that never got a
            # batch (bad key, API down past the deadline), whose polls gave up or
            # whose results could not be downloaded gets provisional verdicts: in
            # this run's results, not in verdicts.jsonl, so a resume (with the key
            # fixed, or the API back) submits or collects it for real.
            provisional = remote is None or remote.status != "failed"
            for verdict in scoring.unanswered(
                rec.model, rec.trial, lines.unanswered, Status.API_ERROR, failure
            ):
                if provisional:
                    self.ctx.provisional(verdict, rec.shard)
                else:
                    await scoring.record(verdict, rec.shard)
            # The lifecycle may have recorded more (a file id, upload attempts) since
            # ``rec`` was read: keep it, or a resume would upload again and orphan it.
            latest = store.shards.get(rec.key, rec)
            await lifecycle.save(latest.evolve(status="failed", message=failure))
            return None
        final_status = remote.status if remote is not None else "failed"
        missing = (
            f"no line for this request in the output or error file "
            f"of batch {rec.batch_id} ({final_status})"
        )
        for verdict in scoring.unanswered(
            rec.model, rec.trial, lines.unanswered, Status.MISSING, missing
        ):
            await scoring.record(verdict, rec.shard)
        if lines.to_retry:
            child = await self._retry_shard(store, rec, frozenset(lines.to_retry))
            rec = rec.evolve(retry_shard=child.key, status="done")
            await lifecycle.save(child, rec)
            return child
        await lifecycle.save(rec.evolve(status="done"))
        return child if child is not None and child.status != "done" else None

    async def _retry_shard(
        self, store: RunStore, parent: ShardRecord, ids: frozenset[str]
    ) -> ShardRecord:
        """A new shard resubmitting ``ids`` of ``parent`` (same request lines)."""
        siblings = [r.shard for r in store.shards.values() if r.model == parent.model]
        number = max(siblings, default=0) + 1
        key = shard_key(parent.model, parent.trial, number)
        dest = store.request_path(shard_stem(parent.model, parent.trial, number))
        count, size, sha = await anyio.to_thread.run_sync(
            write_subset, store.path(parent.input_path), dest, ids
        )
        return ShardRecord(
            key=key,
            model=parent.model,
            trial=parent.trial,
            shard=number,
            requests=count,
            input_path=str(dest.relative_to(store.run_dir)),
            sha256=sha,
            bytes=size,
            parent=parent.key,
            round=parent.round + 1,
            repair_round=parent.repair_round,
        )
