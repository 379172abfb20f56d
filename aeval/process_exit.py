"""Leaving the ``aeval`` process quickly once a command has returned.

When ``main`` returns, every file a command wrote is closed (the run store and
the answer files close in ``finally`` blocks, each verdict is flushed as it is
appended). What the interpreter still does before the process ends is tear
down every imported module: with the SDKs, polars, rich and datasets loaded,
that took 0.4–1.0 s on a 2-core machine after the last line was printed
(bench/README.md, "Direct mode end to end"), time a script waiting on
``aeval run`` pays for nothing. So the command line exits like this: run the
``atexit`` handlers (logging, multiprocessing, weakref finalisers: everything
registered to run at exit still does), flush stdout and stderr, then
``os._exit``. A non-daemon thread still running gets the normal exit, which
waits for it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from typing import NoReturn

__all__ = ["exit_process"]


def exit_process(code: int) -> NoReturn:
    """End the process with ``code``, skipping the interpreter's teardown of modules."""
    others = [
        t
        for t in threading.enumerate()
        if t is not threading.main_thread() and t.is_alive() and not t.daemon
    ]
    if others:  # their work is not done: the interpreter waits for them
        sys.exit(code)
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    os._exit(code)
