"""Running the reward service: in the foreground (``aeval serve-reward``) or in the background.

In the background the server runs on a thread of its own with its own
asyncio loop (uvicorn), so the host may be synchronous, asyncio or trio code.
The reward's worker pool lives in the reward's own loop thread either way
(:mod:`aeval.reward.runtime`); it is started before the socket accepts
requests, so the first request does not pay for it.
"""

from __future__ import annotations

import socket
from collections.abc import Callable

import uvicorn

from aeval.errors import AevalError, ConfigError
from aeval.reward.batcher import DEFAULT_MAX_BATCH, DEFAULT_MAX_WAIT_S, MicroBatcher
from aeval.reward.equivalence import EquivalenceReward
from aeval.reward.service import REWARD_PATH, ServiceLimits, build_app
from aeval.uvicorn_thread import UvicornThread, listening_socket

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
        self._uvicorn = UvicornThread("the reward server", "aeval-reward-server", _START_TIMEOUT_S)
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
        sock, root = listening_socket(self._host, self._port)
        self.url = f"{root}{REWARD_PATH}"
        return sock

    def _warm(self) -> None:
        """Start the verifier pool now (a failure to start is said before serving)."""
        self.reward.check_one("", "(assert true)", "")

    def start(self) -> None:
        """Serve in a background thread; returns once requests are accepted."""
        if self._uvicorn.running:
            raise AevalError("this RewardServer is already running")
        self._warm()
        self._uvicorn.start(self._config(), self._bind())

    def stop(self) -> None:
        """Stop serving (requests in progress get up to 2 s to finish)."""
        self._uvicorn.stop()

    def serve_forever(self, on_listening: Callable[[str], None] | None = None) -> None:
        """Serve in the foreground until SIGINT/SIGTERM; ``on_listening(url)`` once bound."""
        self._warm()
        sock = self._bind()
        if on_listening is not None:
            on_listening(self.url)
        self._uvicorn.run(self._config(), sock)

    def __enter__(self) -> RewardServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
