"""Running the reward service: in the foreground (``aeval serve-reward``) or in the background.

In the background the server runs on a thread of its own with its own
asyncio loop (uvicorn), so the host may be synchronous, asyncio or trio code.
The reward's worker pool lives in the reward's own loop thread either way
(:mod:`aeval.reward.runtime`); it is started before the socket accepts
requests, so the first request does not pay for it.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable
from types import TracebackType

import uvicorn

from aeval.errors import AevalError, ConfigError
from aeval.local.server import serve_then_signal
from aeval.reward.batcher import DEFAULT_MAX_BATCH, DEFAULT_MAX_WAIT_S, MicroBatcher
from aeval.reward.equivalence import EquivalenceReward
from aeval.reward.service import REWARD_PATH, ServiceLimits, build_app

__all__ = ["RewardServer"]

_START_TIMEOUT_S = 60.0


class RewardServer:
    """OpenRLHF's remote reward protocol on ``host:port``, scored by ``reward``.

    :param reward: the judge (its reading, scores, limits, and pool: local or Ray).
        The server does not close it.
    :param limits: concurrency, body size and item limits (:class:`ServiceLimits`).
    :param chunk_size: concurrent requests' checks are scored together, up to this many
        at a time (:class:`~aeval.reward.batcher.MicroBatcher`) ...
    :param chunk_wait_s: ... gathered for at most this long.
    :param port: ``0``: any free port (read :attr:`url`).

    ``with RewardServer(reward) as server:`` serves in the background;
    :meth:`serve_forever` in the foreground.
    """

    def __init__(
        self,
        reward: EquivalenceReward,
        *,
        limits: ServiceLimits | None = None,
        chunk_size: int = DEFAULT_MAX_BATCH,
        chunk_wait_s: float = DEFAULT_MAX_WAIT_S,
        host: str = "127.0.0.1",
        port: int = 0,
        log_level: str = "warning",
    ) -> None:
        self.reward = reward
        self.limits = limits or ServiceLimits()
        for name in ("max_concurrency", "max_body_bytes", "max_items"):
            if getattr(self.limits, name) < 1:
                raise ConfigError(f"serve-reward: {name} must be at least 1")
        if self.limits.max_waiting < 0:
            raise ConfigError("serve-reward: max_waiting must be >= 0")
        self.batcher = MicroBatcher(reward, max_batch=chunk_size, max_wait_s=chunk_wait_s)
        self._host = host
        self._port = port
        self._log_level = log_level
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        self.url = ""  # http://HOST:PORT/get_reward once bound

    def _config(self) -> uvicorn.Config:
        return uvicorn.Config(
            build_app(self.reward, self.batcher, self.limits),
            log_level=self._log_level,
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=2,
        )

    def _bind(self) -> socket.socket:
        try:
            family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
            # IPPROTO_TCP named, so that asyncio turns Nagle off on accepted sockets.
            sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((self._host, self._port))
        except OSError as err:
            raise ConfigError(f"cannot listen on {self._host}:{self._port}: {err}") from err
        sock.listen(2048)
        host = f"[{self._host}]" if ":" in self._host else self._host
        self.url = f"http://{host}:{sock.getsockname()[1]}{REWARD_PATH}"
        return sock

    def _warm(self) -> None:
        """Start the verifier pool now (a failure to start is said before serving)."""
        self.reward.check_one("", "(assert true)", "")

    def start(self) -> None:
        """Serve in a background thread; returns once requests are accepted."""
        if self._thread is not None:
            raise AevalError("this RewardServer is already running")
        self._warm()
        sock = self._bind()
        server = uvicorn.Server(self._config())
        self._server = server
        ready = threading.Event()

        async def serve() -> None:
            try:
                await serve_then_signal(server, sock, ready)
            finally:
                sock.close()

        def run() -> None:
            try:
                asyncio.run(serve())
            except BaseException as err:  # reported to the starting thread
                self._failure = err
                ready.set()

        self._thread = threading.Thread(target=run, name="aeval-reward-server", daemon=True)
        self._thread.start()
        if not ready.wait(_START_TIMEOUT_S) or self._failure or not server.started:
            self.stop()
            raise AevalError(f"the reward server did not start: {self._failure!r}")

    def stop(self) -> None:
        """Stop serving (requests in progress get up to 2 s to finish)."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(_START_TIMEOUT_S)
        self._thread = None
        self._server = None

    def serve_forever(self, on_listening: Callable[[str], None] | None = None) -> None:
        """Serve in the foreground until SIGINT/SIGTERM; ``on_listening(url)`` once bound."""
        self._warm()
        sock = self._bind()
        server = uvicorn.Server(self._config())
        self._server = server
        if on_listening is not None:
            on_listening(self.url)
        try:
            server.run(sockets=[sock])
        finally:
            sock.close()

    def __enter__(self) -> RewardServer:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
