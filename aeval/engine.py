"""The engine: every job's shards submitted, polled and verified concurrently.

One :class:`Run` is one run directory. Under a single anyio task group it
drives every shard through the batch lifecycle (:mod:`aeval.batch.lifecycle`),
streams each downloaded line through a bounded memory stream into the
verification pool, and appends every verdict to the store the moment it
exists. It reports progress only as typed events (:mod:`aeval.events`): it
never prints, never imports Rich, installs no signal handlers and keeps no
global state, so two runs can share one event loop (asyncio or trio).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import random
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import polars as pl
from anyio.abc import ObjectReceiveStream, ObjectSendStream

from aeval.batch.lifecycle import ShardFailed, ShardLifecycle
from aeval.batch.provider import BatchProvider, RemoteBatch, TransientApiError
from aeval.batch.retry import RetryNotice
from aeval.batch.shard import write_shards
from aeval.config import Credentials, RunConfig, resolve_credentials
from aeval.errors import (
    AevalError,
    ApiError,
    ConfigError,
    InputFileError,
    RunDirError,
    UnreachableError,
)
from aeval.events import (
    BatchPhase,
    Event,
    JobFinished,
    OutputDownloaded,
    RetryScheduled,
    RunFinished,
    RunOutcome,
    RunStarted,
    ShardInfo,
    ShardUpdated,
    VerdictProduced,
)
from aeval.provenance import (
    PROVENANCE_KEY,
    DatasetFingerprint,
    check_same_data,
    probe_local_server,
    run_provenance,
)
from aeval.run_lock import RunLock
from aeval.rundir_errors import first_os_error, storage_failure
from aeval.store import (
    CONFIG_FILE,
    MANIFEST_FILE,
    RunStore,
    ShardRecord,
    empty_verdicts,
    new_run_id,
    shard_key,
    shard_stem,
)
from aeval.submit_hold import hold_submissions, lift_hold, submission_hold
from aeval.verdicts import Status, Verdict, verdicts_frame

__all__ = ["DryRunPlan", "Run", "RunResult", "evaluate", "plan_run"]

# How often a live run looks for a submission hold put by 'cancel'.
_HOLD_CHECK_S = 1.0

# Per-request failures worth resubmitting with --retry-failed.
RETRYABLE_ERROR_CODES = frozenset({"batch_expired", "rate_limit_exceeded", "server_error"})

_PHASES: frozenset[str] = frozenset(BatchPhase.__args__)  # type: ignore[attr-defined]


@dataclass(frozen=True, slots=True)
class RunResult:
    """How a run ended, and its verdicts."""

    run_id: str
    run_dir: Path
    outcome: RunOutcome
    verdicts: pl.DataFrame
    failed_jobs: tuple[str, ...] = ()
    message: str = ""


@dataclass(frozen=True, slots=True)
class _Truth:
    answer: str
    constants: str
    tier: str | None


@dataclass(frozen=True, slots=True)
class _Work:
    response: Any  # aeval.responses.Response
    truth: _Truth
    model: str
    trial: int
    shard: int


class _Pending:
    """Verdicts of one job still on their way to the store (so JobFinished comes after them)."""

    def __init__(self) -> None:
        self.count = 0
        self._event = anyio.Event()

    def add(self) -> None:
        self.count += 1

    def done(self) -> None:
        self.count -= 1
        if self.count <= 0:
            self._event.set()

    async def drained(self) -> None:
        while self.count > 0:
            self._event = anyio.Event()
            await self._event.wait()


@dataclass(frozen=True, slots=True)
class DryRunPlan:
    """What a run would send: shards per job and an estimate of input tokens."""

    run_dir: Path
    items: int
    shards: tuple[ShardRecord, ...]
    request_bytes: int
    estimated_input_tokens: int


def _is_retryable(response: Any) -> bool:
    code = response.error_code
    if code is None:
        return False
    status = response.status_code
    return code in RETRYABLE_ERROR_CODES or status == 429 or (status is not None and status >= 500)


class _TruthTable:
    """Ground truth by row id, kept in the dataset's own columns.

    A dict of Python strings would copy every answer and declaration block
    (~125 MB more for 50,000 synthetic rows); a row's strings are made only
    when its answer is checked.
    """

    def __init__(self, frame: pl.DataFrame) -> None:
        self._index = {cid: i for i, cid in enumerate(frame["id"].to_list())}
        self._answer = frame["answer"]
        self._constants = frame["constants"]
        self._tier = frame["tier"]

    def get(self, cid: str) -> _Truth | None:
        i = self._index.get(cid)
        if i is None:
            return None
        return _Truth(self._answer[i], self._constants[i], self._tier[i])

    def __len__(self) -> int:
        return len(self._index)


def _load_truth(config: RunConfig) -> tuple[pl.DataFrame, _TruthTable, DatasetFingerprint]:
    from aeval.dataset import DEFAULT_DATASET, load_dataset_fingerprinted

    frame, fingerprint = load_dataset_fingerprinted(
        config.dataset or DEFAULT_DATASET,
        revision=config.dataset_revision,
        limit=config.limit,
        sample=config.sample,
        seed=config.seed,
        tier=config.tier,
        ids=config.sample_ids,
    )
    return (
        frame.select("id", "question"),
        _TruthTable(frame.select("id", "answer", "constants", "tier")),
        fingerprint,
    )


def _plan_shards(config: RunConfig, store: RunStore, questions: pl.DataFrame) -> list[ShardRecord]:
    """Write every job's request files and return their (not yet saved) shard records."""
    from aeval.prompts import request_body

    records: list[ShardRecord] = []
    for model in config.models:
        for trial in range(1, config.trials + 1):

            def requests(model: str = model) -> Any:
                for cid, question in questions.iter_rows():
                    yield cid, request_body(model, question, config.prompt, config.generation)

            def path_for(shard: int, model: str = model, trial: int = trial) -> Path:
                return store.request_path(shard_stem(model, trial, shard))

            for f in write_shards(requests(), path_for, config.shard_limits):
                records.append(
                    ShardRecord(
                        key=shard_key(model, trial, f.shard),
                        model=model,
                        trial=trial,
                        shard=f.shard,
                        requests=f.requests,
                        input_path=str(f.path.relative_to(store.run_dir)),
                        sha256=f.sha256,
                        bytes=f.bytes,
                    )
                )
    return records


