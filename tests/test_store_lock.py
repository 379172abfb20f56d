"""The claim on a run directory: atomic between processes, released by any exit."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from aeval.errors import RunDirError
from aeval.store import RunStore
from aeval.store.lock import RunLock, holder, is_held

HOLD_S = 1.5


def _open_and_hold(run_dir: str, barrier: object, results: object) -> None:
    barrier.wait()  # type: ignore[attr-defined]
    try:
        store = RunStore.open(Path(run_dir))
    except RunDirError as err:
        results.put(("refused", str(err)))  # type: ignore[attr-defined]
        return
    results.put(("drives", os.getpid()))  # type: ignore[attr-defined]
    time.sleep(HOLD_S)  # hold it while the others try
    store.close()


def test_only_one_of_many_simultaneous_openers_drives_the_run(tmp_path: Path) -> None:
    # Eight processes released by one barrier all try to open the run at once:
    # the old read-pid/check/write lock let several through (two batches per shard).
    RunStore.create(tmp_path, "r", {}).close()
    ctx = multiprocessing.get_context("fork")
    n = 8
    barrier = ctx.Barrier(n)
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_open_and_hold, args=(str(tmp_path / "r"), barrier, results))
        for _ in range(n)
    ]
    for proc in procs:
        proc.start()
    outcomes = [results.get(timeout=60) for _ in range(n)]
    for proc in procs:
        proc.join(timeout=60)
    drivers = [pid for kind, pid in outcomes if kind == "drives"]
    assert len(drivers) == 1, outcomes
    refusals = [text for kind, text in outcomes if kind == "refused"]
    assert len(refusals) == n - 1
    assert all(f"in use by process {drivers[0]}" in text for text in refusals)


_HOLDER = """
import sys, time
from pathlib import Path
from aeval.store import RunStore
store = RunStore.open(Path(sys.argv[1]))
print("held", flush=True)
time.sleep(600)
"""


def test_a_killed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    RunStore.create(tmp_path, "r", {}).close()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(tmp_path / "r")],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        assert is_held(tmp_path / "r")
        assert holder(tmp_path / "r") == f"process {proc.pid}"
        with pytest.raises(RunDirError, match=f"in use by process {proc.pid}"):
            RunStore.open(tmp_path / "r")
    finally:
        proc.send_signal(signal.SIGKILL)  # no clean-up code runs
        proc.wait(timeout=30)
    assert (tmp_path / "r" / "run.lock").read_text()  # the dead holder's text is still there
    assert not is_held(tmp_path / "r")  # ...but the kernel released the lock
    RunStore.open(tmp_path / "r").close()


def test_a_given_lock_is_used_and_left_to_its_owner(tmp_path: Path) -> None:
    RunStore.create(tmp_path, "r", {}).close()
    with RunLock.acquire(tmp_path / "r") as lock:
        RunStore.open(tmp_path / "r", lock=lock).close()
        assert lock.held and is_held(tmp_path / "r")  # closing the store kept the caller's lock
        with pytest.raises(RunDirError, match="in use"):
            RunStore.open(tmp_path / "r")
    assert not is_held(tmp_path / "r")
    assert (tmp_path / "r" / "run.lock").read_text() == ""  # released: nobody named


def test_a_lock_where_there_is_no_directory_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RunDirError, match=r"cannot claim .*nowhere"):
        RunLock.acquire(tmp_path / "nowhere")
