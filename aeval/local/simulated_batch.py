"""The life of one batch: validating → in_progress → finalizing → completed.

Or ``failed`` (the input does not validate, the enqueued-token limit is hit), ``expired`` (the
completion window ran out: finished requests in the output file, the rest in the error file as
``batch_expired``) and ``cancelling → cancelled`` (the same partial results, as
``batch_cancelled``). Every provider's batch runs here: its codec wrote its requests as OpenAI
batch lines, and reads the OpenAI output and error lines back in its own shapes.

The input file is read twice, line by line (once to validate, as the Batch API does, never raising
for bad input; once to answer), and answers go straight to the output and error files, so a
50,000-request batch never sits in memory. The CPU-bound passes run in a worker thread a chunk at a
time, so the event loop keeps answering polls. Requests are answered in a shuffled order (seeded by
the batch id), so output lines do not follow the input's order and a partial result is a scattered
subset.
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

from aeval.http_guard import loads
from aeval.local.chat import ChatRequest, Completion, HttpFailure, Responder
from aeval.local.faults import FaultInjector
from aeval.local.models import ModelRouter
from aeval.local.state import BatchRecord, Store
from aeval.local.timing import Limits, Timing
from aeval.local.wire import batch_line, chat_completion, failure_body, response_object

__all__ = ["AnsweringPass", "BatchRunner", "Validated", "trial_of", "validate_input"]

log = logging.getLogger(__name__)

_CHUNK = 1024  # requests per worker-thread step when there is no pace to keep
_WINDOW = 2048  # input lines the answer order is shuffled across
_MAX_REPORTED_ERRORS = 1000  # as many as the API reports
_CANCEL_SEEN_S = 0.05  # how soon a batch waiting out a phase sees it was cancelled
_EXPIRED = ("batch_expired",
            "This request could not be executed before the completion window expired.")  # fmt: skip
_CANCELLED = ("batch_cancelled", "This request was not executed because the batch was cancelled.")


def _now() -> int:
    return int(time.time())


def prompt_tokens(raw: bytes) -> int:
    # From the request line's length: close enough for usage figures, and free.
    return max(1, (len(raw) - 120) // 4)


def _nonblank(handle: IO[bytes]) -> Iterator[tuple[int, bytes]]:
    return ((n, raw) for n, raw in enumerate(handle, start=1) if raw.strip())


def trial_of(metadata: Mapping[str, str] | None) -> int | None:
    """The trial an aeval batch belongs to, from its ``aeval_shard`` metadata (``model|tN|sK``):
    the synthetic responders sample each trial afresh. ``None`` for a batch not aeval's."""
    parts = (metadata or {}).get("aeval_shard", "").rsplit("|", 2)
    if len(parts) == 3 and parts[1].startswith("t") and parts[1][1:].isdigit():
        return int(parts[1][1:])
    return None


@dataclass(slots=True)
class Validated:
    """What validation learnt about an input file (errors: code, message, param, line)."""

    total: int = 0
    model: str | None = None
    input_tokens: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)

    def error(self, code: str, message: str, line: int | None, param: str | None = None) -> None:
        if len(self.errors) < _MAX_REPORTED_ERRORS:
            self.errors.append({"code": code, "message": message, "param": param, "line": line})

    def check(self, request: Any, number: int, endpoint: str) -> None:
        """One line's errors, as the Batch API names them."""
        if not isinstance(request, dict):
            return self.error("invalid_json_line", "Each line must be a JSON object.", number)
        missing = [key for key in ("custom_id", "method", "url", "body") if key not in request]
        if missing:
            message = f"Missing required parameter: '{missing[0]}'."
            return self.error("missing_required_parameter", message, number, missing[0])
        custom_id, body = request["custom_id"], request["body"]
        if not isinstance(custom_id, str):
            self.error("invalid_custom_id", "The custom_id must be a string.", number, "custom_id")
        elif custom_id in self.seen:
            message = f"The custom_id '{custom_id}' is a duplicate of another request."
            self.error("duplicate_custom_id", message, number, "custom_id")
        self.seen.add(str(custom_id))
        if request["method"] != "POST":
            self.error("invalid_method", "Only the POST method is supported.", number, "method")
        if request["url"] != endpoint:
            message = ("The URL provided for this request does not match the batch endpoint "
                       f"'{endpoint}'.")  # fmt: skip
            self.error("invalid_url", message, number, "url")
        self.check_model(body.get("model") if isinstance(body, dict) else None, number)
        return None

    def check_model(self, model: Any, number: int) -> None:
        if not isinstance(model, str) or not model:
            message = "Missing required parameter: 'body.model'."
            self.error("missing_required_parameter", message, number, "body.model")
        elif self.model is None:
            self.model = model
        elif model != self.model:
            message = (f"The model '{model}' does not match the model '{self.model}' of the "
                       "other requests: a batch must use a single model.")  # fmt: skip
            self.error("model_mismatch", message, number, "body.model")


