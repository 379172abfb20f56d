"""The life of one batch: validating → in_progress → finalizing → completed.

Or ``failed`` (the input does not validate, the enqueued-token limit is hit),
``expired`` (the completion window ran out: finished requests in the output
file, the rest in the error file as ``batch_expired``) and ``cancelling →
cancelled`` (the same partial results, as ``batch_cancelled``).

The input file is read twice, line by line (once to validate, in
:mod:`aeval.local.batch_input`; once to answer, in
:mod:`aeval.local.batch_pass`), and answers are written straight to the output
and error files, so a 50,000-request batch never sits in memory. The CPU-bound
passes run in a worker thread a chunk at a time, so the event loop keeps
answering polls while a big batch is being worked through.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

import anyio
import anyio.to_thread

from aeval.local.batch_input import validate_input
from aeval.local.batch_pass import AnsweringPass
from aeval.local.chat import Responder
from aeval.local.faults import FaultInjector
from aeval.local.models import ModelRouter
from aeval.local.state import BatchRecord, Store
from aeval.local.timing import Limits, Timing

__all__ = ["BatchRunner"]

log = logging.getLogger(__name__)

_CHUNK = 1024  # requests per worker-thread step when there is no pace to keep

_EXPIRED = (
    "batch_expired",
    "This request could not be executed before the completion window expired.",
)
_CANCELLED = ("batch_cancelled", "This request was not executed because the batch was cancelled.")


def _now() -> int:
    return int(time.time())


class BatchRunner:
    """Drives batches through their lifecycle; one per server."""

    def __init__(
        self,
        store: Store,
        router: ModelRouter,
        faults: FaultInjector,
        timing: Timing,
        limits: Limits,
    ) -> None:
        self._store = store
        self._router = router
        self._faults = faults
        self._timing = timing
        self._limits = limits

    async def run(self, batch: BatchRecord) -> None:
        """Take ``batch`` from wherever it stands to a terminal status."""
        try:
            await self._run(batch)
        except Exception as err:  # a bug here must not leave a batch running forever
            log.exception("local batch %s crashed", batch.id)
            self._fail(batch, "server_error", f"The batch failed due to a server error: {err}")

    async def _run(self, batch: BatchRecord) -> None:
        started = time.monotonic()
        if batch.status == "validating":
            await anyio.sleep(self._timing.validating_s)
        input_path = self._store.file_path(batch.input_file_id)
        if batch.input_file_id not in self._store.files:
            self._fail(batch, "file_not_found", f"Input file {batch.input_file_id} was deleted.")
            return
        # A provider whose batches hold more than OpenAI's says so (a Message Batch: 100,000).
        most = int(batch.extra.get("max_requests", self._limits.max_requests))
        validated = await anyio.to_thread.run_sync(validate_input, input_path, batch.endpoint, most)
        batch.total = validated.total
        batch.model = validated.model
        batch.input_tokens = validated.input_tokens
        if validated.errors:
            self._fail_validation(batch, validated.errors)
            return
        responder = self._router.responder_for(batch.model or "")
        if responder is None:
            self._fail(
                batch,
                "model_not_found",
                f"The model `{batch.model}` does not exist or you do not have access to it.",
            )
            return
        metadata = batch.metadata or {}
        if batch.status == "validating" and (
            self._over_token_limit(batch)
            or self._faults.for_batch("token_limit", batch.model, metadata)
        ):
            self._fail(
                batch,
                "token_limit_exceeded",
                f"Enqueued token limit reached for {batch.model} in organization org-local. "
                f"Limit: {self._limits.enqueued_tokens or 90_000:,} enqueued tokens. "
                "Please try submitting again later.",
            )
            return
        if self._faults.for_batch("fail", batch.model, metadata):
            self._fail(batch, "server_error", "The batch failed due to an internal server error.")
            return
        # A batch already cancelling (cancelled while validating, or found so after a
        # restart) goes through _answer too, which writes every request as cancelled.
        if batch.status == "validating":
            batch.status = "in_progress"
            batch.in_progress_at = _now()
            self._store.save_batch(batch)
        await self._answer(batch, responder, started)

    def _over_token_limit(self, batch: BatchRecord) -> bool:
        limit = self._limits.enqueued_tokens
        if limit is None:
            return False
        queued = sum(
            other.input_tokens
            for other in self._store.batches.values()
            if other is not batch
            and other.model == batch.model
            and other.status in ("in_progress", "finalizing", "cancelling")
        )
        return queued + batch.input_tokens > limit

    async def _answer(self, batch: BatchRecord, responder: Responder, started: float) -> None:
        expire = self._faults.for_batch("expire", batch.model, batch.metadata or {})
        stop_after = math.ceil(expire.fraction * batch.total) if expire else None
        window = self._timing.completion_window_s
        rate = self._timing.requests_per_second
        chunk = _CHUNK if rate is None else max(1, int(rate * 0.25))
        out_id, out_path = self._store.new_file_path()
        err_id, err_path = self._store.new_file_path()
        work = AnsweringPass(
            batch, self._store.file_path(batch.input_file_id), out_path, err_path, responder
        )
        batch.completed = batch.failed = 0
        pace_start = time.monotonic()
        ending: tuple[str, tuple[str, str]] | None = None
        try:
            while not work.exhausted:
                if batch.status == "cancelling":
                    ending = ("cancelled", _CANCELLED)
                    break
                done = work.completed + work.failed
                if (stop_after is not None and done >= stop_after) or (
                    window is not None and time.monotonic() - started >= window
                ):
                    ending = ("expired", _EXPIRED)
                    break
                n = chunk if stop_after is None else max(1, min(chunk, stop_after - done))
                await anyio.to_thread.run_sync(work.step, n)
                batch.completed, batch.failed = work.completed, work.failed
                if rate is not None:
                    due = pace_start + (work.completed + work.failed) / rate
                    await anyio.sleep(max(0.0, due - time.monotonic()))
                else:
                    await anyio.sleep(0)
            if ending is None and batch.status != "cancelling":
                batch.status = "finalizing"
                batch.finalizing_at = _now()
                self._store.save_batch(batch)
                stuck = self._faults.for_batch(
                    "stuck_finalizing", batch.model, batch.metadata or {}
                )
                await anyio.sleep(self._timing.finalizing_s + (stuck.delay if stuck else 0.0))
            if ending is None and batch.status == "cancelling":  # cancelled while finalizing
                ending = ("cancelled", _CANCELLED)
            if ending is not None:
                await anyio.to_thread.run_sync(work.abandon, *ending[1])
        finally:
            work.close()
        batch.output_tokens = work.output_tokens
        batch.output_file_id = self._publish(batch, out_id, work.completed, "output")
        batch.error_file_id = self._publish(batch, err_id, work.error_lines, "error")
        if ending is None:
            batch.status, batch.completed_at = "completed", _now()
        elif ending[0] == "expired":
            batch.status, batch.expired_at = "expired", _now()
        else:
            batch.status, batch.cancelled_at = "cancelled", _now()
        self._store.save_batch(batch)

    def _publish(self, batch: BatchRecord, file_id: str, lines: int, kind: str) -> str | None:
        if lines == 0:
            self._store.delete_file(file_id)
            return None
        self._store.add_file(
            file_id,
            f"batch_{batch.id}_{kind}.jsonl",
            "batch_output",
            counted=False,
            api=batch.api,
        )
        return file_id

    def _fail_validation(self, batch: BatchRecord, errors: list[dict[str, Any]]) -> None:
        batch.errors = errors
        batch.status, batch.failed_at = "failed", _now()
        self._store.save_batch(batch)

    def _fail(self, batch: BatchRecord, code: str, message: str) -> None:
        self._fail_validation(
            batch, [{"code": code, "message": message, "param": None, "line": None}]
        )
