"""aeval.http_guard: what every listening service checks before a route sees a request (issue #46).

Each test sends the bad input and asserts the clear answer. The body guard is driven through a
tiny ASGI app by hand (the ASGI messages uvicorn would send), so a test can hold a body half-sent
without sockets; the servers' own tests (test_local_hardening, test_reward_hardening) send the
same over real HTTP.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
from starlette.types import Message, Receive, Scope, Send

from aeval.commands.options import listen_token
from aeval.errors import ConfigError
from aeval.http_guard import (
    bearer_matches,
    guard_body,
    header_int,
    host_allowed,
    is_loopback,
    loads,
    presented_token,
)

NESTED = b"[" * 100_000 + b"]" * 100_000


def test_nested_json_is_a_value_error_like_any_malformed_json() -> None:
    with pytest.raises(RecursionError):
        json.loads(NESTED)  # what the parser does on its own: a server error in any route
    with pytest.raises(ValueError, match="nested too deeply"):
        loads(NESTED)
    assert loads(b'{"a": [1]}') == {"a": [1]}


@pytest.mark.parametrize("raw", ["abc", "-1", "1.5", "²", "9" * 5000, "0x10", ""])
def test_a_header_number_that_is_not_one_is_a_value_error_naming_the_header(raw: str) -> None:
    with pytest.raises(ValueError, match="header x-goog-upload-offset"):
        header_int(raw, "x-goog-upload-offset")


def test_header_numbers_read() -> None:
    assert header_int(None, "h") is None
    assert header_int(" 42 ", "h") == 42
    with pytest.raises(ValueError, match=">= 1"):
        header_int("0", "X-Aeval-Trial", least=1)


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("localhost", True), ("::1", True), ("127.0.0.2", True),
     ("0.0.0.0", False), ("10.0.0.5", False), ("::", False), ("example.com", False)],
)  # fmt: skip
def test_which_hosts_are_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.mark.parametrize(
    ("header", "allowed"),
    [(b"127.0.0.1:8000", True), (b"localhost:8000", True), (b"LOCALHOST", True),
     (b"[::1]:8000", True), (b"attacker.example:8000", False), (b"127.0.0.1.nip.io", False),
     (b"", False)],
)  # fmt: skip
def test_a_loopback_server_answers_only_to_a_loopback_host_header(
    header: bytes, allowed: bool
) -> None:
    # DNS rebinding: a page from attacker.example, re-resolved to 127.0.0.1, sends its own name.
    assert host_allowed({"headers": [(b"host", header)]}) is allowed


def test_the_token_is_read_from_bearer_or_basic_and_compared_whole() -> None:
    basic = b"Basic " + base64.b64encode(b"aeval:s3cret")
    assert presented_token({b"authorization": b"Bearer s3cret"}) == b"s3cret"
    assert presented_token({b"authorization": basic}) == b"s3cret"
    assert presented_token({b"authorization": b"Basic !!notbase64"}) == b""
    assert presented_token({}) is None
    assert bearer_matches(b"s3cret", "s3cret")
    assert not bearer_matches(b"s3cre", "s3cret") and not bearer_matches(None, "s3cret")


def test_a_token_comes_from_its_file_or_its_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AEVAL_TEST_TOKEN", "from-env")
    assert listen_token("AEVAL_TEST_TOKEN", None) == "from-env"
    (tmp_path / "token").write_text("from-file\n")
    assert listen_token("AEVAL_TEST_TOKEN", tmp_path / "token") == "from-file"
    (tmp_path / "two").write_text("a\nb\n")
    with pytest.raises(ConfigError, match="one line"):
        listen_token("AEVAL_TEST_TOKEN", tmp_path / "two")
    with pytest.raises(ConfigError, match="cannot read"):
        listen_token("AEVAL_TEST_TOKEN", tmp_path / "missing")


# ---------------------------------------------------------------- the body guard, by hand


async def _echo_length(scope: Scope, receive: Receive, send: Send) -> None:
    """A route that reads its whole body, answers 200 with its length, and would answer
    500 for anything that went wrong while reading (as Starlette's error middleware does)."""
    size = 0
    try:
        while True:
            message = await receive()
            size += len(message.get("body", b""))
            if not message.get("more_body"):
                break
        status, body = 200, str(size).encode()
    except Exception:
        status, body = 500, b"Internal Server Error"
    await send({"type": "http.response.start", "status": status, "headers": []})
    await send({"type": "http.response.body", "body": body})


def _refusal(status: int, message: str) -> tuple[int, Mapping[str, Any]]:
    return status, {"error": {"message": message}}


Answer = tuple[int, dict[str, Any] | bytes, list[tuple[bytes, bytes]], int]


async def _guarded(messages: list[Message], headers: list[tuple[bytes, bytes]],
                   *, limit: int = 100, deadline_s: float = 5.0, hang: bool = False
                   ) -> Answer:  # fmt: skip
    """Run the echo route behind the guard; (status, body, response headers, messages read)."""
    pending = list(messages)
    read = 0
    sent: list[Message] = []

    async def receive() -> Message:
        nonlocal read
        if not pending:
            if hang:
                await anyio.sleep_forever()
            return {"type": "http.disconnect"}
        read += 1
        return pending.pop(0)

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/", "headers": headers}
    await guard_body(_echo_length, scope, receive, send, limit=limit, deadline_s=deadline_s,
                     refusal=_refusal)  # fmt: skip
    start, body = sent[0], b"".join(m.get("body", b"") for m in sent[1:])
    try:
        return start["status"], json.loads(body), start["headers"], read
    except ValueError:
        return start["status"], body, start["headers"], read


def _chunks(*sizes: int, last: bool = True) -> list[Message]:
    final = len(sizes) - 1
    return [{"type": "http.request", "body": b"x" * n, "more_body": not (last and i == final)}
            for i, n in enumerate(sizes)]  # fmt: skip


@pytest.mark.anyio
async def test_a_body_within_its_limit_reaches_the_route() -> None:
    status, body, _, _ = await _guarded(_chunks(40, 60), [(b"content-length", b"100")])
    assert (status, body) == (200, 100)


@pytest.mark.anyio
async def test_a_body_declared_over_its_limit_is_refused_before_a_byte_is_read() -> None:
    status, body, headers, read = await _guarded(_chunks(40, 61), [(b"content-length", b"101")])
    assert status == 413 and read == 0
    assert isinstance(body, dict) and "101 bytes; the limit here is 100" in body["error"]["message"]
    assert (b"connection", b"close") in headers  # uvicorn closes instead of reading the rest


@pytest.mark.anyio
async def test_a_streamed_body_is_cut_off_where_it_passes_its_limit() -> None:
    # chunked: no length declared, and the route would read all 10 chunks
    chunked = [(b"transfer-encoding", b"chunked")]
    status, body, headers, read = await _guarded(_chunks(*[30] * 10), chunked)
    assert status == 413 and read == 4  # 120 bytes: the fourth chunk passed the limit
    assert isinstance(body, dict) and "over the limit here of 100" in body["error"]["message"]
    assert (b"connection", b"close") in headers


@pytest.mark.anyio
async def test_a_body_that_stops_arriving_is_answered_408_at_its_deadline() -> None:
    # half a body, then nothing: without the deadline the route would wait for good
    with anyio.fail_after(5):
        status, body, headers, _ = await _guarded(
            _chunks(10, last=False), [(b"content-length", b"50")], deadline_s=0.3, hang=True
        )
    assert status == 408 and isinstance(body, dict)
    assert "did not arrive whole within 1 seconds" in body["error"]["message"]
    assert (b"connection", b"close") in headers


@pytest.mark.anyio
async def test_a_content_length_that_is_not_a_number_is_a_400() -> None:
    status, body, _, read = await _guarded(_chunks(1), [(b"content-length", b"9" * 5000)])
    assert status == 400 and read == 0
    assert isinstance(body, dict) and "content-length" in body["error"]["message"]
