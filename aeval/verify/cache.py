"""Each distinct answer checked once: a verdict cache in front of any checker.

A check's result depends only on the row's ground truth and declarations,
the answer as extracted (its text, and the extraction repairs, which also say
whether it may be cut off), the limits, and whether the details of a wrong
answer were asked for. :class:`VerdictCache` keys results by a digest of
exactly that; the published reading by the study's extraction, truth,
declarations and limits. Only outcomes that do not depend on the machine are
kept (a timeout, a memory limit, a killed worker or a verifier error is never
remembered), so a hit gives the verdict a fresh check would give.

:class:`CachedChecker` puts a cache in front of a :class:`VerifierPool` (or
anything with its ``check``/``check_published``): hits are answered without a
worker, and a check asked again while the first is still running waits for
the first. It can start its pool only on the first miss, so a rescore whose
every answer is cached starts no worker at all.

The cache is bounded (least recently used entries go first) and may be backed
by a file (:data:`aeval.store.names.VERDICT_CACHE_FILE` in a run or rescore
directory): entries are appended as they are made and read back on the next
start. The file is ignored (and started afresh) when it was written by other
verifier code or another Z3.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from functools import cache, lru_cache
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import anyio
from anyio.abc import TaskGroup, TaskStatus

from aeval.study_reasons import NO_ANSWER
from aeval.verdicts import CheckResult, Status
from aeval.verify.checker import Checker
from aeval.verify.extract import extract_answer
from aeval.verify.limits import VerifyLimits
from aeval.verify.published import DETERMINED, REFUSED, PublishedResult, extract_published

__all__ = ["CachedChecker", "VerdictCache"]

DEFAULT_MAX_ENTRIES = 65_536
# Outcomes that any run on any machine gives again for the same key.
_STABLE = frozenset(
    {
        Status.EQUIVALENT,
        Status.NOT_EQUIVALENT,
        Status.NO_ANSWER,
        Status.PARSE_ERROR,
        Status.UNKNOWN_SYMBOL,
        Status.FORBIDDEN_COMMAND,
        Status.TOO_LARGE,
        Status.BAD_GROUND_TRUTH,
    }
)
# Beyond this the response is too_large before extraction (Verifier's own rule):
# left to the checker, never keyed.
_RESPONSE_SIZE_FACTOR = 64


@cache
def code_fingerprint() -> str:
    """The verifier's source and Z3's version: a cache file from other code is not read.

    Z3's version is the installed z3-solver's (its metadata): importing Z3 in the
    parent process, which never checks an answer itself, cost ~0.1 s per run.
    """
    try:
        z3_version = importlib.metadata.version("z3-solver")
    except importlib.metadata.PackageNotFoundError:
        z3_version = "unknown"
    digest = hashlib.sha256(z3_version.encode())
    here = Path(__file__).resolve().parent
    for path in sorted(here.glob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _digest(*parts: str) -> bytes:
    digest = hashlib.blake2b(digest_size=20)
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        digest.update(len(data).to_bytes(8, "little"))
        digest.update(data)
    return digest.digest()


@lru_cache(maxsize=16)
def _limits_text(limits: VerifyLimits) -> str:
    # Part of every key; dataclasses.asdict copies deeply (~70 µs a call).
    return repr(asdict(limits))


class VerdictCache:
    """A bounded map from (truth, declarations, extracted answer, limits) to verdicts.

    :param max_entries: most results kept in memory (least recently used go first).
    :param path: a file to read entries from now and append new ones to; None:
        memory only.
    """

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES, path: Path | None = None) -> None:
        self.max_entries = max(1, max_entries)
        self.path = path
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[bytes, CheckResult | PublishedResult] = OrderedDict()
        self._file: IO[str] | None = None
        self._writable = path is not None
        if path is not None:
            self._load(path)

    # -- keys -------------------------------------------------------------------------------

    @staticmethod
    def check_key(
        response_text: str | None,
        truth: str,
        constants: str,
        limits: VerifyLimits,
        details: bool,
    ) -> bytes | None:
        """The key of a check, or None when the response is not to be keyed (too large)."""
        limit = limits.max_answer_bytes * _RESPONSE_SIZE_FACTOR
        if response_text is not None and len(response_text) > limit:
            return None
        extraction = extract_answer(response_text)
        answer = "\x00" + extraction.reason if extraction.text is None else extraction.text
        return _digest(
            "check",
            truth,
            constants,
            answer,
            "+".join(extraction.repairs),
            _limits_text(limits),
            "details" if details else "status",
        )

    @staticmethod
    def published_key(answer: str, truth: str, constants: str, limits: VerifyLimits) -> bytes:
        return _digest("published", truth, constants, answer, _limits_text(limits))

    # -- entries ----------------------------------------------------------------------------

    def get(self, key: bytes) -> CheckResult | PublishedResult | None:
        found = self._entries.get(key)
        if found is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return found

    @staticmethod
    def keeps(result: CheckResult | PublishedResult) -> bool:
        """Whether ``result`` is an outcome that does not depend on the machine."""
        if isinstance(result, CheckResult):
            return result.status in _STABLE
        return result.reason in DETERMINED or result.reason.startswith(REFUSED)

    def put(self, key: bytes, result: CheckResult | PublishedResult) -> None:
        """Remember ``result`` if it is an outcome that does not depend on the machine."""
        if not self.keeps(result):
            return
        known = key in self._entries
        self._entries[key] = result
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
        if not known and self.path is not None and self._writable:
            try:
                if self._file is None:
                    self._file = self.path.open("a", encoding="utf-8")
                self._file.write(_entry_line(key, result))
            except OSError:
                self._writable = False
                self._drop_file()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: bytes) -> bool:
        return key in self._entries

    # -- the file ---------------------------------------------------------------------------

    def _load(self, path: Path) -> None:
        """Read the entries this code wrote, then write the file again with those kept
        only (a key evicted and checked again was appended twice; the file stays as
        large as the cache). The file is opened for appending on the first new entry
        and closed by :meth:`close` (the checker that owns the cache closes it)."""
        header = {"aeval_verdict_cache": 1, "code": code_fingerprint()}
        read = 0
        with (
            contextlib.suppress(OSError, ValueError, UnicodeDecodeError),
            path.open(encoding="utf-8") as handle,
        ):
            first = handle.readline()
            if first and json.loads(first) == header:
                for line in handle:
                    read += 1
                    self._load_line(line)
        if read == len(self._entries) and read > 0:
            return  # nothing to drop
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp")
            with tmp.open("w", encoding="utf-8") as out:
                out.write(json.dumps(header) + "\n")
                for key, result in self._entries.items():
                    out.write(_entry_line(key, result))
            os.replace(tmp, path)
        except OSError:
            # The file is a saving, never a requirement: the cache works in memory,
            # and whatever cannot be written is reported by the writer of the results.
            self._writable = False

    def _load_line(self, line: str) -> None:
        try:
            item = json.loads(line)
            key = bytes.fromhex(item["k"])
            result: CheckResult | PublishedResult
            if "r" in item:
                fields = dict(item["r"])
                fields["status"] = Status(fields["status"])
                result = CheckResult(**fields)
            else:
                result = PublishedResult(**item["p"])
        except (ValueError, KeyError, TypeError):
            return  # a torn last line (a killed process): that entry is checked again
        self._entries[key] = result
        self._entries.move_to_end(key)
        if len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)

    def flush(self) -> None:
        if self._file is not None:
            try:
                self._file.flush()
            except OSError:
                self._drop_file()

    def close(self) -> None:
        self.flush()
        self._drop_file()

    def _drop_file(self) -> None:
        handle, self._file = self._file, None
        if handle is not None:
            with contextlib.suppress(OSError):
                handle.close()


def _entry_line(key: bytes, result: CheckResult | PublishedResult) -> str:
    if isinstance(result, CheckResult):
        fields: dict[str, Any] = {
            "status": result.status.value,
            "reason": result.reason,
            "repaired": result.repaired,
            "direction": result.direction,
            "counterexample": result.counterexample,
            "elapsed_ms": round(result.elapsed_ms, 3),
        }
        return json.dumps({"k": key.hex(), "r": fields}) + "\n"
    published = {
        "correct": result.correct,
        "reason": result.reason,
        "elapsed_ms": round(result.elapsed_ms, 3),
        "in_process": result.in_process,
    }
    return json.dumps({"k": key.hex(), "p": published}) + "\n"


class CachedChecker:
    """A :class:`Checker` that answers from ``cache`` where it can and asks ``pool`` otherwise.

    :param pool: an entered pool; or ``start``, an async context manager factory
        entered on the first miss (and left when this checker is), with the
        ``limits``, ``published``, ``published_binary`` and ``workers`` it will have.
    """

    def __init__(
        self,
        cache: VerdictCache,
        pool: Checker | None = None,
        *,
        start: Callable[[], Any] | None = None,
        limits: VerifyLimits | None = None,
        published: bool = False,
        published_binary: bool = False,
        workers: int = 1,
    ) -> None:
        if pool is None and (start is None or limits is None):
            raise ValueError("CachedChecker needs a pool, or a way to start one and its limits")
        self.cache = cache
        self._pool = pool
        self._start = start
        self._task_group: TaskGroup | None = None
        self._closing = anyio.Event()
        self._starting = anyio.Lock()
        self._running: dict[bytes, anyio.Event] = {}
        if pool is not None:
            limits = pool.limits
        assert limits is not None
        self.limits: VerifyLimits = limits
        self.published: bool = pool.published if pool is not None else published
        # An audit of the published reading asks the binary for every answer: never cached.
        self.published_binary: bool = (
            getattr(pool, "published_binary", False) if pool is not None else published_binary
        )
        self.workers: int = pool.workers if pool is not None else workers

    async def __aenter__(self) -> CachedChecker:
        # A pool started on a miss lives in a task of its own (its task group must
        # be entered and left by one task), until this checker is left.
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        self.cache.close()  # its file, opened on the first new entry; reopened if used again
        self._closing.set()
        if self._task_group is None:
            return None
        group, self._task_group = self._task_group, None
        return await group.__aexit__(exc_type, exc, tb)

    async def _hold_pool(self, *, task_status: TaskStatus[Checker]) -> None:
        assert self._start is not None
        async with self._start() as pool:
            task_status.started(pool)
            await self._closing.wait()

    @property
    def pool_started(self) -> bool:
        return self._pool is not None

    async def _checker(self) -> Checker:
        if self._pool is None:
            async with self._starting:
                if self._pool is None:
                    if self._task_group is None:
                        raise RuntimeError("CachedChecker needs 'async with' to start its pool")
                    self._pool = await self._task_group.start(self._hold_pool)
        assert self._pool is not None
        return self._pool

    async def _once(self, key: bytes | None, run: Callable[[Checker], Awaitable[Any]]) -> Any:
        if key is None:
            return await run(await self._checker())
        while True:
            found = self.cache.get(key)
            if found is not None:
                return found
            running = self._running.get(key)
            if running is None:
                break
            await running.wait()  # the same check is on its way: its result, if kept
            if self.cache.get(key) is None:
                # Not kept (a timeout, a kill): this one is checked on its own.
                return await run(await self._checker())
        done = self._running[key] = anyio.Event()
        try:
            result = await run(await self._checker())
            self.cache.put(key, result)
            return result
        finally:
            del self._running[key]
            done.set()

    async def check(
        self,
        response_text: str | None,
        truth: str,
        constants: str,
        *,
        on_start: Callable[[float], object] | None = None,
        details: bool = True,
    ) -> CheckResult:
        key = VerdictCache.check_key(response_text, truth, constants, self.limits, details)

        async def run(pool: Checker) -> CheckResult:
            return await pool.check(
                response_text, truth, constants, on_start=on_start, details=details
            )

        result: CheckResult = await self._once(key, run)
        return result

    async def check_published(
        self, response_text: str | None, truth: str, constants: str
    ) -> PublishedResult:
        answer = extract_published(response_text)
        if answer is None:
            return PublishedResult(False, NO_ANSWER)
        key = (
            None
            if self.published_binary
            else VerdictCache.published_key(answer, truth, constants, self.limits)
        )

        async def run(pool: Checker) -> PublishedResult:
            return await pool.check_published(response_text, truth, constants)

        result: PublishedResult = await self._once(key, run)
        return result

    async def check_both(
        self, response_text: str | None, truth: str, constants: str, *, details: bool = True
    ) -> tuple[CheckResult, PublishedResult]:
        """Both readings from the cache where it has them; when it has neither (and
        neither is on its way), one :meth:`VerifierPool.check_both` for the two."""
        answer = extract_published(response_text)
        check_key = VerdictCache.check_key(response_text, truth, constants, self.limits, details)
        published_key = (
            None
            if answer is None or self.published_binary
            else VerdictCache.published_key(answer, truth, constants, self.limits)
        )
        if (
            check_key is None
            or published_key is None
            or any(k in self.cache or k in self._running for k in (check_key, published_key))
        ):
            check = await self.check(response_text, truth, constants, details=details)
            return check, await self.check_published(response_text, truth, constants)
        self.cache.misses += 2
        events = [anyio.Event(), anyio.Event()]
        self._running[check_key], self._running[published_key] = events
        try:
            pool = await self._checker()
            check, published = await pool.check_both(
                response_text, truth, constants, details=details
            )
            self.cache.put(check_key, check)
            self.cache.put(published_key, published)
            return check, published
        finally:
            for key, event in zip((check_key, published_key), events, strict=True):
                del self._running[key]
                event.set()
