"""The local server's two pure-ASGI layers, in front of its routes.

:class:`AuthLayer` answers 401 as OpenAI does unless the request carries the
server's key (only when it has one); :class:`FaultLayer` injects the seeded
HTTP faults of :mod:`aeval.local.faults` (statuses with OpenAI's error bodies,
slow responses, connections dropped mid-body) before a request reaches a route,
and puts OpenAI's ``x-request-id`` header on every response. Pure ASGI rather
than Starlette middleware: a dropped connection needs the raw ``send``.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from aeval.local.faults import FaultInjector
from aeval.local.wire import error_body, random_hex
from aeval.local.wire_routing import wire_of

__all__ = ["AuthLayer", "FaultLayer"]


async def _send_json(
    send: Send, status: int, body: dict[str, Any], headers: list[tuple[bytes, bytes]]
) -> None:
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


class AuthLayer:
    """401 unless the request carries the key: ``Authorization: Bearer <api_key>``, or
    Azure's ``api-key``, Anthropic's ``x-api-key`` or Gemini's ``x-goog-api-key`` header
    (only when a key is set)."""

    def __init__(self, app: ASGIApp, api_key: str | None) -> None:
        self._app = app
        self._expected = f"Bearer {api_key}".encode() if api_key else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._expected is not None and scope["type"] == "http":
            headers = dict(scope["headers"])
            given = headers.get(b"authorization")
            if given is None and b"api-key" in headers:  # how Azure OpenAI takes the key
                given = b"Bearer " + headers[b"api-key"]
            if given is None and b"x-api-key" in headers:  # how Anthropic takes the key
                given = b"Bearer " + headers[b"x-api-key"]
            if given is None and b"x-goog-api-key" in headers:  # how Gemini takes it
                given = b"Bearer " + headers[b"x-goog-api-key"]
            if given != self._expected:
                message = (
                    "You didn't provide an API key."
                    if given is None
                    else "Incorrect API key provided."
                )
                await _send_json(send, 401, error_body(message, code="invalid_api_key"), [])
                return
        await self._app(scope, receive, send)


# What OpenAI says with each injected status: (code, type, message).
_HTTP_ERRORS: dict[int | str, tuple[str, str, str]] = {
    429: (
        "rate_limit_exceeded",
        "requests",
        "Rate limit reached for requests. Please try again later.",
    ),
    "insufficient_quota": (
        "insufficient_quota",
        "insufficient_quota",
        "You exceeded your current quota, please check your plan and billing details.",
    ),
    503: (
        "service_unavailable",
        "server_error",
        "The engine is currently overloaded, please try again later.",
    ),
}
_SERVER_ERROR = (
    "server_error",
    "server_error",
    "The server had an error while processing your request. Sorry about that!",
)


def _with_request_id(send: Send) -> Send:
    """Add the ``x-request-id`` header OpenAI puts on every response (the SDK reads it)."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = [
                *message.get("headers", []),
                (b"x-request-id", f"req_{random_hex(32)}".encode()),
            ]
            message = {**message, "headers": headers}
        await send(message)

    return sending


class FaultLayer:
    """Injects HTTP-level faults before a request reaches the routes."""

    def __init__(self, app: ASGIApp, faults: FaultInjector) -> None:
        self._app = app
        self._faults = faults

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        send = _with_request_id(send)
        if scope["path"].startswith("/aeval/"):  # aeval's own routes: not the API, no faults
            await self._app(scope, receive, send)
            return
        rule = self._faults.for_request(scope["method"], scope["path"], wire_of(scope))
        if rule is None:
            await self._app(scope, receive, send)
        elif rule.kind == "slow":
            await anyio.sleep(rule.delay)
            await self._app(scope, receive, send)
        elif rule.kind == "http":
            code, type_, message = _HTTP_ERRORS.get(
                rule.code or rule.status,
                _HTTP_ERRORS[429] if rule.status == 429 else _SERVER_ERROR,
            )
            headers = []
            if rule.retry_after is not None:
                headers.append((b"retry-after", f"{rule.retry_after:g}".encode()))
            await _send_json(send, rule.status, error_body(message, type_, None, code), headers)
        else:  # drop: promise a body, send part of it, then close the connection
            if rule.after:  # act on the request first; only the response is lost

                async def swallow(message: Message) -> None:
                    pass

                await self._app(scope, receive, swallow)
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", b"4096"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": b'{"id": "', "more_body": True})
            # Returning with the response unfinished makes uvicorn close the connection
            # (logging one line); raising would log a traceback for a planned fault.
