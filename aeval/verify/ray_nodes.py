"""Which nodes of the Ray cluster are alive and can verify (have CPUs)."""

from __future__ import annotations

from typing import Any

import anyio

__all__ = ["ClusterNodes"]

_GCS_CALL_TIMEOUT_S = 10.0


class ClusterNodes:
    """The cluster's membership, as its control store (GCS) reports it.

    :param ray: the connected ``ray`` module.
    :param gcs_address: the control store's ``HOST:PORT``.
    """

    def __init__(self, ray: Any, gcs_address: str) -> None:
        self._ray = ray
        self._gcs_address = gcs_address

    async def answers(self) -> bool:
        """Whether the cluster's control store accepts connections.

        Asked before any call that needs it: with the store gone, Ray's own calls
        wait a minute, and a driver with such a call pending cannot disconnect.
        """
        host, _, port = self._gcs_address.rpartition(":")
        try:
            with anyio.fail_after(2.0):
                stream = await anyio.connect_tcp(host, int(port))
        except (OSError, TimeoutError, ValueError):
            return False
        await stream.aclose()
        return True

    async def with_cpus(self) -> dict[str, int]:
        """Alive nodes with CPUs: node id → CPU count. Empty when the cluster does not answer."""

        def nodes() -> list[dict[str, Any]]:
            found: list[dict[str, Any]] = self._ray.nodes()
            return found

        if not await self.answers():
            return {}
        try:
            with anyio.fail_after(_GCS_CALL_TIMEOUT_S):
                found = await anyio.to_thread.run_sync(nodes, abandon_on_cancel=True)
        except Exception:
            return {}
        return {
            n["NodeID"]: int(n.get("Resources", {}).get("CPU", 0))
            for n in found
            if n.get("Alive") and n.get("Resources", {}).get("CPU", 0) >= 1
        }
