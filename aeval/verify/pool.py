"""VerifierPool: Z3 checks in killable worker processes, for asyncio and trio (anyio).

Every check runs in a worker process under a hard wall-clock budget: a check
over budget is a ``timeout`` verdict, its worker is killed (SIGKILL) and a
replacement is started in the background, and the other checks go on. Each
worker caps its own address space (``RLIMIT_AS``); a worker that dies anyway
is a ``resource_limit`` verdict. Start-up (Python + Z3 import) is paid once per
worker, in ``__aenter__``.

Why not ``anyio.to_process.run_sync(cancellable=True)``, which kills the same
way: its worker pool is shared by everything in the event loop that calls
``to_process``, so per-worker settings (the memory cap, fd 2 pointing at
/dev/null) would leak into other code's workers; it re-runs the parent's
``__main__`` in each worker; and it gives no way to kill the workers when the
pool is done. The worker here is ~60 lines (see :mod:`aeval.verify.worker`) on
``anyio.open_process`` and anyio's buffered streams; the parent's handle on
one is :mod:`aeval.verify.worker_process`.

Each worker has up to ``PIPELINE_DEPTH`` (2) checks sent ahead, so it never
idles through the round trip to the parent. A check's hard budget starts when
its worker reaches it, never while it waits for a free worker or behind
another check, so queued checks do not time out; checks queued on a worker
that is killed are re-sent to another worker, never blamed.
"""

from __future__ import annotations

import math
import os
import pickle
from collections.abc import Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from aeval.errors import AevalError
from aeval.exception_groups import first_of
from aeval.study_reasons import NO_ANSWER
from aeval.verdicts import CheckResult, Status
from aeval.verify.limits import DEFAULT_LIMITS, VerifyLimits
from aeval.verify.published import DETERMINED, PublishedResult, extract_published
from aeval.verify.worker import BOTH, CHECK, DECLINED, PUBLISHED
from aeval.verify.worker_process import Call, WorkerProcess, spawn_worker

__all__ = ["VerifierPool"]

_SPAWN_ATTEMPTS = 3
# Z3 exits the process with this code when an allocation fails (ERR_MEMOUT).
_Z3_MEMOUT_EXIT = 101
# Checks sent ahead to one worker: the next request already waits in its pipe
# when it answers one, so it never idles through the round trip to the parent
# (on a busy 2-core machine that round trip cost more than the check).
PIPELINE_DEPTH = 2
# Published readings remembered per pool (one z3 process each saved on a repeat).
_PUBLISHED_CACHE_SIZE = 4096


