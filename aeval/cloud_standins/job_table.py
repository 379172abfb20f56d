"""The jobs of a cloud stand-in: Bedrock's model invocation jobs and Vertex AI's batch
prediction jobs, kept alike.

Each job is a JSON object, written to its own file in ``<state_dir>/jobs`` whenever it
changes and read back when a stand-in starts over the same directory. A job moves through
its service's phases by its age when it is read (:func:`phase_at`), so no task runs
between requests; every read and change happens under the table's one lock (the routes
run it in worker threads). What differs per service (the fields' names, how a job ends
and what it writes) is the subclass's; the routes' shared parts (a bounded JSON body, a
page of a listing) are here too.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from starlette.requests import Request

__all__ = [
    "BODY_LIMIT",
    "JobShape",
    "JobTable",
    "iso",
    "json_body",
    "jsonl_values",
    "page",
    "phase_at",
    "read_body",
    "split_location",
]

BODY_LIMIT = 1024 * 1024  # a create call's JSON is a few hundred bytes

Job = dict[str, Any]


def iso(epoch: float) -> str:
    """``epoch`` as the services write a time: RFC 3339 in UTC, ``Z``."""
    return datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z")


def phase_at(elapsed: float, phases: Sequence[tuple[str, float]], done: str) -> str:
    """The phase a job is in ``elapsed`` seconds after it was created, each of ``phases``
    lasting its seconds; ``done`` after the last."""
    total = 0.0
    for phase, length in phases:
        total += length
        if elapsed < total:
            return phase
    return done


def split_location(uri: str) -> tuple[str, str]:
    """(bucket, key) of ``s3://bucket/key`` or ``gs://bucket/key`` (the routes checked
    the scheme when the job was created)."""
    bucket, _, key = uri.split("://", 1)[-1].partition("/")
    return bucket, key


def jsonl_values(data: bytes) -> list[Any]:
    """The values of a JSONL object's lines, ``None`` for a line that is not JSON (a job
    over it fails in its own words)."""
    out: list[Any] = []
    for raw in data.splitlines():
        if raw.strip():
            try:
                out.append(json.loads(raw))
            except ValueError:
                out.append(None)
    return out


@dataclass(frozen=True, slots=True)
class JobShape:
    """One service's job: its fields and the states the table moves it through.

    :param key: the field holding a job's id (``jobArn``, ``name``).
    :param state: the field holding its state (``status``, ``state``).
    :param stamp: the field its last change's time is written to.
    :param terminal: the states a job has ended in.
    :param ending: the state a stop or cancel puts a job in; it ends ``ended`` when next
        read, with half its requests answered.
    :param ended: see ``ending``.
    :param done: the state after the last phase: the job finished its requests.
    :param expired: the state a job of the ``expire`` fault ends in instead, half answered.
    :param hidden: fields kept from the create that the service does not answer with.
    """

    key: str
    state: str
    stamp: str
    terminal: tuple[str, ...]
    ending: str
    ended: str
    done: str
    expired: str
    hidden: tuple[str, ...] = ()


class JobTable:
    """Jobs by their id, each saved to ``<root>/jobs/<last part of its id>.json``.

    A subclass says how long each phase lasts (:meth:`phase`), what entering a state
    checks (:meth:`entering`) and how a job ends (:meth:`finish`).

    :param root: the stand-in's state directory.
    :param create_errors: creates that answer 500 after creating their job (a fault).
    :param create_delay_s: a wait after a job is created, before its create answers (a
        fault: a client killed in it never learns the job's id).
    :param expire: every job ends ``expired`` (a fault).
    """

    def __init__(
        self,
        root: Path,
        shape: JobShape,
        *,
        create_errors: int,
        create_delay_s: float,
        expire: bool,
    ) -> None:
        self.root, self.shape, self.expire = root, shape, expire
        self.key, self.state, self.stamp = shape.key, shape.state, shape.stamp
        self.lock = threading.Lock()
        self.create_errors, self.create_delay_s = create_errors, create_delay_s
        (root / "jobs").mkdir(parents=True, exist_ok=True)
        self.jobs: dict[str, Job] = {}
        for path in sorted((root / "jobs").glob("*.json")):
            job = json.loads(path.read_text(encoding="utf-8"))
            self.jobs[job[self.key]] = job

    def save(self, job: Job) -> None:
        """Write ``job`` (stamped with the time) to its file, atomically."""
        job[self.stamp] = iso(time.time())
        path = self.root / "jobs" / f"{job[self.key].rsplit('/', 1)[-1]}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(job), encoding="utf-8")
        tmp.replace(path)
        self.jobs[job[self.key]] = job

    async def create(self, make: Callable[[], tuple[Job, bool]]) -> tuple[Job, bool]:
        """The job ``make`` gives under the lock (``(job, True)``: a new one, saved here;
        ``(job, False)``: one it found), once the create's delay has passed; and whether
        the create answers with an injected error.

        :raises Exception: what ``make`` raises.
        """

        def locked() -> tuple[Job, bool]:
            with self.lock:
                job, new = make()
                if not new:
                    return job, False
                self.save(job)
                fail = self.create_errors > 0
                self.create_errors -= int(fail)
                return job, fail

        job, fail = await anyio.to_thread.run_sync(locked)
        if self.create_delay_s:
            await anyio.sleep(self.create_delay_s)
        return job, fail

    def find(self, identifier: str) -> Job | None:
        """The job named by ``identifier`` (its id; a subclass may take more)."""
        return self.jobs.get(identifier)

    def phase(self, elapsed: float) -> str:
        """The state a job is in ``elapsed`` seconds after its create."""
        raise NotImplementedError

    def entering(self, job: Job, state: str) -> bool:
        """Whether ``job`` may move to ``state`` (a subclass may fail it instead)."""
        return True

    def finish(self, job: Job, state: str, *, share: float) -> None:
        """End ``job`` in ``state``, its first ``share`` of requests answered."""
        raise NotImplementedError

    def advance(self, job: Job) -> Job:
        """Move ``job`` to the state its age says; answer its requests when it ends."""
        shape, now = self.shape, job[self.state]
        if now in shape.terminal:
            return job
        if now == shape.ending:
            self.finish(job, shape.ended, share=0.5)
            return job
        state = self.phase(time.time() - job["_created"])
        if state == now or not self.entering(job, state):
            return job
        if state == shape.done:
            if self.expire:
                self.finish(job, shape.expired, share=0.5)
            else:
                self.finish(job, state, share=1.0)
        else:
            job[self.state] = state
            self.save(job)
        return job

    async def read(self, identifier: str, *, end: bool = False) -> Job | None:
        """The job named ``identifier``, moved to its state; with ``end``, stopped or
        cancelled (it ends when next read). ``None`` for no such job.

        :raises ValueError: asked to end a job that has ended (its state).
        """
        return await anyio.to_thread.run_sync(lambda: self._read(identifier, end))

    def _read(self, identifier: str, end: bool) -> Job | None:
        with self.lock:
            job = self.find(identifier)
            if job is None:
                return None
            job = self.advance(job)
            if end:
                if job[self.state] in self.shape.terminal:
                    raise ValueError(job[self.state])
                job[self.state] = self.shape.ending
                self.save(job)
            return job

    async def listed(self, keep: Callable[[Job], bool]) -> list[dict[str, Any]]:
        """The jobs ``keep`` keeps, each moved to its state, newest first, as the service
        answers them (:meth:`public`)."""

        def locked() -> list[Job]:
            with self.lock:
                return [self.advance(j) for j in list(self.jobs.values()) if keep(j)]

        found = await anyio.to_thread.run_sync(locked)
        found.sort(key=lambda j: j["_created"], reverse=True)
        return [self.public(j) for j in found]

    def public(self, job: Mapping[str, Any]) -> dict[str, Any]:
        """``job`` as the service answers it: without the stand-in's own fields (``_…``)
        and the hidden ones."""
        hidden = self.shape.hidden
        return {k: v for k, v in job.items() if not k.startswith("_") and k not in hidden}


async def read_body(request: Request) -> bytes:
    """The request's body, read up to :data:`BODY_LIMIT` bytes.

    :raises ValueError: over the limit.
    """
    raw = b""
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > BODY_LIMIT:
            raise ValueError("body too large")
    return raw


async def json_body(request: Request) -> Any:
    """The request's JSON body (:func:`read_body`); ``{}`` for none.

    :raises ValueError: over the limit, or not JSON.
    """
    return json.loads(await read_body(request) or b"{}")


def page(found: list[Any], start: int, size: int, items: str, token: str) -> dict[str, Any]:
    """One page of a listing: ``size`` of ``found`` from ``start`` under ``items``, and
    the next page's start under ``token`` while there is one."""
    out: dict[str, Any] = {items: found[start : start + size]}
    if start + size < len(found):
        out[token] = str(start + size)
    return out
