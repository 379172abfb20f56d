"""The one retry policy: transient errors retried (Retry-After honoured), others not."""

from __future__ import annotations

import importlib
import time
from typing import Any

import httpx
import openai
import pytest

from aeval.batch.pacing import PollSchedule
from aeval.batch.providers.openai_api import translate_error
from aeval.batch.retry import (
    TOKEN_LIMIT_CODE,
    RetryNotice,
    call_with_retries,
    resubmittable_batch,
    retryable_request,
    retryable_status,
)
from aeval.batch.transient import TransientApiError
from aeval.config import PollSettings, RetrySettings
from aeval.errors import ApiError, UnreachableError

FAST = RetrySettings(initial_s=0.001, max_s=0.01, deadline_s=5.0)


class _Scripted:
    """An API call that raises ``errors``, one a call, then answers "ok"; ``calls`` counts
    the calls."""

    def __init__(self, *errors: Exception) -> None:
        self.errors, self.calls = errors, 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.calls <= len(self.errors):
            raise self.errors[self.calls - 1]
        return "ok"


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_transient_errors_are_retried_then_succeed(anyio_backend: str) -> None:
    notices: list[RetryNotice] = []
    flaky = _Scripted(TransientApiError("HTTP 503"), TransientApiError("HTTP 503"))
    assert await call_with_retries("poll", flaky, FAST, on_retry=notices.append) == "ok"
    assert flaky.calls == 3
    assert [n.attempt for n in notices] == [1, 2] and notices[0].operation == "poll"


@pytest.mark.anyio
async def test_fatal_errors_are_not_retried() -> None:
    denied = _Scripted(ApiError("HTTP 401"))  # a second call would answer: no raise
    with pytest.raises(ApiError):
        await call_with_retries("create", denied, FAST)
    assert denied.calls == 1


@pytest.mark.anyio
async def test_retry_after_is_honoured() -> None:
    limited = _Scripted(TransientApiError("429", retry_after=0.2))
    notices: list[RetryNotice] = []
    start = time.monotonic()
    await call_with_retries("create", limited, FAST.__class__(max_s=1.0), on_retry=notices.append)
    assert time.monotonic() - start >= 0.19
    assert notices[0].delay_s >= 0.2


@pytest.mark.anyio
async def test_deadline_bounds_the_retrying() -> None:
    async def down() -> None:
        raise TransientApiError("connection refused")

    start = time.monotonic()
    with pytest.raises(TransientApiError):
        await call_with_retries("poll", down, FAST, deadline_s=0.2)
    assert time.monotonic() - start < 2.0


def test_poll_schedule_grows_with_jitter_and_is_bounded() -> None:
    import random

    schedule = PollSchedule(
        PollSettings(initial_s=1.0, factor=2.0, max_s=8.0, jitter=0.1), random.Random(1)
    )
    delays = [schedule.next_delay() for _ in range(8)]
    bases = [1, 2, 4, 8, 8, 8, 8, 8]
    for d, b in zip(delays, bases, strict=True):
        assert 0.9 * b <= d <= 1.1 * b
    assert len(set(delays)) == len(delays)  # jittered: no two batches poll in lock-step


def test_api_calls_while_waiting_ten_minutes_stay_under_sixty() -> None:
    import random

    schedule = PollSchedule(PollSettings(), random.Random(0))
    waited = polls = 0.0
    while waited < 600:
        waited += schedule.next_delay()
        polls += 1
    assert polls < 60


@pytest.mark.parametrize(
    ("header", "expected"),
    [("7", 7.0), ("-3", 0.0), ("soon", None), ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0)],
)
def test_a_429_is_transient_whatever_its_retry_after_says(
    header: str, expected: float | None
) -> None:

    request = httpx.Request("POST", "https://api.example/v1/batches")
    response = httpx.Response(429, headers={"retry-after": header}, request=request)
    err = openai.RateLimitError("slow down", response=response, body=None)
    translated = translate_error(err, "creating a batch")
    assert isinstance(translated, TransientApiError)
    assert translated.retry_after == expected


@pytest.mark.anyio
async def test_no_answer_at_all_past_the_connect_deadline_is_unreachable() -> None:
    from aeval.errors import UnreachableError

    async def refused() -> None:
        raise TransientApiError("uploading f: connection problem: refused", connection=True)

    started = time.monotonic()
    with pytest.raises(UnreachableError, match=r"cannot reach http://x/v1 .*refused"):
        await call_with_retries(
            "upload", refused, FAST, connect_deadline_s=0.1, endpoint="http://x/v1"
        )
    assert time.monotonic() - started < 2  # not the 5 s deadline


