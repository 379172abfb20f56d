"""What verifies answers for the scoring pipeline and the reward, and the one place that picks it.

Two backends share one interface, :class:`Checker`: the local killable pool
(:class:`~aeval.verify.pool.VerifierPool`) and the same pool run on every node
of a Ray cluster (:class:`~aeval.verify.cluster.RayVerifierPool`). Callers
(the engine's scoring, ``rescore``, the reward) take a ``Checker`` and never
learn where a verdict was computed; :func:`open_checker` chooses from one
setting, ``ray_address`` (``None``: this machine).
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Protocol, Self, runtime_checkable

from aeval.verdicts import CheckResult
from aeval.verify.limits import DEFAULT_LIMITS, VerifyLimits
from aeval.verify.pool import VerifierPool
from aeval.verify.published import PublishedResult

__all__ = ["Checker", "open_checker"]


@runtime_checkable
class Checker(Protocol):
    """Verifies answers concurrently under aeval's hard limits; an async context manager.

    ``workers`` is how many checks it runs at once once entered (a caller keeps
    a small multiple of it in flight); ``limits`` the budgets of every check;
    ``published`` whether callers want :meth:`check_published` too.
    """

    limits: VerifyLimits
    published: bool
    workers: int

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None: ...

    async def check(
        self,
        response_text: str | None,
        truth: str,
        constants: str,
        *,
        on_start: Callable[[float], object] | None = None,
        details: bool = True,
    ) -> CheckResult:
        """One answer's verdict; never raises for any answer (see ``VerifierPool.check``)."""
        ...

    async def check_published(
        self, response_text: str | None, truth: str, constants: str
    ) -> PublishedResult:
        """The published reading of one answer; never raises for any answer."""
        ...

    async def check_both(
        self, response_text: str | None, truth: str, constants: str, *, details: bool = True
    ) -> tuple[CheckResult, PublishedResult]:
        """:meth:`check` and :meth:`check_published` of one answer (in one round trip
        where the checker can); never raises for any answer."""
        ...


def open_checker(
    limits: VerifyLimits = DEFAULT_LIMITS,
    workers: int | None = None,
    *,
    published: bool = False,
    published_binary: bool = False,
    ray_address: str | None = None,
) -> Checker:
    """The checker to enter (``async with``) for these settings.

    :param workers: on this machine, the worker processes (default: the CPU
        count); on a Ray cluster, the worker processes per node (default: each
        node's CPU count).
    :param published_binary: read every published verdict with the z3 binary
        (the audit switch; see :class:`~aeval.verify.pool.VerifierPool`).
    :param ray_address: ``None``: the local pool. Otherwise the Ray cluster to
        run the pool on: an address (``HOST:PORT``, ``ray://…``) or ``"auto"``
        (the cluster this process is connected to, else the one Ray's own
        ``address="auto"`` finds: ``RAY_ADDRESS``, else the last ``ray start``
        on this machine).
    :raises ConfigError: ``ray_address`` is given and Ray is not installed
        (the message says how to install it).
    """
    if ray_address is None:
        return VerifierPool(limits, workers, published=published, published_binary=published_binary)
    # The Ray backend (the optional aeval[ray]) loads only with --ray: its modules
    # would add ~0.05 s to every checker's import (best of 7 at load 6).
    from aeval.verify.cluster import RayVerifierPool

    return RayVerifierPool(
        ray_address, limits, workers, published=published, published_binary=published_binary
    )
