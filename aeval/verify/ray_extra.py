"""The optional Ray extra: importing it, or saying in one line how to install it.

A leaf module: both the checker (which picks a backend) and the Ray backend
itself import it, so neither imports the other to learn the hint.
"""

from __future__ import annotations

from types import ModuleType

from aeval.errors import ConfigError

__all__ = ["RAY_INSTALL_HINT", "import_ray", "require_ray"]

RAY_INSTALL_HINT = "verifying on a Ray cluster needs Ray: pip install 'aeval[ray]'"


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
