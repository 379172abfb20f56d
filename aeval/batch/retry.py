"""The one retry rule: what is worth trying again, and how (tenacity).

What is retryable is decided here and nowhere else, at three levels that share
one HTTP rule (:func:`retryable_status`: 408, 409, 429 and 5xx, the statuses
the OpenAI SDK itself retries):

- a call to the API (:func:`retryable_status`, used by the provider to raise
  :class:`~aeval.batch.transient.TransientApiError`);
- one request inside a finished batch (:func:`retryable_request`: the same
  statuses, or an error code meaning "try later", unless its code means "never"),
  resubmitted in a new shard with ``--retry-failed``;
- a whole batch the API refused (:func:`resubmittable_batch`: the enqueued-token
  limit), resubmitted as the shard's next attempt.

Every remote call the engine makes goes through :func:`call_with_retries`:
exponential backoff with full jitter, never shorter than the server's
``Retry-After``, until the operation's deadline. Only
:class:`~aeval.batch.transient.TransientApiError` is retried; an
:class:`~aeval.errors.ApiError` (auth, bad request) stops at once. With a
connect deadline, connection failures in a row (no HTTP answer at all) stop
sooner, as :class:`~aeval.errors.UnreachableError`.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_delay,
    wait_random_exponential,
)
from tenacity.stop import stop_base

from aeval.api_settings import RetrySettings
from aeval.batch.transient import TransientApiError
from aeval.errors import UnreachableError

__all__ = [
    "BUSY_STATUSES",
    "FINAL_REQUEST_CODES",
    "RETRYABLE_REQUEST_CODES",
    "TOKEN_LIMIT_CODE",
    "RetryNotice",
    "busy_status",
    "call_with_retries",
    "resubmittable_batch",
    "retry_after_seconds",
    "retryable_request",
    "retryable_status",
]

# A batch refused because the model's enqueued tokens are over the limit: it
# processed nothing, so it is resubmitted once the model's other batches end.
TOKEN_LIMIT_CODE = "token_limit_exceeded"

# Per-request error codes that mean "not now" rather than "never".
RETRYABLE_REQUEST_CODES = frozenset({"batch_expired", "rate_limit_exceeded", "server_error"})
# Per-request error codes that mean "never", though the HTTP status they stand for (409,
# 501, 500) would be retried: google.rpc.Code's ALREADY_EXISTS, UNIMPLEMENTED and DATA_LOSS
# (aeval.batch.providers.gemini_api says why).
FINAL_REQUEST_CODES = frozenset({"already_exists", "not_implemented", "data_loss"})

T = TypeVar("T")


def retry_after_seconds(headers: Any) -> float | None:
    """Seconds to wait according to an HTTP answer's ``retry-after-ms`` / ``Retry-After``
    (seconds or a date): the hint every provider's SDK exposes on its errors."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):  # neither seconds nor an HTTP date: no hint
        return None
    return max(0.0, parsed.timestamp() - time.time())


def retryable_status(status: int | None) -> bool:
    """An HTTP status that may go away if the same request is made again later.

    408 (timeout), 409 (conflict: a lock held elsewhere), 429 (rate limit) and
    every 5xx: the set the OpenAI SDK retries on its own.
    """
    return status is not None and (status in (408, 409, 429) or status >= 500)


# "Full, come back later" (rate limit, overloaded): the request itself did not fail,
# so in direct mode such an answer does not use up one of its attempts.
BUSY_STATUSES = frozenset({429, 503})


def busy_status(status: int | None) -> bool:
    """An HTTP status saying the server is full now, not that the request failed."""
    return status in BUSY_STATUSES


def retryable_request(error_code: str | None, status_code: int | None) -> bool:
    """A failed request inside a batch that is worth resubmitting (``--retry-failed``)."""
    if error_code is None or error_code in FINAL_REQUEST_CODES:
        return False
    return error_code in RETRYABLE_REQUEST_CODES or retryable_status(status_code)


def resubmittable_batch(status: str, error_codes: frozenset[str]) -> bool:
    """A batch the API failed as a whole, but that a later resubmission can pass."""
    return status == "failed" and TOKEN_LIMIT_CODE in error_codes


@dataclass(frozen=True, slots=True)
class RetryNotice:
    """Told to the caller before each backoff sleep (the engine turns it into an event)."""

    operation: str
    attempt: int
    delay_s: float
    error: str


class _WaitRetryAfter:
    """Exponential backoff with jitter, but never less than the server's Retry-After."""

    def __init__(self, settings: RetrySettings) -> None:
        self._backoff = wait_random_exponential(multiplier=settings.initial_s, max=settings.max_s)
        self._cap = settings.max_s

    def __call__(self, state: RetryCallState) -> float:
        delay = self._backoff(state)
        outcome = state.outcome
        err = outcome.exception() if outcome is not None else None
        if isinstance(err, TransientApiError) and err.retry_after is not None:
            delay = max(delay, min(err.retry_after, self._cap))
        return delay