def validate_input(path: Path, endpoint: str, max_requests: int) -> Validated:
    """Check a batch input file the way the Batch API does; never raises for bad input."""
    result = Validated()
    with path.open("rb") as handle:
        for number, raw in _nonblank(handle):
            result.total += 1
            try:
                request = loads(raw)  # a line nested too deep is not JSON the API can read
            except ValueError:
                message = "This line is not parseable as valid JSON."
                result.error("invalid_json_line", message, number)
                continue
            result.check(request, number, endpoint)
            result.input_tokens += prompt_tokens(raw)
    if result.total == 0:
        result.error("empty_file", "The input file contains no requests.", None)
    if result.total > max_requests:
        message = (f"The input file contains {result.total} requests; a batch may contain at "
                   f"most {max_requests}.")  # fmt: skip
        result.error("too_many_requests", message, None)
    return result


class AnsweringPass:
    """One pass over a batch's input that answers requests, in worker-thread steps."""

    def __init__(self, batch: BatchRecord, input_path: Path, out_path: Path, err_path: Path,
                 responder: Responder, faults: FaultInjector) -> None:  # fmt: skip
        self._batch, self._model, self._trial = batch, batch.model or "", trial_of(batch.metadata)
        self._responses = batch.endpoint == "/v1/responses"  # else chat completions
        self._responder, self._faults = responder, faults
        self._input = input_path.open("rb")
        self._lines = _nonblank(self._input)
        self._out = out_path.open("w", encoding="utf-8")
        self._err = err_path.open("w", encoding="utf-8")
        self._rng = random.Random(batch.id)
        self._pending: list[bytes] = []
        self._input_done = self.exhausted = False
        self.completed = self.failed = self.output_tokens = 0
        self.error_lines = 0  # failed requests plus those abandoned at the end

    def step(self, n: int) -> None:
        """Answer up to ``n`` more requests, drawn at random from a window of the next
        ``_WINDOW`` input lines (call from a worker thread)."""
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
        for raw in chunk:
            self._answer(raw)

    def _answer(self, raw: bytes) -> None:
        request = json.loads(raw)
        # A line may name the dataset row apart from its custom id (a Message Batch's is tagged).
        row_id = request.get("row_id", request["custom_id"])
        asked = ChatRequest(self._model, request["body"], row_id, self._trial)
        rule = self._faults.for_batch("request_error", self._batch)
        reply = self._responder.respond(asked) if rule is None else HttpFailure(
            rule.status, f"Injected error {rule.status}.", code=rule.code)  # fmt: skip
        if isinstance(reply, Completion):
            shape = response_object if self._responses else chat_completion
            body = shape(self._model, reply, prompt_tokens(raw))
            usage = body["usage"]
            self.output_tokens += usage.get("completion_tokens", usage.get("output_tokens", 0))
            line = batch_line(request["custom_id"], status_code=200, body=body)
            self.completed += 1
        else:
            line = batch_line(request["custom_id"], status_code=reply.status_code,
                              body=failure_body(reply))  # fmt: skip
            self.failed += 1
            self.error_lines += 1
        (self._out if isinstance(reply, Completion) else self._err).write(json.dumps(line) + "\n")

    def abandon(self, code: str, message: str) -> None:
        """Report every request not answered yet as ``code`` in the error file."""
        error = {"code": code, "message": message}
        for raw in itertools.chain(self._pending, (raw for _, raw in self._lines)):
            line = batch_line(json.loads(raw).get("custom_id"), error=error)
            self._err.write(json.dumps(line) + "\n")
            self.error_lines += 1
        self._pending = []
        self.exhausted = True

    def close(self) -> None:
        for handle in (self._input, self._out, self._err):
            handle.close()


async def _finalizing(batch: BatchRecord, seconds: float) -> None:
    """Wait out ``batch``'s finalizing phase, or until it is cancelled: a batch held there
    (``stuck_finalizing``) ends once its owner cancels it, not minutes later."""
    deadline = time.monotonic() + seconds
    while batch.status != "cancelling" and (left := deadline - time.monotonic()) > 0:
        await anyio.sleep(min(left, _CANCEL_SEEN_S))


