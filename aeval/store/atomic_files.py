"""Durable file writes: replace a file atomically, hash one without reading it whole."""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
from pathlib import Path

__all__ = ["atomic_write_text", "file_sha256"]


def file_sha256(path: Path) -> str:
    """The file's sha256 (hex), read in chunks."""
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:  # some filesystems do not allow opening directories
        return
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_text(path: Path, text: str) -> None:
    """Replace ``path`` with ``text``: write a temporary sibling, fsync, rename, fsync dir.

    A link already at ``path`` is replaced, never followed; the sibling is created new
    (``O_EXCL | O_NOFOLLOW``, a name no one can guess), so nothing planted there is written
    through either.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(6)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        with open(os.open(tmp, flags, 0o666), "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError:  # a full disk: leave the old file, and no half-written sibling
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_dir(path.parent)