class _ConnectWatch(stop_base):
    """Stops retrying once connection failures in a row have lasted ``deadline_s``.

    Timed from the start of the first failing attempt, so a connect timeout
    that takes a while to fail counts in full. Any HTTP answer resets it.
    """

    def __init__(self, deadline_s: float | None) -> None:
        self.deadline_s = deadline_s
        self.attempt_started = time.monotonic()
        self.since: float | None = None
        self.tripped = False

    def before(self, state: RetryCallState) -> None:
        self.attempt_started = time.monotonic()

    def __call__(self, state: RetryCallState) -> bool:
        outcome = state.outcome
        err = outcome.exception() if outcome is not None else None
        if not (isinstance(err, TransientApiError) and err.connection):
            self.since = None
            return False
        if self.since is None:
            self.since = self.attempt_started
        if self.deadline_s is not None and time.monotonic() - self.since >= self.deadline_s:
            self.tripped = True
        return self.tripped


class _AttemptsBesidesBusy(stop_base):
    """Stops after ``limit`` failed attempts, a busy answer (429, 503) not counting, nor
    (while a connect deadline watches them) failures to connect at all."""

    def __init__(self, limit: int, *, count_connection: bool) -> None:
        self.limit = limit
        self.count_connection = count_connection
        self.failures = 0

    def __call__(self, state: RetryCallState) -> bool:
        outcome = state.outcome
        err = outcome.exception() if outcome is not None else None
        if isinstance(err, TransientApiError) and (
            busy_status(err.status) or (err.connection and not self.count_connection)
        ):
            return False
        self.failures += 1
        return self.failures >= self.limit


async def call_with_retries(
    operation: str,
    call: Callable[[], Awaitable[T]],
    settings: RetrySettings,
    *,
    on_retry: Callable[[RetryNotice], None] | None = None,
    deadline_s: float | None = None,
    connect_deadline_s: float | None = None,
    endpoint: str = "the API",
    endpoint_variable: str | None = "OPENAI_BASE_URL",
    max_attempts: int | None = None,
) -> T:
    """Run ``call`` until it succeeds, retrying transient failures.

    :param deadline_s: give up after this long (default ``settings.deadline_s``);
        the last TransientApiError is then raised.
    :param connect_deadline_s: give up sooner when every attempt for this long
        failed to connect at all (``None``: no such limit).
    :param endpoint: what to name in the UnreachableError (the base URL).
    :param endpoint_variable: the environment variable that sets it, to name as well.
    :param max_attempts: also give up after this many failed attempts, not
        counting "busy" answers (429, 503: :func:`busy_status`), which are waited
        out until the deadline, nor, with a connect deadline, failures to connect
        (those end at the connect deadline); a direct request: a server that always
        says 500 to it is not asked for half an hour.
    :raises TransientApiError: when the deadline passed without success.
    :raises UnreachableError: when the connect deadline passed without any HTTP answer.
    :raises ApiError: at once, for failures retrying will not fix.
    """

    def before_sleep(state: RetryCallState) -> None:
        if on_retry is None or state.outcome is None or state.next_action is None:
            return
        on_retry(
            RetryNotice(
                operation=operation,
                attempt=state.attempt_number,
                delay_s=state.next_action.sleep,
                error=str(state.outcome.exception()),
            )
        )

    watch = _ConnectWatch(connect_deadline_s)
    stop = stop_after_delay(settings.deadline_s if deadline_s is None else deadline_s) | watch
    if max_attempts is not None:
        stop = stop | _AttemptsBesidesBusy(
            max_attempts, count_connection=connect_deadline_s is None
        )
    retrying = AsyncRetrying(
        sleep=anyio.sleep,  # tenacity defaults to asyncio.sleep; anyio keeps trio working
        retry=retry_if_exception_type(TransientApiError),
        wait=_WaitRetryAfter(settings),
        stop=stop,
        before=watch.before,
        before_sleep=before_sleep,
        reraise=True,
    )
    try:
        async for attempt in retrying:
            with attempt:
                return await call()
    except TransientApiError as err:
        if watch.tripped and watch.since is not None:
            lasted = time.monotonic() - watch.since
            check = f"{endpoint_variable} and the network" if endpoint_variable else "the network"
            raise UnreachableError(
                f"cannot reach {endpoint} (no answer for {lasted:.0f} s): {err}; check {check}"
            ) from err
        raise
    raise AssertionError("unreachable: tenacity either returns or raises")  # pragma: no cover
