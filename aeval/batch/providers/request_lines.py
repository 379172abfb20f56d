"""A shard's request file rewritten into a provider's own input-line shape before upload.

aeval writes every shard as ``{custom_id, method, url, body}`` lines; Together
and Mistral take ``{custom_id, body}`` (Mistral with the model named on the
job, not in each body), Gemini ``{key, request}``. Rewritten a line at a time,
into a temporary file named as the upload must be named.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio.to_thread

from aeval.batch.shard import read_request_lines

__all__ = ["first_model", "rewrite_lines", "rewritten"]

Shape = Callable[[dict[str, Any]], dict[str, Any]]


def rewrite_lines(source: Path, dest: Path, shape: Shape) -> None:
    """Write ``shape(line)`` for every request line of ``source`` to ``dest``."""
    with dest.open("w", encoding="utf-8") as out:
        for line in read_request_lines(source):
            out.write(json.dumps(shape(line), ensure_ascii=False))
            out.write("\n")


@asynccontextmanager
async def rewritten(source: Path, name: str, shape: Shape) -> AsyncIterator[Path]:
    """``source`` rewritten by :func:`rewrite_lines` (in a worker thread) into a temporary
    file called ``name``, removed on the way out."""
    with tempfile.TemporaryDirectory(prefix="aeval-upload-") as tmp:
        converted = Path(tmp) / name
        await anyio.to_thread.run_sync(rewrite_lines, source, converted, shape)
        yield converted


def first_model(source: Path) -> str | None:
    """The ``model`` of the first request's body (a shard holds one model's requests)."""
    for line in read_request_lines(source):
        model = line.get("body", {}).get("model")
        return model if isinstance(model, str) and model else None
    return None
