"""The parent's side of one verifier worker process: start it, frame requests to it, kill it.

The process itself is :mod:`aeval.verify.worker`; the scheduling of checks
across workers is :class:`~aeval.verify.pool.VerifierPool`'s.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import subprocess
import sys
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from anyio.abc import ByteSendStream, Process
from anyio.streams.buffered import BufferedByteReceiveStream

from aeval.errors import AevalError
from aeval.verify.limits import VerifyLimits
from aeval.verify.worker import _HEADER, READY

__all__ = ["Call", "WorkerProcess", "spawn_worker"]

# A worker that cannot import Z3 within this long is broken, not slow.
_STARTUP_TIMEOUT_S = 60.0


@dataclass(eq=False)
class Call:
    """One check sent to a worker and not yet answered."""

    turn: anyio.Event = field(default_factory=anyio.Event)  # set: answer is next, or requeue
    started: float | None = None  # when the worker began on it (its budget runs from here)
    requeue: bool = False  # the worker died before reaching it: send it elsewhere


class WorkerProcess:
    """One worker process, its framed pipe, and the calls sent to it, in order."""

    def __init__(self, process: Process) -> None:
        self.process = process
        assert process.stdin is not None and process.stdout is not None
        self._send: ByteSendStream = process.stdin
        self._recv = BufferedByteReceiveStream(process.stdout)
        self.calls: deque[Call] = deque()
        self.send_lock = anyio.Lock()
        self.retired = False  # killed or dying: its slots in the ready stream are void

    async def send(self, payload: bytes) -> None:
        await self._send.send(_HEADER.pack(len(payload)) + payload)

    async def receive(self) -> bytes:
        (size,) = _HEADER.unpack(await self._recv.receive_exactly(_HEADER.size))
        return await self._recv.receive_exactly(size)

    async def kill(self) -> None:
        with anyio.CancelScope(shield=True):
            with contextlib.suppress(ProcessLookupError):
                self.process.kill()
            await self.process.aclose()


def _worker_env() -> dict[str, str]:
    # The worker imports aeval the way this process did, installed or not.
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


async def spawn_worker(limits: VerifyLimits) -> WorkerProcess:
    """Start one worker and wait until it has loaded Z3 under ``limits``.

    :raises AevalError: the worker greeted with something other than ``READY``.
    :raises TimeoutError: it did not greet within ``_STARTUP_TIMEOUT_S``.
    """
    process = await anyio.open_process(
        [sys.executable, "-m", "aeval.verify.worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=_worker_env(),
    )
    worker = WorkerProcess(process)
    try:
        with anyio.fail_after(_STARTUP_TIMEOUT_S):
            await worker.send(pickle.dumps(limits, pickle.HIGHEST_PROTOCOL))
            if await worker.receive() != READY:
                raise AevalError("verifier worker sent an unexpected greeting")
    except BaseException:
        await worker.kill()
        raise
    return worker
