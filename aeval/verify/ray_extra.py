"""The optional Ray extra: importing it, or saying in one line how to install it.

A leaf module: both the checker (which picks a backend) and the Ray backend
itself import it, so neither imports the other to learn the hint.
"""

from __future__ import annotations

import importlib
import threading
from types import ModuleType

from aeval.errors import ConfigError

__all__ = ["RAY_INSTALL_HINT", "SERIALIZATION_IMPORTS", "import_ray", "require_ray", "warm_ray"]

RAY_INSTALL_HINT = "verifying on a Ray cluster needs Ray: pip install 'aeval[ray]'"
# What the driver's first ``.remote()`` imports, serially, before any actor is submitted:
# Ray builds its serialization context then, and its add-ons register pydantic's and
# Arrow's serializers (ray/util/serialization_addons.py ``apply`` ->
# ray/_common/pydantic_compat.py, ray/_private/arrow_serialization.py; Ray 2.60.0).
SERIALIZATION_IMPORTS = ("pyarrow", "pydantic")


def import_ray() -> ModuleType:
    """The ``ray`` module.

    :raises ConfigError: Ray is not installed; the message says how to install it.
    """
    try:
        import ray
    except ImportError:
        raise ConfigError(RAY_INSTALL_HINT) from None
    return ray


def require_ray() -> None:
    """Check that Ray can be imported (before anything is read or written).

    :raises ConfigError: it cannot; the message says how to install it.
    """
    import_ray()


def warm_ray() -> threading.Thread:
    """Start importing :data:`SERIALIZATION_IMPORTS` in a daemon thread, and return it.

    Called once ``--ray`` is resolved: the command then reads its dataset and answer
    files (I/O, and polars, which releases the GIL), so the imports overlap work done
    anyway instead of delaying the first actor's submission (0.1-0.35 s, bench/README.md).
    A package that is absent or fails to import is left to Ray, which meets it (and
    says so) where it would have anyway. Daemon: it never holds the process at exit.
    """

    def load() -> None:
        for name in SERIALIZATION_IMPORTS:
            try:
                importlib.import_module(name)
            except Exception:  # Ray's own import of it reports the problem
                continue

    thread = threading.Thread(target=load, name="aeval-warm-ray", daemon=True)
    thread.start()
    return thread
