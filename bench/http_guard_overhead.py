"""What the body guard (aeval.http_guard.guard_body, in front of every route of both services)
costs per request, side by side with the same route unguarded: a chat-sized JSON body of
--body-bytes in --chunks messages, the route reading it whole and answering, in one process.

    .venv/bin/python bench/http_guard_overhead.py --requests 20000
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import anyio
from starlette.types import Message, Receive, Scope, Send

from aeval.http_guard import guard_body


async def route(scope: Scope, receive: Receive, send: Send) -> None:
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"{}"})


def refusal(status: int, message: str) -> tuple[int, dict[str, Any]]:
    return status, {"error": message}


async def run(requests: int, body_bytes: int, chunks: int, guarded: bool) -> float:
    piece = b"x" * (body_bytes // chunks)
    headers = [(b"content-length", str(len(piece) * chunks).encode())]
    scope = {"type": "http", "method": "POST", "path": "/v1/chat/completions", "headers": headers}

    async def send(message: Message) -> None:
        pass

    started = time.perf_counter()
    for _ in range(requests):
        left = chunks

        async def receive() -> Message:
            nonlocal left
            left -= 1
            return {"type": "http.request", "body": piece, "more_body": left > 0}

        if guarded:
            await guard_body(route, scope, receive, send, limit=16 << 20, deadline_s=60,
                             refusal=refusal)  # fmt: skip
        else:
            await route(scope, receive, send)
    return (time.perf_counter() - started) / requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--body-bytes", type=int, default=2_000)
    parser.add_argument("--chunks", type=int, default=1)
    args = parser.parse_args()
    bare = guarded = float("inf")
    for _ in range(3):  # interleaved, best of 3
        bare = min(bare, anyio.run(run, args.requests, args.body_bytes, args.chunks, False))
        guarded = min(guarded, anyio.run(run, args.requests, args.body_bytes, args.chunks, True))
    print(f"bare route {bare * 1e6:.1f} µs/request, guarded {guarded * 1e6:.1f} µs/request "
          f"(+{(guarded - bare) * 1e6:.1f} µs, {guarded / bare:.2f}x)")  # fmt: skip


if __name__ == "__main__":
    main()
