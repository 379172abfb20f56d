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
import tempfile
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import anyio
from anyio.abc import ByteSendStream, Process
from anyio.streams.buffered import BufferedByteReceiveStream

from aeval.errors import AevalError
from aeval.verify.limits import VerifyLimits
from aeval.verify.worker import _HEADER, READY

__all__ = ["Call", "WorkerProcess", "spawn_worker"]

# A worker that cannot import Z3 within this long is broken, not slow.
_STARTUP_TIMEOUT_S = 60.0
# How long a worker whose stdout closed gets to exit on its own (its exit code).
_EXIT_GRACE_S = 5.0
# The most of a worker's start-up stderr read back (its last lines say why) and
# the most of one line quoted in an error.
_STDERR_TAIL_BYTES = 64 * 1024
_REASON_CHARS = 300
# What a worker's pipes raise when it died before greeting.
_GONE = (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError)


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

    async def greeting(self) -> bytes:
        """The worker's first message: ``READY``, or what a module it imported printed
        to stdout (read as far as it is already here, never gigabytes it never sends)."""
        header = await self._recv.receive_exactly(_HEADER.size)
        (size,) = _HEADER.unpack(header)
        if size != len(READY):
            rest = b""
            with anyio.move_on_after(1.0), contextlib.suppress(anyio.EndOfStream):
                rest = await self._recv.receive(60)  # the rest of its line, sent with it
            return header + rest
        return await self._recv.receive_exactly(size)

    async def receive(self) -> bytes:
        (size,) = _HEADER.unpack(await self._recv.receive_exactly(_HEADER.size))
        return await self._recv.receive_exactly(size)

    def signal_kill(self) -> None:
        """Send SIGKILL without waiting for the process to end (:meth:`kill` waits)."""
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()

    async def kill(self) -> None:
        with anyio.CancelScope(shield=True):
            self.signal_kill()
            await self.process.aclose()


def _worker_env() -> dict[str, str]:
    # The worker imports aeval the way this process did, installed or not.
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


async def spawn_worker(limits: VerifyLimits) -> WorkerProcess:
    """Start one worker and wait until it has loaded Z3 under ``limits``.

    :raises AevalError: it could not start, died before greeting, did not greet
        within ``_STARTUP_TIMEOUT_S``, or greeted with something else than
        ``READY``; the message is one line saying why (the worker's own last
        line on stderr, its exit code, and which Python ran it).
    """
    argv = [sys.executable, "-m", "aeval.verify.worker"]
    command = " ".join(argv)
    # The worker's stderr during start-up goes to an unlinked temporary file, read
    # only if it fails: a file never fills and blocks the worker as an unread pipe
    # would, needs no task to drain it, and is gone with its last descriptor (this
    # one, closed below; the worker points its own fd 2 at /dev/null before it
    # greets, so nothing Z3 writes later lands here).
    with tempfile.TemporaryFile() as stderr:
        try:
            process = await anyio.open_process(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=stderr,
                env=_worker_env(),
            )
        except OSError as err:
            raise AevalError(f"{sys.executable}: {err.strerror or err}") from err
        worker = WorkerProcess(process)
        try:
            with anyio.fail_after(_STARTUP_TIMEOUT_S):
                await worker.send(pickle.dumps(limits, pickle.HIGHEST_PROTOCOL))
                greeting = await worker.greeting()
            if greeting != READY:
                raise AevalError(
                    f"{command} wrote {greeting!r} to stdout before its greeting: something "
                    "it imports at start-up prints (a sitecustomize or .pth file?)"
                )
        except _GONE as err:
            code = None  # still running after the grace: it only closed its stdout
            with anyio.move_on_after(_EXIT_GRACE_S):
                code = await process.wait()
            await worker.kill()
            raise AevalError(
                f"{_last_line(stderr) or 'it wrote nothing to stderr'} "
                f"({command} {_exit(code)} before it was ready)"
            ) from err
        except TimeoutError as err:
            await worker.kill()
            said = _last_line(stderr)
            raise AevalError(
                f"{command} did not load Z3 within {_STARTUP_TIMEOUT_S:g} s (an overloaded "
                "machine, or an import that hangs)"
                + (f"; its last line on stderr: {said}" if said else "")
            ) from err
        except BaseException:
            await worker.kill()
            raise
    return worker


def _exit(code: int | None) -> str:
    if code is None:
        return "closed its stdout"
    if code < 0:
        return f"was killed by signal {-code}"
    return f"exited with code {code}"


def _last_line(stderr: IO[bytes]) -> str:
    """The last non-blank line the worker wrote to ``stderr`` (a traceback's exception
    line), cut to ``_REASON_CHARS``; empty if it wrote nothing."""
    stderr.seek(0, os.SEEK_END)
    stderr.seek(max(0, stderr.tell() - _STDERR_TAIL_BYTES))
    lines = stderr.read().decode("utf-8", "replace").splitlines()
    line = next((line.strip() for line in reversed(lines) if line.strip()), "")
    return line if len(line) <= _REASON_CHARS else line[: _REASON_CHARS - 1] + "…"
