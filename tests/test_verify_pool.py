"""The worker pool: hard timeouts, replacement, memory cap, both backends, real processes."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import anyio
import pytest

from aeval.errors import AevalError
from aeval.verdicts import Status
from aeval.verify import VerifierPool, VerifyLimits, check_response, worker_process
from aeval.verify.worker_process import spawn_worker

pytestmark = pytest.mark.anyio

TRUTH = "(assert (and (> x 1) (< y 10)))"
CONSTANTS = "(declare-const x Int)\n(declare-const y Int)\n(declare-const z Int)"
GOOD = f"<answer>{TRUTH}</answer>"
# Sum of three cubes = 33: Z3 cannot finish this in any sane time.
HARD = "<answer>(assert (= (+ (* x x x) (* y y y) (* z z z)) 33))</answer>"


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return request.param


async def test_checks_agree_with_the_in_process_verifier() -> None:
    answers = [
        GOOD,
        "<answer>(assert (> x 1))</answer>",
        "<answer>(check-sat)</answer>",
        None,
        # Request kinds are tagged, never guessed from a request's content or length:
        # an answer that reads like a tag is still checked as an answer.
        "published",
        "check",
    ]
    async with VerifierPool(workers=2) as pool:
        results = [await pool.check(a, TRUTH, CONSTANTS) for a in answers]
    expected = [check_response(a, TRUTH, CONSTANTS) for a in answers]
    for got, want in zip(results, expected, strict=True):
        assert (got.status, got.reason, got.direction, got.counterexample) == (
            want.status,
            want.reason,
            want.direction,
            want.counterexample,
        )


async def test_a_stuck_check_times_out_on_budget_while_others_complete() -> None:
    limits = VerifyLimits(timeout_s=1.0, solver_timeout_ms=60_000)
    async with VerifierPool(limits, workers=2) as pool:
        before = pool.pids
        finished: dict[str, float] = {}
        results = {}
        start = time.perf_counter()

        async def run(name: str, answer: str) -> None:
            results[name] = await pool.check(answer, TRUTH, CONSTANTS)
            finished[name] = time.perf_counter() - start

        async with anyio.create_task_group() as tg:
            tg.start_soon(run, "hard", HARD)
            await anyio.sleep(0.05)
            for i in range(30):
                tg.start_soon(run, f"good{i}", GOOD)
        hard = results.pop("hard")
        assert hard.status is Status.TIMEOUT, hard
        assert finished["hard"] <= limits.timeout_s + 0.5
        assert {r.status for r in results.values()} == {Status.EQUIVALENT}
        # The other worker kept serving while the stuck one ran.
        assert sum(finished[k] < finished["hard"] for k in results) >= 10
        # The killed worker is replaced: a new process, same pool size, still working.
        with anyio.fail_after(30):
            while len(pool.pids) < 2:
                await anyio.sleep(0.05)
        assert pool.replaced == 1
        assert len(set(pool.pids) - set(before)) == 1
        assert (await pool.check(GOOD, TRUTH, CONSTANTS)).status is Status.EQUIVALENT


async def test_queued_checks_do_not_spend_their_budget_waiting() -> None:
    limits = VerifyLimits(timeout_s=1.0, solver_timeout_ms=60_000)
    async with VerifierPool(limits, workers=1) as pool:
        results = []

        async def run(answer: str) -> None:
            results.append(await pool.check(answer, TRUTH, CONSTANTS))

        async with anyio.create_task_group() as tg:
            tg.start_soon(run, HARD)
            await anyio.sleep(0.05)
            tg.start_soon(run, GOOD)  # waits ~1 s for the only worker
        assert [r.status for r in results] == [Status.TIMEOUT, Status.EQUIVALENT]


async def test_memory_cap_is_a_resource_limit_and_the_pool_carries_on() -> None:
    limits = VerifyLimits(memory_mb=768, timeout_s=30)
    blowups = [
        # Bit-blasting 20-million-bit vectors: Z3 aborts the process (exit 101).
        "(assert (bvult ((_ int2bv 20000000) x) ((_ int2bv 20000000) (+ x 1))))",
        # A 200,000-bit multiplier: Z3 notices its own memory limit.
        "(assert (= (bvmul ((_ int2bv 200000) x) ((_ int2bv 200000) y)) ((_ int2bv 200000) 7)))",
    ]
    async with VerifierPool(limits, workers=1) as pool:
        for answer in blowups:
            result = await pool.check(f"<answer>{answer}</answer>", TRUTH, CONSTANTS)
            assert result.status is Status.RESOURCE_LIMIT, result
            assert "memory" in result.reason
        assert (await pool.check(GOOD, TRUTH, CONSTANTS)).status is Status.EQUIVALENT


@pytest.mark.slow
async def test_deep_nesting_with_lifted_limits_gets_a_verdict_not_a_crash() -> None:
    # Z3 itself on 200,000 levels (~10 s); the default limits stop this at the
    # reader, which tests/test_verify_sanitiser.py covers in the default run.
    limits = VerifyLimits(max_depth=10**6, max_answer_bytes=10**7, timeout_s=20)
    deep = "(assert " + "(not " * 200_000 + "(> x 1)" + ")" * 200_000 + ")"
    async with VerifierPool(limits, workers=1) as pool:
        result = await pool.check(f"<answer>{deep}</answer>", TRUTH, CONSTANTS)
        assert result.status in (Status.NOT_EQUIVALENT, Status.RESOURCE_LIMIT, Status.TIMEOUT)
        assert (await pool.check(GOOD, TRUTH, CONSTANTS)).status is Status.EQUIVALENT


async def test_cancelling_a_check_kills_its_worker_and_leaving_kills_all() -> None:
    limits = VerifyLimits(timeout_s=30, solver_timeout_ms=60_000)
    async with VerifierPool(limits, workers=1) as pool:
        (pid,) = pool.pids
        with anyio.move_on_after(0.3):
            await pool.check(HARD, TRUTH, CONSTANTS)
        assert pool.replaced == 1
        assert (await pool.check(GOOD, TRUTH, CONSTANTS)).status is Status.EQUIVALENT
        pids = pool.pids
        assert pid not in pids
    await anyio.sleep(0.1)
    for p in (pid, *pids):
        with pytest.raises(ProcessLookupError):
            os.kill(p, 0)


async def test_check_outside_the_context_is_a_clear_error() -> None:
    with pytest.raises(AevalError, match="async with"):
        await VerifierPool(workers=1).check(GOOD, TRUTH, CONSTANTS)


async def test_a_worker_that_cannot_start_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "executable", "/nonexistent/python3")
    assert await _start_error() == (
        "cannot start a Z3 verifier worker: /nonexistent/python3: No such file or directory"
    )


async def _start_error() -> str:
    """What entering a one-worker pool raises, as the user reads it."""
    with pytest.raises(AevalError) as caught:
        async with VerifierPool(workers=1):
            pass
    return str(caught.value)


def _site(tmp_path: Path, files: dict[str, str]) -> str:
    """A directory put first on the workers' PYTHONPATH, holding ``files`` (path: text)."""
    site = tmp_path / "site"
    for name, text in files.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_text(text)
    return str(site)


