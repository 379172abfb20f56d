"""A uvicorn server on a thread of its own, or in the foreground: how the local server
(:mod:`aeval.local.server`) and the reward service (:mod:`aeval.reward.server`) run.

In the background the server has its own thread and asyncio event loop, so the host may
be asyncio, trio or plain synchronous code, and the server outlives anything the host
does to its own loop. No signal handlers are installed there (uvicorn only does so on
the main thread); in the foreground, uvicorn's own handle SIGINT and SIGTERM, and a server
stopped by either cleans up before the process ends.

Every server is bounded the same way (:class:`Bounds`): a connection must send a request's
head within a deadline, a body is read under its route's limit and deadline
(:mod:`aeval.http_guard`), and beyond ``limit_concurrency`` connections uvicorn answers 503.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal, Self

import anyio.to_thread
import uvicorn
from starlette.types import ASGIApp
from uvicorn.protocols.http.h11_impl import H11Protocol

from aeval.errors import AevalError, ConfigError

__all__ = ["BackgroundServer", "Bounds", "UvicornThread", "listening_socket"]


@dataclass(frozen=True, slots=True)
class Bounds:
    """What one server lets a client hold.

    :param head_timeout_s: a connection that has not sent a whole request head this long
        after it opened (or after its last response) is closed: uvicorn has no such deadline,
        so an idle socket would otherwise hold a file descriptor for good.
    :param body_timeout_s: a request body must arrive whole this long after its head.
    :param keep_alive_s: uvicorn's ``timeout_keep_alive``: an idle kept-alive connection's life.
    :param limit_concurrency: uvicorn's: beyond this many connections (or requests in
        progress), a new request is answered 503 and its connection closed.
    """

    head_timeout_s: float = 10.0
    body_timeout_s: float = 60.0
    keep_alive_s: float = 5.0
    limit_concurrency: int = 1024


class _HeadDeadlineH11(H11Protocol):
    """uvicorn's h11 protocol, which also closes a connection that sends no whole request
    head within the server's ``head_timeout_s`` (set on the class by :func:`_protocol`)."""

    head_timeout_s = 10.0
    _head_deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm_head_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_deadline is not None:
            self._head_deadline.cancel()
        super().connection_lost(exc)

    def _arm_head_deadline(self) -> None:
        armed_for = self.cycle  # a new request head replaces it

        def overdue() -> None:
            idle = armed_for is None or armed_for.response_complete
            if self.cycle is armed_for and idle and not self.transport.is_closing():
                self.transport.close()

        if self._head_deadline is not None:
            self._head_deadline.cancel()
        self._head_deadline = self.loop.call_later(self.head_timeout_s, overdue)


def _protocol(head_timeout_s: float) -> type[H11Protocol]:
    return type("HeadDeadlineH11", (_HeadDeadlineH11,), {"head_timeout_s": head_timeout_s})


class _Terminated(BaseException):
    """SIGTERM, raised so that serving unwinds (see :func:`_sigterm_unwinds`)."""


@contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    """SIGTERM as :class:`_Terminated` while serving in the foreground.

    uvicorn catches SIGTERM to shut down gracefully, then raises it again under the handler
    that was there before; under the default one the process ends on the spot, before any
    ``finally`` (a temporary state folder would be left behind). Under this one serving
    unwinds, and :meth:`BackgroundServer.serve_forever` ends the process by the signal once
    it has cleaned up.
    """

    def exit_(signum: int, frame: Any) -> None:
        raise _Terminated

    previous = signal.signal(signal.SIGTERM, exit_)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def listening_socket(host: str, port: int) -> tuple[socket.socket, str]:
    """A TCP socket listening on ``host:port`` (``0``: any free port), and its
    ``http://HOST:PORT`` root.

    :raises ConfigError: the address cannot be listened on.
    """
    try:
        # IPPROTO_TCP named explicitly: asyncio turns Nagle's algorithm off only on
        # sockets whose ``proto`` says TCP, and accepted ones inherit it from this
        # one. With proto 0, a response's headers and body (two writes) waited
        # for the client's delayed ACK: +40 ms on every reused connection.
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as err:
        raise ConfigError(f"cannot listen on {host}:{port}: {err}") from err
    sock.listen(2048)
    shown = f"[{host}]" if ":" in host else host
    return sock, f"http://{shown}:{sock.getsockname()[1]}"


async def _serve_then_signal(
    server: uvicorn.Server, sock: socket.socket, ready: threading.Event
) -> None:
    """Serve on ``sock`` until told to stop, setting ``ready`` once requests are accepted
    (or serving ended): what the serving thread reports to its starter."""

    async def watch() -> None:
        while not server.started and not server.should_exit:
            await asyncio.sleep(0.005)
        ready.set()

    watcher = asyncio.ensure_future(watch())
    try:
        await server.serve(sockets=[sock])
    finally:
        watcher.cancel()
        ready.set()
        sock.close()


