"""A run directory that cannot be written (full disk, read-only mount), said in one line.

A write that fails deep inside the engine's task groups surfaces as nested
exception groups around one ``OSError``; :func:`storage_failure` finds it and
turns it into a :class:`~aeval.errors.RunDirError` whose message names the
path and the OS error and says what happens to the remote batches: the
"keep running" sentence only when some were created.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Iterable
from pathlib import Path

from aeval.errors import RunDirError
from aeval.exception_groups import first_of

__all__ = ["first_os_error", "storage_failure"]

# OS errors that mean the run directory cannot be written (full, read-only, not ours).
_WRITE_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG, errno.EACCES, errno.EPERM}
)
# Network errors are OSErrors too; they are the batch layer's to retry and report.
_NETWORK = (ConnectionError, TimeoutError, socket.gaierror, socket.herror)


def first_os_error(err: BaseException) -> OSError | None:
    """The first file-system OSError in ``err`` (itself, or inside nested exception groups)."""
    return first_of(err, OSError, unless=_NETWORK)


def storage_failure(
    err: OSError, run_dir: Path, *, opened: bool, batches: Iterable[object]
) -> RunDirError:
    """One line: what could not be written, why, and what to do about the batches.

    :param opened: whether the run directory exists as a run (resume can carry on).
    :param batches: the batches created (or maybe created) so far.
    """
    where = err.filename or run_dir
    verb = "cannot write" if err.errno in _WRITE_ERRNOS else "cannot use"
    text = f"{verb} {where}: {err.strerror or err}"
    sent = sum(1 for _ in batches)
    if sent:
        text += (
            f". {sent} remote batch(es) keep running: make room, then "
            f"'python -m aeval resume {run_dir}' collects them "
            f"(or 'python -m aeval cancel {run_dir}')"
        )
    elif opened:
        text += f". Nothing was sent; make room, then 'python -m aeval resume {run_dir}' carries on"
    else:
        text += ". Nothing was sent"
    return RunDirError(text)
