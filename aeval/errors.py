"""The one exception hierarchy of aeval.

Every error a user can cause or fix is an :class:`AevalError` whose message
names the input that was wrong and what to do about it. The CLI prints the
message (never a traceback); library users catch by type.
"""

from __future__ import annotations

__all__ = [
    "AevalError",
    "ApiError",
    "ConfigError",
    "DatasetError",
    "InputFileError",
    "RunDirError",
    "UnreachableError",
]


class AevalError(Exception):
    """Base class: something the user can act on. ``str(err)`` is the whole story."""


class ConfigError(AevalError):
    """A setting, flag or config file is invalid."""


class DatasetError(AevalError):
    """A benchmark could not be loaded or does not have the expected shape."""


class InputFileError(AevalError):
    """A file given on the command line (batch output, instruction file…) is unusable."""


class RunDirError(AevalError):
    """A run directory is missing, foreign or inconsistent."""


class ApiError(AevalError):
    """The batch API refused something in a way retries will not fix (auth, bad request)."""


class UnreachableError(AevalError):
    """The API could not be reached at all (refused, DNS, timeouts) for longer than the
    connect deadline, before the run had created anything remote."""
