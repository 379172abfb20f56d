"""Failures of every provider's SDK, in aeval's two kinds.

Each SDK has its own exception classes, but the decision is the same for all:
an HTTP status :func:`aeval.batch.retry.retryable_status` names, or no HTTP
answer at all (the transport's own errors, which google-genai and mistralai
let through unwrapped), is a :class:`TransientApiError`; anything else is an
:class:`~aeval.errors.ApiError`, and a 401/403 names the provider's key and
base-URL variables.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import (
    AbstractAsyncContextManager,
    AsyncExitStack,
    asynccontextmanager,
    contextmanager,
)
from typing import Any, TypeVar

from aeval.batch.retry import retry_after_seconds, retryable_status
from aeval.batch.transient import TransientApiError
from aeval.errors import ApiError

__all__ = [
    "failing_as",
    "guard_lines",
    "http_failure",
    "opened_as",
    "stainless_failure",
    "transport_failure",
]

Failure = Callable[[Exception, str], Exception]
T = TypeVar("T")

# Where the HTTP stacks under these SDKs raise their transport errors from.
_TRANSPORT_MODULES = frozenset({"httpx", "httpx2", "httpcore", "anyio", "aiohttp", "h11"})


def http_failure(
    what: str, status: int, message: str, *, headers: Any = None, check: str
) -> Exception:
    """The error for an HTTP error answer (``check``: which variables to look at on 401/403)."""
    detail = f"{what}: HTTP {status}: {message}"
    if retryable_status(status):
        return TransientApiError(detail, retry_after=retry_after_seconds(headers), status=status)
    if status in (401, 403):
        return ApiError(f"{detail} — check {check}")
    return ApiError(detail)


def transport_failure(err: BaseException, what: str) -> TransientApiError | None:
    """A transport error (no HTTP answer) as retryable, or ``None`` when ``err`` is not one.

    A read or write timeout means the server was reached; only a failure to
    connect counts towards the run's connect deadline.
    """
    for candidate in (err, err.__cause__):
        if candidate is None:
            continue
        module = type(candidate).__module__.split(".")[0]
        if module in _TRANSPORT_MODULES or isinstance(candidate, ConnectionError):
            name = type(candidate).__name__
            reached = "Timeout" in name and "Connect" not in name
            return TransientApiError(
                f"{what}: connection problem: {name}: {candidate}", connection=not reached
            )
    return None


@contextmanager
def failing_as(fail: Failure, what: str) -> Iterator[None]:
    """Raise an exception from inside as ``fail(err, what)`` makes it (aeval's two kinds),
    or as it came where ``fail`` gives it back (neither the SDK's nor the transport's)."""
    try:
        yield
    except Exception as err:
        failure = fail(err, what)
        if failure is err:
            raise
        raise failure from err


@asynccontextmanager
async def opened_as(
    fail: Failure, what: str, opening: AbstractAsyncContextManager[T]
) -> AsyncIterator[T]:
    """Enter an SDK's streaming response with its failures made as ``fail`` makes them.

    Only the SDK's own work is translated: what the caller's ``async with`` body
    raises (scoring's anyio errors, a disk write that failed) reaches the caller
    as it was raised, never taken for a connection problem and retried.
    """
    async with AsyncExitStack() as stack:
        with failing_as(fail, what):
            response = await stack.enter_async_context(opening)
        yield response


async def guard_lines(
    lines: AsyncIterator[str], what: str, fail: Failure | None = None
) -> AsyncIterator[str]:
    """Re-raise a download broken half-way (connection dropped mid-body) as retryable.

    The server was reached (it answered), so this never counts towards the connect
    deadline. ``fail``: the SDK's own failures, where its stream raises them.
    """
    try:
        async for line in lines:
            yield line
    except Exception as err:
        failure = fail(err, what) if fail is not None else err
        if failure is err:
            broken = transport_failure(err, what)
            if broken is None:
                raise
            failure = TransientApiError(str(broken))
        raise failure from err


def stainless_failure(
    err: Exception,
    what: str,
    sdk: Any,
    check: str,
    *,
    hint_404: Callable[[Any], str | None] | None = None,
) -> Exception:
    """An exception of a Stainless-generated SDK (``openai``, ``anthropic``, ``together``,
    ``groq``: the same classes in each SDK's own module ``sdk``) in aeval's two kinds.

    :param check: which variables to look at on 401/403.
    :param hint_404: what to add to a 404's message, given the SDK's error (``None``: nothing).
    """
    if isinstance(err, sdk.APIConnectionError):  # includes timeouts
        # The SDK says only "Connection error."; the transport's reason is the cause.
        cause = err.__cause__
        reason = f"{err} ({type(cause).__name__}: {cause})" if cause else str(err)
        # A read or write timeout means the server was reached (a slow upload, a
        # busy API): only a failure to connect counts towards the connect deadline.
        reached = isinstance(err, sdk.APITimeoutError) and "Connect" not in type(cause).__name__
        return TransientApiError(f"{what}: connection problem: {reason}", connection=not reached)
    if isinstance(err, sdk.APIStatusError):
        body = err.body
        inner = body.get("error", body) if isinstance(body, dict) else None
        message = (
            str(inner.get("message"))
            if isinstance(inner, dict) and inner.get("message")
            else str(err.message)
        )
        hint = hint_404(err) if hint_404 is not None and err.status_code == 404 else None
        if hint is not None:
            return ApiError(f"{what}: HTTP 404: {message} — {hint}")
        return http_failure(
            what, err.status_code, message, headers=err.response.headers, check=check
        )
    if isinstance(err, sdk.APIResponseValidationError):
        return ApiError(f"{what}: the API sent a response we cannot read: {err}")
    return transport_failure(err, what) or err