def _connect_clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The clock the connect deadline reads (aeval.batch.retry's ``time.monotonic``), moved
    by the test alone: how long a failure to connect lasted is what the test says it
    lasted, however slowly a loaded machine runs it."""
    import types

    import aeval.batch.retry as retry

    now = [0.0]
    fake = types.SimpleNamespace(monotonic=lambda: now[0], time=time.time)
    monkeypatch.setattr(retry, "time", fake)
    return now


@pytest.mark.anyio
async def test_any_http_answer_restarts_the_connect_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = _connect_clock(monkeypatch)
    settings = RetrySettings(initial_s=0.001, max_s=0.01, deadline_s=600.0)
    calls = 0

    async def never_answers() -> None:
        nonlocal calls
        calls += 1
        now[0] += 0.04  # each failure to connect takes 0.04 s
        raise TransientApiError("connection problem", connection=True)

    # Without an HTTP answer the deadline (0.1 s) ends it at the third failure.
    with pytest.raises(UnreachableError):
        await call_with_retries("poll", never_answers, settings, connect_deadline_s=0.1)
    assert calls == 3

    calls = 0

    async def flapping() -> None:
        nonlocal calls
        calls += 1
        if calls == 30:  # a failure retrying will not fix ends the test's call
            raise ApiError("HTTP 400")
        if calls % 3 == 0:  # the server answers now and then: it is there, only unwell
            raise TransientApiError("HTTP 503")
        now[0] += 0.04
        raise TransientApiError("connection problem", connection=True)

    # 20 failures to connect (0.8 s) in all, never more than two (0.08 s) in a row:
    # never UnreachableError.
    with pytest.raises(ApiError, match="HTTP 400"):
        await call_with_retries("poll", flapping, settings, connect_deadline_s=0.1)
    assert calls == 30


@pytest.mark.parametrize("http", ["httpx", "sdk"])
def test_only_a_failure_to_connect_counts_towards_the_connect_deadline(http: str) -> None:
    # "sdk": the HTTP library the installed openai SDK really raises from (its httpx
    # fork, httpx2, in openai 3.x), whose ConnectTimeout an httpx check never matched.
    try:
        sdk_http: Any = importlib.import_module("httpx2")
    except ImportError:  # an SDK from before the fork
        sdk_http = httpx
    lib = httpx if http == "httpx" else sdk_http
    request = httpx.Request("POST", "https://api.example/v1/files")

    def sdk_error(cause: Exception) -> openai.APIConnectionError:
        err: openai.APIConnectionError = (
            openai.APITimeoutError(request=request)
            if isinstance(cause, lib.TimeoutException)
            else openai.APIConnectionError(request=request)
        )
        err.__cause__ = cause
        return err

    refused = translate_error(sdk_error(lib.ConnectError("refused")), "uploading f")
    connect_timeout = translate_error(sdk_error(lib.ConnectTimeout("no SYN-ACK")), "uploading f")
    slow_upload = translate_error(sdk_error(lib.WriteTimeout("slow link")), "uploading f")
    assert isinstance(refused, TransientApiError) and refused.connection
    assert "ConnectError: refused" in str(refused)
    assert isinstance(connect_timeout, TransientApiError) and connect_timeout.connection
    assert isinstance(slow_upload, TransientApiError) and not slow_upload.connection


# The one retry rule, pinned: (HTTP status, retryable). The same table decides a
# call (the provider's TransientApiError) and a failed request inside a batch.
_STATUS_TABLE = [
    (None, False),
    (200, False),
    (400, False),
    (401, False),
    (403, False),
    (404, False),
    (408, True),
    (409, True),
    (422, False),
    (429, True),
    (500, True),
    (502, True),
    (503, True),
    (504, True),
]


@pytest.mark.parametrize(("status", "retryable"), _STATUS_TABLE)
def test_one_http_rule_for_calls_and_for_requests(status: int | None, retryable: bool) -> None:
    assert retryable_status(status) is retryable
    # A batch's error line with this status (and an unremarkable code) is resubmitted alike.
    assert retryable_request("some_error", status) is retryable
    if status is not None and status >= 400:
        request = httpx.Request("POST", "http://api.test/v1/batches")
        response = httpx.Response(status, request=request, json={"error": {"message": "x"}})
        err = openai.APIStatusError("x", response=response, body=None)
        assert isinstance(translate_error(err, "creating"), TransientApiError) is retryable


@pytest.mark.parametrize(
    ("code", "status", "retryable"),
    [
        ("batch_expired", None, True),
        ("rate_limit_exceeded", None, True),
        ("server_error", None, True),
        ("invalid_request_error", 400, False),
        ("content_filter", None, False),
        (None, 500, False),  # not an error line at all
    ],
)
def test_error_codes_that_mean_try_later(
    code: str | None, status: int | None, retryable: bool
) -> None:
    assert retryable_request(code, status) is retryable


def test_only_the_token_limit_makes_a_failed_batch_resubmittable() -> None:
    assert resubmittable_batch("failed", frozenset({TOKEN_LIMIT_CODE}))
    assert not resubmittable_batch("failed", frozenset({"invalid_json_line"}))
    assert not resubmittable_batch("completed", frozenset({TOKEN_LIMIT_CODE}))