class UvicornThread:
    """One uvicorn server at a time, served in the background (:meth:`start`,
    :meth:`stop`) or in the foreground (:meth:`run`).

    :param what: the server, for messages ("the reward server").
    :param thread_name: the background thread's name.
    :param start_timeout_s: how long :meth:`start` waits for requests to be accepted,
        and :meth:`stop` for the thread to end.
    """

    def __init__(self, what: str, thread_name: str, start_timeout_s: float) -> None:
        self._what = what
        self._thread_name = thread_name
        self._timeout_s = start_timeout_s
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None

    @property
    def running(self) -> bool:
        """Whether :meth:`start` was called and :meth:`stop` not yet."""
        return self._thread is not None

    def start(self, config: uvicorn.Config, sock: socket.socket) -> None:
        """Serve ``config``'s app on ``sock`` (closed when serving ends) in a background
        thread; returns once requests are accepted.

        :raises AevalError: the server did not start (it is stopped again).
        """
        server = uvicorn.Server(config)
        self._server = server
        self._failure = None
        ready = threading.Event()

        def serve() -> None:
            try:
                asyncio.run(_serve_then_signal(server, sock, ready))
            except BaseException as err:  # reported to the starting thread
                self._failure = err
                ready.set()

        self._thread = threading.Thread(target=serve, name=self._thread_name, daemon=True)
        self._thread.start()
        if not ready.wait(self._timeout_s) or self._failure or not server.started:
            self.stop()
            raise AevalError(f"{self._what} did not start: {self._failure!r}")

    def stop(self) -> None:
        """Tell the server to stop (requests in progress get its graceful-shutdown time)
        and wait for its thread."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(self._timeout_s)
        self._thread = None
        self._server = None

    def run(self, config: uvicorn.Config, sock: socket.socket) -> None:
        """Serve ``config``'s app on ``sock`` in the foreground until SIGINT/SIGTERM
        (or :meth:`stop` from another thread); ``sock`` is closed at the end."""
        server = uvicorn.Server(config)
        self._server = server
        try:
            with _sigterm_unwinds():
                server.run(sockets=[sock])
        finally:
            sock.close()


class BackgroundServer:
    """A server on ``host:port``, served in the background (``with``, ``async with``
    from asyncio or trio, :meth:`start`/:meth:`stop`) or in the foreground
    (:meth:`serve_forever`).

    A subclass says what it serves (:meth:`_app`, built before the socket is bound, so a
    bad setting fails first), what its URL is once bound (:meth:`_bound`) and what to
    clean up once serving ends (:meth:`_cleanup`).
    """

    def __init__(
        self,
        what: str,
        thread_name: str,
        *,
        host: str,
        port: int,
        log_level: str,
        start_timeout_s: float,
        lifespan: Literal["on", "off"] = "off",
        bounds: Bounds | None = None,
    ) -> None:
        self._what, self._host, self._port = what, host, port
        self.bounds = bounds or Bounds()
        self._log_level, self._lifespan = log_level, lifespan
        self._uvicorn = UvicornThread(what, thread_name, start_timeout_s)
        self._url = ""

    def _app(self) -> ASGIApp:
        raise NotImplementedError

    def _bound(self, root: str) -> str:
        """Record and return the server's URL, given its ``http://HOST:PORT`` root."""
        raise NotImplementedError

    def _cleanup(self) -> None:
        """Release what serving needed (called whenever serving ends or fails to start)."""

    def _config(self) -> uvicorn.Config:
        bounds = self.bounds
        return uvicorn.Config(self._app(), log_level=self._log_level, access_log=False,
                              lifespan=self._lifespan, timeout_graceful_shutdown=2,
                              http=_protocol(bounds.head_timeout_s),
                              timeout_keep_alive=max(1, round(bounds.keep_alive_s)),
                              limit_concurrency=bounds.limit_concurrency)  # fmt: skip

    def _bind(self) -> socket.socket:
        sock, root = listening_socket(self._host, self._port)
        self._url = self._bound(root)
        return sock

    def start(self) -> None:
        """Serve in a background thread; returns once requests are accepted."""
        if self._uvicorn.running:
            raise AevalError(f"{self._what} is already running")
        try:
            config = self._config()
            self._uvicorn.start(config, self._bind())
        except BaseException:
            self._cleanup()
            raise

    def stop(self) -> None:
        """Stop serving (requests in progress get up to 2 s to finish)."""
        self._uvicorn.stop()
        self._cleanup()

    def serve_forever(self, on_listening: Callable[[str], None] | None = None) -> None:
        """Serve in the foreground until SIGINT/SIGTERM; ``on_listening(url)`` is called
        once the socket accepts connections."""
        try:
            config, sock = self._config(), self._bind()
            if on_listening is not None:
                on_listening(self._url)
            self._uvicorn.run(config, sock)
        except _Terminated:
            self._cleanup()
            # Ended by SIGTERM, as the signal's sender expects, now that nothing is left behind.
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            signal.raise_signal(signal.SIGTERM)
        finally:
            self._cleanup()

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    async def __aenter__(self) -> Self:
        await anyio.to_thread.run_sync(self.start)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await anyio.to_thread.run_sync(self.stop)
