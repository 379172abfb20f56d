"""The local server's way in, in front of every wire's routes (pure ASGI rather than
Starlette middleware: a dropped connection needs the raw ``send``).

Every response gets OpenAI's ``x-request-id`` header; a server on loopback refuses a ``Host``
that is not a loopback name (DNS rebinding); the body is read under its route's limit and the
server's deadline (:func:`aeval.http_guard.guard_body`); the seeded HTTP faults of
:mod:`aeval.local.faults` strike first (statuses, slow responses, connections dropped
mid-body; never on aeval's own ``/aeval/`` routes, which are not the API under test); then
a 401 unless the request carries the server's key (only when it has one); then the app of
the wire the request speaks. Errors take that wire's shape (its codec's).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import anyio
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from aeval.http_guard import bearer_matches, guard_body, host_allowed
from aeval.local.batch_api import ApiError, Codec
from aeval.local.context import ServerContext
from aeval.local.wire import random_hex
from aeval.local.wire_azure import AZURE_V1_PREFIX
from aeval.local.wire_together import TOGETHER_UPLOADS
from aeval.local.wire_xai import XAI_PREFIX

__all__ = ["Gateway", "wire_of"]


def wire_of(scope: Scope) -> str:
    """The provider whose API a request is meant for: ``openai``, ``anthropic``, ``google``,
    ``together``, ``mistral``, ``xai`` (served under ``/xai``) or ``azure`` (its v1 API).

    Several providers use the same paths for different shapes (``POST /v1/batches``
    is OpenAI's and Together's; ``GET /v1/files`` is OpenAI's, Together's, Mistral's
    and, under google-genai's default API version, Gemini's), so a request is told
    apart by what only its SDK sends: Gemini's ``x-goog-api-key``/``x-goog-api-client``
    headers, the Together and Mistral SDKs' ``User-Agent``, and the paths only one
    provider has. Everything else is OpenAI's (and Azure's, Groq's, the direct routes).
    """
    path: str = scope.get("path", "")
    headers = dict(scope.get("headers") or [])
    agent = headers.get(b"user-agent", b"").lower()
    if b"x-goog-api-key" in headers or b"x-goog-api-client" in headers:
        return "google"
    if path.startswith(("/v1beta/", "/upload/")):
        return "google"
    if path.startswith("/v1/messages/"):
        return "anthropic"
    if path.startswith("/v1/batch/jobs") or agent.startswith(b"mistral-client-python/"):
        return "mistral"
    if path.startswith(TOGETHER_UPLOADS) or b"together/python" in agent:  # "AsyncTogether/Python"
        return "together"
    if path.startswith(XAI_PREFIX + "/"):
        return "xai"
    # Azure's v1 API and Groq's share /openai/v1: the openai SDK's agent is Azure's
    # ("AsyncOpenAI/Python"), the groq SDK's ("AsyncGroq/Python") Groq's.
    if path.startswith(AZURE_V1_PREFIX + "/") and agent.startswith((b"asyncopenai/", b"openai/")):
        return "azure"
    return "openai"


# What OpenAI says with each injected status: (code, type, message).
_HTTP_ERRORS: dict[int | str, tuple[str, str, str]] = {
    429: ("rate_limit_exceeded", "requests",
          "Rate limit reached for requests. Please try again later."),
    "insufficient_quota": ("insufficient_quota", "insufficient_quota",
        "You exceeded your current quota, please check your plan and billing details."),
    503: ("service_unavailable", "server_error",
          "The engine is currently overloaded, please try again later."),
}  # fmt: skip
_SERVER_ERROR = ("server_error", "server_error",
    "The server had an error while processing your request. Sorry about that!")  # fmt: skip


def _with_request_id(send: Send) -> Send:
    """Add the ``x-request-id`` header OpenAI puts on every response (the SDK reads it)."""

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            request_id = (b"x-request-id", f"req_{random_hex(32)}".encode())
            message = {**message, "headers": [*message.get("headers", []), request_id]}
        await send(message)

    return sending


def _upload_url(scope: Scope) -> bool:
    """A URL the server handed out for one upload, which SDKs call without the key (the
    together SDK PUTs with its bare client; google-genai sends a resumable upload's chunks
    to its ``x-goog-upload-url``): its random id is the capability, as a real one's is."""
    path, query = scope["path"], scope.get("query_string", b"")
    return path.startswith(TOGETHER_UPLOADS) or (
        path.startswith("/upload/") and b"upload_id=" in query
    )