def _request_ids(path: Path, sha256: str | None = None) -> list[str]:
    """The custom_ids of a request file, in order, checked against the manifest's ``sha256``
    in the same pass (a changed file would pair answers with the wrong requests)."""
    import hashlib

    ids: list[str] = []
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for lineno, line in enumerate(fh, start=1):
            digest.update(line)
            try:
                ids.append(json.loads(line)["custom_id"])
            except (ValueError, KeyError, TypeError) as err:
                raise RunDirError(f"{path}, line {lineno}: not a request line ({err})") from err
    if sha256 is not None and digest.hexdigest() != sha256:
        raise RunDirError(
            f"request file {path} has sha256 {digest.hexdigest()[:12]}…, but the manifest "
            f"recorded {sha256[:12]}… for it: it was changed after the run wrote it"
        )
    return ids


def _write_subset(source: Path, dest: Path, ids: frozenset[str]) -> tuple[int, int, str]:
    """Copy the request lines of ``ids`` from ``source`` to ``dest``; (count, bytes, sha256)."""
    import hashlib

    digest = hashlib.sha256()
    count = size = 0
    with source.open("rb") as src, dest.open("wb") as out:
        for raw in src:
            if json.loads(raw)["custom_id"] in ids:
                out.write(raw)
                digest.update(raw)
                count += 1
                size += len(raw)
    return count, size, digest.hexdigest()


def _phase(status: str) -> BatchPhase:
    return status if status in _PHASES else "pending"  # type: ignore[return-value]


