"""The life of one batch: validating → in_progress → finalizing → completed.

Or ``failed`` (the input does not validate, the enqueued-token limit is hit),
``expired`` (the completion window ran out: finished requests in the output
file, the rest in the error file as ``batch_expired``) and ``cancelling →
cancelled`` (the same partial results, as ``batch_cancelled``).

The input file is read twice, line by line (once to validate, once to
answer), and answers are written straight to the output and error files, so
a 50,000-request batch never sits in memory. The CPU-bound passes run in a
worker thread a chunk at a time, so the event loop keeps answering polls
while a big batch is being worked through. Requests are answered in a
shuffled order (seeded by the batch id), so output lines do not follow the
input's order and a partial result is a scattered subset, as with the real API.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import random
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import anyio
import anyio.to_thread

from aeval.local.chat import ChatRequest, Completion, Responder
from aeval.local.faults import FaultInjector
from aeval.local.models import ModelRouter
from aeval.local.state import BatchRecord, Store, new_id
from aeval.local.timing import Limits, Timing
from aeval.local.wire import batch_line, chat_completion, failure_body

__all__ = ["BatchRunner", "Validated", "validate_input"]

log = logging.getLogger(__name__)

_REQUIRED = ("custom_id", "method", "url", "body")
_MAX_REPORTED_ERRORS = 1000
_CHUNK = 1024  # requests per worker-thread step when there is no pace to keep
_WINDOW = 2048  # input lines the answer order is shuffled across

_EXPIRED = (
    "batch_expired",
    "This request could not be executed before the completion window expired.",
)
_CANCELLED = ("batch_cancelled", "This request was not executed because the batch was cancelled.")


def _now() -> int:
    return int(time.time())


@dataclass(slots=True)
class Validated:
    """What validation learnt about an input file."""

    total: int = 0
    model: str | None = None
    input_tokens: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)

    def error(self, code: str, message: str, line: int | None, param: str | None = None) -> None:
        if len(self.errors) < _MAX_REPORTED_ERRORS:
            self.errors.append({"code": code, "message": message, "param": param, "line": line})


def _prompt_tokens(raw: bytes) -> int:
    # From the request line's length: close enough for usage figures, and free.
    return max(1, (len(raw) - 120) // 4)


def _nonblank_lines(handle: IO[bytes]) -> Iterator[tuple[int, bytes]]:
    for number, raw in enumerate(handle, start=1):
        if raw.strip():
            yield number, raw


def validate_input(path: Path, endpoint: str, limits: Limits) -> Validated:
    """Check a batch input file the way the Batch API does; never raises for bad input."""
    result = Validated()
    seen: set[str] = set()
    with path.open("rb") as handle:
        for number, raw in _nonblank_lines(handle):
            result.total += 1
            try:
                request = json.loads(raw)
            except ValueError:
                result.error(
                    "invalid_json_line", "This line is not parseable as valid JSON.", number
                )
                continue
            if not isinstance(request, dict):
                result.error("invalid_json_line", "Each line must be a JSON object.", number)
                continue
            missing = [key for key in _REQUIRED if key not in request]
            if missing:
                result.error(
                    "missing_required_parameter",
                    f"Missing required parameter: '{missing[0]}'.",
                    number,
                    missing[0],
                )
                continue
            custom_id, body = request["custom_id"], request["body"]
            if not isinstance(custom_id, str):
                result.error(
                    "invalid_custom_id", "The custom_id must be a string.", number, "custom_id"
                )
            elif custom_id in seen:
                result.error(
                    "duplicate_custom_id",
                    f"The custom_id '{custom_id}' is a duplicate of another request.",
                    number,
                    "custom_id",
                )
            seen.add(str(custom_id))
            if request["method"] != "POST":
                result.error(
                    "invalid_method", "Only the POST method is supported.", number, "method"
                )
            if request["url"] != endpoint:
                result.error(
                    "invalid_url",
                    f"The URL provided for this request does not match the batch endpoint "
                    f"'{endpoint}'.",
                    number,
                    "url",
                )
            model = body.get("model") if isinstance(body, dict) else None
            if not isinstance(model, str) or not model:
                result.error(
                    "missing_required_parameter",
                    "Missing required parameter: 'body.model'.",
                    number,
                    "body.model",
                )
            elif result.model is None:
                result.model = model
            elif model != result.model:
                result.error(
                    "model_mismatch",
                    f"The model '{model}' does not match the model '{result.model}' of the "
                    "other requests: a batch must use a single model.",
                    number,
                    "body.model",
                )
            result.input_tokens += _prompt_tokens(raw)
    if result.total == 0:
        result.error("empty_file", "The input file contains no requests.", None)
    if result.total > limits.max_requests:
        result.error(
            "too_many_requests",
            f"The input file contains {result.total} requests; a batch may contain at most "
            f"{limits.max_requests}.",
            None,
        )
    return result


def trial_of(metadata: Mapping[str, str] | None) -> int | None:
    """The trial an aeval batch belongs to, from its ``aeval_job`` metadata (``model|tN|sK``).

    The real API samples each trial's answers afresh; the synthetic responders
    need the trial to do the same. ``None`` for a batch that is not aeval's.
    """
    parts = (metadata or {}).get("aeval_job", "").rsplit("|", 2)
    if len(parts) == 3 and parts[1].startswith("t") and parts[1][1:].isdigit():
        return int(parts[1][1:])
    return None


class _Pass:
    """One pass over a batch's input that answers requests, in worker-thread steps."""

    def __init__(
        self,
        batch: BatchRecord,
        input_path: Path,
        out_path: Path,
        err_path: Path,
        responder: Responder,
    ) -> None:
        self._batch_id = batch.id
        self._model = batch.model or ""
        self._trial = trial_of(batch.metadata)
        self._responder = responder
        self._input = input_path.open("rb")
        self._lines = _nonblank_lines(self._input)
        self._out = out_path.open("w", encoding="utf-8")
        self._err = err_path.open("w", encoding="utf-8")
        self._rng = random.Random(batch.id)
        self._pending: list[bytes] = []
        self._input_done = False
        self.exhausted = False
        self.completed = 0
        self.failed = 0
        self.error_lines = 0  # failed requests plus those abandoned at the end
        self.output_tokens = 0

    def step(self, n: int) -> None:
        """Answer up to ``n`` more requests (call from a worker thread).

        Requests are drawn at random from a window of the next ``_WINDOW``
        input lines, so the answer order, and any partial result, is scattered.
        """
        pending = self._pending
        if not self._input_done:
            want = max(_WINDOW, n) - len(pending)
            for _, raw in self._lines:
                pending.append(raw)
                want -= 1
                if want <= 0:
                    break
            else:
                self._input_done = True
            self._rng.shuffle(pending)
        chunk = pending[-n:]
        del pending[-n:]
        self.exhausted = self._input_done and not pending
        out, err = self._out, self._err
        for raw in chunk:
            request = json.loads(raw)
            body = request["body"]
            reply = self._responder.respond(
                ChatRequest(self._model, body, request["custom_id"], self._trial)
            )
            if isinstance(reply, Completion):
                completion = chat_completion(self._model, reply, _prompt_tokens(raw))
                self.output_tokens += completion["usage"]["completion_tokens"]
                line = batch_line(request["custom_id"], status_code=200, body=completion)
                out.write(json.dumps(line))
                out.write("\n")
                self.completed += 1
            else:
                line = batch_line(
                    request["custom_id"], status_code=reply.status_code, body=failure_body(reply)
                )
                err.write(json.dumps(line))
                err.write("\n")
                self.failed += 1
                self.error_lines += 1

    def abandon(self, code: str, message: str) -> None:
        """Report every request not answered yet as ``code`` in the error file."""
        error = {"code": code, "message": message}
        rest = itertools.chain(self._pending, (raw for _, raw in self._lines))
        for raw in rest:
            custom_id = json.loads(raw).get("custom_id")
            self._err.write(json.dumps(batch_line(custom_id, error=error)))
            self._err.write("\n")
            self.error_lines += 1
        self._pending = []
        self.exhausted = True

    def close(self) -> None:
        for handle in (self._input, self._out, self._err):
            handle.close()


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
        validated = await anyio.to_thread.run_sync(
            validate_input, input_path, batch.endpoint, self._limits
        )
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
        work = _Pass(
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
            file_id, f"batch_{batch.id}_{kind}.jsonl", "batch_output", counted=False
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


def new_batch(
    input_file_id: str, endpoint: str, completion_window: str, metadata: dict[str, str] | None
) -> BatchRecord:
    return BatchRecord(
        id=new_id("batch_"),
        input_file_id=input_file_id,
        endpoint=endpoint,
        completion_window=completion_window,
        created_at=_now(),
        metadata=metadata,
    )
