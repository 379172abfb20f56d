"""Where the Ray backend connects, and the one connection a process shares.

``resolve_address`` turns ``--ray``'s value into an address (or "use the
connection this process has"); :class:`AevalConnection` opens Ray's
process-wide connection once for every pool of the process and ends it when
the last one leaves.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from contextlib import AbstractContextManager
from typing import Any

from aeval.errors import ConfigError

__all__ = ["CONNECTION", "AevalConnection", "resolve_address"]


class AevalConnection:
    """The Ray connection aeval itself opened, shared by every pool of the process.

    Ray's connection is process-wide (``ray.init`` once per process), so whether to
    end it is too: the pool that opened it must not ``ray.shutdown()`` while another
    pool of the process (a reward in another thread, a second run) still uses it.
    A connection the application made itself is never ended here.

    Joining and leaving both hold the lock for their whole Ray call, so a pool
    that joins while the last one leaves waits for the shutdown to end and then
    connects anew, rather than adopting a connection that is closing. Both calls
    block (a shutdown takes ~5 s when the cluster is gone): call them off the
    event loop.
    """

    def __init__(self, lock: AbstractContextManager[object] | None = None) -> None:
        self._lock = lock if lock is not None else threading.Lock()
        self._users = 0  # pools using the connection aeval opened

    def join(self, ray: Any, address: str) -> bool:
        """Connect to ``address`` unless this process is connected (decided under the
        lock, so two pools entering at once connect once); True: call :meth:`leave`.

        :raises ConfigError: an unusable address (see :func:`resolve_address`).
        """
        with self._lock:
            target = resolve_address(address, connected=ray.is_initialized())
            if target is not None:
                _check_reachable(target)
                # "auto" goes to Ray as it is: its own lookup, and what it enables
                # for a cluster found that way (a local cluster's auth token).
                ray.init(
                    address="auto" if address.strip() == "auto" else target,
                    logging_level=logging.WARNING,
                    log_to_driver=False,
                )
                self._users = 1
                return True
            if self._users:  # aeval's own connection, opened by another pool
                self._users += 1
                return True
            return False

    def leave(self, ray: Any) -> None:
        """One pool fewer; the last one out ends the connection, still under the lock."""
        with self._lock:
            self._users -= 1
            if self._users == 0:
                ray.shutdown()


# The process's one: Ray's connection is process-wide, so its count of users is too.
CONNECTION = AevalConnection()


def _ray_auto_address() -> str | None:
    """Where Ray's own ``address="auto"`` connects when ``RAY_ADDRESS`` is unset.

    That is the cluster the last ``ray start`` on this machine recorded
    (``ray_current_cluster`` in Ray's temp directory, ``RAY_TMPDIR`` or
    ``/tmp/ray``), else a cluster whose processes run on this machine; ``None``:
    none. It is asked of Ray itself (``canonicalize_bootstrap_address``, which
    ``ray.init`` calls: ray/_private/services.py, Ray 2.60.0) because Ray has no
    public call that only looks, and ``ray.init`` waits minutes on an address
    nobody answers before it says so.
    """
    # Deferred: Ray is the optional heavy extra, imported only once --ray is used.
    from ray._private import services

    forget = getattr(services.find_gcs_addresses, "cache_clear", None)
    if forget is not None:  # as ray.init does: look again, not at what an earlier call saw
        forget()
    try:
        found: str | None = services.canonicalize_bootstrap_address("auto")
    except ConnectionError:  # Ray found nothing
        return None
    return found


def resolve_address(address: str, *, connected: bool) -> str | None:
    """The address to connect to; ``None``: use the connection this process already has.

    ``"auto"`` is the cluster this process is connected to, else what Ray's own
    ``address="auto"`` finds: the cluster named by ``RAY_ADDRESS``, else the
    one the last ``ray start`` on this machine recorded (see
    :func:`_ray_auto_address`).

    :raises ConfigError: ``"auto"`` finding nothing, or an empty address.
    """
    address = address.strip()
    if not address:
        raise ConfigError("--ray needs a cluster address (HOST:PORT, ray://HOST:PORT or 'auto')")
    if address != "auto":
        return None if connected else address
    if connected:
        return None
    named = os.environ.get("RAY_ADDRESS", "").strip()
    if named:
        return named
    found = _ray_auto_address()
    if found:
        return found
    raise ConfigError(
        "--ray auto: no Ray cluster found (RAY_ADDRESS is not set, no 'ray start' on this "
        "machine recorded one, and this process is not connected to one); give the "
        "cluster's address (HOST:PORT of its head)"
    )


def _check_reachable(address: str) -> None:
    """Fail fast on a plain HOST:PORT nobody listens on (Ray itself retries for a minute)."""
    if "://" in address or ":" not in address:
        return
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=5.0):
            pass
    except (OSError, ValueError) as err:
        raise ConfigError(
            f"--ray {address}: no Ray cluster answers there ({err}); start one with "
            "'ray start --head' or give its head's HOST:PORT"
        ) from None
