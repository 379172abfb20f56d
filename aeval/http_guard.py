"""What aeval's listening services (the local server, the reward service) check before a route
sees a request, written once as plain ASGI: the ``Host`` of a loopback server, a key compared in
constant time, and a body read under a size limit and a deadline.

The body guard (:func:`guard_body`) wraps the app's ``receive``: a body declared over its limit
is refused before a byte of it is read; one that streams past the limit (chunked, no length), or
does not arrive whole within the deadline, is cut off where it stands. Either way the client gets
one error response, in the shape its route answers errors in, with ``Connection: close`` (uvicorn
then closes the connection instead of waiting for the rest of the body), and whatever the route
was doing with the half-read body is dropped.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import ipaddress
import json
import math
from collections.abc import Callable, Mapping
from typing import Any

import anyio
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["BodyRefused", "Refusal", "bearer_matches", "guard_body", "header_int",
           "host_allowed", "is_loopback", "loads", "presented_token"]  # fmt: skip

# The error response a client gets (status, body), given the guard's status and one line
# saying what was wrong: a route may answer its own (Gemini says 400 for a body too large).
Refusal = Callable[[int, str], tuple[int, Mapping[str, Any]]]


def loads(raw: str | bytes) -> Any:
    """Untrusted JSON, parsed: nesting deeper than the parser's recursion limit is a
    :class:`ValueError` like any other malformed JSON (the parser raises ``RecursionError``)."""
    try:
        return json.loads(raw)
    except RecursionError:
        raise ValueError("the JSON is nested too deeply to read") from None


def header_int(value: str | None, name: str, *, least: int = 0) -> int | None:
    """A header's number (``None`` when absent); :class:`ValueError` naming the header when it
    is not a decimal integer of at most 18 digits, at least ``least``."""
    if value is None:
        return None
    text = value.strip()
    # ASCII digits only (str.isdigit takes "²"), and few enough that int() is cheap and legal.
    if not (text.isascii() and text.isdigit() and len(text) <= 18) or int(text) < least:
        raise ValueError(f"header {name}: {value[:40]!r} is not an integer >= {least}")
    return int(text)


def is_loopback(host: str) -> bool:
    """Whether a server listening on ``host`` is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def host_allowed(scope: Scope) -> bool:
    """Whether a request to a loopback server names the server in its ``Host`` header (a
    loopback name or address, any port). A page a browser loaded from another name that
    resolves to 127.0.0.1 (DNS rebinding) sends that name: it is refused."""
    host = dict(scope.get("headers") or []).get(b"host", b"").decode("latin-1").lower()
    name = host.rsplit("]", 1)[0].lstrip("[") if host.startswith("[") else host.split(":")[0]
    return is_loopback(name)


def presented_token(headers: Mapping[bytes, bytes]) -> bytes | None:
    """The token a request presents: ``Authorization: Bearer TOKEN``, or the password of
    ``Authorization: Basic`` (what a client sends for a URL ``http://user:TOKEN@host/``)."""
    given = headers.get(b"authorization")
    if given is None:
        return None
    scheme, _, value = given.partition(b" ")
    if scheme.lower() == b"bearer":
        return value.strip()
    if scheme.lower() == b"basic":
        try:
            return base64.b64decode(value.strip(), validate=True).partition(b":")[2]
        except (binascii.Error, ValueError):
            return b""
    return b""


def bearer_matches(given: bytes | None, token: str) -> bool:
    """Whether ``given`` is ``token``, compared in constant time (``hmac.compare_digest``)."""
    return given is not None and hmac.compare_digest(given, token.encode())


class BodyRefused(Exception):
    """The body went over its limit or missed its deadline (raised from ``receive``)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


async def _refuse(send: Send, answer: tuple[int, Mapping[str, Any]]) -> None:
    status, body = answer
    payload = json.dumps(body).encode()
    headers = [(b"content-type", b"application/json"), (b"connection", b"close"),
               (b"content-length", str(len(payload)).encode())]  # fmt: skip
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


async def guard_body(app: ASGIApp, scope: Scope, receive: Receive, send: Send, *, limit: int,
                     deadline_s: float, refusal: Refusal) -> None:  # fmt: skip
    """Call ``app`` with a body of at most ``limit`` bytes that arrives whole within
    ``deadline_s`` of the request's head (see the module docstring): past either, ``refusal``
    shapes the 413 or 408 the client gets instead of the app's answer."""
    headers = dict(scope.get("headers") or [])
    try:
        declared = header_int(headers.get(b"content-length", b"").decode("latin-1") or None,
                              "content-length")  # fmt: skip
    except ValueError as err:
        await _refuse(send, refusal(400, str(err)))
        return
    if declared is not None and declared > limit:
        message = f"The request body is {declared} bytes; the limit here is {limit} bytes."
        await _refuse(send, refusal(413, message))
        return
    # One timer for the request, put off for good once the body is in: a route still waiting
    # for its body at the deadline is cut off (408), one that has it never is.
    if not declared and b"chunked" not in headers.get(b"transfer-encoding", b"").lower():
        await app(scope, receive, send)  # no body is coming (h11 holds a client to that)
        return
    timer = anyio.CancelScope(deadline=anyio.current_time() + deadline_s)
    received, done, refused, started = 0, False, None, False

    async def receiving() -> Message:
        nonlocal received, done, refused
        if done or refused is not None:
            return await receive()
        message = await receive()
        if message["type"] == "http.request":
            received += len(message.get("body", b""))
            done = not message.get("more_body", False)
            if received > limit:
                refused = BodyRefused(413, f"The request body is over the limit here of "
                                      f"{limit} bytes.")  # fmt: skip
                raise refused
        else:
            done = True  # the client went away: the route hears it from its own receive
        if done:
            timer.deadline = math.inf
        return message

    async def sending(message: Message) -> None:
        nonlocal started
        if refused is None:  # after a refusal, the route's own answer is dropped
            started = started or message["type"] == "http.response.start"
            await send(message)

    try:
        with timer:
            await app(scope, receiving, sending)
    except Exception:
        if refused is None:
            raise
    if timer.cancelled_caught and refused is None:
        message = f"The request body did not arrive whole within {math.ceil(deadline_s)} seconds."
        refused = BodyRefused(408, message)
    if refused is not None and not started:
        await _refuse(send, refusal(refused.status, refused.message))