class Run:
    """One evaluation run (new, or resumed from its directory).

    :param config: what to run. Its ``credentials`` (or, when ``None``, the
        environment's ``OPENAI_API_KEY``/``OPENAI_KEY`` and ``OPENAI_BASE_URL``)
        say where to send requests.
    :param subscribers: synchronous callables given every event; they must be
        cheap, and one that raises is ignored (the run goes on).
    :param provider: a batch provider to use instead of the OpenAI SDK one
        (for another provider's batch API).
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
        resume_dir: Path | None = None,
        offline: bool = False,
        submit: bool | None = True,
        lock: RunLock | None = None,
        synthetic: str | None = None,
    ) -> None:
        self.config = config
        # False: collect what exists, create no batch (cancel). None: as the run
        # directory says (no batch while it has a submission hold, aeval.submit_hold).
        self.submit = submit
        self._lock = lock  # the caller's claim on the run directory (resume only)
        self.offline = offline  # a label for RunStarted and the provenance: nothing else differs
        # Which synthetic responder answers (the offline demo's local models), if any.
        self.synthetic = synthetic
        # The provenance recorded when the run started (aeval.provenance), once known.
        self.provenance: dict[str, Any] | None = None
        self._recorded_provenance: dict[str, Any] | None = None
        self._subscribers = list(subscribers)
        self._provider = provider
        self._resume_dir = Path(resume_dir) if resume_dir is not None else None
        if self._resume_dir is not None:
            self.run_id = self._resume_dir.name
            self.run_dir = self._resume_dir
        else:
            self.run_id = config.run_id or new_run_id()
            self.run_dir = Path(config.out_dir) / self.run_id
        self._store: RunStore | None = None
        self._streams: list[ObjectSendStream[Event]] = []
        self._scope: anyio.CancelScope | None = None
        self._started = False
        self._cancel_requested = False
        self._finished = False
        self._final: pl.DataFrame | None = None
        self._provisional: list[Verdict] = []
        # Each answer's equivalence class among its item's trials (maj@n's votes),
        # found once every verdict is in (aeval.answer_classes).
        self._answer_classes: dict[tuple[str, int, str], int] = {}
        self._failed_jobs: dict[tuple[str, int], str] = {}
        self._rng = random.Random()
        self._truth: _TruthTable | dict[str, _Truth] = {}
        self._pending: dict[tuple[str, int], _Pending] = {}
        self._fatal: AevalError | None = None  # what ended the run early (see _stop)
        self.subscriber_errors = 0

    @classmethod
    def resume(
        cls,
        run_dir: Path,
        *,
        subscribers: Sequence[Callable[[Event], None]] = (),
        credentials: Credentials | None = None,
        provider: BatchProvider | None = None,
        offline: bool = False,
        submit: bool | None = None,
        lock: RunLock | None = None,
        synthetic: str | None = None,
        **overrides: Any,
    ) -> Run:
        """A Run that continues the run in ``run_dir`` with its saved configuration.

        :param submit: ``None`` (default): create the batches that were never
            created, unless the directory is on hold (a ``--dry-run`` plan, or a
            cancelled run: then only collect what exists). ``True``: create them
            and lift the hold. ``False``: only collect what exists.
        :param lock: a claim on ``run_dir`` the caller already holds
            (:class:`aeval.run_lock.RunLock`); without one the run takes its own
            when it starts and releases it when it ends.
        :param overrides: settings to change on resume (e.g. ``poll``, ``workers``);
            the models, trials and rows of a run cannot change.
        """
        run_dir = Path(run_dir)
        path = run_dir / CONFIG_FILE
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise RunDirError(
                f"{run_dir} is not a run directory (no config.json); give the directory "
                "that 'python -m aeval run' printed"
            ) from None
        except (OSError, json.JSONDecodeError) as err:
            raise RunDirError(f"{path}: cannot read the saved configuration: {err}") from err
        frozen = {
            *("models", "trials", "dataset", "dataset_revision"),
            *("limit", "sample", "seed", "tier", "prompt"),
        }
        changed = frozen & set(overrides)
        if changed:
            raise ConfigError(f"a resumed run cannot change {sorted(changed)}")
        config = RunConfig.from_dict(saved, source=str(path))
        config = dataclasses.replace(
            config, out_dir=run_dir.parent, run_id=run_dir.name, **overrides
        )
        if credentials is not None:
            config = config.with_credentials(credentials)
        run = cls(
            config,
            subscribers=subscribers,
            provider=provider,
            resume_dir=run_dir,
            offline=offline,
            submit=submit,
            lock=lock,
            synthetic=synthetic,
        )
        recorded = saved.get(PROVENANCE_KEY)
        run._recorded_provenance = recorded if isinstance(recorded, dict) else None
        return run

    # -- observing -------------------------------------------------------------------

    def events(self) -> AsyncIterator[Event]:
        """An async iterator over this run's events from now on; ends when the run ends.

        Iterate it from another task while :meth:`run` runs. Keep iterating: events
        are buffered for a slow reader, not dropped.
        """
        send, receive = anyio.create_memory_object_stream[Event](math.inf)
        if self._finished:
            send.close()  # nothing more will come
        else:
            self._streams.append(send)
        return _iterate(receive)

    def verdicts(self) -> pl.DataFrame:
        """Every verdict written so far (all of them once :meth:`run` returned)."""
        if self._final is not None:
            return self._final
        if self._store is not None:
            return self._with_provisional(self._store.verdicts_frame())
        if (self.run_dir / MANIFEST_FILE).exists():
            with RunStore.open(self.run_dir, read_only=True) as store:
                return store.verdicts_frame()
        return empty_verdicts()

    def _with_provisional(self, frame: pl.DataFrame) -> pl.DataFrame:
        """The store's verdicts with what only this process knows: provisional
        verdicts, and the answers' classes once they are found."""
        from aeval.answer_classes import with_answer_classes

        if self._provisional:
            extra = verdicts_frame(self._provisional)
            frame = pl.concat([frame, extra]).sort(["model", "trial", "custom_id"])
        return with_answer_classes(frame, self._answer_classes)

    def cancel(self) -> None:
        """Stop the run from outside: :meth:`run` returns an ``interrupted`` result.

        Remote batches keep running; resume the directory later to collect them.
        """
        self._cancel_requested = True
        if self._scope is not None:
            self._scope.cancel()

    def _emit(self, event: Event) -> None:
        for subscriber in self._subscribers:
            try:
                subscriber(event)
            except Exception:  # a broken display must not break the run
                self.subscriber_errors += 1
        for stream in self._streams:
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                stream.send_nowait(event)

    # -- running ---------------------------------------------------------------------

    async def run(self) -> RunResult:
        """Run to the end and return the outcome with every verdict.

        Cancellation (from an enclosing cancel scope, or :meth:`cancel`) stops
        every task, kills busy verifier workers, and leaves a consistent run
        directory that ``python -m aeval resume`` continues.

        :raises AevalError: bad configuration, an unusable run directory or
            dataset, or no API key.
        """
        if self._started:
            raise AevalError("a Run can only be run once; resume its directory instead")
        self._started = True
        outcome: RunOutcome = "interrupted"
        message = "interrupted"
        try:
            with anyio.CancelScope() as scope:
                self._scope = scope
                if self._cancel_requested:
                    scope.cancel()
                outcome, message = await self._run_reporting_os_errors()
            if self._fatal is not None:
                raise self._fatal
            if scope.cancelled_caught:
                outcome, message = "interrupted", self._resume_hint()
            return RunResult(
                run_id=self.run_id,
                run_dir=self.run_dir,
                outcome=outcome,
                verdicts=self.verdicts(),
                failed_jobs=tuple(f"{m} trial {t}" for m, t in self._failed_jobs),
                message=message,
            )
        except AevalError as err:
            # A run that could not go on (bad dataset, damaged run directory…)
            # is not "interrupted": say why it stopped.
            outcome, message = "finished_with_failures", f"stopped: {err}"
            raise
        finally:
            if outcome == "interrupted":
                message = self._resume_hint()
            self._emit(RunFinished(outcome=outcome, run_dir=str(self.run_dir), message=message))
            self._finished = True
            for stream in self._streams:
                stream.close()
            if self._store is not None:
                self._store.close()

    def _resume_hint(self) -> str:
        return (
            f"interrupted; remote batches keep running. Resume with "
            f"'python -m aeval resume {self.run_dir}' or cancel them with "
            f"'python -m aeval cancel {self.run_dir}'"
        )

    def _credentials(self) -> Credentials:
        creds = self.config.credentials or resolve_credentials()
        if creds is None:
            raise ConfigError(
                "no API key: set OPENAI_API_KEY (or OPENAI_KEY), and OPENAI_BASE_URL for "
                "another endpoint; 'python -m aeval' with no key runs the offline demo"
            )
        return creds

    def _open_store(self) -> RunStore:
        if self._resume_dir is not None:
            return RunStore.open(self._resume_dir, lock=self._lock)
        config = {**self.config.to_dict(), PROVENANCE_KEY: self.provenance}
        return RunStore.create(self.config.out_dir, self.run_id, config)

    def _record_provenance(self, fingerprint: DatasetFingerprint) -> None:
        """Pin the data (refusing a resume against different data) and fix the provenance.

        Runs before the store is opened: a refused resume writes nothing.
        """
        if self._resume_dir is not None:
            check_same_data(self._resume_dir, self._recorded_provenance, fingerprint)
        elif fingerprint.revision:
            # A batch can outlive a dataset update, and a branch or tag can move:
            # the run (and its resume) stays at the commit it loaded.
            self.config = dataclasses.replace(self.config, dataset_revision=fingerprint.revision)
        synthetic = self.synthetic or ("local batch server" if self.offline else None)
        self.provenance = self._recorded_provenance or run_provenance(
            self.config, fingerprint, offline=self.offline, synthetic=synthetic
        )

    async def _run_reporting_os_errors(self) -> tuple[RunOutcome, str]:
        """:meth:`_run`, with a failed write to the run directory (full or read-only
        disk) raised as one :class:`RunDirError` naming the path and the OS error."""
        try:
            return await self._run()
        except (OSError, BaseExceptionGroup) as err:
            os_error = first_os_error(err)
            if os_error is None:
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
        if self.submit is None:
            self.submit = False
        elif self.submit:
            lift_hold(store.run_dir)

    async def _watch_hold(self, lifecycle: ShardLifecycle) -> None:
        """Once ``cancel`` puts this live run's directory on hold: create no more
        batches, and cancel any this run created that ``cancel`` could not see yet.
        The cancelled batches are then collected like any other terminal batch."""
        from aeval.batch.provider import TERMINAL_STATUSES
        from aeval.batch.retry import call_with_retries

        while submission_hold(self.run_dir) is None:
            await anyio.sleep(_HOLD_CHECK_S)  # one stat a second
        lifecycle.submit = self.submit = False
        cancelled: set[str] = set()
        while True:
            for rec in list(lifecycle.store.shards.values()):
                batch_id = rec.batch_id
                if batch_id is None or batch_id in cancelled or rec.status in TERMINAL_STATUSES:
                    continue
                if rec.status in ("downloading", "done", "failed"):
                    continue
                cancelled.add(batch_id)
                with contextlib.suppress(ApiError, TransientApiError):  # e.g. finished meanwhile
                    await call_with_retries(
                        "cancel",
                        lambda batch_id=batch_id: lifecycle.provider.cancel(batch_id),
                        self.config.retry,
                        deadline_s=_HOLD_CHECK_S * 60,
                    )
            await anyio.sleep(_HOLD_CHECK_S)

    async def _prepare(self) -> tuple[RunStore, list[ShardRecord]]:
        if self._resume_dir is not None:
            # Claim the directory before anything else: a second driver must stop
            # at once, before it loads data or touches a file.
            self._store = self._open_store()
            self._apply_hold(self._store)
        questions, self._truth, fingerprint = await anyio.to_thread.run_sync(
            _load_truth, self.config
        )
        if self.synthetic is None and self._resume_dir is None and self._provider is None:
            # A run sent by hand to an 'aeval serve' is as synthetic as the offline demo.
            creds = self.config.credentials or resolve_credentials()
            if creds is not None:
                self.synthetic = await probe_local_server(creds.base_url, creds.api_key)
        self._record_provenance(fingerprint)  # refuses a resume against other data
        store = self._store if self._store is not None else self._open_store()
        self._store = store
        if self.submit is None:
            self.submit = True
        if not store.shards:  # new, or killed before the plan was saved: plan (again)
            records = await anyio.to_thread.run_sync(_plan_shards, self.config, store, questions)
            store.put_shards(records)
        return store, list(store.shards.values())

    async def _run(self) -> tuple[RunOutcome, str]:
        provider = self._provider
        if provider is None:
            from aeval.batch.openai_api import OpenAIBatchProvider

            provider = OpenAIBatchProvider(self._credentials(), self.config.retry)
        try:
            return await self._run_with(provider)
        finally:
            if self._provider is None:
                with anyio.CancelScope(shield=True):
                    await provider.aclose()

    async def _run_with(self, provider: BatchProvider) -> tuple[RunOutcome, str]:
        from aeval.verify import VerifierPool

        store, records = await self._prepare()
        self._emit(
            RunStarted(
                run_id=self.run_id,
                run_dir=str(self.run_dir),
                models=self.config.models,
                trials=self.config.trials,
                items=len(self._truth),
                shards=tuple(
                    ShardInfo(r.model, r.trial, r.shard, r.requests)
                    for r in records
                    if r.parent is None
                ),
                offline=self.offline,
                resumed=self._resume_dir is not None,
                synthetic=bool((self.provenance or {}).get("synthetic")),
            )
        )
        for rec in records:
            self._emit(self._shard_event(rec))
        lifecycle = ShardLifecycle(
            provider=provider,
            store=store,
            poll=self.config.poll,
            retry=self.config.retry,
            rng=self._rng,
            on_change=lambda rec: self._emit(self._shard_event(rec)),
            on_retry=self._on_retry,
            submit=bool(self.submit),
        )
        async with (
            VerifierPool(
                self.config.limits, self.config.workers, published=self.config.published
            ) as pool,
            anyio.create_task_group() as watch,
        ):
            watch.start_soon(self._watch_hold, lifecycle)
            await self._pipeline(pool, lifecycle, records)
            watch.cancel_scope.cancel()
        from aeval.report import summarize

        frame = self._with_provisional(store.verdicts_frame())
        store.finish({**summarize(frame), PROVENANCE_KEY: self.provenance}, frame)
        self._final = frame
        if self._failed_jobs:
            failed = "; ".join(f"{m} trial {t}: {why}" for (m, t), why in self._failed_jobs.items())
            return "finished_with_failures", f"finished with failed jobs: {failed}"
        return "finished", f"finished: {frame.height} verdicts in {self.run_dir}"

    async def _find_answer_classes(self, pool: Any) -> None:
        """Every answer's equivalence class among its item's trials (maj@n's votes),
        with the same pool; the answers are read back from outputs/ so that a
        resumed run classes the answers of earlier processes too."""
        from aeval.answer_classes import answer_classes, keys_needing_text, run_answer_texts

        store = self._store
        assert store is not None
        frame = self._with_provisional(store.verdicts_frame())

        keys = keys_needing_text(frame)
        texts = await anyio.to_thread.run_sync(
            run_answer_texts, store.run_dir, list(store.shards.values()), keys, self.config.limits
        )

        def constants(cid: str) -> str | None:
            truth = self._truth.get(cid)
            return None if truth is None else truth.constants

        found = await answer_classes(frame, pool, texts, constants)
        self._answer_classes = found.classes

    async def _pipeline(
        self, pool: Any, lifecycle: ShardLifecycle, records: list[ShardRecord]
    ) -> None:
        """jobs → (bounded) work stream → checkers → (bounded) verdict stream → writer;
        then, every verdict in, the answers' equivalence classes."""
        queue = self.config.verify_queue
        work_send, work_recv = anyio.create_memory_object_stream[_Work](queue)
        verdict_send, verdict_recv = anyio.create_memory_object_stream[tuple[Verdict, int]](queue)
        # Twice as many checkers as workers keeps every worker busy while
        # results travel back; the pool bounds real concurrency.
        checkers = pool.workers * 2
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._write_verdicts, verdict_recv)
            async with verdict_send, anyio.create_task_group() as checks:
                for _ in range(checkers):
                    checks.start_soon(self._check, pool, work_recv.clone(), verdict_send.clone())
                work_recv.close()
                async with work_send, anyio.create_task_group() as jobs:
                    for model in self.config.models:
                        for trial in range(1, self.config.trials + 1):
                            roots = [
                                r
                                for r in records
                                if (r.model, r.trial) == (model, trial) and r.parent is None
                            ]
                            jobs.start_soon(
                                self._job,
                                lifecycle,
                                model,
                                trial,
                                roots,
                                work_send.clone(),
                                verdict_send.clone(),
                            )
        await self._find_answer_classes(pool)

    def _shard_event(self, rec: ShardRecord) -> ShardUpdated:
        return ShardUpdated(
            model=rec.model,
            trial=rec.trial,
            shard=rec.shard,
            phase=_phase(rec.status),
            batch_id=rec.batch_id,
            completed=rec.completed,
            failed=rec.failed,
            total=rec.total or rec.requests,
            created_at=rec.created_at,
        )

    def _on_retry(self, rec: ShardRecord, notice: RetryNotice) -> None:
        self._emit(
            RetryScheduled(
                model=rec.model,
                trial=rec.trial,
                shard=rec.shard,
                operation=notice.operation,
                attempt=notice.attempt,
                delay_s=notice.delay_s,
                error=notice.error,
            )
        )

    # -- the stages ------------------------------------------------------------------

    async def _write_verdicts(self, verdicts: ObjectReceiveStream[tuple[Verdict, int]]) -> None:
        store = self._store
        assert store is not None
        async with verdicts:
            async for verdict, shard in verdicts:
                if store.append_verdict(verdict):
                    self._emit(VerdictProduced(verdict=verdict, shard=shard))
                pending = self._pending.get((verdict.model, verdict.trial))
                if pending is not None:
                    pending.done()

    async def _check(
        self,
        pool: Any,
        work: ObjectReceiveStream[_Work],
        verdicts: ObjectSendStream[tuple[Verdict, int]],
    ) -> None:
        from aeval.responses import score_response

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
                await verdicts.send((verdict, item.shard))

    async def _job(
        self,
        lifecycle: ShardLifecycle,
        model: str,
        trial: int,
        roots: list[ShardRecord],
        work: ObjectSendStream[_Work],
        verdicts: ObjectSendStream[tuple[Verdict, int]],
    ) -> None:
        problems: list[str] = []
        pending = self._pending.setdefault((model, trial), _Pending())
        async with work, verdicts, anyio.create_task_group() as tg:
            for rec in roots:
                tg.start_soon(self._shard, lifecycle, rec, work.clone(), verdicts.clone(), problems)
        await pending.drained()
        ok = not problems
        if not ok:
            self._failed_jobs[(model, trial)] = problems[0]
        self._emit(JobFinished(model=model, trial=trial, ok=ok, message="; ".join(problems)))

    async def _shard(
        self,
        lifecycle: ShardLifecycle,
        rec: ShardRecord,
        work: ObjectSendStream[_Work],
        verdicts: ObjectSendStream[tuple[Verdict, int]],
        problems: list[str],
    ) -> None:
        async with work, verdicts:
            while rec is not None:
                try:
                    rec = await self._drive_shard(lifecycle, rec, work, verdicts, problems)
                except (RunDirError, UnreachableError) as err:
                    self._stop(err)  # no shard can go on: end the whole run with this error
                    return

    def _stop(self, err: AevalError) -> None:
        """End the run with ``err`` (raised by :meth:`run`): cancel every task first."""
        if self._fatal is None:
            self._fatal = err
        if self._scope is not None:
            self._scope.cancel()

    async def _drive_shard(
        self,
        lifecycle: ShardLifecycle,
        rec: ShardRecord,
        work: ObjectSendStream[_Work],
        verdicts: ObjectSendStream[tuple[Verdict, int]],
        problems: list[str],
    ) -> ShardRecord | None:
        """Run one shard to the end; returns the retry shard to run next, if any."""
        from aeval.responses import api_error_verdict, parse_batch_line

        store = lifecycle.store
        config = self.config
        model, trial = rec.model, rec.trial
        expected = frozenset(
            await anyio.to_thread.run_sync(_request_ids, store.path(rec.input_path), rec.sha256)
        )
        child = store.shards.get(rec.retry_shard) if rec.retry_shard else None
        handed_over = (
            frozenset(
                await anyio.to_thread.run_sync(
                    _request_ids, store.path(child.input_path), child.sha256
                )
            )
            if child is not None
            else frozenset()
        )
        pending = self._pending.setdefault((model, trial), _Pending())
        seen: set[str] = set()
        to_retry: list[str] = []
        counts = {"output": 0, "error": 0}
        sources: dict[tuple[int, str], str] = {}  # the file's name, made once, not per line

        async def sink(line: str, lineno: int, kind: str) -> None:
            counts[kind] += 1
            source = sources.get((rec.attempt, kind))
            if source is None:
                source = sources[rec.attempt, kind] = str(store.output_path(rec, kind))
            try:
                response = parse_batch_line(line, source=source, lineno=lineno)
            except InputFileError:
                return  # hostile or torn line: its row ends up 'missing', never lost silently
            cid = response.custom_id
            if cid not in expected or cid in seen:
                return
            seen.add(cid)
            if cid in handed_over or store.has_verdict(model, trial, cid):
                return
            truth = self._truth.get(cid)
            if truth is None:
                return
            if response.is_error:
                if (
                    self.submit
                    and child is None
                    and rec.round < config.retry_failed
                    and _is_retryable(response)
                ):
                    to_retry.append(cid)
                    return
                verdict = api_error_verdict(response, model=model, trial=trial, tier=truth.tier)
                pending.add()
                await verdicts.send((verdict, rec.shard))
                return
            pending.add()
            await work.send(_Work(response, truth, model, trial, rec.shard))

        failure: str | None = None
        remote: RemoteBatch | None = None
        try:
            rec, remote = await lifecycle.run_batch(rec)
            if remote.status == "failed":
                described = "; ".join(e.describe() for e in remote.errors) or "no reason given"
                failure = f"batch {remote.id} failed: {described}"
            else:
                rec = lifecycle.save(rec.evolve(status="downloading"))
                rec = await lifecycle.download(rec, "output", sink)
                rec = await lifecycle.download(rec, "error", sink)
                self._emit(
                    OutputDownloaded(
                        model=model,
                        trial=trial,
                        shard=rec.shard,
                        output_lines=counts["output"],
                        error_lines=counts["error"],
                    )
                )
        except ShardFailed as err:
            failure = str(err)
        except TransientApiError as err:  # retried until the deadline: give the shard up
            failure = f"{rec.key}: gave up retrying: {err}"
        except ApiError as err:  # e.g. a result file the API no longer has
            failure = f"{rec.key}: {err}"
        if failure is not None:
            problems.append(failure)
            # Only a batch the API failed is final. A shard that never got a
            # batch (bad key, API down past the deadline), whose polls gave up or
            # whose results could not be downloaded gets provisional verdicts: in
            # this run's results, not in verdicts.jsonl, so a resume (with the key
            # fixed, or the API back) submits or collects it for real.
            provisional = remote is None or remote.status != "failed"
            unanswered = expected - seen - handed_over
            for verdict in self._unanswered(store, rec, unanswered, Status.API_ERROR, failure):
                if provisional:
                    self._provisional.append(verdict)
                    self._emit(VerdictProduced(verdict=verdict, shard=rec.shard))
                    continue
                pending.add()
                await verdicts.send((verdict, rec.shard))
            # The lifecycle may have recorded more (a file id, upload attempts) since
            # ``rec`` was read: keep it, or a resume would upload again and orphan it.
            latest = store.shards.get(rec.key, rec)
            lifecycle.save(latest.evolve(status="failed", message=failure))
            return None
        final_status = remote.status if remote is not None else "failed"
        missing = (
            f"no line for this request in the output or error file "
            f"of batch {rec.batch_id} ({final_status})"
        )
        for verdict in self._unanswered(
            store, rec, expected - seen - handed_over, Status.MISSING, missing
        ):
            pending.add()
            await verdicts.send((verdict, rec.shard))
        if to_retry:
            child = self._retry_shard(store, rec, frozenset(to_retry))
            rec = rec.evolve(retry_shard=child.key, status="done")
            store.put_shards([child, rec])
            self._emit(self._shard_event(child))
            self._emit(self._shard_event(rec))
            return child
        lifecycle.save(rec.evolve(status="done"))
        return child if child is not None and child.status != "done" else None

    def _unanswered(
        self, store: RunStore, rec: ShardRecord, ids: frozenset[str], status: Status, reason: str
    ) -> Iterator[Verdict]:
        """A ``status`` verdict for each of ``ids`` (in order) that has none in the store yet.

        Lazy: the store is asked about each id only when its turn comes.
        """
        from aeval.responses import published_unanswered

        published = published_unanswered() if self.config.published else {}
        for cid in sorted(ids):
            if not store.has_verdict(rec.model, rec.trial, cid):
                truth = self._truth.get(cid)
                yield Verdict(
                    model=rec.model,
                    trial=rec.trial,
                    custom_id=cid,
                    status=status,
                    reason=reason,
                    tier=truth.tier if truth else None,
                    **published,
                )

    def _retry_shard(
        self, store: RunStore, parent: ShardRecord, ids: frozenset[str]
    ) -> ShardRecord:
        """A new shard resubmitting ``ids`` of ``parent`` (same request lines)."""
        siblings = [r.shard for r in store.shards.values() if r.model == parent.model]
        number = max(siblings, default=0) + 1
        key = shard_key(parent.model, parent.trial, number)
        dest = store.request_path(shard_stem(parent.model, parent.trial, number))
        count, size, sha = _write_subset(store.path(parent.input_path), dest, ids)
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
        )


