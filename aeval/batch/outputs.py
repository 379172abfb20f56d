"""A batch's output and error files: streamed to the run directory and, line by line, to a sink.

A file is written to a ``.part`` sibling and renamed into place only when it
is complete, so a file in its place is whole; once there, it is read back from
disk instead of downloaded again.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio.lowlevel

from aeval.batch.providers.base import BatchProvider, BatchTag

__all__ = ["LineSink", "OutputDownload", "replay_output"]

# (line text, 1-based line number, "output" | "error") -> awaitable
LineSink = Callable[[str, int, str], Awaitable[None]]


class OutputDownload:
    """One ``output`` or ``error`` file on its way from the provider to ``path`` and ``sink``.

    :meth:`attempt` may be called again after a download broken half-way: it
    starts over, and lines already given to ``sink`` are not given again.
    """

    def __init__(
        self,
        provider: BatchProvider,
        file_id: str,
        path: Path,
        kind: str,
        sink: LineSink,
        tag: BatchTag | None = None,
    ) -> None:
        self._provider = provider
        self._tag = tag
        self._file_id = file_id
        self._path = path
        self._kind = kind
        self._sink = sink
        self._tmp = path.with_name(f".{path.name}.part")
        self._fed = 0

    async def attempt(self) -> None:
        lineno = 0
        # Plain buffered writes: a line is a memory copy; a thread hop per
        # line would cost more than the write itself.
        with self._tmp.open("w", encoding="utf-8") as fh:
            async with self._provider.open_lines(self._file_id, self._tag) as lines:
                async for line in lines:
                    if not line.strip():
                        continue
                    lineno += 1
                    fh.write(line + "\n")
                    if lineno > self._fed:
                        self._fed = lineno
                        await self._sink(line, lineno, self._kind)
            fh.flush()
            os.fsync(fh.fileno())

    def finish(self) -> None:
        """Move the complete file into its place in the run directory."""
        os.replace(self._tmp, self._path)


async def replay_output(path: Path, kind: str, sink: LineSink) -> None:
    """Give ``sink`` every line of an already downloaded file, as the download did."""
    lineno = 0
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            line = line.rstrip("\n")
            if not line.strip():
                continue
            lineno += 1
            await sink(line, lineno, kind)
            if lineno % 256 == 0:
                await anyio.lowlevel.checkpoint()
