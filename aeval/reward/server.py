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
from aeval.http_guard import is_loopback
from aeval.reward.batcher import DEFAULT_MAX_BATCH, DEFAULT_MAX_WAIT_S, MicroBatcher
from aeval.reward.equivalence import EquivalenceReward
from aeval.reward.service import REWARD_PATH, ServiceLimits, build_app
from aeval.uvicorn_thread import BackgroundServer, Bounds

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
    :param token: when set, every route but ``/health`` needs ``Authorization: Bearer TOKEN``.
        A host that is not loopback needs one, or ``allow_no_token=True`` said explicitly.

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
        token: str | None = None,
        allow_no_token: bool = False,
    ) -> None:
        limits = limits or ServiceLimits()
        for name in ("max_concurrency", "max_body_bytes", "max_items", "max_reading"):
            if getattr(limits, name) < 1:
                raise ConfigError(f"serve-reward: {name} must be at least 1")
        if not limits.read_timeout_s > 0:
            raise ConfigError("serve-reward: read_timeout_s must be positive")
        self.check_auth(host, token, allow_no_token=allow_no_token)
        # Every request the limits let in, and no more: beyond, uvicorn answers 503.
        most = limits.max_reading + limits.max_concurrency + limits.max_waiting
        bounds = Bounds(body_timeout_s=limits.read_timeout_s, limit_concurrency=most + 16)
        super().__init__("the reward server", "aeval-reward-server", host=host, port=port,
                         log_level=log_level, start_timeout_s=_START_TIMEOUT_S,
                         bounds=bounds)  # fmt: skip
        self.reward = reward
        self.limits = limits
        self._token = token or None
        if self.limits.max_waiting < 0:
            raise ConfigError("serve-reward: max_waiting must be >= 0")
        self.batcher = MicroBatcher(reward, max_batch=chunk_size, max_wait_s=chunk_wait_s)
        self.url = ""  # http://HOST:PORT/get_reward once bound

    @staticmethod
    def check_auth(host: str, token: str | None, *, allow_no_token: bool) -> None:
        """:raises ConfigError: ``host`` is not loopback and there is no token, unasked."""
        if not token and not allow_no_token and not is_loopback(host):
            raise ConfigError(
                f"serve-reward: refusing to listen on {host} without a token: set "
                "AEVAL_REWARD_TOKEN or --token-file FILE (or say --no-auth)"
            )

    def _app(self) -> ASGIApp:
        # The verifier pool starts now, so a failure to start is said before serving.
        self.reward.check_one("", "(assert true)", "")
        return build_app(self.reward, self.batcher, self.limits, token=self._token,
                         loopback=is_loopback(self._host))  # fmt: skip

    def _bound(self, root: str) -> str:
        self.url = f"{root}{REWARD_PATH}"
        return self.url