class VerifierPool:
    """An async context manager that verifies answers in ``workers`` killable processes.

    :param limits: the budgets of every check (see :class:`VerifyLimits`).
    :param workers: number of worker processes; default: the CPU count.
    :param published: whether callers also want the published reading
        (:meth:`check_published`); :func:`aeval.scoring.responses.score_response` asks
        for it only then.
    :param published_binary: give every published reading from the z3 binary,
        as the study ran it (for audits); by default a worker reads the answers
        whose outcome provably matches the binary's itself
        (:mod:`aeval.verify.published_inprocess`) and runs the binary for the rest.

    Use it from one event loop (asyncio or trio, via anyio)::

        async with VerifierPool() as pool:
            result = await pool.check(response_text, truth, constants)

    ``check`` may be called concurrently from many tasks; at most ``workers``
    checks run at once (two more are queued in the workers' pipes) and the rest
    wait, without their deadline running.
    Cancelling a task in ``check`` kills the worker it was using. Leaving the
    context kills all workers.
    """

    def __init__(
        self,
        limits: VerifyLimits = DEFAULT_LIMITS,
        workers: int | None = None,
        *,
        published: bool = False,
        published_binary: bool = False,
    ) -> None:
        if workers is not None and workers < 1:
            raise AevalError(f"VerifierPool needs at least one worker, got {workers}")
        self.limits = limits
        self.published = published
        self.published_binary = published_binary
        self._published_seen: dict[tuple[str, str, str], PublishedResult] = {}
        self.workers = workers or os.cpu_count() or 1
        self._live: set[WorkerProcess] = set()
        self._ready_send: MemoryObjectSendStream[WorkerProcess] | None = None
        self._ready_recv: MemoryObjectReceiveStream[WorkerProcess] | None = None
        self._task_group: TaskGroup | None = None
        self._spawn_error: BaseException | None = None
        self.replaced = 0  # workers killed and replaced so far (timeouts, deaths)

    # -- lifecycle ----------------------------------------------------------------

    async def __aenter__(self) -> VerifierPool:
        # Unbounded: slots of replaced workers may linger until someone skips them.
        self._ready_send, self._ready_recv = anyio.create_memory_object_stream[WorkerProcess](
            math.inf
        )
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        try:
            async with anyio.create_task_group() as tg:
                for _ in range(self.workers):
                    tg.start_soon(self._add_worker, True)
        except BaseException as exc:
            await self.__aexit__(type(exc), exc, exc.__traceback__)
            if isinstance(exc, BaseExceptionGroup):
                first = first_of(exc, AevalError)
                if first is not None:
                    raise first from None
            raise
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        with anyio.CancelScope(shield=True):
            live = list(self._live)
            for worker in live:  # every one signalled before any is waited for: they
                worker.signal_kill()  # die together (a run's end waits for the last)
            for worker in live:
                await worker.kill()
            self._live.clear()
        if self._task_group is not None:
            # Replacements still starting are cancelled; their processes die with them.
            self._task_group.cancel_scope.cancel()
            await self._task_group.__aexit__(None, None, None)
            self._task_group = None
        for stream in (self._ready_send, self._ready_recv):
            if stream is not None:
                stream.close()
        return None

    async def _add_worker(self, raise_errors: bool = False) -> None:
        """Start one worker and make it available (retrying a few times)."""
        for attempt in range(_SPAWN_ATTEMPTS):
            try:
                worker = await spawn_worker(self.limits)
                break
            except (AevalError, OSError) as e:  # spawn_worker's one line on why; a full /tmp
                error: BaseException = e
                await anyio.sleep(0.2 * (attempt + 1))
        else:
            self._spawn_error = error
            if raise_errors:
                raise AevalError(f"cannot start a Z3 verifier worker: {error}") from error
            if not self._live and self._ready_send is not None:
                # Nobody is left to serve waiting checks: wake them with an error.
                self._ready_send.close()
            return
        self._live.add(worker)
        assert self._ready_send is not None
        for _ in range(PIPELINE_DEPTH):
            self._ready_send.send_nowait(worker)

    def _replace(self, worker: WorkerProcess) -> None:
        """Retire ``worker`` (once): its queued calls go elsewhere, a new worker starts."""
        if worker.retired:
            return
        worker.retired = True
        self._live.discard(worker)
        self.replaced += 1
        for call in worker.calls:
            call.requeue = True
            call.turn.set()
        worker.calls.clear()
        if self._task_group is not None:
            self._task_group.start_soon(self._kill_and_replace, worker)

    async def _kill_and_replace(self, worker: WorkerProcess) -> None:
        await worker.kill()
        await self._add_worker()

    # -- checks -------------------------------------------------------------------

    @property
    def pids(self) -> tuple[int, ...]:
        """Process ids of the live workers (for diagnostics and tests)."""
        return tuple(sorted(w.process.pid for w in self._live))

    async def check(
        self,
        response_text: str | None,
        truth: str,
        constants: str,
        *,
        on_start: Callable[[float], object] | None = None,
        details: bool = True,
    ) -> CheckResult:
        """Verify one response against a row's ground truth.

        Never raises for any answer: timeouts, memory exhaustion and dead
        workers come back as verdicts. Raises :class:`AevalError` only when the
        pool is not entered or no worker can be started at all.

        :param on_start: called with ``anyio.current_time()`` of the moment a
            worker began this check (again if it is re-sent to another worker),
            so a caller can time the check itself rather than its wait for a
            worker (the reward's per-round budgets do).
        :param details: ``False``: the same status and repairs, but no direction
            or counterexample for a ``not_equivalent`` answer (about half the
            solver work on wrong answers; the reward's choice).
        """
        payload = pickle.dumps(
            (CHECK, response_text, truth, constants, details), pickle.HIGHEST_PROTOCOL
        )
        result: CheckResult = await self._request(payload, self.limits.timeout_s, on_start)
        return result

    async def check_published(
        self, response_text: str | None, truth: str, constants: str, *, declined: bool = False
    ) -> PublishedResult:
        """The published reading of one response (see :mod:`aeval.verify.published`).

        Read in a worker where the outcome provably matches the z3 binary's
        (unless ``published_binary``), else by the binary run from a worker,
        under the worker's memory cap and a ``limits.timeout_s`` timeout of its
        own; the hard budget of the call leaves room for that timeout to fire
        first. Never raises for any answer.

        The same extracted answer for the same row (another trial's identical
        answer) gets the remembered result: Z3 gives the same output for the
        same script, so only results Z3 settled are remembered, never a
        timeout or a kill.

        :param declined: a worker's reading without the binary already found that
            only the binary can read this response (:meth:`check_both`).
        """
        answer = extract_published(response_text)
        if answer is None:
            return PublishedResult(False, NO_ANSWER)
        key = (answer, truth, constants)
        seen = self._published_seen.get(key)
        if seen is not None:
            return seen
        budget = self.limits.timeout_s * 1.5 + 1.0
        result = await self._request(
            self._published_payload(
                response_text, truth, constants, self.published_binary, declined
            ),
            budget,
        )
        if isinstance(result, CheckResult) and not self.published_binary:
            # Killed or died in the in-process reading (a cap of the worker's, not
            # the binary's): the binary reads it as the audit does.
            result = await self._request(
                self._published_payload(response_text, truth, constants, True, False), budget
            )
        if isinstance(result, CheckResult):  # killed, died, or the worker failed
            return PublishedResult(False, f"{result.status.value}: {result.reason}")
        published: PublishedResult = result
        self._remember_published(key, published)
        return published

    async def check_both(
        self, response_text: str | None, truth: str, constants: str, *, details: bool = True
    ) -> tuple[CheckResult, PublishedResult]:
        """:meth:`check` and :meth:`check_published` of one response, in one round trip
        to one worker where the published reading needs no z3 binary (the truth is
        parsed once, by the worker that checks the answer); the same results as the
        two calls. Never raises for any answer.
        """
        answer = extract_published(response_text)
        seen = None if answer is None else self._published_seen.get((answer, truth, constants))
        if not self.published or self.published_binary or answer is None or seen is not None:
            check = await self.check(response_text, truth, constants, details=details)
            return check, await self.check_published(response_text, truth, constants)
        payload = pickle.dumps(
            (BOTH, response_text, truth, constants, details), pickle.HIGHEST_PROTOCOL
        )
        result = await self._request(payload, self.limits.timeout_s, frames=2)
        declined = False
        if isinstance(result, CheckResult):  # killed, died, or the worker failed in the check
            check, published = result, None
        else:
            check, *rest = result
            # No second answer: the worker was killed or died in the reading (the
            # check stands); or it did not try the reading (DECLINED: it tried,
            # and only the binary can read the answer).
            published = rest[0] if rest and isinstance(rest[0], PublishedResult) else None
            declined = rest == [DECLINED]
        if published is None:
            return check, await self.check_published(
                response_text, truth, constants, declined=declined
            )
        self._remember_published((answer, truth, constants), published)
        return check, published

    @staticmethod
    def _published_payload(
        response_text: str | None, truth: str, constants: str, binary: bool, declined: bool
    ) -> bytes:
        return pickle.dumps(
            (PUBLISHED, response_text, truth, constants, binary, declined),
            pickle.HIGHEST_PROTOCOL,
        )

    def _remember_published(self, key: tuple[str, str, str], result: PublishedResult) -> None:
        if result.reason in DETERMINED:
            if len(self._published_seen) >= _PUBLISHED_CACHE_SIZE:
                self._published_seen.clear()
            self._published_seen[key] = result

    async def _request(
        self,
        payload: bytes,
        budget: float,
        on_start: Callable[[float], object] | None = None,
        *,
        frames: int = 1,
    ) -> Any:
        """Send one framed request; its answer, or a CheckResult when it was killed or died.

        ``frames`` > 1: the request has that many answers, returned as a list; a
        worker killed or dead after the first leaves the list short (and is replaced).
        """
        if self._ready_recv is None:
            raise AevalError("VerifierPool.check() needs 'async with VerifierPool() as pool'")
        # A worker that died before it began this check (killed from outside,
        # crashed on an earlier one) says nothing about this answer: the check
        # goes to another worker.
        failures = 0
        while failures < self.workers + _SPAWN_ATTEMPTS:
            worker = await self._next_worker()
            if worker.retired:
                continue  # a stale slot of a replaced worker
            if worker.process.returncode is not None:
                self._replace(worker)
                failures += 1
                continue
            call = Call()
            try:
                async with worker.send_lock:  # calls are queued in the order they are sent
                    if worker.retired:
                        continue
                    worker.calls.append(call)
                    if len(worker.calls) == 1:
                        call.started = anyio.current_time()
                        call.turn.set()
                    await worker.send(payload)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                self._replace(worker)
                failures += 1
                continue
            except BaseException:  # cancelled mid-frame: the worker's state is unknown
                self._replace(worker)
                raise
            result = await self._finish(worker, call, budget, on_start, frames)
            if result is not None:
                return result
        raise AevalError("the Z3 verifier workers keep dying before they receive a check")

    async def _next_worker(self) -> WorkerProcess:
        assert self._ready_recv is not None
        try:
            return await self._ready_recv.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise AevalError(
                f"no Z3 verifier worker is available: cannot start one: {self._spawn_error}"
            ) from self._spawn_error

    async def _finish(
        self,
        worker: WorkerProcess,
        call: Call,
        budget: float,
        on_start: Callable[[float], object] | None = None,
        frames: int = 1,
    ) -> Any:
        """Wait for this call's answer under the hard budget; ``None``: send it elsewhere.

        Answers come back in order, so a call reads its answer when the one
        before it on this worker is done; its budget starts then.
        """
        done = False
        received: list[Any] = []
        try:
            await call.turn.wait()
            if call.requeue:
                return None
            assert call.started is not None
            start = call.started
            if on_start is not None:
                on_start(start)
            remaining = budget - (anyio.current_time() - start)
            with anyio.move_on_after(remaining):
                while len(received) < frames:
                    received.append(pickle.loads(await worker.receive()))
                done = True
            if not done and call.requeue:  # another call retired this worker meanwhile
                return None
            if done:
                return received[0] if frames == 1 else received
            if received:  # the first answers stand; the worker is replaced below
                return received
            elapsed = anyio.current_time() - start
            return CheckResult(
                Status.TIMEOUT,
                f"killed after {elapsed:.2f} s (hard budget {budget:g} s)",
                elapsed_ms=elapsed * 1000.0,
            )
        except (
            anyio.EndOfStream,
            anyio.IncompleteRead,
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
            OSError,
        ):
            if call.requeue:  # killed because another call retired it: not this answer's fault
                return None
            await worker.kill()
            if received:  # it died after its first answers: they stand
                return received
            code = worker.process.returncode
            why = (
                "Z3 ran out of memory"
                if code == _Z3_MEMOUT_EXIT
                else f"the verifier worker died (exit code {code}), most likely"
            )
            return CheckResult(
                Status.RESOURCE_LIMIT,
                f"{why} under the worker's {self.limits.memory_mb} MB memory cap",
                elapsed_ms=(anyio.current_time() - call.started) * 1000.0
                if call.started is not None
                else 0.0,
            )
        finally:
            if done and not worker.retired:
                worker.calls.popleft()
                if worker.calls:
                    following = worker.calls[0]
                    following.started = anyio.current_time()
                    following.turn.set()
                assert self._ready_send is not None
                self._ready_send.send_nowait(worker)
            elif not call.requeue:
                # Over budget, dead, or cancelled while the worker held this
                # call: the worker is in an unknown state.
                self._replace(worker)