class Gateway:
    """Request id, faults, the key, then the wire's app (see the module docstring); the
    lifespan goes to ``openai``'s app."""

    def __init__(self, apps: Mapping[str, ASGIApp], codecs: Mapping[str, Codec],
                 ctx: ServerContext, openai_shapes: Sequence[Codec] = ()) -> None:  # fmt: skip
        self._apps, self._codecs, self._ctx = dict(apps), codecs, ctx
        self._faults, self._key = ctx.faults, ctx.api_key
        # Whose routes a request's body limit is looked up in, per wire (Azure's and Groq's
        # shapes of OpenAI's API are served on its wire).
        self._limits = {wire: [codec, *(openai_shapes if wire == "openai" else ())]
                        for wire, codec in codecs.items()}  # fmt: skip

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._apps["openai"](scope, receive, send)
            return
        send, wire = _with_request_id(send), wire_of(scope)
        codec = self._codecs[wire]
        if self._ctx.loopback and not host_allowed(scope):
            message = "Invalid Host header: a server on loopback answers only to a loopback name."
            await codec.respond(ApiError(400, message))(scope, receive, send)
            return
        method, path = scope["method"], scope["path"]
        limit, too_large = next(
            (found for c in self._limits[wire] if (found := c.body_limit(self._ctx, method, path))),
            (self._ctx.limits.json_body_bytes, None),
        )

        def refusal(status: int, message: str) -> tuple[int, Mapping[str, Any]]:
            err = ApiError(status, message)
            err = too_large if status == 413 and too_large is not None else err
            return err.status, codec.error(err.status, err.message, **dict(err.fields))

        async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
            await self._route(scope, receive, send, wire)

        await guard_body(guarded, scope, receive, send, limit=limit,
                         deadline_s=self._ctx.body_timeout_s, refusal=refusal)  # fmt: skip

    async def _route(self, scope: Scope, receive: Receive, send: Send, wire: str) -> None:
        """Faults first, then the key, then the wire's app."""
        rule = None
        if not scope["path"].startswith("/aeval/"):
            rule = self._faults.for_request(scope["method"], scope["path"], wire)
        if rule is None or rule.kind == "slow":
            if rule is not None:
                await anyio.sleep(rule.delay)
            await self._admit(scope, receive, send, wire)
        elif rule.kind == "http":
            code, type_, message = _HTTP_ERRORS.get(
                rule.code or rule.status,
                _HTTP_ERRORS[429] if rule.status == 429 else _SERVER_ERROR,
            )
            after = {} if rule.retry_after is None else {"retry-after": f"{rule.retry_after:g}"}
            body = self._codecs[wire].error(rule.status, message, type=type_, code=code)
            await JSONResponse(body, rule.status, after)(scope, receive, send)
        else:  # drop: promise a body, send part of it, then close the connection
            if rule.after:  # act on the request first; only the response is lost

                async def swallow(message: Message) -> None:
                    pass

                await self._admit(scope, receive, swallow, wire)
            headers = [(b"content-type", b"application/json"), (b"content-length", b"4096")]
            await send({"type": "http.response.start", "status": 200, "headers": headers})
            await send({"type": "http.response.body", "body": b'{"id": "', "more_body": True})
            # Returning with the response unfinished makes uvicorn close the connection
            # (logging one line); raising would log a traceback for a planned fault.

    async def _admit(self, scope: Scope, receive: Receive, send: Send, wire: str) -> None:
        """The wire's app, or 401 unless the request carries the key (when one is set):
        ``Authorization: Bearer <api_key>``, or Azure's ``api-key``, Anthropic's
        ``x-api-key`` or Gemini's ``x-goog-api-key`` header."""
        headers = dict(scope["headers"])
        given = headers.get(b"authorization")
        for other in (b"api-key", b"x-api-key", b"x-goog-api-key"):
            if given is None and other in headers:
                given = b"Bearer " + headers[other]
        scheme, _, token = (given or b"").partition(b" ")
        keyed = scheme == b"Bearer" and bearer_matches(token, self._key or "")
        if self._key is None or keyed or _upload_url(scope):
            await self._apps.get(wire, self._apps["openai"])(scope, receive, send)
            return
        message = "Incorrect API key provided."
        message = "You didn't provide an API key." if given is None else message
        body = self._codecs[wire].error(401, message, code="invalid_api_key")
        await JSONResponse(body, 401)(scope, receive, send)