BROKEN_Z3 = {"z3/__init__.py": 'raise ImportError("no z3 here")\n'}


async def test_a_worker_that_cannot_import_z3_says_why_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The worker's own last line on stderr (its traceback's exception), its exit code
    and which Python lacks Z3: not the parent's view of a closed pipe."""
    monkeypatch.setenv("PYTHONPATH", _site(tmp_path, BROKEN_Z3))  # _worker_env copies it
    assert await _start_error() == (
        "cannot start a Z3 verifier worker: ImportError: no z3 here "
        f"({sys.executable} -m aeval.verify.worker exited with code 1 before it was ready)"
    )


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # about the worker, not the loop
async def test_a_worker_whose_start_up_prints_to_stdout_is_named_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Something the worker imports before its protocol starts prints to stdout: that
    text is named, rather than read as the length of a greeting never sent."""
    site = _site(tmp_path, {"sitecustomize.py": 'print("hello from sitecustomize")\n'})
    monkeypatch.setenv("PYTHONPATH", site)
    with pytest.raises(AevalError) as caught:
        await spawn_worker(VerifyLimits())
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(
        f"{sys.executable} -m aeval.verify.worker wrote b'hello from sitecustomize"
    ), message
    assert "to stdout before its greeting" in message


@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # about the worker, not the loop
async def test_a_worker_that_does_not_greet_in_time_says_what_it_last_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slow = (
        'import sys, time\nprint("loading plugins", file=sys.stderr, flush=True)\ntime.sleep(60)\n'
    )
    monkeypatch.setenv("PYTHONPATH", _site(tmp_path, {"sitecustomize.py": slow}))
    monkeypatch.setattr(worker_process, "_STARTUP_TIMEOUT_S", 3.0)  # this test's subject
    with pytest.raises(AevalError) as caught:
        await spawn_worker(VerifyLimits())
    assert str(caught.value) == (
        f"{sys.executable} -m aeval.verify.worker did not load Z3 within 3 s (an overloaded "
        "machine, or an import that hangs); its last line on stderr: loading plugins"
    )


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts fds in /proc (Linux)")
@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # about the worker, not the loop
async def test_replacing_workers_leaks_no_descriptor_and_workers_keep_no_stderr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Workers are replaced after every timeout (thousands per run): the start-up stderr
    file of each is closed in the parent, and a running worker's fd 2 is /dev/null (what
    Z3 writes there later can never fill anything)."""

    def fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    async def replace_the_worker() -> None:
        [pid] = pool.pids
        assert os.readlink(f"/proc/{pid}/fd/2") == os.devnull
        replaced = pool.replaced
        os.kill(pid, signal.SIGKILL)
        # Seen dead before the check is sent, or while it runs: replaced once either way.
        await pool.check(GOOD, TRUTH, CONSTANTS)
        assert pool.replaced == replaced + 1
        # Served by the replacement, once it has started.
        assert (await pool.check(GOOD, TRUTH, CONSTANTS)).status is Status.EQUIVALENT

    async with VerifierPool(workers=1) as pool:
        for _ in range(3):  # the pool's own streams and tasks are all in place
            await replace_the_worker()
        settled = fds()
        for _ in range(20):
            await replace_the_worker()
        assert fds() == settled
    monkeypatch.setenv("PYTHONPATH", _site(tmp_path, BROKEN_Z3))
    before = fds()
    for _ in range(5):
        with pytest.raises(AevalError, match="no z3 here"):
            await spawn_worker(VerifyLimits())
    assert fds() == before


