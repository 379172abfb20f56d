"""A counting reverse proxy on 127.0.0.1: forwards every byte to one upstream and records
each request/answer pair (sent, answered, status, a digest of the request body).

Run alone (its own process, as issue 39 measures: the proxy then competes for the cores
like any other process instead of sharing the bench's event loop):

    python bench/counting_proxy.py HOST:PORT RECORD.jsonl

prints ``port N`` once listening and, on SIGTERM or SIGINT, writes one JSON line per
exchange to RECORD.jsonl and exits. :func:`start_proxy` runs the same proxy inside the
caller's event loop (the bench's "in-process" figure).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import signal
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class Exchange:
    sent: float  # time.monotonic() when the request's head arrived
    target: str = ""  # the request line's method and path
    digest: str = ""  # of the request body: the same request sent twice has the same one
    done: float | None = None  # when the whole answer had been forwarded
    status: int | None = None


@dataclass
class Recorder:
    """Every request/answer pair the proxy saw, in order."""

    exchanges: list[Exchange] = field(default_factory=list)


async def _pipe_requests(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    pending: asyncio.Queue[Exchange],
    rec: Recorder,
) -> None:
    """Client → server: each request's head and Content-Length body; one Exchange each."""
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            exchange = Exchange(time.monotonic(), b" ".join(head.split(b" ", 2)[:2]).decode())
            length = _content_length(head)
            body = await reader.readexactly(length) if length else b""
            exchange.digest = hashlib.blake2b(body, digest_size=12).hexdigest()
            rec.exchanges.append(exchange)
            await pending.put(exchange)
            writer.write(head + body)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


async def _pipe_answers(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, pending: asyncio.Queue[Exchange]
) -> None:
    """Server → client: each answer's head and body; stamps the oldest open Exchange."""
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            exchange = await pending.get()
            exchange.status = int(head.split(b" ", 2)[1])
            length = _content_length(head)
            writer.write(head + (await reader.readexactly(length) if length else b""))
            await writer.drain()
            exchange.done = time.monotonic()
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    finally:
        writer.close()


def _content_length(head: bytes) -> int:
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value.strip())
        if name.strip().lower() == b"transfer-encoding":
            raise RuntimeError("chunked bodies are not proxied (the local server sends none)")
    return 0


async def start_proxy(upstream: tuple[str, int], rec: Recorder) -> asyncio.Server:
    """The proxy in the running event loop, on an ephemeral 127.0.0.1 port."""

    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        server_r, server_w = await asyncio.open_connection(*upstream)
        pending: asyncio.Queue[Exchange] = asyncio.Queue()
        try:
            await asyncio.gather(
                _pipe_requests(client_r, server_w, pending, rec),
                _pipe_answers(server_r, client_w, pending),
            )
        except asyncio.CancelledError:  # the scenario ended with the connection open
            server_w.close()
            client_w.close()

    return await asyncio.start_server(handle, "127.0.0.1", 0)


def read_record(path: Path) -> Recorder:
    return Recorder([Exchange(**json.loads(line)) for line in path.read_text().splitlines()])


async def _serve(upstream: tuple[str, int], record: Path) -> None:
    rec = Recorder()
    server = await start_proxy(upstream, rec)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    print(f"port {server.sockets[0].getsockname()[1]}", flush=True)
    await stop.wait()
    server.close()
    record.write_text("".join(json.dumps(asdict(e)) + "\n" for e in rec.exchanges))


if __name__ == "__main__":
    host, _, port = sys.argv[1].rpartition(":")
    asyncio.run(_serve((host, int(port)), Path(sys.argv[2])))
