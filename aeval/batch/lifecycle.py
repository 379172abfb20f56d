"""One shard's life on the batch API, written once for every provider.

check the request file's hash → record the upload attempt → upload → record
intent → create (or find the batch a crashed run created) → record its id →
delete stray uploads → poll with jittered backoff → download output and error
files, streaming each line to the caller while writing it to the run directory.

Every state change is written to the manifest (through :class:`RunStore`)
*before* the next remote call that depends on it, which is what makes a
SIGKILL at any point resumable without creating a batch twice. A remote
create is never repeated blindly: every new attempt at ``create`` first asks
the provider to find the batch (:meth:`BatchProvider.find`, its lost-create
rule), and every upload attempt is counted before it is made, so that files
whose upload response was lost are found by name and deleted once the shard
has its batch.

Each shard goes through its own model's provider (:class:`ProviderSet`): one run
may mix providers, every job on its own API, all concurrently. A provider whose
lost-create rule needs it (``serial_creates``) gets this run's creates one at a
time, from the recorded intent to the recorded id, and every create intent of
its shards left unresolved (by a SIGKILL, or a create that gave up) resolved
before the next intent is recorded.
"""

from __future__ import annotations

import functools
import random
import secrets
import time
from collections.abc import Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager, nullcontext
from typing import TypeVar

import anyio

from aeval.api_settings import PollSettings, RetrySettings
from aeval.batch.outputs import LineSink, OutputDownload, replay_output
from aeval.batch.pacing import ModelGate, PollSchedule
from aeval.batch.providers.base import (
    BatchInput,
    BatchProvider,
    BatchTag,
    ForeignBatchError,
    RemoteBatch,
)
from aeval.batch.providers.registry import ProviderSet, provider_spec
from aeval.batch.retry import (
    TOKEN_LIMIT_CODE,
    RetryNotice,
    call_with_retries,
    resubmittable_batch,
)
from aeval.batch.shard import check_request_file
from aeval.batch.transient import TransientApiError
from aeval.errors import AevalError, ApiError
from aeval.store import RunStore, ShardRecord
from aeval.store.hold import Submit
from aeval.store.shards import ShardChanges

T = TypeVar("T")

__all__ = [
    "BatchSetAside",
    "ShardFailed",
    "ShardLifecycle",
    "batch_metadata",
    "batch_tag",
    "claimed_batches",
]


def batch_tag(run_id: str, rec: ShardRecord, claimed: frozenset[str] = frozenset()) -> BatchTag:
    """What names the shard's current batch, so a resumed run (or ``cancel``) can find it
    through its provider's lost-create rule.

    :param claimed: batch ids the run recorded for any shard (never found for this one).
    """
    return BatchTag(
        run_id=run_id,
        shard=rec.key,
        attempt=rec.attempt,
        requests=rec.requests,
        intent_at=rec.intent_at,
        claimed=claimed - {rec.batch_id} if rec.batch_id else claimed,
        input_file_id=rec.input_file_id,
    )


def batch_metadata(run_id: str, rec: ShardRecord) -> dict[str, str]:
    """What the shard's current batch is labelled with where the API keeps metadata."""
    return batch_tag(run_id, rec).metadata


def claimed_batches(records: Iterable[ShardRecord]) -> frozenset[str]:
    """Every batch id a run recorded, current or previous."""
    ids: set[str] = set()
    for rec in records:
        ids.update(rec.previous_batch_ids)
        if rec.batch_id:
            ids.add(rec.batch_id)
    return frozenset(ids)


class ShardFailed(Exception):
    """The shard cannot finish: auth, bad request, a poll grace exhausted, or a call
    (upload, create, download) still failing at its retry deadline."""


class BatchSetAside(ShardFailed):
    """The batch the lost-create search took for the shard's is another's (its results
    say so): set aside, and the shard's own batch looked for again, or created."""


def _failed(rec: ShardRecord, err: TransientApiError | ApiError) -> ShardFailed:
    if isinstance(err, TransientApiError):  # retried until the deadline: give the shard up
        return ShardFailed(f"{rec.key}: gave up retrying: {err}")
    return ShardFailed(f"{rec.key}: {err}")


