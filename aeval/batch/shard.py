"""Request files: a job's requests split under the API's per-file limits, and the
check that a file is still the one the manifest recorded.

Written by hand because it is a streaming split with two limits (count and
bytes) and a running hash: each line is serialised once, written once, and
never held beyond the current line, so a 50,000-request job costs no memory.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final

from aeval.api_settings import ShardLimits
from aeval.errors import ConfigError, RunDirError
from aeval.store.atomic_files import file_sha256

if TYPE_CHECKING:
    from aeval.store import RunStore, ShardRecord

__all__ = [
    "COMPLETIONS_URL",
    "RESPONSES_URL",
    "URL",
    "ShardFile",
    "batch_line",
    "check_request_file",
    "read_request_lines",
    "request_url",
    "write_shards",
]

URL: Final = "/v1/chat/completions"
COMPLETIONS_URL = "/v1/completions"  # direct mode's --endpoint completions (base models)
# --endpoint responses: OpenAI's Responses API, a Batch API endpoint too (openai 3.57
# types/batch_create_params.py, endpoint).
RESPONSES_URL = "/v1/responses"


def batch_line(custom_id: str, body: dict[str, Any], url: str = URL) -> bytes:
    """One line of a batch input file (with its newline)."""
    line = {"custom_id": custom_id, "method": "POST", "url": url, "body": body}
    return (json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


@dataclass(frozen=True, slots=True)
class ShardFile:
    shard: int
    path: Path
    requests: int
    bytes: int
    sha256: str


def write_shards(
    requests: Iterable[tuple[str, dict[str, Any]]],
    path_for: Callable[[int], Path],
    limits: ShardLimits,
    *,
    url: str = URL,
) -> list[ShardFile]:
    """Write ``(custom_id, body)`` pairs into as few files as the limits allow.

    :param path_for: where shard ``n`` goes (the parent directory must exist).
    :raises ConfigError: a single request is larger than the byte limit.
    """
    out: list[ShardFile] = []
    fh: IO[bytes] | None = None
    digest = hashlib.sha256()
    count = size = 0
    shard = -1
    path = Path()

    def close() -> None:
        nonlocal fh
        if fh is not None:
            fh.flush()
            fh.close()
            out.append(ShardFile(shard, path, count, size, digest.hexdigest()))
            fh = None

    for custom_id, body in requests:
        line = batch_line(custom_id, body, url)
        if len(line) > limits.max_bytes:
            raise ConfigError(
                f"request {custom_id!r} is {len(line)} bytes, over the "
                f"{limits.max_bytes}-byte limit of one batch input file"
            )
        if fh is None or count >= limits.max_requests or size + len(line) > limits.max_bytes:
            close()
            shard += 1
            path = path_for(shard)
            fh = path.open("wb")
            digest = hashlib.sha256()
            count = size = 0
        fh.write(line)
        digest.update(line)
        count += 1
        size += len(line)
    close()
    return out


def request_url(path: Path) -> str:
    """The ``url`` a request file's lines name (one file is one route: every line of a
    shard is written with the same ``url``); :data:`URL` for a file with none."""
    for line in read_request_lines(path):
        url = line.get("url")
        return url if isinstance(url, str) else URL
    return URL


def read_request_lines(path: Path) -> Iterator[dict[str, Any]]:
    """Each request line of a request file (``{custom_id, method, url, body}``), parsed,
    one at a time: the one reader of the format :func:`batch_line` writes."""
    with Path(path).open("rb") as fh:
        for raw in fh:
            if raw.strip():
                line: dict[str, Any] = json.loads(raw)
                yield line


def check_request_file(store: RunStore, rec: ShardRecord) -> Path:
    """The shard's request file, after checking it is the one the manifest recorded.

    :raises RunDirError: the file is missing or its sha256 differs from the
        manifest's (edited, or written over by another shard's requests).
    """
    path = store.path(rec.input_path)
    try:
        digest = file_sha256(path)
    except OSError as err:
        raise RunDirError(f"{rec.key}: cannot read request file {path}: {err}") from err
    if digest != rec.sha256:
        raise RunDirError(
            f"{rec.key}: request file {path} has sha256 {digest[:12]}…, but the manifest "
            f"recorded {rec.sha256[:12]}… for it; it was changed after the run wrote it, "
            "so its answers cannot be matched to the manifest's requests"
        )
    return path
