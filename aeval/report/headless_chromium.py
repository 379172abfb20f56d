"""Headless Chromium, as it is started to look at the pages the report writes: the
documentation build's screenshot of the sample viewer (docs/_ext/draw_pictures.py)
and the page tests (tests/chromium_helpers.py) start it with the same flags.

Chromium is not a dependency: the viewer is a static page any browser opens, and
nothing in aeval starts a browser itself.
"""

from __future__ import annotations

import shutil
from pathlib import Path

__all__ = ["CHROMIUM_NAMES", "find_chromium", "headless_command"]

# The names its packages install it under (Debian's, Ubuntu's snap, Google's).
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")


def find_chromium() -> str | None:
    """The path of the first Chromium on ``PATH``, or ``None``."""
    return next((path for path in map(shutil.which, CHROMIUM_NAMES) if path), None)


def headless_command(chromium: str, profile: Path, window: tuple[int, int]) -> list[str]:
    """The command line that starts ``chromium`` headless in a ``window`` (width, height)
    with a profile of its own (``profile``, a directory the caller throws away), before
    the caller's own flags and page: no sandbox (it runs as root in containers and CI),
    no GPU, and nothing fetched or synced in the background (the machines that draw the
    pages may be offline)."""
    return [
        chromium,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        f"--window-size={window[0]},{window[1]}",
    ]