class BatchRunner:
    """Drives batches through their lifecycle; one per server."""

    def __init__(self, store: Store, router: ModelRouter, faults: FaultInjector, timing: Timing,
                 limits: Limits) -> None:  # fmt: skip
        self._store, self._router, self._faults = store, router, faults
        self._timing, self._limits = timing, limits

    async def run(self, batch: BatchRecord) -> None:
        """Take ``batch`` from wherever it stands to a terminal status."""
        try:
            started = time.monotonic()
            if batch.status == "validating":
                await anyio.sleep(self._timing.validating_s)
            responder = await self._validate(batch)
            if responder is not None:
                await self._answer(batch, responder, started)
        except Exception as err:  # a bug here must not leave a batch running forever
            log.exception("local batch %s crashed", batch.id)
            self._fail(batch, "server_error", f"The batch failed due to a server error: {err}")

    async def _validate(self, batch: BatchRecord) -> Responder | None:
        """The responder of a batch that may run (now ``in_progress``), or ``None``: failed."""
        if batch.input_file_id not in self._store.files:
            return self._fail(
                batch, "file_not_found", f"Input file {batch.input_file_id} was deleted."
            )
        most = self._limits.requests(batch.api)
        path = self._store.file_path(batch.input_file_id)
        validated = await anyio.to_thread.run_sync(validate_input, path, batch.endpoint, most)
        batch.total, batch.model = validated.total, validated.model
        batch.input_tokens = validated.input_tokens
        if validated.errors:
            return self._fail(batch, errors=validated.errors)
        responder = self._router.responder_for(batch.model or "")
        if responder is None:
            return self._fail(batch, "model_not_found", f"The model `{batch.model}` does not "
                              "exist or you do not have access to it.")  # fmt: skip
        if batch.status == "validating" and (
            self._over_token_limit(batch) or self._faults.for_batch("token_limit", batch)
        ):
            limit = self._limits.enqueued_tokens or 90_000
            return self._fail(batch, "token_limit_exceeded", f"Enqueued token limit reached for "
                              f"{batch.model} in organization org-local. Limit: {limit:,} "
                              "enqueued tokens. Please try submitting again later.")  # fmt: skip
        if self._faults.for_batch("fail", batch):
            return self._fail(
                batch, "server_error", "The batch failed due to an internal server error."
            )
        # A batch already cancelling (cancelled while validating, or found so after a
        # restart) is answered too: every request written as cancelled.
        if batch.status == "validating":
            batch.status, batch.in_progress_at = "in_progress", _now()
            self._store.save_batch(batch)
        return responder

    def _over_token_limit(self, batch: BatchRecord) -> bool:
        limit = self._limits.enqueued_tokens
        if limit is None:
            return False
        queued = sum(other.input_tokens for other in self._store.batches.values()
                     if other is not batch and other.model == batch.model
                     and other.status in ("in_progress", "finalizing", "cancelling"))  # fmt: skip
        return queued + batch.input_tokens > limit

    async def _answer(self, batch: BatchRecord, responder: Responder, started: float) -> None:
        out_id, out_path = self._store.new_file_path()
        err_id, err_path = self._store.new_file_path()
        input_path = self._store.file_path(batch.input_file_id)
        work = AnsweringPass(batch, input_path, out_path, err_path, responder, self._faults)
        try:
            ending = await self._work_through(batch, work, started)
            if ending is None and batch.status != "cancelling":
                batch.status, batch.finalizing_at = "finalizing", _now()
                self._store.save_batch(batch)
                stuck = self._faults.for_batch("stuck_finalizing", batch)
                await _finalizing(batch, self._timing.finalizing_s + (stuck.delay if stuck else 0))
            if ending is None and batch.status == "cancelling":  # cancelled while finalizing
                ending = _CANCELLED
            if ending is not None:
                await anyio.to_thread.run_sync(work.abandon, *ending)
        finally:
            work.close()
        batch.output_tokens = work.output_tokens
        batch.output_file_id = self._publish(batch, out_id, work.completed, "output")
        batch.error_file_id = self._publish(batch, err_id, work.error_lines, "error")
        status = {None: "completed", _EXPIRED: "expired", _CANCELLED: "cancelled"}[ending]
        batch.status = status
        setattr(batch, f"{status}_at", _now())
        self._store.save_batch(batch)

    async def _work_through(
        self, batch: BatchRecord, work: AnsweringPass, started: float
    ) -> tuple[str, str] | None:
        """Answer at the timing's pace until done (``None``), cancelled or expired."""
        expire = self._faults.for_batch("expire", batch)
        stop_after = math.ceil(expire.fraction * batch.total) if expire else None
        window, rate = self._timing.completion_window_s, self._timing.requests_per_second
        chunk = _CHUNK if rate is None else max(1, int(rate * 0.25))
        batch.completed = batch.failed = 0
        pace_start = time.monotonic()
        while not work.exhausted:
            if batch.status == "cancelling":
                return _CANCELLED
            done = work.completed + work.failed
            if (stop_after is not None and done >= stop_after) or (
                window is not None and time.monotonic() - started >= window
            ):
                return _EXPIRED
            n = chunk if stop_after is None else max(1, min(chunk, stop_after - done))
            await anyio.to_thread.run_sync(work.step, n)
            batch.completed, batch.failed = work.completed, work.failed
            due = pace_start + (work.completed + work.failed) / rate if rate else 0.0
            await anyio.sleep(max(0.0, due - time.monotonic()))
        return None

    def _publish(self, batch: BatchRecord, file_id: str, lines: int, kind: str) -> str | None:
        if lines == 0:
            self._store.delete_file(file_id)
            return None
        self._store.add_file(file_id, f"batch_{batch.id}_{kind}.jsonl", "batch_output",
                             counted=False, api=batch.api)  # fmt: skip
        return file_id

    def _fail(self, batch: BatchRecord, code: str = "", message: str = "",
              errors: list[dict[str, Any]] | None = None) -> Responder | None:  # fmt: skip
        """Fail ``batch`` with ``errors`` (or one of ``code``); ``None``, no responder for it."""
        batch.errors = errors or [{"code": code, "message": message, "param": None, "line": None}]
        batch.status, batch.failed_at = "failed", _now()
        self._store.save_batch(batch)
        return None
