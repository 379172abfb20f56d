"""The run handle: one run directory from start to outcome.

:class:`Run` owns what a run *is*: its configuration, directory and lock, its
events and subscribers, its provenance, and how it ended (:class:`RunResult`).
What it does is delegated: :mod:`aeval.engine.planning` loads the rows and
writes the request files, a driver (:mod:`aeval.engine.drivers`: the batch API,
or direct requests) obtains the answers, and :mod:`aeval.scoring.pipeline` turns
them into stored verdicts. It never prints, installs no signal handlers and
keeps no global state, so two runs can share one event loop (asyncio or trio).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Unpack

import anyio
import polars as pl

from aeval.allocator import return_freed_heap
from aeval.batch.providers.base import BatchProvider
from aeval.batch.providers.registry import check_providers, run_credentials
from aeval.config import Credentials, RunConfig, is_aeval_server, resolve_credentials
from aeval.cost import warm_prices
from aeval.dataset import TruthTable
from aeval.engine.broadcast import Broadcast
from aeval.engine.drivers import Driver, DriverContext, open_driver, watch_hold
from aeval.engine.planning import (
    ResumeOverrides,
    check_round_ids,
    load_truth,
    pin_data,
    plan_shards,
    saved_config,
)
from aeval.errors import AevalError
from aeval.events import (
    Event,
    RunFinished,
    RunOutcome,
    RunStarted,
    ShardInfo,
    VerdictProduced,
)
from aeval.exception_groups import first_of
from aeval.scoring.answer_classes import classes_of_run, with_answer_classes
from aeval.scoring.pipeline import Scoring
from aeval.store import (
    RunLayout,
    RunStore,
    ShardRecord,
    empty_verdicts,
    new_run_id,
)
from aeval.store.failures import first_os_error, storage_failure
from aeval.store.hold import Submit, lift_hold, submission_hold
from aeval.store.lock import RunLock
from aeval.store.provenance import (
    PROVENANCE_KEY,
    Provenance,
    probe_local_server,
)
from aeval.store.results import publish_results, stage_verdicts
from aeval.store.summary_record import Summary
from aeval.summary.aggregate import summarize_file
from aeval.verdicts import Verdict, verdicts_frame
from aeval.verify.cache import CachedChecker, VerdictCache
from aeval.verify.checker import open_checker

__all__ = ["Run", "RunResult", "evaluate"]

# Where a Run is in its life: a Run runs once; cancel() before run() makes run() stop at once.
_State = Literal["new", "cancel_requested", "running", "finished"]


@dataclass(frozen=True, slots=True)
class RunResult:
    """How a run ended, and its verdicts."""

    run_id: str
    run_dir: Path
    outcome: RunOutcome
    verdicts: pl.DataFrame
    failed_jobs: tuple[str, ...] = ()
    message: str = ""
    # What summary.json holds (with the provenance), when the run got to write it.
    summary: Summary | None = None


class Run:
    """One evaluation run (new, or resumed from its directory).

    :param config: what to run. Its ``credentials`` (or, when ``None``, the
        environment's ``OPENAI_API_KEY``/``OPENAI_KEY`` and ``OPENAI_BASE_URL``)
        say where to send requests.
    :param subscribers: synchronous callables given every event; they must be
        cheap, and one that raises is ignored (the run goes on).
    :param provider: one batch provider that answers for every model of the run
        (a library user's own, or a test's); without it each model's provider is
        opened through :mod:`aeval.batch.providers` with its own credentials.
    :param synthetic: which synthetic models answer (e.g. aeval's local server,
        :func:`aeval.local.models.describe_models`); the run's provenance and
        every report then label it SYNTHETIC.
    """

    def __init__(
        self,
        config: RunConfig,
        *,
        subscribers: Sequence[Callable[[Event], None]] = (),
        provider: BatchProvider | None = None,
        offline: bool = False,
        synthetic: str | None = None,
    ) -> None:
        check_providers(config)  # a setting a provider would reject, before anything is written
        self.config = config
        # May the run create batches (pay)? A new run may; a resumed one as told (resume()).
        self.submit = Submit.CREATE
        self._lock: RunLock | None = None  # the caller's claim on the run directory (resume)
        self.offline = offline  # a label for RunStarted and the provenance: nothing else differs
        # Which synthetic responder answers (the offline demo's local models), if any.
        self.synthetic = synthetic
        # The provenance recorded when the run started (aeval.store.provenance), once known.
        self.provenance: Provenance | None = None
        self._recorded_provenance: dict[str, Any] | None = None
        self._provider = provider
        self._resume_dir: Path | None = None  # set by resume()
        self.run_id = config.run_id or new_run_id()
        self.run_dir = Path(config.out_dir) / self.run_id
        self._store: RunStore | None = None
        self._broadcast = Broadcast(subscribers)
        self._emit = self._broadcast.emit
        self._scope: anyio.CancelScope | None = None
        self._state: _State = "new"
        self._final: pl.DataFrame | None = None
        self._summary: Summary | None = None
        self._provisional: list[Verdict] = []
        # Each answer's equivalence class among its item's trials (maj@n's votes),
        # found once every verdict is in (aeval.scoring.answer_classes).
        self._answer_classes: dict[tuple[str, int, str], int] | None = None
        self._failed_jobs: dict[tuple[str, int], str] = {}
        self._fatal: AevalError | None = None  # what ended the run early (see _stop)

    @classmethod
    def resume(
        cls,
        run_dir: Path,
        *,
        subscribers: Sequence[Callable[[Event], None]] = (),
        credentials: Credentials | Mapping[str, Credentials] | None = None,
        provider: BatchProvider | None = None,
        offline: bool = False,
        submit: Submit = Submit.AS_HELD,
        lock: RunLock | None = None,
        synthetic: str | None = None,
        **overrides: Unpack[ResumeOverrides],
    ) -> Run:
        """A Run that continues the run in ``run_dir`` with its saved configuration.

        :param submit: ``Submit.AS_HELD`` (default): create the batches that were
            never created, unless the directory is on hold (a ``--dry-run`` plan, or
            a cancelled run: then only collect what exists). ``Submit.CREATE``:
            create them and lift the hold. ``Submit.COLLECT``: only collect what exists.
        :param lock: a claim on ``run_dir`` the caller already holds
            (:class:`aeval.store.lock.RunLock`); without one the run takes its own
            when it starts and releases it when it ends.
        :param overrides: settings to change on resume (:class:`ResumeOverrides`: e.g.
            ``poll``, ``workers``); the models, trials and rows of a run cannot change.
        """
        run_dir = Path(run_dir)
        config, recorded = saved_config(run_dir, overrides, credentials)
        run = cls(
            config, subscribers=subscribers, provider=provider, offline=offline, synthetic=synthetic
        )
        run._resume_dir = run.run_dir = run_dir
        run.run_id = run_dir.name
        run.submit = submit
        run._lock = lock
        run._recorded_provenance = recorded
        return run

    # -- observing -------------------------------------------------------------------

    def subscribe(self, subscriber: Callable[[Event], None]) -> None:
        """Give ``subscriber`` every event from now on, after those already subscribed
        (synchronously, in the run's task: it must be cheap; one that raises is ignored)."""
        self._broadcast.subscribe(subscriber)

    def events(self) -> AsyncIterator[Event]:
        """An async iterator over this run's events from now on; ends when the run ends.

        Iterate it from another task while :meth:`run` runs. Keep iterating: events
        are buffered for a slow reader, not dropped.
        """
        return self._broadcast.listen(closed=self._state == "finished")

    def verdicts(self) -> pl.DataFrame:
        """Every verdict written so far (all of them once :meth:`run` returned)."""
        if self._final is not None:
            return self._final
        if self._store is not None:
            return self._with_provisional(self._store.verdicts_frame())
        if RunLayout(self.run_dir).manifest.exists():
            with RunStore.open(self.run_dir, read_only=True) as store:
                return store.verdicts_frame()
        return empty_verdicts()

    def _with_provisional(self, frame: pl.DataFrame) -> pl.DataFrame:
        """The store's verdicts with what only this process knows: provisional
        verdicts, and the answers' classes once they are found."""
        if self._provisional:
            extra = verdicts_frame(self._provisional)
            frame = pl.concat([frame, extra]).sort(["model", "trial", "custom_id"])
        return with_answer_classes(frame, self._answer_classes)

    def cancel(self) -> None:
        """Stop the run from outside: :meth:`run` returns an ``interrupted`` result.

        Remote batches keep running; resume the directory later to collect them.
        In direct mode the requests in flight are dropped (not recorded) and sent
        again on resume; every answer already written stays.
        """
        if self._state == "new":
            self._state = "cancel_requested"
        if self._scope is not None:
            self._scope.cancel()

    @property
    def subscriber_errors(self) -> int:
        """How many times a subscriber raised (each ignored: the run went on)."""
        return self._broadcast.subscriber_errors

    # -- running ---------------------------------------------------------------------

    async def run(self) -> RunResult:
        """Run to the end and return the outcome with every verdict.

        Cancellation (from an enclosing cancel scope, or :meth:`cancel`) stops
        every task, kills busy verifier workers, and leaves a consistent run
        directory that ``python -m aeval resume`` continues.

        :raises AevalError: bad configuration, an unusable run directory or
            dataset, or no API key.
        """
        if self._state not in ("new", "cancel_requested"):
            raise AevalError("a Run can only be run once; resume its directory instead")
        cancelled_early = self._state == "cancel_requested"
        self._state = "running"
        # How it ended: interrupted until the run says otherwise. An interrupted
        # run's message is always the resume hint (_ending).
        outcome: RunOutcome = "interrupted"
        message = ""
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                if cancelled_early:
                    scope.cancel()
                outcome, message = await self._run_reporting_os_errors()
            if self._fatal is not None:
                raise self._fatal
            if scope.cancelled_caught:
                outcome = "interrupted"
            outcome, message = self._ending(outcome, message)
            return RunResult(
                run_id=self.run_id,
                run_dir=self.run_dir,
                outcome=outcome,
                verdicts=self.verdicts(),
                failed_jobs=tuple(f"{m} trial {t}" for m, t in self._failed_jobs),
                message=message,
                summary=self._summary if self._final is not None else None,
            )
        except AevalError as err:
            # A run that could not go on (bad dataset, damaged run directory…)
            # is not "interrupted": say why it stopped.
            outcome, message = "finished_with_failures", f"stopped: {err}"
            raise
        finally:
            outcome, message = self._ending(outcome, message)
            self._emit(RunFinished(outcome=outcome, run_dir=str(self.run_dir), message=message))
            self._state = "finished"
            self._broadcast.close()
            if self._store is not None:
                self._store.close()

    def _stop(self, err: AevalError) -> None:
        """End the run with ``err`` (raised by :meth:`run`): cancel every task first."""
        if self._fatal is None:
            self._fatal = err
        if self._scope is not None:
            self._scope.cancel()

    def _ending(self, outcome: RunOutcome, message: str) -> tuple[RunOutcome, str]:
        if outcome != "interrupted":
            return outcome, message
        if self.config.api == "direct":  # nothing remote keeps running
            return outcome, (
                f"interrupted; requests in flight were not recorded and are sent again on "
                f"resume. Resume with 'python -m aeval resume {self.run_dir}'"
            )
        return outcome, (
            f"interrupted; remote batches keep running. Resume with "
            f"'python -m aeval resume {self.run_dir}' or cancel them with "
            f"'python -m aeval cancel {self.run_dir}'"
        )

    def _open_store(self) -> RunStore:
        if self._resume_dir is not None:
            return RunStore.open(self._resume_dir, lock=self._lock)
        config = {**self.config.to_dict(), PROVENANCE_KEY: self.provenance}
        return RunStore.create(self.config.out_dir, self.run_id, config)

    async def _run_reporting_os_errors(self) -> tuple[RunOutcome, str]:
        """:meth:`_run`, with a failed write to the run directory (full or read-only
        disk) raised as one :class:`RunDirError` naming the path and the OS error, and an
        :class:`AevalError` from inside a task group raised as itself."""
        try:
            return await self._run()
        except (OSError, BaseExceptionGroup) as err:
            os_error = first_os_error(err)
            if os_error is None:
                # A task that stopped the run for a reason a person can act on
                # (the verifier's Ray cluster went away): that reason, not the group.
                reason = first_of(err, AevalError)
                if reason is not None:
                    raise reason from err
                raise
            shards = self._store.shards.values() if self._store is not None else ()
            sent = [r for r in shards if r.batch_id or r.intent_attempt is not None]
            raise storage_failure(
                os_error, self.run_dir, opened=self._store is not None, batches=sent
            ) from err

    def _apply_hold(self, store: RunStore) -> None:
        """A directory on hold (dry run, cancelled) creates no batch unless told to."""
        if submission_hold(store.run_dir) is None:
            return
        if self.submit is Submit.AS_HELD:
            self.submit = Submit.COLLECT
        elif self.submit is Submit.CREATE:
            lift_hold(store.run_dir)

    def _on_hold(self) -> None:
        self.submit = Submit.COLLECT  # 'cancel' put the live run on hold: no more batches

    def _job_failed(self, model: str, trial: int, why: str) -> None:
        self._failed_jobs[(model, trial)] = why

    def _record_provisional(self, verdict: Verdict, shard: int) -> None:
        """A verdict for this run's result only, never the store: a resume replaces it."""
        self._provisional.append(verdict)
        self._emit(VerdictProduced(verdict=verdict, shard=shard))

    async def _prepare(self) -> tuple[RunStore, TruthTable, list[ShardRecord]]:
        if self._resume_dir is not None:
            # Claim the directory before anything else: a second driver must stop
            # at once, before it loads data or touches a file.
            self._store = self._open_store()
            self._apply_hold(self._store)
        questions, truth, fingerprint = await anyio.to_thread.run_sync(load_truth, self.config)
        if self.config.rounds > 1:
            check_round_ids(truth.ids())  # before a new run's directory exists
        if self.synthetic is None and self._resume_dir is None and self._provider is None:
            # A run sent to an 'aeval serve' is as synthetic as the offline demo.
            # Only aeval's own server is asked: a provider's never sees an /aeval/ path.
            for creds in filter(is_aeval_server, self._endpoints()):
                self.synthetic = await probe_local_server(creds.base_url, creds.api_key)
                if self.synthetic is not None:
                    break
        # Refuses a resume against other data, before the store is opened (nothing written).
        self.config, self.provenance = pin_data(
            self.config,
            fingerprint,
            resume_dir=self._resume_dir,
            recorded=self._recorded_provenance,
            synthetic=self.synthetic or ("local batch server" if self.offline else None),
            offline=self.offline,
        )
        store = self._store if self._store is not None else self._open_store()
        self._store = store
        if self.submit is Submit.AS_HELD:
            self.submit = Submit.CREATE
        if not store.shards:  # new, or killed before the plan was saved: plan (again)
            records = await anyio.to_thread.run_sync(plan_shards, self.config, store, questions)
            store.put_shards(records)
        return store, truth, list(store.shards.values())

    def _endpoints(self) -> list[Credentials]:
        """Where this run's requests go: one endpoint in direct mode, one per provider
        in batch mode."""
        if self.config.api == "direct":
            creds = self.config.given_credentials() or resolve_credentials()
            return [creds] if creds is not None else []
        return list(run_credentials(self.config.models, self.config.credentials).values())

    async def _run(self) -> tuple[RunOutcome, str]:
        async with open_driver(self.config, provider=self._provider, emit=self._emit) as driver:
            return await self._run_with(driver)

    async def _run_with(self, driver: Driver) -> tuple[RunOutcome, str]:
        store, truth, records = await self._prepare()
        self._emit(
            RunStarted(
                run_id=self.run_id,
                run_dir=str(self.run_dir),
                models=self.config.models,
                trials=self.config.trials,
                items=len(truth),
                shards=tuple(
                    ShardInfo(model=r.model, trial=r.trial, shard=r.shard, requests=r.requests)
                    for r in records
                    if r.parent is None
                ),
                offline=self.offline,
                resumed=self._resume_dir is not None,
                synthetic=bool(self.provenance and self.provenance.get("synthetic")),
            )
        )
        scoring = Scoring(
            store,
            truth,
            emit=self._emit,
            published=self.config.published,
            queue=self.config.verify_queue,
            measure_pace=store.verdict_count
            < len(self.config.models) * self.config.trials * len(truth),
            rounds=self.config.rounds,
        )
        ctx = DriverContext(
            config=self.config,
            store=store,
            scoring=scoring,
            emit=self._emit,
            submit=lambda: self.submit,
            stop=self._stop,
            job_failed=self._job_failed,
            provisional=self._record_provisional,
        )
        driver.announce(ctx, records)
        ending: list[tuple[Summary, pl.DataFrame] | Exception] = []
        first_verdict = anyio.Event()
        self._broadcast.subscribe(_set_on_verdict(first_verdict))
        async with (
            anyio.create_task_group() as finishing,
            open_checker(
                self.config.limits,
                self.config.workers,
                published=self.config.published,
                published_binary=self.config.published_binary,
                ray_address=self.config.ray_address,
            ) as own_pool,
            CachedChecker(
                VerdictCache(path=RunLayout(store.run_dir).verdict_cache), own_pool
            ) as pool,
            anyio.create_task_group() as watch,
        ):
            watch.start_soon(watch_hold, driver, ctx, self._on_hold)
            watch.start_soon(_warm_prices_after, first_verdict)
            await scoring.run(pool, lambda: driver.run_jobs(ctx, records), pace_pool=own_pool)
            # Every verdict in: the answers' equivalence classes (maj@n's votes),
            # with the same pool (before the watch's scope is cancelled: this runs in it).
            # Only the declarations of the ground truth are still needed: the rest is
            # let go so that the end's frames and summary reuse its memory instead of
            # adding to the peak. The verdict frame is built once, for the same reason,
            # and given its classes below.
            constants = truth.constants_lookup()
            truth.release()
            # what the streaming let go goes back to the system before polars builds
            # the frame (polars' allocator never reuses the C heap's free pages)
            await anyio.to_thread.run_sync(return_freed_heap)
            unclassed = self._with_provisional(store.verdicts_frame())
            self._answer_classes = await classes_of_run(
                # maj@n votes over the trials' first answers (a repair round's answer is
                # another question's: the conversation differs). classes_of_run reads the
                # round-1 verdicts alone: given a copy of them, the copy sat beside the
                # whole frame (+55 MB at 4 x 50,000 with three rounds).
                unclassed,
                pool,
                store.run_dir,
                store.shards.values(),
                constants,
                self.config.limits,
            )
            del constants
            watch.cancel_scope.cancel()
            # The summary is computed and the end files written in a thread while the
            # verifier's workers are stopped (leaving this block waits for each to end):
            # both are on the way from the last answer to exit. The frame goes in a
            # list that _finish empties: it holds the only reference, to let it go.
            frames = [with_answer_classes(unclassed, self._answer_classes)]
            del unclassed
            finishing.start_soon(self._finish, store, frames, ending)
        (result,) = ending
        if isinstance(result, Exception):
            raise result
        self._summary, self._final = result
        if self._failed_jobs:
            failed = "; ".join(f"{m} trial {t}: {why}" for (m, t), why in self._failed_jobs.items())
            return "finished_with_failures", f"finished with failed jobs: {failed}"
        return "finished", f"finished: {self._final.height} verdicts in {self.run_dir}"

    async def _finish(
        self,
        store: RunStore,
        frames: list[pl.DataFrame],
        into: list[tuple[Summary, pl.DataFrame] | Exception],
    ) -> None:
        """The run's summary and end files (``summary.json``, ``verdicts.parquet``) from
        its final frame (the one item of ``frames``, taken out of it), in a worker
        thread; the outcome (or what it raised, to be raised by the run's own task, as
        before) is appended to ``into``.

        The frame is written first and let go; the summary is computed from the file
        (:func:`summarize_file`: the same dict as :func:`summarize` of the frame); the
        run's result reads the frame back. So the summary's work never sits beside the
        whole frame: at 4 x 50,000 requests with three rounds the two together were
        the run's peak (593 MB, bench/README.md "Repair rounds: memory")."""

        def finish() -> tuple[Summary, pl.DataFrame]:
            staged = stage_verdicts(store.run_dir, frames.pop())
            summary = summarize_file(
                staged,
                batch_prices=self.config.api != "direct",
                rounds=self.config.rounds,
            )
            summary["provenance"] = self.provenance  # its key in the summary (PROVENANCE_KEY)
            publish_results(store.run_dir, staged, summary)
            return summary, pl.read_parquet(RunLayout(store.run_dir).verdicts_parquet)

        try:
            into.append(await anyio.to_thread.run_sync(finish))
        except Exception as err:  # raised again by the run's own task
            into.append(err)


def _set_on_verdict(seen: anyio.Event) -> Callable[[Event], None]:
    """A subscriber that sets ``seen`` at the run's first verdict."""

    def subscriber(event: Event) -> None:
        if isinstance(event, VerdictProduced):
            seen.set()

    return subscriber


async def _warm_prices_after(seen: anyio.Event) -> None:
    """Load the price data in a worker thread once the run has its first verdict.

    Otherwise the summary's first price lookup loads it on the way from the last answer
    to exit (0.1-0.2 s, bench/README.md "The price data in a run's tail"). Not at the
    start: the import holds the GIL, and the first window of a direct run goes out paced
    (2 ms a request, aeval.engine.direct.aimd) until the first answer; a verdict comes
    after an answer, while the run waits on the others. A run with no new verdict (a
    resume with all of them in) is not warmed: the summary loads the data as before.
    """
    await seen.wait()
    await anyio.to_thread.run_sync(warm_prices)


async def evaluate(
    config: RunConfig, *, subscribers: Sequence[Callable[[Event], None]] = ()
) -> pl.DataFrame:
    """Run ``config`` to the end and return its verdicts (a convenience around :class:`Run`)."""
    result = await Run(config, subscribers=subscribers).run()
    return result.verdicts