class ShardLifecycle:
    """Drives shards of one run through the batch API. One instance per run."""

    def __init__(
        self,
        *,
        providers: ProviderSet,
        store: RunStore,
        poll: PollSettings,
        retry: RetrySettings,
        rng: random.Random,
        on_change: Callable[[ShardRecord], None],
        on_retry: Callable[[ShardRecord, RetryNotice], None],
        submit: Callable[[], Submit] = lambda: Submit.CREATE,
    ) -> None:
        # The run's policy now: anything but CREATE only reattaches and collects
        # (a cancelled run, or a live one 'cancel' put on hold).
        self.submit = submit
        self.started = time.monotonic()
        self.providers = providers
        self.store = store
        self.poll = poll
        self.retry = retry
        self.rng = rng
        self._on_change = on_change
        self._on_retry = on_retry
        self.gates: dict[str, ModelGate] = {}
        # One lock per provider whose lost-create rule needs this run's creates serialised.
        self._create_locks: dict[str, anyio.Lock] = {}
        self._created = False  # anything remote recorded yet (see _connect_deadline)
        # When each polled shard is looked at next (epoch s), by ShardRecord.key: the
        # live view's estimate of when a batch's answers can arrive.
        self.next_poll: dict[str, float] = {}

    # -- bookkeeping ---------------------------------------------------------------

    def gate(self, model: str) -> ModelGate:
        return self.gates.setdefault(model, ModelGate())

    async def save(self, *records: ShardRecord) -> ShardRecord:
        """Record the shards durably (the manifest written off the event loop), then
        tell the subscribers; returns the first."""
        await self.store.save_shards(records)
        for rec in records:
            self._on_change(rec)
        return records[0]

    def provider(self, rec: ShardRecord) -> BatchProvider:
        """The open adapter of the shard's model's provider."""
        return self.providers.for_model(rec.model)

    def tag(self, rec: ShardRecord) -> BatchTag:
        return batch_tag(self.store.run_id, rec, claimed_batches(self.store.shards.values()))

    def metadata(self, rec: ShardRecord) -> dict[str, str]:
        return self.tag(rec).metadata

    def _connect_deadline(self) -> float | None:
        """The connect deadline while the run has created nothing remote; then none.

        Until then an endpoint that never answers is a wrong URL or a closed
        port, and the run ends; once files or batches exist, giving up would
        strand them, so connection failures get the long deadline like the rest.
        """
        if not self._created:
            self._created = any(
                r.input_file_id or r.batch_id or r.intent_attempt is not None
                for r in self.store.shards.values()
            )
        return None if self._created else self.retry.connect_deadline_s

    async def _call(
        self,
        rec: ShardRecord,
        operation: str,
        call: Callable[[], Awaitable[T]],
        *,
        deadline_s: float | None = None,
    ) -> T:
        deadline_s = self.retry.deadline_s if deadline_s is None else deadline_s
        left = self.retry.run_deadline_s - (time.monotonic() - self.started)
        deadline_s = max(0.0, min(deadline_s, left))  # the run-level bound on retrying
        provider = self.provider(rec)
        return await call_with_retries(
            operation,
            call,
            self.retry,
            on_retry=lambda notice: self._on_retry(rec, notice),
            deadline_s=deadline_s,
            connect_deadline_s=self._connect_deadline(),
            endpoint=provider.endpoint,
            endpoint_variable=_base_url_variable(provider.name),
        )

    async def _apply(self, rec: ShardRecord, remote: RemoteBatch) -> ShardRecord:
        """The shard as ``remote`` has it, recorded (and told) if that is a change."""
        applied = self._applied(rec, remote)
        return rec if applied is rec else await self.save(applied)

    @staticmethod
    def _applied(rec: ShardRecord, remote: RemoteBatch) -> ShardRecord:
        """The shard as ``remote`` has it (``rec`` itself where nothing changed)."""
        changes: ShardChanges = {
            "batch_id": remote.id,
            "status": remote.status,
            "completed": remote.completed,
            "failed": remote.failed,
            "total": remote.total,
            "created_at": remote.created_at,
            "output_file_id": remote.output_file_id,
            "error_file_id": remote.error_file_id,
            "errors": tuple(
                {"code": e.code, "line": e.line, "message": e.message} for e in remote.errors
            ),
        }
        if all(getattr(rec, k) == v for k, v in changes.items()):
            return rec
        return rec.evolve(**changes)

    # -- the stages ----------------------------------------------------------------

    async def ensure_uploaded(self, rec: ShardRecord) -> ShardRecord:
        if rec.input_file_id is not None or not self.provider(rec).wants_upload(rec.bytes):
            return rec
        path = self.store.path(rec.input_path)
        if not path.exists():
            raise ShardFailed(f"{rec.key}: request file {path} is missing from the run directory")
        await anyio.to_thread.run_sync(check_request_file, self.store, rec)
        # A name of this shard's own, recorded before the upload, so that a stray copy
        # is recognisable by it; the random part keeps it apart from a run elsewhere
        # under the same --run-id (an adapter may make the file's bytes unique by it).
        name = rec.upload_name or f"{self.store.run_id}-{rec.stem}-{secrets.token_hex(4)}.jsonl"
        rec = await self.save(rec.evolve(status="uploading", upload_name=name))

        async def upload_once() -> str:
            # Counted before the upload: if its response is lost, the file exists
            # remotely under ``name`` and is deleted once the shard has its batch.
            nonlocal rec
            rec = await self.save(rec.evolve(upload_attempts=rec.upload_attempts + 1))
            return await self.provider(rec).upload(path, filename=name)

        file_id = await self._call(rec, "upload", upload_once)
        return await self.save(rec.evolve(input_file_id=file_id))

    async def clear_stray_uploads(self, rec: ShardRecord) -> ShardRecord:
        """Delete the request files uploaded for this shard that never became its input.

        Only needed after more than one upload attempt (a lost response, or a
        kill between upload and recording its id). Best effort: what cannot be
        deleted now is tried again on resume.
        """
        if rec.stray_uploads_cleared or rec.upload_attempts <= 1 or rec.upload_name is None:
            return rec
        name, keep = rec.upload_name, rec.input_file_id
        provider = self.provider(rec)
        try:
            ids = await self._call(
                rec, "list files", lambda: provider.find_files(name), deadline_s=60.0
            )
            for file_id in ids:
                if file_id != keep:
                    await self._call(
                        rec,
                        "delete file",
                        functools.partial(provider.delete_file, file_id),
                        deadline_s=60.0,
                    )
        except (TransientApiError, ApiError):
            return rec
        return await self.save(rec.evolve(stray_uploads_cleared=True))

    async def ensure_batch(self, rec: ShardRecord) -> tuple[ShardRecord, RemoteBatch]:
        """Reattach to the shard's current batch, or create it exactly once."""
        provider = self.provider(rec)
        found: RemoteBatch | None = None
        if rec.batch_id is None and provider.serial_creates:
            async with self._serial_creates(provider):
                rec, found = await self._settle_intents(provider, rec)
        elif rec.batch_id is None and rec.intent_attempt == rec.attempt:
            # A previous process recorded the intent and may have created the
            # batch before dying: look for it before creating anything.
            tag = self.tag(rec)
            found = await self._call(rec, "list", lambda: provider.find(tag))
            if found is not None:
                rec = await self._apply(rec, found)
        if found is not None:
            return await self.clear_stray_uploads(rec), found
        if rec.batch_id is not None:
            remote = await self._call(
                rec, "poll", functools.partial(provider.retrieve, rec.batch_id)
            )
            rec = await self.clear_stray_uploads(await self._apply(rec, remote))
            return rec, remote
        if self.submit() is not Submit.CREATE:
            raise ShardFailed(
                f"{rec.key}: never submitted (the run was cancelled before its batch was created)"
            )
        rec = await self.ensure_uploaded(rec)
        gate = self.gate(rec.model)
        await gate.wait_unblocked()
        async with self._serial_creates(provider):
            if provider.serial_creates:
                # Another shard's create may have given up meanwhile with its intent
                # unresolved: settled before this intent is recorded.
                rec, found = await self._settle_intents(provider, rec)
                if found is not None:
                    return await self.clear_stray_uploads(rec), found
            if rec.intent_attempt != rec.attempt or rec.intent_at is None:
                rec = await self.save(rec.evolve(intent_attempt=rec.attempt, intent_at=time.time()))
            source = BatchInput(
                path=self.store.path(rec.input_path),
                file_id=rec.input_file_id,
                requests=rec.requests,
                bytes=rec.bytes,
            )
            tag = self.tag(rec)
            attempts = 0

            async def create_once() -> RemoteBatch:
                # A create whose response was lost (dropped connection, 5xx after
                # the fact) may still have created the batch: look before retrying.
                nonlocal attempts
                attempts += 1
                if attempts > 1:
                    found = await provider.find(tag)
                    if found is not None:
                        return found
                return await provider.create(source, tag)

            remote = await self._call(rec, "create", create_once)
            rec = await self._apply(rec, remote)
        rec = await self.clear_stray_uploads(rec)
        return rec, remote

    async def _settle_intents(
        self, provider: BatchProvider, rec: ShardRecord
    ) -> tuple[ShardRecord, RemoteBatch | None]:
        """Resolve every unresolved create intent of ``provider``'s shards (holding its
        serial-create lock): the batch its lost-create search finds is recorded as that
        shard's, or, none found, the intent is withdrawn (nothing was created for it; the
        shard records a new one when it creates).

        Called before any intent on a serial provider is recorded, so that at most one
        of its creates is ever unresolved, in this process or left by a killed one: a
        search that tells batches apart by time and size only then never has another
        shard's unrecorded batch in its window (one shard's intent left by a SIGKILL
        before its create was sent, another's batch created by the resume, both in one
        window, would otherwise be taken for the first shard's).

        :returns: ``rec`` as recorded now, and the batch found for it, if one was.
        """
        pending = sorted(
            (
                r
                for r in self.store.shards.values()
                if r.batch_id is None and r.intent_attempt == r.attempt and self._on(r, provider)
            ),
            key=lambda r: r.intent_at or 0.0,
        )
        mine: RemoteBatch | None = None
        for shard in pending:
            # Each search's claimed ids include the batches found before it.
            tag = self.tag(shard)
            found = await self._call(shard, "list", functools.partial(provider.find, tag))
            if found is None:
                await self.save(shard.evolve(intent_attempt=None, intent_at=None))
            else:
                await self._apply(shard, found)
                if shard.key == rec.key:
                    mine = found
        return self.store.shards.get(rec.key, rec), mine

    def _on(self, rec: ShardRecord, provider: BatchProvider) -> bool:
        """Whether the shard's model is on ``provider`` (a provider without a key is none)."""
        try:
            return self.provider(rec) is provider
        except AevalError:
            return False

    def _serial_creates(self, provider: BatchProvider) -> AbstractAsyncContextManager[object]:
        """Held from a create's recorded intent to its recorded id (and while unresolved
        intents are settled, :meth:`_settle_intents`), where the provider's lost-create rule
        tells this run's batches apart by time and size only; not across the upload or the
        gate's wait."""
        if not provider.serial_creates:
            return nullcontext()
        return self._create_locks.setdefault(provider.name, anyio.Lock())

    async def poll_until_terminal(
        self, rec: ShardRecord, remote: RemoteBatch
    ) -> tuple[ShardRecord, RemoteBatch]:
        """Poll with jittered backoff; a poll failing for longer than the grace fails the shard."""
        schedule = PollSchedule(self.poll, self.rng)
        provider = self.provider(rec)
        last_status = remote.status
        schedule.observe(remote, anyio.current_time())
        delay = self._schedule_poll(rec, schedule)
        while not remote.terminal:
            await anyio.sleep(delay)
            batch_id = remote.id
            try:
                remote = await self._call(
                    rec,
                    "poll",
                    functools.partial(provider.retrieve, batch_id),
                    deadline_s=self.poll.grace_s,
                )
            except TransientApiError as err:
                raise ShardFailed(
                    f"{rec.key}: polling batch {batch_id} kept failing for "
                    f"{self.poll.grace_s:.0f} s: {err}"
                ) from err
            schedule.observe(remote, anyio.current_time())  # the counts as of this answer
            if remote.status != last_status:
                if remote.status == "finalizing":  # usually short: look again soon
                    schedule.reset()
                last_status = remote.status
            applied = self._applied(rec, remote)
            if applied is not rec:
                await self.store.save_shards([applied])
            rec = applied
            # The next poll is scheduled once the change is on disk and told at once, with
            # no wait between: an update never names a poll time already past (the save can
            # take longer than the shortest wait on a loaded machine).
            if remote.terminal:
                self.next_poll.pop(rec.key, None)
            else:
                delay = self._schedule_poll(rec, schedule)
            # Told even when the batch did not change: the next poll's time did.
            self._on_change(rec)
        return rec, remote

    def _schedule_poll(self, rec: ShardRecord, schedule: PollSchedule) -> float:
        """The wait from now to the shard's next poll, noted in :attr:`next_poll`."""
        delay = schedule.next_delay(anyio.current_time())
        self.next_poll[rec.key] = time.time() + delay
        return delay

    async def download(self, rec: ShardRecord, kind: str, sink: LineSink) -> ShardRecord:
        """Stream the batch's ``output`` or ``error`` file to disk and, line by line, to ``sink``.

        An already downloaded file is read back from the run directory. A
        download broken half-way is retried from the start; lines already given
        to ``sink`` are not given again.
        """
        file_id = rec.output_file_id if kind == "output" else rec.error_file_id
        done = rec.output_downloaded if kind == "output" else rec.error_downloaded
        if file_id is None:
            return rec
        path = self.store.output_path(rec, kind)
        if done and path.exists():
            await replay_output(path, kind, sink)
            return rec
        download = OutputDownload(self.provider(rec), file_id, path, kind, sink, self.tag(rec))
        try:
            await self._call(rec, f"download {kind}", download.attempt)
        except ForeignBatchError as err:
            try:
                await self.set_aside(rec)
            except (TransientApiError, ApiError) as looking:  # the search for its own failed
                raise _failed(rec, looking) from err
            raise BatchSetAside(
                f"{rec.key}: {err}; batch {rec.batch_id} was found by listing but is not this "
                "shard's: it is set aside, and the shard's own batch is looked for again "
                "(or created)"
            ) from err
        except (TransientApiError, ApiError) as err:  # the same failure a poll gives up with
            raise _failed(rec, err) from err
        download.finish()
        if kind == "output":
            return await self.save(rec.evolve(output_downloaded=True))
        return await self.save(rec.evolve(error_downloaded=True))

    async def set_aside(self, rec: ShardRecord) -> ShardRecord:
        """:meth:`disown` the shard's batch and settle its intent at once (found: the
        shard's own batch is recorded; none: the intent is withdrawn), holding the
        provider's serial-create lock, so that no other intent is ever unresolved beside
        it (:meth:`_settle_intents`)."""
        provider = self.provider(rec)
        async with self._serial_creates(provider):
            rec = await self.disown(rec)
            if provider.serial_creates:  # the shard's intent and any other left unresolved
                rec, _ = await self._settle_intents(provider, rec)
        return rec

    async def disown(self, rec: ShardRecord) -> ShardRecord:
        """Forget a batch the lost-create rule took for the shard's but whose results
        say otherwise: kept among the run's claimed ids (never found again), while the
        intent stays, so the next look finds the shard's own batch, if it exists."""
        return await self.save(rec.without_batch(total=0, created_at=None))

    async def resubmit(self, rec: ShardRecord) -> ShardRecord:
        """Start a new attempt of the same shard (after the token limit refused it)."""
        return await self.save(rec.without_batch(attempt=rec.attempt + 1, intent_at=None))

    async def run_batch(self, rec: ShardRecord) -> tuple[ShardRecord, RemoteBatch]:
        """Submit (or reattach) and wait for a terminal status, resubmitting on the token limit.

        :raises ShardFailed: auth or request errors, a poll failing past its grace, or
            an upload or create still failing at its retry deadline.
        """
        token_waits = 0
        while True:
            gate = self.gate(rec.model)
            try:
                rec, remote = await self.ensure_batch(rec)
                if not remote.terminal:
                    await gate.started()
                    try:
                        rec, remote = await self.poll_until_terminal(rec, remote)
                    finally:
                        await gate.finished()
            except (TransientApiError, ApiError) as err:
                raise _failed(rec, err) from err
            if resubmittable_batch(remote.status, remote.error_codes):
                if token_waits >= self.retry.token_limit_max_resubmits:
                    raise ShardFailed(
                        f"{rec.key}: still over the enqueued-token limit after "
                        f"{token_waits} resubmissions"
                    )
                token_waits += 1
                await gate.block()
                delay = min(
                    self.retry.max_s * 10,
                    self.retry.token_limit_wait_s * 2 ** (token_waits - 1),
                ) * self.rng.uniform(0.8, 1.2)
                self._on_retry(
                    rec,
                    RetryNotice(
                        operation="resubmit",
                        attempt=token_waits,
                        delay_s=delay,
                        error=f"{TOKEN_LIMIT_CODE}: waiting for {rec.model}'s batches",
                    ),
                )
                await gate.wait_idle()
                await anyio.sleep(delay)
                await gate.unblock()
                rec = await self.resubmit(rec)
                continue
            return rec, remote


def _base_url_variable(provider: str) -> str | None:
    try:
        return provider_spec(provider).base_url_variable
    except AevalError:  # a library user's own provider under another name
        return None
