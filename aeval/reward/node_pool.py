"""One verifier pool per machine, shared by every reward process on it.

verl's reward loop starts a reward worker per agent-loop worker (eight by
default, each a Ray actor: a process of its own) and its ``remote`` manager
more processes still; TRL under ``accelerate`` runs one training process per
GPU. Each process that made its own pool would start CPU-count Z3 workers, so
eight would put eight pools on one machine's cores. Instead the first process
starts a **pool server**, a process of its own session holding one
:class:`~aeval.verify.pool.VerifierPool`, listening on a Unix socket that
only this user can reach, and every reward process with the same settings
on the machine sends its chunks there. The server outlives the process that
started it and exits once no process has been connected for ``LINGER_S``.

Each request is one reward call's distinct checks and its schedule; the
server runs the schedule (:func:`aeval.reward.schedule.run_schedule`) in its
pool and sends the outcome back. A cancelled request is cancelled in the
server too, which kills the workers busy with it. Frames are a length and a
pickle: both ends are this user's processes, on a socket in a directory only
this user can open.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import pickle
import socket
import struct
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
from anyio.streams.buffered import BufferedByteReceiveStream

from aeval.errors import AevalError
from aeval.reward.schedule import Check, Outcome, Schedule, run_schedule
from aeval.verify.limits import VerifyLimits
from aeval.verify.pool import VerifierPool
from aeval.version import __version__

__all__ = ["LINGER_S", "NodePool", "pool_dir", "socket_path"]

LINGER_S = 30.0  # how long an unused server waits for a client before it exits
_HEADER = struct.Struct("!Q")
# What a connection whose other end went away raises.
_GONE = (
    anyio.EndOfStream,
    anyio.IncompleteRead,
    anyio.BrokenResourceError,
    anyio.ClosedResourceError,
    OSError,
)
_SERVER_MAIN = "from aeval.reward.node_pool import serve_main; serve_main()"


def pool_dir() -> Path:
    """This user's directory for pool sockets (``AEVAL_POOL_DIR``, else one in the temp dir)."""
    base = Path(os.environ.get("AEVAL_POOL_DIR") or tempfile.gettempdir()) / f"aeval-{os.getuid()}"
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = base.stat()
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise AevalError(f"{base} must belong to this user and be closed to others (chmod 700)")
    return base


def socket_path(limits: VerifyLimits, workers: int | None) -> Path:
    """The socket of the machine's pool for these settings (one pool per distinct setting)."""
    key = hashlib.sha256(pickle.dumps((limits, workers, __version__))).hexdigest()[:16]
    return pool_dir() / f"pool-{key}.sock"


async def _send(stream: anyio.abc.ByteSendStream, message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    await stream.send(_HEADER.pack(len(data)) + data)


async def _receive(stream: BufferedByteReceiveStream) -> Any:
    (size,) = _HEADER.unpack(await stream.receive_exactly(_HEADER.size))
    return pickle.loads(await stream.receive_exactly(size))


# -- the server -------------------------------------------------------------------------------


async def _serve(path: Path, limits: VerifyLimits, workers: int | None, linger_s: float) -> None:
    async with VerifierPool(limits, workers) as pool:
        listener = await anyio.create_unix_listener(path)
        clients = 0
        changed = anyio.Event()

        async def handle(stream: anyio.abc.SocketStream) -> None:
            nonlocal clients, changed
            clients += 1
            changed.set()
            changed = anyio.Event()
            lock = anyio.Lock()
            scopes: dict[int, anyio.CancelScope] = {}
            reader = BufferedByteReceiveStream(stream)

            async def run(request: int, checks: Any, schedule: Any) -> None:
                with anyio.CancelScope() as scope:
                    scopes[request] = scope
                    try:
                        outcome: Any = await run_schedule(pool, checks, schedule)
                    except AevalError as err:
                        outcome = err
                    try:
                        async with lock:
                            await _send(stream, (request, outcome))
                    except _GONE:
                        pass  # the client went away: nobody waits for this outcome
                scopes.pop(request, None)

            try:
                async with stream, anyio.create_task_group() as tg:
                    try:
                        await _send(stream, ("hello", os.getpid(), pool.pids, pool.workers))
                    except _GONE:
                        return  # a probe: the starter checking that a server answers
                    while True:
                        try:
                            message = await _receive(reader)
                        except _GONE:
                            break
                        if message[0] == "check":
                            tg.start_soon(run, *message[1:])
                        elif message[0] == "cancel" and message[1] in scopes:
                            scopes[message[1]].cancel()
                    tg.cancel_scope.cancel()  # the client went away: so did its requests
            finally:
                clients -= 1
                changed.set()
                changed = anyio.Event()

        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, handle)
            print("ready", flush=True)  # the starter waits for this line
            os.close(1)
            while True:
                if clients == 0:
                    with anyio.move_on_after(linger_s):
                        await changed.wait()
                    if clients == 0:
                        break
                else:
                    await changed.wait()
            path.unlink(missing_ok=True)  # new clients start a new server
            tg.cancel_scope.cancel()


