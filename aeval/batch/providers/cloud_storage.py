"""What the storage-backed cloud batch adapters share: Bedrock's over S3, Vertex AI's over
Cloud Storage.

Both read a shard's requests from one object under the run's prefix (``--bedrock-s3
s3://BUCKET/PREFIX``, ``--vertex-gcs gs://BUCKET/PREFIX``), find their job's results as
objects the job wrote under that prefix, join each result to its row by an id carried in
the request (hex of the custom id: a Bedrock ``recordId`` is alphanumeric, a Vertex AI
label lowercase), and report a request with no result in a job that ended early as the
job's ending, read back from the input object. Their storage SDKs (boto3,
google-cloud-storage) are synchronous, so each call runs in a worker thread with its
failure translated by the adapter into aeval's two kinds.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import anyio
import anyio.to_thread

from aeval.batch.providers.lines import error_line
from aeval.errors import ApiError

__all__ = [
    "StorageBatchAdapter",
    "StoragePrefix",
    "hex_id",
    "in_thread",
    "paced",
    "result_lines",
    "unhex_id",
]

T = TypeVar("T")

# An exception of an SDK call -> aeval's (the same exception where it has no meaning for aeval).
Translate = Callable[[Exception, str], Exception]
# One result line -> (its custom id, an OpenAI output line); (None, None) for a foreign one.
ParseResult = Callable[[bytes], tuple[str | None, str | None]]


def hex_id(custom_id: str) -> str:
    """The id a request carries its custom id in: hex, alphanumeric and lowercase."""
    return custom_id.encode("utf-8").hex()


def unhex_id(value: object) -> str | None:
    """The custom id behind :func:`hex_id`'s value; ``None`` for one aeval did not write."""
    try:
        return bytes.fromhex(str(value)).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return None


@dataclass(frozen=True, slots=True)
class StoragePrefix:
    """The run's storage prefix on one cloud.

    :param scheme: ``"s3"`` or ``"gs"``.
    :param kind: what a location of it is called (``"an S3 location"``).
    :param uri: the prefix as configured, ``None`` when it is not.
    :param missing: the line that says how to name one, raised when it is not.
    """

    scheme: str
    kind: str
    uri: str | None
    missing: str

    def split(self, uri: str) -> tuple[str, str]:
        """(bucket, key) of ``SCHEME://bucket/key``.

        :raises ApiError: not a location of this storage.
        """
        head = f"{self.scheme}://"
        if not uri.startswith(head) or not uri[len(head) :].split("/", 1)[0]:
            raise ApiError(f"{uri!r} is not {self.kind} ({head}BUCKET/PREFIX)")
        bucket, _, key = uri[len(head) :].partition("/")
        return bucket, key

    def root(self) -> tuple[str, str]:
        """(bucket, prefix) of the run's prefix, without slashes at either end.

        :raises ApiError: no prefix configured, or not a location of this storage.
        """
        if not self.uri:
            raise ApiError(self.missing)
        bucket, key = self.split(self.uri.rstrip("/"))
        return bucket, key.strip("/")

    def key(self, name: str) -> tuple[str, str]:
        """(bucket, key) of the object ``name`` under the run's prefix."""
        bucket, prefix = self.root()
        return bucket, f"{prefix}/{name}" if prefix else name


async def in_thread(what: str, fn: Callable[[], T], translate: Translate) -> T:
    """``fn()`` (a synchronous SDK call) in a worker thread; its failure as ``translate``
    says, chained to the SDK's, or as raised where ``translate`` keeps it."""
    try:
        return await anyio.to_thread.run_sync(fn)
    except Exception as err:
        failure = translate(err, what)
        if failure is err:
            raise
        raise failure from err


class StorageBatchAdapter:
    """What a storage-backed cloud's batch adapter is the same in: its jobs read their
    requests from the run's storage prefix only, and every synchronous storage call runs
    in a worker thread. A subclass sets ``_endpoint`` and ``_storage`` and reads its
    SDKs' failures (``_fail``); the rest of the protocol is its own."""

    serial_creates = False
    _endpoint: str
    _storage: StoragePrefix

    @property
    def endpoint(self) -> str:
        return self._endpoint

    def wants_upload(self, size_bytes: int) -> bool:
        return True  # a job reads its requests from the cloud's storage only

    def _fail(self, err: Exception, what: str) -> Exception:
        """``err`` in aeval's two kinds (``err`` itself where it has no meaning for aeval)."""
        raise NotImplementedError

    async def _call(self, what: str, fn: Callable[[], T]) -> T:
        return await in_thread(what, fn, self._fail)


def result_lines(
    paths: Iterable[Path],
    parse: ParseResult,
    *,
    asked: Path | None = None,
    asked_id: Callable[[bytes], str | None] | None = None,
    unfinished: str | None = None,
    why: str = "",
) -> Iterator[str]:
    """The output lines of a job's result files, each request's first result only (a
    job's order is its own, so a line is joined to its row by the id it carries); then,
    where the job ended early (``unfinished``: ``batch_expired``…), an error line
    ``why`` for every request of its input file ``asked`` (each line's id read by
    ``asked_id``) that has no result."""
    seen: set[str] = set()
    for path in paths:
        with path.open("rb") as handle:
            for raw in handle:
                if not raw.strip():
                    continue
                custom_id, line = parse(raw)
                if custom_id is None or line is None or custom_id in seen:
                    continue
                seen.add(custom_id)
                yield line
    if asked is None or asked_id is None or unfinished is None:
        return
    with asked.open("rb") as handle:
        for raw in handle:
            try:
                custom_id = asked_id(raw)
            except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
                continue
            if custom_id is not None and custom_id not in seen:
                seen.add(custom_id)
                yield error_line(custom_id, code=unfinished, message=why)


async def paced(lines: Iterable[str]) -> AsyncIterator[str]:
    """``lines`` (read from a job's downloaded result files: these adapters', and Gemini's)
    as an async iterator that lets other tasks run every 256 lines."""
    for n, line in enumerate(lines):
        yield line
        if n % 256 == 255:
            await anyio.sleep(0)
