"""A uvicorn server on a thread of its own, or in the foreground: how the local server
(:mod:`aeval.local.server`) and the reward service (:mod:`aeval.reward.server`) run.

In the background the server has its own thread and asyncio event loop, so the host may
be asyncio, trio or plain synchronous code, and the server outlives anything the host
does to its own loop. No signal handlers are installed there (uvicorn only does so on
the main thread); in the foreground, uvicorn's own handle SIGINT and SIGTERM.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable
from typing import Literal, Self

import anyio.to_thread
import uvicorn
from starlette.types import ASGIApp

from aeval.errors import AevalError, ConfigError

__all__ = ["BackgroundServer", "UvicornThread", "listening_socket"]


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
    ) -> None:
        self._what, self._host, self._port = what, host, port
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
        return uvicorn.Config(self._app(), log_level=self._log_level, access_log=False,
                              lifespan=self._lifespan, timeout_graceful_shutdown=2)  # fmt: skip

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
