"""One direct request, from its body to the line that records its answer.

The request goes through the openai SDK's async client
(``chat.completions.create``, ``completions.create`` or ``responses.create``, one per
``--endpoint``, with the body's fields as they are in the request file), holding a slot of the run's
:class:`~aeval.engine.direct.aimd.AimdLimiter`. What is retried is decided by the
project's one rule (:func:`aeval.batch.retry.retryable_status` through
:func:`~aeval.batch.providers.openai_api.translate_error`) and how by
:func:`~aeval.batch.retry.call_with_retries` (tenacity, full jitter, never
sooner than ``Retry-After``). A 429 or 503 teaches the limiter the server's
capacity; while other requests of the run are in flight, the refused request
waits first in line for the next slot they free instead of sleeping (the
server has room again exactly then); otherwise it backs off. The slot is
given back before each backoff sleep, so a request waiting out a
``Retry-After`` never keeps the server idle.

**The SDK's own retries are off** (``max_retries=0``), on purpose: (1) a
silent SDK retry of a 429 hides from the limiter exactly the signal that must
lower it; (2) every retry of a completion is paid again (the request reached the
server), so each one is made where it is counted and reported (a
``RetryScheduled`` event) rather than inside the SDK; (3) one retry rule for the
whole project (:mod:`aeval.batch.retry`). That *is* the production default of direct mode; the
tests run with it.

Which request this is, the client says in two headers (``X-Aeval-Custom-Id``,
``X-Aeval-Trial``) to aeval's own local server only (:func:`~aeval.config.is_aeval_server`),
which counts and varies its synthetic answers by them; any other server is sent
the request body and the SDK's own headers, nothing of aeval's.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import openai

from aeval.batch.providers.openai_api import sdk_client, translate_error
from aeval.batch.retry import BUSY_STATUSES, RetryNotice, call_with_retries, retryable_status
from aeval.batch.transient import TransientApiError
from aeval.config import Credentials, RetrySettings, is_aeval_server
from aeval.engine.direct.aimd import AimdLimiter
from aeval.engine.direct.answer_files import answer_line

__all__ = ["DirectClient", "NoAnswer"]


class NoAnswer(Exception):
    """A request got no HTTP answer at all through its attempts (connection errors,
    timeouts): not an answer to record; the request is for a later resume."""


_CUSTOM_ID_HEADER = "X-Aeval-Custom-Id"  # the names aeval.local.direct reads
_TRIAL_HEADER = "X-Aeval-Trial"


def _json_or_none(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


class DirectClient:
    """Sends direct requests for one run; close it with :meth:`aclose`.

    :param endpoint: ``"chat"``, ``"completions"`` or ``"responses"``.
    :param timeout: seconds one request may take (``--request-timeout``).
    :param on_retry: told before each backoff sleep, with the request's model and
        trial (the engine emits an event).
    """

    def __init__(
        self,
        credentials: Credentials,
        *,
        endpoint: str,
        timeout: float,
        retry: RetrySettings,
        limiter: AimdLimiter,
        on_retry: Callable[[RetryNotice, str | None, int], None] = lambda n, m, t: None,
    ) -> None:
        # No SDK retries: every retry goes through the one retry rule (and the limiter).
        self._client = sdk_client(credentials, max_retries=0, timeout=timeout)
        self._identify = is_aeval_server(credentials)
        self._endpoint = endpoint
        self._retry = retry
        self.limiter = limiter
        self._on_retry = on_retry

    @property
    def base_url(self) -> str:
        return str(self._client.base_url).rstrip("/")

    async def ask(
        self,
        custom_id: str,
        trial: int,
        body: dict[str, Any],
        *,
        connect_deadline_s: float | None = None,
    ) -> str:
        """The answer line of one request (the server's last answer once retrying gave up).

        :param connect_deadline_s: stop sooner when the server cannot be reached at
            all for this long (the run passes it until its first answer).
        :raises UnreachableError: no HTTP answer at all for ``connect_deadline_s``.
        :raises NoAnswer: no HTTP answer at all through the request's attempts.
        """
        headers = (
            {_CUSTOM_ID_HEADER: custom_id, _TRIAL_HEADER: str(trial)} if self._identify else {}
        )
        last: list[str] = []  # the line of the last retryable HTTP answer

        async def attempt() -> str:
            refused = 0
            while True:
                async with self.limiter.slot(first=refused > 0) as ticket:
                    try:
                        raw = await self._send(body, headers)
                    except openai.APIStatusError as err:
                        status = err.status_code
                        response = err.response
                        line = answer_line(
                            custom_id,
                            status,
                            response.headers.get("x-request-id"),
                            _json_or_none(response.text),
                        )
                        if not retryable_status(status):
                            return line  # a 400 and the like: the server's final word
                        last[:] = [line]
                        # Busy while other requests of this run are in flight: the
                        # server has room again when one of them is answered, so this
                        # one goes first in line for that slot rather than sleeping
                        # (a backoff longer than a request would idle the server).
                        # With nothing else in flight, the backoff and Retry-After.
                        if status not in BUSY_STATUSES or self.limiter.in_use <= 1:
                            if status in BUSY_STATUSES:
                                self.limiter.busy(ticket)
                            raise translate_error(err, f"request {custom_id}") from err
                        self.limiter.busy(ticket)
                        error = str(translate_error(err, f"request {custom_id}"))
                    except openai.OpenAIError as err:
                        raise translate_error(err, f"request {custom_id}") from err
                    else:
                        self.limiter.success()
                        http = raw.http_response
                        # The slot goes to the next request before this answer is read
                        # into its line: the server has room again now.
                        break
                refused += 1
                notice = RetryNotice("request", refused, 0.0, error)
                self._on_retry(notice, body.get("model"), trial)
            return answer_line(
                custom_id, http.status_code, http.headers.get("x-request-id"), raw_body(http)
            )

        try:
            return await call_with_retries(
                "request",
                attempt,
                self._retry,
                on_retry=lambda notice: self._on_retry(notice, body.get("model"), trial),
                connect_deadline_s=connect_deadline_s,
                endpoint=self.base_url,
                max_attempts=self._retry.request_attempts,
            )
        except TransientApiError as err:
            if last:  # retrying gave up: the server's last answer is its word
                return last[0]
            # No HTTP answer at all (refused, reset, timed out): nothing the server said,
            # so nothing to write; the request stays unanswered and resume asks again.
            raise NoAnswer(str(err)) from err

    async def _send(self, body: dict[str, Any], headers: dict[str, str]) -> Any:
        # The body goes exactly as the request file holds it (what a batch line would
        # carry), as extra_body, which the SDK merges over the typed parameters: those
        # get empty placeholders because the SDK walks typed parameters through its
        # typing-introspection transform, measured at a quarter of the engine's CPU
        # per request (bench/README.md, "Direct mode"); the body needs no transform.
        model = body["model"]
        if self._endpoint == "chat":
            return await self._client.chat.completions.with_raw_response.create(
                model=model, messages=(), extra_body=body, extra_headers=headers
            )
        if self._endpoint == "responses":
            # input is a required parameter up to openai 1.x (the floor): a placeholder,
            # as prompt above; the body's input, instructions, reasoning… go over it.
            return await self._client.responses.with_raw_response.create(
                model=model, input="", extra_body=body, extra_headers=headers
            )
        return await self._client.completions.with_raw_response.create(
            model=model, prompt="", extra_body=body, extra_headers=headers
        )

    async def aclose(self) -> None:
        await self._client.close()


def raw_body(http: Any) -> Any:
    """The response body as JSON (read raw: the SDK's pydantic model is never built,
    a cost that adds up at thousands of answers a minute)."""
    return _json_or_none(http.text)