def serve_main() -> None:
    """The pool server's process: ``python -c …node_pool import serve_main…`` SOCKET."""
    path = Path(sys.argv[1])
    limits, workers, linger_s = pickle.loads(sys.stdin.buffer.read())
    anyio.run(_serve, path, limits, workers, linger_s)


# -- the client -------------------------------------------------------------------------------


def _connectable(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX) as probe:
        try:
            probe.connect(str(path))
        except OSError:
            return False
        return True


def _ensure_server(path: Path, limits: VerifyLimits, workers: int | None, linger_s: float) -> None:
    """Start the pool server for ``path`` unless one answers there (one starter at a time)."""
    import fcntl

    with ExitStack() as stack:
        lock = stack.enter_context(open(path.with_suffix(".lock"), "w"))
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _connectable(path):
            return
        path.unlink(missing_ok=True)
        log = stack.enter_context(open(path.with_suffix(".log"), "ab"))
        server = subprocess.Popen(
            [sys.executable, "-c", _SERVER_MAIN, str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            start_new_session=True,  # outlives the process that started it
        )
        assert server.stdin is not None and server.stdout is not None
        server.stdin.write(pickle.dumps((limits, workers, linger_s)))
        server.stdin.close()
        ready = server.stdout.readline()
        server.stdout.close()
        if ready.strip() != b"ready":
            server.kill()
            server.wait()
            raise AevalError(f"the machine's verifier pool did not start; see {log.name}")


@dataclass(eq=False)
class _Pending:
    done: anyio.Event = field(default_factory=anyio.Event)
    result: Any = None


class NodePool:
    """A connection to the machine's shared verifier pool; an async context manager.

    Entering it starts the pool server when none is running for these
    settings. :meth:`run` sends one reward call's checks.
    """

    def __init__(
        self, limits: VerifyLimits, workers: int | None, linger_s: float = LINGER_S
    ) -> None:
        self.limits = limits
        self.workers = workers or os.cpu_count() or 1
        self._settings = workers
        self.linger_s = linger_s
        self.path = socket_path(limits, workers)
        self.server_pid = 0
        self.pids: tuple[int, ...] = ()
        self._ids = itertools.count()
        self._pending: dict[int, _Pending] = {}
        self._stream: anyio.abc.SocketStream | None = None
        self._lock = anyio.Lock()
        self._tg: anyio.abc.TaskGroup | None = None

    async def __aenter__(self) -> NodePool:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        try:
            await self._connect()
        except BaseException:
            self._tg.cancel_scope.cancel()
            await self._tg.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._tg is not None
        try:
            if self._stream is not None:
                with anyio.CancelScope(shield=True):
                    await self._stream.aclose()
        finally:
            self._tg.cancel_scope.cancel()
            await self._tg.__aexit__(None, None, None)

    async def _connect(self) -> None:
        await anyio.to_thread.run_sync(
            _ensure_server, self.path, self.limits, self._settings, self.linger_s
        )
        stream = await anyio.connect_unix(self.path)
        reader = BufferedByteReceiveStream(stream)
        _, self.server_pid, self.pids, self.workers = await _receive(reader)
        self._stream = stream
        assert self._tg is not None
        self._tg.start_soon(self._read, stream, reader)

    async def _read(
        self, stream: anyio.abc.SocketStream, reader: BufferedByteReceiveStream
    ) -> None:
        try:
            while True:
                request, result = await _receive(reader)
                pending = self._pending.get(request)
                if pending is not None:
                    pending.result = result
                    pending.done.set()
        except _GONE:
            pass
        if self._stream is stream:
            self._stream = None
        lost = AevalError("the machine's shared verifier pool went away")
        for pending in self._pending.values():
            if not pending.done.is_set():
                pending.result = lost
                pending.done.set()

    async def run_schedule(self, checks: list[Check], schedule: Schedule) -> Outcome:
        """The outcome of one reward call's distinct ``checks`` under ``schedule``, in the
        machine's pool; reconnects (starting a server) once if the pool went away."""
        for attempt in range(2):
            async with self._lock:
                if self._stream is None:
                    await self._connect()
                stream = self._stream
                assert stream is not None
                request = next(self._ids)
                pending = self._pending[request] = _Pending()
                await _send(stream, ("check", request, checks, schedule))
            try:
                await pending.done.wait()
            except BaseException:
                with anyio.CancelScope(shield=True):
                    if self._stream is stream:
                        try:
                            async with self._lock:
                                await _send(stream, ("cancel", request))
                        except _GONE:
                            pass  # gone already: so is the request
                raise
            finally:
                self._pending.pop(request, None)
            result = pending.result
            if isinstance(result, AevalError) and attempt == 0 and self._stream is not stream:
                continue  # the server went away mid-call: once more, on a fresh one
            if isinstance(result, BaseException):
                raise result
            if not isinstance(result, Outcome):  # the pool server sends only these
                raise AevalError(f"the machine's verifier pool answered {type(result).__name__}")
            return result
        raise AssertionError("unreachable")
