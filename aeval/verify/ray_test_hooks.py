"""Test hooks of the Ray backend, in one place; off everywhere but in tests.

``HOLD_CHUNKS_ENV`` names a file path in a node's environment
(tests/test_verify_cluster.py sets it on one node). While that file exists,
the node's actor holds every chunk it is sent (after creating
``<path>.held``), so a test can remove the node with a chunk on it whatever
the machine's load. Unset, an actor reads it once and never looks again.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

__all__ = ["HOLD_CHUNKS_ENV", "hold_chunks_gate", "hold_while"]

HOLD_CHUNKS_ENV = "AEVAL_TEST_HOLD_CHUNKS_WHILE"


def hold_chunks_gate() -> Path | None:
    """Test hook: the gate file this node's actor holds chunks behind; ``None`` (always,
    outside tests): hold nothing."""
    named = os.environ.get(HOLD_CHUNKS_ENV) or None
    return Path(named) if named is not None else None


async def hold_while(gate: Path) -> None:
    """Test hook: say a chunk is held, wait while ``gate`` exists."""
    if gate.exists():
        gate.with_name(gate.name + ".held").touch()
    while gate.exists():
        await asyncio.sleep(0.05)
