"""The claim on a run directory: one driving process (or embedded run) at a time.

Two processes driving one run directory could each create the same batch
(paying twice) and write the same verdicts twice, so whoever drives a run
(``run``, ``resume``, ``cancel`` collecting results, an embedded
:class:`aeval.Run`) holds :class:`RunLock` for as long as it drives it.

The claim is an ``fcntl.flock`` on ``run.lock``, taken without waiting: the
kernel decides atomically who gets it, so two ``resume``\\ s started together
cannot both proceed, and it releases the lock when the holder exits for any
reason (SIGKILL and power loss included), so a stale lock never needs
clearing by hand. The file also names the holder (pid and host) for the
loser's message; that text is information only, never the lock itself. The
file is never deleted: unlinking a lock file that another process has just
opened would let a third process lock a fresh file beside it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from pathlib import Path

from aeval.errors import RunDirError
from aeval.store.layout import RunLayout

__all__ = ["RunLock", "holder", "is_held"]

_HOLDER_LOOKS = 25  # x 20 ms


class RunLock:
    """An exclusive, process-lifetime claim on one run directory.

    Take it with :meth:`acquire` (or :meth:`try_acquire`); give it back with
    :meth:`release` (also a context manager). Two claims on one directory
    conflict even inside one process: two embedded runs of the same directory
    in one event loop would pay twice just as two processes would.
    """

    def __init__(self, run_dir: Path, fd: int) -> None:
        self.run_dir = run_dir
        self._fd: int | None = fd

    @property
    def path(self) -> Path:
        return RunLayout(self.run_dir).lock

    @property
    def held(self) -> bool:
        return self._fd is not None

    @classmethod
    def try_acquire(cls, run_dir: Path) -> RunLock | None:
        """Claim ``run_dir`` now, or return ``None`` if another process (or run) holds it.

        :raises RunDirError: the lock file cannot be created (read-only or full disk…).
        """
        run_dir = Path(run_dir)
        path = RunLayout(run_dir).lock
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as err:
            raise RunDirError(
                f"cannot claim {run_dir}: cannot open {path}: {err.strerror or err}"
            ) from err
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        except OSError as err:
            os.close(fd)
            raise RunDirError(f"cannot lock {path}: {err.strerror or err}") from err
        lock = cls(run_dir, fd)
        # Who holds it, for the message of whoever comes next. A full disk may
        # refuse the text; the lock itself holds all the same.
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()} {socket.gethostname()}\n".encode(), 0)
        return lock

    @classmethod
    def acquire(cls, run_dir: Path) -> RunLock:
        """Claim ``run_dir`` now.

        :raises RunDirError: another process holds it (the message names it), or
            the lock file cannot be created.
        """
        lock = cls.try_acquire(run_dir)
        if lock is None:
            raise RunDirError(
                f"{run_dir} is in use by {holder(run_dir)}: one process drives a run at a "
                "time. Wait for it to end, or stop it first ('python -m aeval cancel "
                f"{run_dir}' cancels the run and lets that process collect the results)"
            )
        return lock

    def release(self) -> None:
        """Give the claim back (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)  # nobody holds it: nothing to name
        os.close(fd)  # closing the only descriptor releases the flock

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def holder(run_dir: Path) -> str:
    """Who holds ``run_dir``'s lock, as the lock file tells it: ``process 123 on host``."""
    text = ""
    # The holder writes its name just after taking the lock: a loser that lost by
    # a hair may look in between, so it looks again for a moment.
    for _ in range(_HOLDER_LOOKS):
        with contextlib.suppress(OSError):
            text = RunLayout(Path(run_dir)).lock.read_text().strip()
        if text:
            break
        time.sleep(0.02)
    pid, _, host = text.partition(" ")
    if not pid:
        return "another process"
    if host and host != socket.gethostname():
        return f"process {pid} on {host}"
    return f"process {pid}"


def is_held(run_dir: Path) -> bool:
    """Whether some process (or run) drives ``run_dir`` now.

    Only a snapshot, and it takes the lock for an instant when it is free: for
    tests and diagnostics, never to decide whether to drive (use
    :meth:`RunLock.try_acquire` and keep what it returns).
    """
    lock = RunLock.try_acquire(run_dir)
    if lock is None:
        return True
    lock.release()
    return False