async def test_a_worker_killed_while_idle_costs_no_verdict() -> None:
    async with VerifierPool(workers=2) as pool:
        for pid in pool.pids:
            os.kill(pid, 9)
        await anyio.sleep(0.1)
        results = [await pool.check(GOOD, TRUTH, CONSTANTS) for _ in range(4)]
        assert {r.status for r in results} == {Status.EQUIVALENT}
        assert pool.replaced == 2


async def test_cancelling_a_queued_check_does_not_blame_the_one_running() -> None:
    # One worker, two checks sent to it: the running one is wrong, and whether it
    # is also too weak runs into Z3's own (soft) timeout; the check queued
    # behind it is cancelled, which retires the worker.
    limits = VerifyLimits(solver_timeout_ms=800, timeout_s=20)
    async with VerifierPool(limits, workers=1) as pool:
        results = {}

        async def running() -> None:
            results["running"] = await pool.check(HARD, TRUTH, CONSTANTS)

        async with anyio.create_task_group() as tg:
            tg.start_soon(running)
            await anyio.sleep(0.05)
            with anyio.move_on_after(0.2):
                await pool.check(GOOD, TRUTH, CONSTANTS)
        # The running check was re-sent to the replacement worker, not failed.
        assert results["running"].status is Status.NOT_EQUIVALENT, results
        assert "undecided (timeout)" in results["running"].reason
        assert pool.replaced == 1
        assert (await pool.check(GOOD, TRUTH, CONSTANTS)).status is Status.EQUIVALENT


@pytest.mark.slow
async def test_chaos_stuck_checks_among_many_never_blame_the_innocent() -> None:
    # 1 in 8 checks is stuck; all are in flight at once through pipelined workers.
    limits = VerifyLimits(timeout_s=0.5, solver_timeout_ms=60_000)
    answers = [HARD if i % 8 == 3 else GOOD for i in range(160)]
    async with VerifierPool(limits, workers=2) as pool:
        results: dict[int, Status] = {}

        async def run(i: int) -> None:
            results[i] = (await pool.check(answers[i], TRUTH, CONSTANTS)).status

        async with anyio.create_task_group() as tg:
            for i in range(len(answers)):
                tg.start_soon(run, i)
        for i, answer in enumerate(answers):
            assert results[i] is (Status.TIMEOUT if answer is HARD else Status.EQUIVALENT), i
        assert pool.replaced == answers.count(HARD)
        assert len(pool.pids) <= 2


@pytest.mark.parametrize(
    ("budget", "solver_ms"), [(10.0, 4_000), (60.0, 4_000), (5.0, 2_000), (0.5, 200)]
)
def test_a_budget_leaves_room_for_both_solver_calls(budget: float, solver_ms: int) -> None:
    limits = VerifyLimits.with_budget(budget, memory_mb=512)
    assert limits.timeout_s == budget and limits.memory_mb == 512
    assert limits.solver_timeout_ms == solver_ms
    assert 2 * limits.solver_timeout_ms < budget * 1000


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # about the worker, not the loop
async def test_sigint_to_the_process_group_does_not_kill_the_workers() -> None:
    """Ctrl-C and a Jupyter interrupt reach every process of the group: a worker that
    died of it mid-check would leave a false resource_limit verdict behind."""
    async with VerifierPool(workers=1) as pool:
        [pid] = pool.pids
        os.kill(pid, signal.SIGINT)
        result = await pool.check(GOOD, TRUTH, CONSTANTS)
        assert result.status is Status.EQUIVALENT
        assert pool.pids == (pid,) and pool.replaced == 0
