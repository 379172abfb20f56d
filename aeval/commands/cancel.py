"""``python -m aeval cancel RUN_DIR``: cancel a run's remote batches and collect what exists.

It cancels every unfinished batch of the run, each through its own provider
(finding, by that provider's lost-create rule, any whose id was never
recorded), then puts the directory on hold
(:mod:`aeval.store.hold`): no process creates a batch for it any more unless
``resume --submit`` says so. Then:

* the run is not live: unless ``--no-collect``, it waits for the batches to
  reach ``cancelled`` and downloads and verifies their partial results exactly
  like ``resume`` would, holding the run's lock throughout;
* the run is live (another process holds its lock): that process sees the
  hold within a second, creates no more batches (cancelling any it created
  meanwhile), and collects the cancelled batches' partial results like any
  other terminal batch. ``cancel`` says so and exits 0 without waiting.

A batch is counted cancelled only when its provider says so (``cancelling``,
``cancelled``, or another end it reached meanwhile). A cancel the provider
refuses or never answers (after the usual retries) is written down
(:mod:`aeval.store.cancel_failures`, shown by ``status``) and said in one line
naming the batch and this command, which retries it; ``cancel`` then collects
nothing (the batch runs on) and exits 1.

``--delete-files`` then deletes the run's uploaded request files and result
files from the API (not while another process still collects them).

Its arguments are in :mod:`aeval.commands.cancel_args`, which ``--help`` loads
without this module's engine.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from pathlib import Path
from typing import TypeVar

import anyio

from aeval.batch.lifecycle import batch_tag, claimed_batches
from aeval.batch.providers.base import TERMINAL_STATUSES, BatchProvider
from aeval.batch.providers.registry import open_providers, provider_spec
from aeval.batch.retry import RetryNotice, call_with_retries
from aeval.batch.transient import TransientApiError
from aeval.commands.drive import existing_run_dir, resume_overrides, run_credentials_or_fail
from aeval.config import Credentials, RetrySettings
from aeval.errors import ApiError, UnreachableError
from aeval.model_names import parse_model
from aeval.store import RunStore
from aeval.store.cancel_failures import (
    cancel_failures,
    clear_cancel_failure,
    describe_cancel_failure,
    note_cancel_failure,
)
from aeval.store.hold import Submit, hold_submissions
from aeval.store.lock import RunLock, holder

T = TypeVar("T")

# A batch the provider did not confirm cancelled: it may still run and bill.
EXIT_NOT_CANCELLED = 1


def _quiet(line: str) -> None:
    """The default ``say`` of :func:`cancel_batches`: nothing."""


async def cancel_batches(
    run_dir: Path,
    credentials: Credentials | Mapping[str, Credentials] | None = None,
    connect_deadline_s: float | None = None,
    say: Callable[[str], None] = _quiet,
) -> list[str]:
    """Cancel the run's unfinished remote batches, each through its own provider;
    returns what was done, one line each.

    :param credentials: given credentials (see :class:`~aeval.config.RunConfig`); every
        other provider's come from its environment variables.
    :param say: told what is being done as it starts, before any call to a provider
        (which batches, at which provider and endpoint), and each retry as it is
        scheduled (what failed, and when the next attempt is): the command prints it,
        so a provider that does not answer is never a silent wait.
    :raises ConfigError: a provider of the run has no key (naming its variable).
    :raises UnreachableError: an API gave no answer at all for ``connect_deadline_s``
        (default: RetrySettings'), e.g. a wrong base URL or a closed port.
    """
    store = RunStore.open(run_dir, read_only=True)
    retry = RetrySettings(deadline_s=120.0)
    if connect_deadline_s is None:
        connect_deadline_s = retry.connect_deadline_s
    _say_plan(store, say)  # before the SDKs load: the first line comes at once
    providers = open_providers([r.model for r in store.shards.values()], credentials, retry)
    claimed = claimed_batches(store.shards.values())
    done: list[str] = []
    unreachable: list[UnreachableError] = []

    async def call(
        provider: BatchProvider, operation: str, what: str, fn: Callable[[], Awaitable[T]]
    ) -> T:
        def retrying(notice: RetryNotice) -> None:
            say(
                f"{provider.name}: {operation} {what}: attempt {notice.attempt} failed "
                f"({notice.error}); trying again in {notice.delay_s:.1f} s"
            )

        return await call_with_retries(
            operation,
            fn,
            retry,
            on_retry=retrying,
            connect_deadline_s=connect_deadline_s,
            endpoint=provider.endpoint,
            endpoint_variable=provider_spec(provider.name).base_url_variable,
        )

    def not_cancelled(key: str, batch_id: str, why: str) -> None:
        note_cancel_failure(run_dir, batch_id, key, why)
        done.append(f"{key}: batch {batch_id} NOT cancelled: {why}")

    async def cancel_one(key: str) -> None:
        rec = store.shards[key]
        provider = providers.for_model(rec.model)
        batch_id = rec.batch_id
        if batch_id is None and rec.intent_attempt is not None:
            tag = batch_tag(store.run_id, rec, claimed)
            found = await call(provider, "list", f"for {key}'s batch", lambda: provider.find(tag))
            batch_id = found.id if found is not None else None
        if batch_id is None:
            done.append(f"{key}: no batch was created")
            return
        if rec.status in TERMINAL_STATUSES or rec.status == "done":
            clear_cancel_failure(run_dir, batch_id)
            done.append(f"{key}: batch {batch_id} already {rec.status}")
            return
        try:
            remote = await call(
                provider, "cancel", f"batch {batch_id}", lambda: provider.cancel(batch_id)
            )
        except TransientApiError as err:  # answered, but kept failing past the deadline
            not_cancelled(key, batch_id, str(err))
            return
        except ApiError as err:  # refused: it may have finished meanwhile; ask
            try:
                remote = await call(
                    provider, "poll", f"batch {batch_id}", lambda: provider.retrieve(batch_id)
                )
            except (ApiError, TransientApiError):
                not_cancelled(key, batch_id, str(err))
                return
            if not remote.terminal:
                not_cancelled(key, batch_id, str(err))
                return
        # Confirmed only by the provider's own word: the batch is cancelling or over.
        if not (remote.terminal or remote.status == "cancelling"):
            not_cancelled(key, batch_id, f"the provider still reports it {remote.status}")
            return
        clear_cancel_failure(run_dir, batch_id)
        done.append(f"{key}: batch {batch_id} {remote.status}")

    async def guarded(key: str, scope: anyio.CancelScope) -> None:
        try:
            await cancel_one(key)
        except UnreachableError as err:  # the same for every shard: stop them all
            unreachable.append(err)
            scope.cancel()
        except TransientApiError as err:  # the lookup kept failing past the deadline
            done.append(f"{key}: could not look its batch up: {err}")

    try:
        async with anyio.create_task_group() as tg:
            for key in store.shards:
                tg.start_soon(guarded, key, tg.cancel_scope)
    finally:
        await providers.aclose()
    if unreachable:
        raise unreachable[0]
    return sorted(done)


def _say_plan(store: RunStore, say: Callable[[str], None]) -> None:
    """One line per provider: the batches about to be cancelled there, and the shards
    whose batch must first be looked up (a create whose id was never recorded)."""
    by_provider: dict[str, tuple[list[str], list[str]]] = {}
    for key, rec in store.shards.items():
        if rec.status in TERMINAL_STATUSES or rec.status == "done":
            continue
        ids, lookups = by_provider.setdefault(parse_model(rec.model).provider, ([], []))
        if rec.batch_id is not None:
            ids.append(rec.batch_id)
        elif rec.intent_attempt is not None:
            lookups.append(key)
    parts = {
        name: [
            *([f"{len(ids)} batch(es) {_some(ids)}"] if ids else []),
            *([f"looking up the batch of {_some(lookups)}"] if lookups else []),
        ]
        for name, (ids, lookups) in sorted(by_provider.items())
    }
    if not any(parts.values()):
        say(f"cancelling: no batch of {store.run_dir} is unfinished")
    for name, found in parts.items():
        if found:
            say(f"cancelling at {name}: {'; '.join(found)}")


def _some(names: list[str], shown: int = 6) -> str:
    """The first ``shown`` names in order, and how many more."""
    names = sorted(names)
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


async def delete_files(
    run_dir: Path, credentials: Credentials | Mapping[str, Credentials] | None = None
) -> int:
    """Delete the run's uploaded request files and result files from each provider that
    keeps files; returns how many were deleted."""
    store = RunStore.open(run_dir, read_only=True)
    providers = open_providers(
        [r.model for r in store.shards.values()], credentials, RetrySettings()
    )
    count = 0
    try:
        for rec in store.shards.values():
            provider = providers.for_model(rec.model)
            # What each id is (a file, or a batch standing for its results) is the
            # adapter's to know: its delete_file removes it.
            fids = (rec.input_file_id, rec.output_file_id, rec.error_file_id)
            ids = {f for f in fids if f}
            # uploads whose response was lost, never cleared
            if rec.upload_name and rec.upload_attempts > 1 and not rec.stray_uploads_cleared:
                ids.update(await provider.find_files(rec.upload_name))
            for fid in sorted(ids):
                await provider.delete_file(fid)
            count += len(ids)
    finally:
        await providers.aclose()
    return count


def main(args: argparse.Namespace) -> int:
    run_dir = existing_run_dir(args.run_dir)  # a mistyped path says so, not "no API key"
    overrides = resume_overrides(args)
    credentials = run_credentials_or_fail(run_dir, "to cancel the run's batches")
    deadline = getattr(args, "connect_deadline", None)
    RunStore.open(run_dir, read_only=True)  # a run directory, readable, before anything
    lock = RunLock.try_acquire(run_dir)  # None: a live process drives the run
    try:
        say = partial(print, flush=True)  # each line as it happens, also into a pipe
        for line in anyio.run(cancel_batches, run_dir, credentials, deadline, say):
            print(line)
        # Then the hold: no process creates a batch for this run any more, and a
        # live one cancels any it created after the list above was read.
        hold_submissions(run_dir, "cancelled")
        failures = cancel_failures(run_dir)
        if failures:  # still running and billing: say so, and collect nothing (it runs on)
            for batch_id, failure in sorted(failures.items()):
                print(describe_cancel_failure(run_dir, batch_id, failure), file=sys.stderr)
            return EXIT_NOT_CANCELLED
        if lock is None:  # look again: the live process may have ended meanwhile
            lock = RunLock.try_acquire(run_dir)
        if lock is None:
            return _told_live_run(args)
        code = 0
        if not args.no_collect:
            # The engine only to collect, after the batches are cancelled: its import
            # (~1 s quiet, 2.9 s at load 19) would otherwise come before cancel's first line.
            from aeval.commands.execute import execute
            from aeval.engine import Run

            code = execute(
                lambda subs: Run.resume(
                    run_dir,
                    subscribers=subs,
                    credentials=credentials,
                    submit=Submit.COLLECT,
                    lock=lock,
                    **overrides,
                ),
                args,
                lost_is_failure=False,  # the user stopped them
            )
        if args.delete_files:
            n = anyio.run(delete_files, run_dir, credentials)
            print(f"deleted {n} file(s) from the API")
        return code
    finally:
        if lock is not None:
            lock.release()


def _told_live_run(args: argparse.Namespace) -> int:
    run_dir = args.run_dir
    print(
        f"{run_dir} is being run by {holder(run_dir)}: it creates no more batches and "
        "collects the cancelled batches' partial results itself, then ends "
        f"('python -m aeval status {run_dir}' shows where it is)"
    )
    if args.delete_files:
        print(
            "files not deleted: that process still downloads them. Run "
            f"'python -m aeval cancel --delete-files {run_dir}' again once it has ended"
        )
    return 0
