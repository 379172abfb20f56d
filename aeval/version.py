"""aeval's version, in a leaf module: code deep in the package (cache keys, Ray actor
names, exports) reads it without importing the package's public API."""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"  # pyproject.toml's [project] version