async def _iterate(receive: ObjectReceiveStream[Event]) -> AsyncIterator[Event]:
    async with receive:
        async for event in receive:
            yield event


def plan_run(config: RunConfig) -> DryRunPlan:
    """Write the request files of a run (``--dry-run``) without calling any API."""
    questions, truth, fingerprint = _load_truth(config)
    if fingerprint.revision:  # pinned to the commit loaded, as a run is
        config = dataclasses.replace(config, dataset_revision=fingerprint.revision)
    provenance = run_provenance(config, fingerprint, offline=False, synthetic=None)
    run_id = config.run_id or new_run_id()
    saved = {**config.to_dict(), PROVENANCE_KEY: provenance}
    store = RunStore.create(config.out_dir, run_id, saved)
    try:
        hold_submissions(store.run_dir, "dry-run")  # resume only submits it when told to
        records = _plan_shards(config, store, questions)
        store.put_shards(records)
    finally:
        store.close()
    total = sum(r.bytes for r in records)
    return DryRunPlan(
        run_dir=store.run_dir,
        items=len(truth),
        shards=tuple(records),
        request_bytes=total,
        # ~4 bytes per token for English text and JSON framing: an estimate only.
        estimated_input_tokens=total // 4,
    )


async def evaluate(
    config: RunConfig, *, subscribers: Sequence[Callable[[Event], None]] = ()
) -> pl.DataFrame:
    """Run ``config`` to the end and return its verdicts (a convenience around :class:`Run`)."""
    result = await Run(config, subscribers=subscribers).run()
    return result.verdicts
