"""Running the reward service: in the foreground (``aeval serve-reward``) or in the background.

In the background the server runs on a thread of its own with its own
asyncio loop (uvicorn), so the host may be synchronous, asyncio or trio code.
The reward's worker pool lives in the reward's own loop thread either way
(:mod:`aeval.reward.runtime`); it is started before the socket accepts
requests, so the first request does not pay for it.
"""

from __future__ import annotations

from starlette.types import ASGIApp

from aeval.errors import ConfigError
from aeval.reward.batcher import DEFAULT_MAX_BATCH, DEFAULT_MAX_WAIT_S, MicroBatcher
from aeval.reward.equivalence import EquivalenceReward
from aeval.reward.service import REWARD_PATH, ServiceLimits, build_app
from aeval.uvicorn_thread import BackgroundServer

__all__ = ["RewardServer"]

_START_TIMEOUT_S = 60.0


class RewardServer(BackgroundServer):
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
        super().__init__("the reward server", "aeval-reward-server", host=host, port=port,
                         log_level=log_level, start_timeout_s=_START_TIMEOUT_S)  # fmt: skip
        self.reward = reward
        self.limits = limits or ServiceLimits()
        for name in ("max_concurrency", "max_body_bytes", "max_items"):
            if getattr(self.limits, name) < 1:
                raise ConfigError(f"serve-reward: {name} must be at least 1")
        if self.limits.max_waiting < 0:
            raise ConfigError("serve-reward: max_waiting must be >= 0")
        self.batcher = MicroBatcher(reward, max_batch=chunk_size, max_wait_s=chunk_wait_s)
        self.url = ""  # http://HOST:PORT/get_reward once bound

    def _app(self) -> ASGIApp:
        # The verifier pool starts now, so a failure to start is said before serving.
        self.reward.check_one("", "(assert true)", "")
        return build_app(self.reward, self.batcher, self.limits)

    def _bound(self, root: str) -> str:
        self.url = f"{root}{REWARD_PATH}"
        return self.url
