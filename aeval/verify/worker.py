"""The verifier worker process: ``python -m aeval.verify.worker`` (started by VerifierPool only).

Protocol on stdin/stdout, each message a 4-byte big-endian length and a pickle:
the parent sends :class:`VerifyLimits` once, the worker answers ``b"READY"``
when Z3 is loaded; then each request ``("check", response_text, truth, constants,
details)`` gets one :class:`CheckResult` back; ``("both", …)`` the same, then
the in-process published reading, ``DECLINED`` (only the binary can read it) or
None (not tried) (two messages); and each ``("published", response_text, truth,
constants, binary, declined)`` one :class:`~aeval.verify.published.PublishedResult`
(read in this process where that provably gives the binary's outcome, unless
``binary`` forces the z3 binary; ``declined``: a ``"both"`` request already found
that only the binary can, so it is not asked again). EOF on stdin ends the worker.

Before any check, the worker caps its own address space (``RLIMIT_AS``) and
points fd 1 at /dev/null (the protocol uses a private duplicate of the original
stdout). Its fd 2 is the parent's record of start-up: whatever stops the worker
before ``READY`` (a missing or broken ``z3``) is written there for the parent to
report. Just before greeting, the worker points fd 2 at /dev/null too: Z3 writes
diagnostics to the native stderr for as long as it runs, and nothing reads them.
"""

from __future__ import annotations

import os
import pickle
import resource
import signal
import struct
import sys
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, BinaryIO

from aeval.verdicts import CheckResult, Status
from aeval.verify.limits import VerifyLimits
from aeval.verify.published import (
    PublishedResult,
    check_published,
    published_without_binary,
    z3_binary,
)
from aeval.verify.published_session import Z3Session, z3_memory_mb

if TYPE_CHECKING:  # loaded in serve(), after the memory cap
    from aeval.verify.equivalence import Verifier
    from aeval.verify.published_inprocess import PublishedInProcess

_HEADER = struct.Struct(">I")
READY = b"READY"
# The first item of a request says what it asks for (never guessed from its length
# or content: a response's text is arbitrary).
CHECK = "check"
PUBLISHED = "published"
BOTH = "both"
# The second answer of a "both" request whose published reading needs the binary.
DECLINED = "declined"
# A check that took less than this share of its budget also gets the in-process
# published reading in the same request (at most two solver calls of a tenth of
# the budget each: the request stays within the check's own budget).
_BOTH_SHARE = 0.5


def read_frame(stream: BinaryIO) -> bytes | None:
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(header)
    body = stream.read(size)
    return body if len(body) == size else None


def write_frame(fd: int, payload: bytes) -> None:
    view = memoryview(_HEADER.pack(len(payload)) + payload)
    while view:
        view = view[os.write(fd, view) :]


def _cap_memory(memory_mb: int) -> None:
    cap = memory_mb * 1024 * 1024
    _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))


def serve(stdin: BinaryIO, out_fd: int) -> None:
    frame = read_frame(stdin)
    if frame is None:
        return
    limits = pickle.loads(frame)
    _cap_memory(limits.memory_mb)

    # Deferred: Z3 (and the modules that load it) only after the memory cap, and
    # never in the parent, which imports this module to start workers (they would
    # add ~0.06 s to its import of the pool: best of 7 at load 6).
    import z3

    from aeval.verify.equivalence import Verifier
    from aeval.verify.published_inprocess import PublishedInProcess

    # Z3's own allocator cap, below RLIMIT_AS, so that most blow-ups end as a
    # clean "memory" verdict instead of an allocation failure.
    z3.set_param("memory_max_size", z3_memory_mb(limits.memory_mb))
    verifier = Verifier(limits)
    in_process = PublishedInProcess(verifier, limits.timeout_s)
    # The published reading's z3 for the answers the in-process reading leaves:
    # one process kept across answers (started on first use), where that is
    # provably a fresh process's reading; the audit starts one per answer.
    session = Z3Session(z3_binary, limits.timeout_s, limits.memory_mb)
    try:
        _serve_requests(stdin, out_fd, limits, verifier, in_process, session)
    finally:
        session.close()


def _serve_requests(
    stdin: BinaryIO,
    out_fd: int,
    limits: VerifyLimits,
    verifier: Verifier,
    in_process: PublishedInProcess,
    session: Z3Session,
) -> None:
    _silence(2)
    sys.stderr = open(os.devnull, "w")  # noqa: SIM115 (lives as long as the process)
    write_frame(out_fd, READY)
    while (frame := read_frame(stdin)) is not None:
        try:
            request = pickle.loads(frame)
            kind, *args = request
            result: CheckResult | PublishedResult | str | None
            if kind == BOTH:
                # Two answers: the check as soon as it is made, then the published
                # reading (or None). Whatever stops the worker in the reading (a Z3
                # crash, the budget) leaves the check as it was: the verdict never
                # depends on whether the reading was asked.
                check = _guarded(verifier.check, *args)
                write_frame(out_fd, pickle.dumps(check, pickle.HIGHEST_PROTOCOL))
                published: PublishedResult | str | None = None
                if check.elapsed_ms < limits.timeout_s * 1000.0 * _BOTH_SHARE:
                    content, truth, constants, _details = args
                    # The check's own solver results, where the reading asks the same.
                    directions = verifier.last_directions
                    try:
                        published = published_without_binary(
                            content,
                            truth,
                            constants,
                            in_process=partial(in_process.reading, directions=directions),
                        )
                    except Exception:
                        published = None  # the parent asks again on its own
                    else:
                        published = DECLINED if published is None else published
                result = published
            elif kind == PUBLISHED:
                # The published reading: here where provably the same, else the z3
                # binary in a child process, which inherits this worker's memory cap.
                content, truth, constants, binary, declined = args
                result = check_published(
                    content,
                    truth,
                    constants,
                    timeout_s=limits.timeout_s,
                    memory_mb=limits.memory_mb,
                    in_process=None if binary else in_process.reading,
                    session=None if binary else session,
                    declined=declined,
                )
            else:
                result = verifier.check(*args)
        except MemoryError:
            result = CheckResult(Status.RESOURCE_LIMIT, "the worker ran out of memory")
        except Exception as err:  # a verifier bug must not take the run down
            result = CheckResult(Status.UNKNOWN, f"verifier error: {err!r}")
        write_frame(out_fd, pickle.dumps(result, pickle.HIGHEST_PROTOCOL))


def _guarded(check: Callable[..., CheckResult], *args: object) -> CheckResult:
    """``check(*args)``, or the verdict of what it raised."""
    try:
        return check(*args)
    except MemoryError:
        return CheckResult(Status.RESOURCE_LIMIT, "the worker ran out of memory")
    except Exception as err:  # a verifier bug must not take the run down
        return CheckResult(Status.UNKNOWN, f"verifier error: {err!r}")


def main() -> None:
    # Ctrl-C in a terminal, and a Jupyter kernel interrupt, signal the whole process
    # group: a worker killed by it mid-check would read as a resource_limit verdict
    # before the parent's cancellation arrives. The parent owns the worker's life
    # (it kills it, or closes its stdin); SIGINT is not for the worker.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out_fd = os.dup(1)
    _silence(1)
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 (lives as long as the process)
    # fd 2 stays the parent's until serve() has loaded Z3: an import that fails
    # there leaves its traceback for the parent to name.
    serve(sys.stdin.buffer, out_fd)


def _silence(fd: int) -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


if __name__ == "__main__":
    main()
