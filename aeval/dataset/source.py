"""Where a benchmark's rows came from, for error messages and for the run's fingerprint."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from aeval.dataset.fingerprint import SourceKind

__all__ = ["Source", "first_line", "row_only"]


@dataclass(frozen=True)
class Source:
    """Where rows came from, for messages: a name, and a way to turn a row number into a place."""

    name: str
    locate: Callable[[int], str]
    kind: SourceKind = "file"
    sha256: str | None = None  # of a local file's (or directory's) bytes
    revision: str | None = None  # the hub commit the rows were loaded at


def row_only(row: int) -> str:
    return f"row {row}"


def first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__
