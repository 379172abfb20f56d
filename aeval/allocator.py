"""How the process's polars memory goes back to the system once it is freed.

polars allocates through its own jemalloc, which keeps freed pages for a while
(polars sets ``dirty_decay_ms:500,muzzy_decay_ms:1000``) so that the next
allocation can reuse them. The end of a large run is a burst of short polars
steps (the verdict frame, a dozen group-bys for the summary, the parquet), each
freeing what it used well within that window, and the pages one step frees,
kept per thread, are seldom what the next one asks for: kept, they stack up into
the run's peak. Returned at once, the memory a step frees is gone before the next
begins, and the steps take no longer (measured in ``bench/README.md``, "Scale").

jemalloc reads its settings once, when polars is loaded, from
``_RJEM_MALLOC_CONF``, to which polars adds its own defaults first (the later
setting wins; polars documents the variable for exactly this). The CLI sets it
before anything imports polars, unless the user set it (polars' defaults alone,
inherited from a parent Python process that imported polars, do not count). An application that
embeds the engine decides for its own process: it sets the same variable
before importing polars (or aeval).
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping

__all__ = ["POLARS_ALLOCATOR_ENV", "RETURN_FREED_PAGES", "return_freed_heap", "return_freed_pages"]

POLARS_ALLOCATOR_ENV = "_RJEM_MALLOC_CONF"
RETURN_FREED_PAGES = "dirty_decay_ms:0,muzzy_decay_ms:0"
# What polars itself writes into the variable when it is imported (its defaults, then
# the user's): a process started by one that imported polars inherits it, and that
# is polars' choice, not the user's (polars 1.30 writes muzzy_decay_ms:-1).
_POLARS_DEFAULTS = (
    "dirty_decay_ms:500,muzzy_decay_ms:1000",
    "dirty_decay_ms:500,muzzy_decay_ms:-1",
    "thp:always,metadata_thp:always",
)


def _users_own(value: str) -> bool:
    for default in _POLARS_DEFAULTS:
        value = value.replace(default, "")
    return bool(value.strip(", "))


def return_freed_pages(environ: MutableMapping[str, str] | None = None) -> bool:
    """Have polars' allocator return freed pages at once: in ``environ`` (a child
    process's environment), or in this process's own when none is given.

    Returns whether the setting will take effect: not when the user chose their
    own, nor in this process once polars is loaded (jemalloc has read its
    settings by then). polars' own defaults, inherited from a parent process that
    imported it, are not the user's choice.
    """
    if environ is None:
        if "polars" in sys.modules:
            return False
        environ = os.environ
    if _users_own(environ.get(POLARS_ALLOCATOR_ENV, "")):
        return False
    environ[POLARS_ALLOCATOR_ENV] = RETURN_FREED_PAGES
    return True


def return_freed_heap() -> bool:
    """Collect Python's garbage and hand the C heap's free pages back to the system
    (glibc's ``malloc_trim``); whether the trim ran (not on another C library).

    Python's larger objects live on glibc's heap, which keeps what they free for later
    ``malloc`` calls. polars allocates through its own jemalloc and never reuses those
    pages, so at the end of a run, once the streaming state is let go, the verdict
    frame's build would otherwise stack on top of them: trimmed there, the end of a
    4 x 50,000 three-round run peaked 30 MB lower (bench/README.md, "Repair rounds:
    memory"). A trim walks the heap once: call it at such a turn, not per request.
    """
    import ctypes
    import gc

    gc.collect()
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):  # musl, macOS, Windows: no such call
        return False
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    trim(0)
    return True
