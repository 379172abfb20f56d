"""The Ray backend (aeval.verify.cluster) on a real multi-node Ray cluster on loopback.

Every node on 127.0.0.1, started with ``ray.cluster_utils.Cluster``; every
process a cluster started is checked gone at the end. The default run has the
checks that need no cluster (the install hint, the address rules, the node
actor's logic, the shared connection) and one two-node cluster test: ``auto``,
shared actors, a poison chunk and a lost node. The rest share one cluster per
module (a head with no CPUs and two workers of one CPU each) and are ``slow``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import polars as pl
import pytest
from output_lines import ok_line

from aeval.errors import AevalError, ConfigError
from aeval.rescoring.rescore import rescore_files
from aeval.reward import EquivalenceReward
from aeval.verdicts import Status
from aeval.verify import VerifierPool, VerifyLimits
from aeval.verify.checker import open_checker
from aeval.verify.cluster import HOLD_CHUNKS_ENV, RayVerifierPool, resolve_address
from aeval.verify.ray_extra import RAY_INSTALL_HINT

# Every Ray cluster here starts from Ray's defaults, not from a token left in ~/.ray
# (conftest.ray_home).
pytestmark = pytest.mark.usefixtures("ray_home")

# Without it, Ray's own address detection points the nodes at the machine's
# external interface. Ray reads it when it is imported, so it is set before any
# test imports Ray, for this process and the CLI processes the tests start.
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
os.environ.update(LOOPBACK_ENV)
MODEL = "gpt-4o-mini-2024-07-18"
TRUTH = "(assert (and (> x 1) (< y 10)))"
CONSTANTS = "(declare-const x Int)\n(declare-const y Int)\n(declare-const z Int)"
GOOD = f"<answer>{TRUTH}</answer>"
RESCORE = [sys.executable, "-m", "aeval", "rescore", "--dataset"]
# Sum of three cubes = 33: Z3 cannot finish this in any sane time.
HARD = "<answer>(assert (= (+ (* x x x) (* y y y) (* z z z)) 33))</answer>"
# Bit-blasting 20-million-bit vectors: Z3 runs into the worker's memory cap.
MEMORY_BOMB = (
    "<answer>(assert (bvult ((_ int2bv 20000000) x) ((_ int2bv 20000000) (+ x 1))))</answer>"
)


# -- no cluster needed (default run) -------------------------------------------------------


def _aeval_without_ray(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """The CLI in a process where ``import ray`` fails, as on a machine without the extra."""
    code = "import sys; sys.modules['ray'] = None; from aeval.cli import main; sys.exit(main())"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )


def test_ray_flag_without_ray_says_how_to_install_it(tmp_path: Path) -> None:
    answers = tmp_path / "out.jsonl"
    answers.write_text(ok_line("0", GOOD, MODEL) + "\n")
    out = tmp_path / "rescored"
    proc = _aeval_without_ray(
        ["rescore", "--dataset", "x.parquet", "--out", str(out), "--ray", "auto", str(answers)],
        tmp_path,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [f"aeval: error: {RAY_INSTALL_HINT}"]
    assert not out.exists()  # said before anything was read or written
    run = _aeval_without_ray(["run", "--out", str(tmp_path / "runs"), "--ray", "auto"], tmp_path)
    assert run.returncode == 2 and run.stderr.strip().splitlines()[-1] == (
        f"aeval: error: {RAY_INSTALL_HINT}"
    )
    assert not (tmp_path / "runs").exists()


def test_auto_is_the_connection_else_what_rays_own_auto_finds(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from ray._private import services

    monkeypatch.setenv("RAY_ADDRESS", "10.0.0.5:6379")
    assert resolve_address("auto", connected=False) == "10.0.0.5:6379"
    assert resolve_address("auto", connected=True) is None  # the connection this process has
    assert resolve_address(" 127.0.0.1:7000 ", connected=False) == "127.0.0.1:7000"
    monkeypatch.delenv("RAY_ADDRESS")
    # What `ray start` records for a later `ray.init(address="auto")`: the file
    # ray_current_cluster in Ray's temp dir (ray._private.utils.write_ray_address, Ray 2.60.0).
    monkeypatch.setenv("RAY_TMPDIR", str(tmp_path))
    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "ray_current_cluster").write_text("127.0.0.1:6380\n")
    # Ray's own answer (it prefers a cluster whose processes it sees here when only one
    # runs: another cluster on this shared machine can be that one).
    assert resolve_address("auto", connected=False) == services.canonicalize_bootstrap_address(
        "auto"
    )
    if not services.find_gcs_addresses():
        assert str(resolve_address("auto", connected=False)).endswith(":6380")
        (tmp_path / "ray" / "ray_current_cluster").unlink()
        with pytest.raises(ConfigError, match="no Ray cluster found"):
            resolve_address("auto", connected=False)
    with pytest.raises(ConfigError, match="needs a cluster address"):
        resolve_address("", connected=False)


@pytest.mark.anyio
async def test_the_node_actor_serves_every_pool_until_the_last_leaves_and_keeps_errors_apart() -> (
    None
):
    """NodeVerifier's own logic, in this process: attach/release counting, and a request
    whose check raises gets its error in its place while its peers get their verdicts."""
    from aeval.verify.cluster import NodeVerifier, _Raised
    from aeval.verify.worker import CHECK

    actor = NodeVerifier(VerifyLimits(), 1, False)
    assert await actor.attach() == 1 and await actor.attach() == 1  # two pools, one pool
    good = (CHECK, GOOD, TRUTH, CONSTANTS, True)
    results = await actor.check_chunk([good, (CHECK, GOOD, TRUTH), good])  # one malformed
    assert [r.status for r in (results[0], results[2])] == [Status.EQUIVALENT] * 2
    assert isinstance(results[1], _Raised) and isinstance(results[1].error, ValueError)
    _, _, workers = await actor.pids()
    assert await actor.release() == 1 and all(_alive(p) for p in workers)
    assert await actor.release() == 0  # the last pool out kills the workers
    assert not [p for p in workers if _alive(p)]
    assert await actor.attach() == 0  # closing: a pool asks for the node's actor again


class _WatchedLock:
    """A lock that says when a thread has to wait for it."""

    def __init__(self, waiting: threading.Event) -> None:
        self._lock = threading.Lock()
        self._waiting = waiting

    def __enter__(self) -> None:
        if not self._lock.acquire(blocking=False):
            self._waiting.set()
            self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


class _RecordingRay:
    """The three calls the connection makes of Ray (``is_initialized``, ``init``,
    ``shutdown``), recording whether each came while a shutdown was under way; the
    shutdown holds until the test lets it end."""

    def __init__(self, progressed: threading.Event) -> None:
        self.connected = False
        self.closing = False
        self.calls: list[tuple[str, bool]] = []
        self.shutting_down = threading.Event()
        self.finish = threading.Event()
        self._progressed = progressed

    def is_initialized(self) -> bool:
        self.calls.append(("is_initialized", self.closing))
        if self.closing:
            self._progressed.set()
        return self.connected

    def init(self, **_: object) -> None:
        self.calls.append(("init", self.closing))
        self.connected = True

    def shutdown(self) -> None:
        self.calls.append(("shutdown", self.closing))
        self.closing = True
        self.shutting_down.set()
        self.finish.wait()
        self.connected = self.closing = False


def test_a_pool_joining_while_the_last_one_leaves_connects_anew_after_the_shutdown() -> None:
    from aeval.verify.cluster import _AevalConnection

    progressed = threading.Event()  # the joiner waits for the lock, or went past it
    ray = _RecordingRay(progressed)
    connection = _AevalConnection(lock=_WatchedLock(progressed))
    address = "ray://127.0.0.1:10001"  # a Ray Client address: no port probe
    assert connection.join(ray, address)
    leaving = threading.Thread(target=connection.leave, args=(ray,))
    leaving.start()
    ray.shutting_down.wait()  # the last pool's shutdown is under way
    joined: list[bool] = []
    joining = threading.Thread(target=lambda: joined.append(connection.join(ray, address)))
    joining.start()
    progressed.wait()
    ray.finish.set()
    leaving.join()
    joining.join()
    assert joined == [True]  # the joiner owns a connection of its own, to leave later
    assert ray.calls == [
        ("is_initialized", False),
        ("init", False),
        ("shutdown", False),
        ("is_initialized", False),  # asked after the shutdown ended, not during it
        ("init", False),
    ]
    assert ray.connected


@pytest.mark.anyio
async def test_an_address_nobody_listens_on_is_one_clear_error() -> None:
    port = _free_port()
    with pytest.raises(ConfigError, match=f"--ray 127.0.0.1:{port}: no Ray cluster answers"):
        async with open_checker(ray_address=f"127.0.0.1:{port}"):
            pass


@pytest.mark.anyio
async def test_leaving_an_actor_ray_can_no_longer_find_neither_fails_nor_kills_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The goodbye to a node's actor is best effort: Ray 2.20 (the floor) raises a bare
    ``Exception`` from ``.remote()`` itself for an actor it cannot find (seen in the floors
    run after the lost-node test). Leaving the pool must not fail for it, nor kill that
    handle: Ray 2.20's ray.kill of a handle it no longer knows aborts the process."""
    pool = RayVerifierPool("auto")
    killed: list[object] = []

    async def kill(handle: object) -> None:
        killed.append(handle)

    def release() -> None:
        raise Exception(  # what ray._raylet.CoreWorker.submit_actor_task raises
            "Failed to submit task to actor ActorID(ab12) due to b\"Can't find actor ab12. "
            "It might be dead or it's from a different cluster\""
        )

    handle = SimpleNamespace(release=SimpleNamespace(remote=release))
    monkeypatch.setattr(pool, "_kill", kill)
    await pool._stop_actor(handle)
    assert killed == []


# -- helpers ---------------------------------------------------------------------------------


def _free_port() -> int:
    """A loopback port that was free a moment ago (closed again: nobody listens there)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answer(kind: int, truth: str) -> str:
    return [
        f"<think>hmm</think><answer>{truth}</answer>",  # equivalent
        f"<answer>```lisp\n{truth}\n```</answer>",  # equivalent, repaired
        "<answer>(assert false)</answer>",  # not_equivalent
        f"<answer>{truth.replace('>', '>=', 1)}</answer>",  # a near miss (often wrong)
        f"<answer>{truth}\n(check-sat)</answer>",  # forbidden_command
        "no tags at all",  # no_answer
    ][kind % 6]


def write_answers(path: Path, dataset: pl.DataFrame, rows: int, shift: int) -> None:
    truths = dataset.head(rows).get_column("answer").to_list()
    ids = dataset.head(rows).get_column("id").to_list() if "id" in dataset.columns else None
    lines = [
        ok_line(str(ids[i]) if ids else str(i), _answer(i + shift, truth), MODEL)
        for i, truth in enumerate(truths)
    ]
    path.write_text("\n".join(lines) + "\n")


def _comparable(frame: pl.DataFrame) -> pl.DataFrame:
    """A verdict frame without what differs run to run even on one machine: timings, and
    which counterexample Z3 picks (it depends on what the worker solved before)."""
    timing = [c for c in frame.columns if "elapsed" in c or c.endswith("_ms")]
    return (
        frame.drop(timing)
        .with_columns(pl.col("counterexample").is_not_null())
        .sort("model", "trial", "custom_id")
    )


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _node_pids(node: Any) -> list[int]:
    return [info.process.pid for infos in node.all_processes.values() for info in infos]


def _own_ray_tmp(monkeypatch: pytest.MonkeyPatch) -> Path:
    """A Ray temp dir of the test's own, so the address file 'auto' finds is this test's
    cluster (short: Ray's socket paths must fit in 107 bytes); no connection left over."""
    import ray

    ray_tmp = Path(tempfile.mkdtemp(prefix="aeval-ray-", dir="/tmp"))
    monkeypatch.setenv("RAY_TMPDIR", str(ray_tmp))
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    if ray.is_initialized():
        ray.shutdown()
    return ray_tmp


# -- two nodes, in the default run ----------------------------------------------------------

# What a node costs to start, cut to what these tests use: no dashboard, no autoscaler
# monitor, no log monitor (ray._private.parameter.RayParams, Ray 2.60.0), a small object
# store (the chunks are kilobytes).
LEAN_HEAD = {
    "node_ip_address": "127.0.0.1",
    "include_dashboard": False,
    "no_monitor": True,
    "include_log_monitor": False,
    "object_store_memory": 80 * 2**20,
}
LEAN_NODE = {"num_cpus": 1, "node_ip_address": "127.0.0.1", "object_store_memory": 80 * 2**20}


class Unreadable(str):
    """An answer that pickles on the driver and cannot be unpickled on a node (as a
    ``str`` subclass from a module the node lacks): the node's call fails with the
    task's own error, while the actor stays healthy."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (int, ("not a number",))


@pytest.mark.anyio
async def test_two_loopback_nodes_auto_shared_actors_a_poison_chunk_and_a_lost_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Ray backend on every change: a head and a worker node of one CPU each."""
    import ray
    from ray.cluster_utils import Cluster

    ray_tmp = _own_ray_tmp(monkeypatch)
    # The worker node's actor holds every chunk it is sent while this file exists (a
    # switch read only in tests, off unless a node's environment names it: HOLD_CHUNKS_ENV).
    # A node's env_vars reach its raylet and the workers it starts, the actor among them
    # (ray._private.parameter.RayParams.env_vars, node.py start_raylet; Ray 2.60.0).
    gate = ray_tmp / "hold"
    held = ray_tmp / "hold.held"
    cluster = Cluster(initialize_head=True, head_node_args={**LEAN_HEAD, "num_cpus": 1})
    pids = _node_pids(cluster.head_node)
    remote: list[int] = []
    try:
        worker_node = cluster.add_node(**LEAN_NODE, env_vars={HOLD_CHUNKS_ENV: str(gate)})
        pids += _node_pids(worker_node)
        cluster.wait_for_nodes()
        limits = VerifyLimits(timeout_s=1.0)
        # 'auto' with RAY_ADDRESS unset and no connection: the last cluster started here.
        async with RayVerifierPool("auto", limits, chunk_size=4) as pool:
            assert ray.is_initialized()
            assert sorted(pool.nodes) == sorted([cluster.head_node.node_id, worker_node.node_id])
            # A second pool of the job with the same settings uses the same actors.
            async with RayVerifierPool("auto", limits, chunk_size=4) as second:
                shared = await second.worker_pids()
                assert shared == await pool.worker_pids()
                assert (await second.check(GOOD, TRUTH, CONSTANTS)).status is Status.EQUIVALENT
            workers = await pool.worker_pids()
            assert workers == shared  # the first pool's actors outlive the second's leaving
            remote = [p for actor, _, pool_pids in workers.values() for p in (actor, *pool_pids)]

            # The happy path: both nodes verify.
            answers = [GOOD if i % 2 else f"<answer>(assert (> x {i}))</answer>" for i in range(40)]
            results: list[Any] = [None] * len(answers)

            async def one(i: int, answer: str) -> None:
                results[i] = await pool.check(answer, TRUTH, CONSTANTS)

            async with anyio.create_task_group() as tg:
                for i, answer in enumerate(answers):
                    tg.start_soon(one, i, answer)
            assert [r.status for r in results[1::2]] == [Status.EQUIVALENT] * 20
            assert {r.status for r in results[0::2]} == {Status.NOT_EQUIVALENT}
            assert set(pool.chunks_by_node) == set(pool.nodes)
            # The Ray path's verdicts are the local pool's, answer by answer (status,
            # reason, repair, direction; the counterexample Z3 picks may differ between workers).
            async with VerifierPool(limits, 1) as local:
                here = [await local.check(answer, TRUTH, CONSTANTS) for answer in answers]
            assert [(r.status, r.reason, r.repaired, r.direction) for r in results] == [
                (r.status, r.reason, r.repaired, r.direction) for r in here
            ]

            # A poison chunk: the call fails on its node with the task's own error. The
            # answer at fault gets it; its peers in the chunk their verdicts; no actor dies.
            raised: list[BaseException] = []

            async def poisoned() -> None:
                try:
                    await pool.check(Unreadable(GOOD), TRUTH, CONSTANTS)
                except AevalError as err:
                    raised.append(err)

            peers: list[Any] = [None] * 7
            async with anyio.create_task_group() as tg:
                tg.start_soon(poisoned)
                for i in range(len(peers)):
                    tg.start_soon(one_into, peers, i, pool)
            assert [p.status for p in peers] == [Status.EQUIVALENT] * 7
            assert len(raised) == 1 and "ValueError" in str(raised[0]), raised
            assert pool.chunks_lost == 0 and await pool.worker_pids() == workers

            # A lost node: from here the worker node's actor holds what it is sent, and
            # the node is removed while it holds a chunk. That chunk is sent again to the
            # head; every answer gets its one verdict, none is lost.
            gate.touch()
            before = pool.chunks_by_node.copy()
            lost_answers = [
                GOOD if i % 3 else f"<answer>(assert (> x {i}))</answer>" for i in range(24)
            ]
            again: list[Any] = [None] * len(lost_answers)
            # A verdict lost would leave its caller waiting: fail rather than hang.
            with anyio.fail_after(60):
                async with anyio.create_task_group() as tg:
                    for i, answer in enumerate(lost_answers):
                        tg.start_soon(one_into, again, i, pool, answer)
                    # Every lane was idle (an idle lane is handed the next answer sent),
                    # and 24 answers are more than the head's two lanes take (2 x 4):
                    # the worker node's lanes get some.
                    while not held.exists():
                        await anyio.sleep(0.02)
                    await anyio.to_thread.run_sync(
                        lambda: cluster.remove_node(worker_node, allow_graceful=False)
                    )
            assert [r.status for r in again] == [
                Status.EQUIVALENT if i % 3 else Status.NOT_EQUIVALENT
                for i in range(len(lost_answers))
            ]
            assert pool.chunks_lost >= 1  # the held chunk was sent again
            assert pool.nodes == (cluster.head_node.node_id,)
            # Nothing came back from the lost node; the head verified all 24.
            assert pool.chunks_by_node[worker_node.node_id] == before[worker_node.node_id]
            head_chunks = pool.chunks_by_node[cluster.head_node.node_id]
            assert head_chunks - before[cluster.head_node.node_id] >= len(lost_answers) // 4
        assert not ray.is_initialized()  # the last pool out ended aeval's connection
    finally:
        for node in cluster.worker_nodes:
            pids += _node_pids(node)
        ray.shutdown()
        cluster.shutdown()
        shutil.rmtree(ray_tmp, ignore_errors=True)
    deadline = time.monotonic() + 30
    while any(_alive(p) for p in pids + remote) and time.monotonic() < deadline:
        await anyio.sleep(0.1)
    assert not [p for p in pids + remote if _alive(p)]


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize(
    ("broken", "said"),
    [
        # the actor starts, its pool's workers cannot: the pool's own start-up error,
        # with the worker's own last line on stderr
        ("z3", "cannot start a Z3 verifier worker: ImportError: no z3 on this node ("),
        # the actor itself cannot be built there (Ray: actor_init_failed): once, not a
        # minute of asking again
        ("anyio", "no anyio on this node"),
    ],
)
async def test_a_node_that_cannot_run_the_verifier_is_named_with_its_reason_at_once(
    broken: str, said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node whose Python lacks a working package (one that fails on import, first on
    the node's PYTHONPATH): entering says which node and why, not "no node with CPUs"."""
    import ray
    from ray.cluster_utils import Cluster

    ray_tmp = _own_ray_tmp(monkeypatch)
    site = tmp_path / "site"
    (site / broken).mkdir(parents=True)
    (site / broken / "__init__.py").write_text(f'raise ImportError("no {broken} on this node")\n')
    path = os.pathsep.join([str(site), *sys.path[1:]])
    cluster = Cluster(
        initialize_head=True,
        head_node_args={**LEAN_HEAD, "num_cpus": 1, "env_vars": {"PYTHONPATH": path}},
    )
    pids = _node_pids(cluster.head_node)
    try:
        start = time.monotonic()
        with pytest.raises(AevalError) as caught:
            async with RayVerifierPool("auto", VerifyLimits(timeout_s=1.0)):
                pass
        took = time.monotonic() - start
        message = str(caught.value)
        assert cluster.head_node.node_id[:8] in message, message
        assert said in message, message
        assert "no node with CPUs" not in message
        assert took < 45, f"{took:.0f} s: the failed start was asked again"
        assert not ray.is_initialized()
    finally:
        ray.shutdown()
        cluster.shutdown()
        shutil.rmtree(ray_tmp, ignore_errors=True)
    deadline = time.monotonic() + 30
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        await anyio.sleep(0.1)
    assert not [p for p in pids if _alive(p)]


async def one_into(into: list[Any], i: int, pool: RayVerifierPool, answer: str = GOOD) -> None:
    into[i] = await pool.check(answer, TRUTH, CONSTANTS)


# -- the cluster -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    import ray
    from ray.cluster_utils import Cluster

    started = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 0, "node_ip_address": "127.0.0.1", "include_dashboard": False},
    )
    pids = _node_pids(started.head_node)
    try:
        for _ in range(2):
            node = started.add_node(num_cpus=1, node_ip_address="127.0.0.1")
            pids += _node_pids(node)
        started.wait_for_nodes()
        yield started
    finally:
        for node in started.worker_nodes:
            pids += _node_pids(node)
        ray.shutdown()
        started.shutdown()
    left = [pid for pid in set(pids) if _alive(pid)]
    assert not left, f"Ray processes still running after shutdown: {left}"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.slow
def test_rescore_on_the_cluster_gives_the_local_verdicts(
    cluster: Any, tmp_path: Path, benchmark_path: Path, dataset: pl.DataFrame
) -> None:
    files = [tmp_path / "t1_output.jsonl", tmp_path / "t2_output.jsonl"]
    for shift, path in enumerate(files):
        write_answers(path, dataset, 60, shift)
    env = {**os.environ, **LOOPBACK_ENV, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    outs = {}
    for where, extra in (("local", ["--workers", "2"]), ("ray", ["--ray", cluster.address])):
        out = tmp_path / where
        proc = subprocess.run(
            [*RESCORE, str(benchmark_path), "--out", str(out), "--quiet", *extra, *map(str, files)],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        assert proc.returncode == 0, proc.stderr
        outs[where] = pl.read_parquet(out / "verdicts.parquet")
    local, ray_frame = (_comparable(outs[w]) for w in ("local", "ray"))
    assert ray_frame.height == 120 and local.height == 120
    differ = [c for c in local.columns if not ray_frame.get_column(c).equals(local.get_column(c))]
    assert not differ, (differ, ray_frame.select(differ).head(3), local.select(differ).head(3))
    # A mix worth comparing: every kind of verdict the answers were built to get.
    assert {"equivalent", "not_equivalent", "forbidden_command", "no_answer"} <= set(
        ray_frame.get_column("status").to_list()
    )
    assert ray_frame.get_column("correct_published").null_count() == 0  # published reading too


@pytest.mark.slow
@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_checks_spread_over_every_node_and_leaving_kills_every_worker(
    cluster: Any, anyio_backend: str
) -> None:
    results: list[Any] = [None] * 200
    async with RayVerifierPool(cluster.address, chunk_size=8) as pool:
        assert len(pool.nodes) == 2  # the head has no CPUs: no actor there
        workers = await pool.worker_pids()
        remote = [pid for _, _, pool_pids in workers.values() for pid in pool_pids]
        assert len(remote) == 2  # one per node, sized to its one CPU

        async def one(i: int) -> None:
            answer = GOOD if i % 2 else f"<answer>(assert (> x {i}))</answer>"
            results[i] = await pool.check(answer, TRUTH, CONSTANTS)

        async with anyio.create_task_group() as tg:
            for i in range(len(results)):
                tg.start_soon(one, i)
        assert set(pool.chunks_by_node) == set(pool.nodes)  # both nodes did some of it
        assert sum(pool.chunks_by_node.values()) == pool.chunks_sent >= 200 // 8
    statuses = [r.status for r in results]
    assert statuses[1::2] == [Status.EQUIVALENT] * 100
    assert set(statuses[0::2]) == {Status.NOT_EQUIVALENT}
    deadline = time.monotonic() + 30
    while any(_alive(p) for p in remote) and time.monotonic() < deadline:
        await anyio.sleep(0.1)
    assert not [p for p in remote if _alive(p)]


@pytest.mark.slow
@pytest.mark.anyio
async def test_the_connection_outlives_the_pool_that_opened_it_while_another_uses_it(
    cluster: Any,
) -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()
    first_in, second_in, first_out = anyio.Event(), anyio.Event(), anyio.Event()
    verdict: list[Status] = []

    async def first() -> None:
        async with RayVerifierPool(cluster.address, chunk_size=8):  # connects this process
            first_in.set()
            await second_in.wait()
        first_out.set()  # the pool that connected has left while the other is still in

    async def second() -> None:
        await first_in.wait()
        async with RayVerifierPool(cluster.address, chunk_size=8) as pool:
            second_in.set()
            await first_out.wait()
            assert ray.is_initialized()
            verdict.append((await pool.check(GOOD, TRUTH, CONSTANTS)).status)

    async with anyio.create_task_group() as tg:
        tg.start_soon(first)
        tg.start_soon(second)
    assert verdict == [Status.EQUIVALENT]
    assert not ray.is_initialized()  # the last pool out ends the connection aeval opened


@pytest.mark.slow
@pytest.mark.anyio
async def test_hostile_answers_on_a_remote_node_are_contained_as_locally(
    cluster: Any, tmp_path: Path
) -> None:
    target = Path("/tmp") / f"aeval-ray-hostile-{uuid.uuid4().hex}"
    writes = [
        f'<answer>(set-option :regular-output-channel "{target}")\n{TRUTH}</answer>',
        f'<answer>{TRUTH}\n(set-option :diagnostic-output-channel "{target}")</answer>',
        f'<answer>(assert (> x 1))) (set-option :regular-output-channel "{target}") '
        f'(echo "pwned") (assert (< y 10)</answer>',
    ]
    # Z3's own timeout above the hard budget: only the kill on the remote node can end HARD.
    limits = VerifyLimits(timeout_s=5.0, solver_timeout_ms=60_000, memory_mb=768)
    async with open_checker(limits, published=True, ray_address=cluster.address) as pool:
        hard = await pool.check(HARD, TRUTH, CONSTANTS)
        assert hard.status is Status.TIMEOUT
        bomb = await pool.check(MEMORY_BOMB, TRUTH, CONSTANTS)
        assert bomb.status is Status.RESOURCE_LIMIT and "memory" in bomb.reason
        for answer in writes:
            check = await pool.check(answer, TRUTH, CONSTANTS)
            assert check.status is not Status.EQUIVALENT, (answer, check)
        for answer in [*writes, HARD, MEMORY_BOMB]:  # the z3 binary's reading, on the node
            published = await pool.check_published(answer, TRUTH, CONSTANTS)
            assert not published.correct, (answer, published)
        # The cluster carries on with the next answer.
        assert (await pool.check(GOOD, TRUTH, CONSTANTS)).status is Status.EQUIVALENT
        assert (await pool.check_published(GOOD, TRUTH, CONSTANTS)).correct
    assert not target.exists()


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_node_lost_mid_rescore_costs_no_verdict_and_repeats_none(
    cluster: Any, tmp_path: Path, dataset: pl.DataFrame
) -> None:
    files = [tmp_path / f"t{t}_output.jsonl" for t in (1, 2, 3)]
    for shift, path in enumerate(files):
        write_answers(path, dataset, 200, shift)
    async with VerifierPool(workers=2, published=False) as local_pool:
        local = await rescore_files(files, dataset, pool=local_pool)
    # From the 100th verdict on, the doomed node's actor holds what it is sent
    # (HOLD_CHUNKS_ENV, as in the default run's two-node test): removed holding a chunk.
    gate, held = tmp_path / "hold", tmp_path / "hold.held"
    doomed = cluster.add_node(
        num_cpus=1, node_ip_address="127.0.0.1", env_vars={HOLD_CHUNKS_ENV: str(gate)}
    )
    cluster.wait_for_nodes()
    seen = 0
    enough = anyio.Event()

    def counted(_verdict: object) -> None:
        nonlocal seen
        seen += 1
        if seen == 100:
            gate.touch()
            enough.set()

    try:
        async with RayVerifierPool(cluster.address, chunk_size=8) as pool:
            lost_node = doomed.node_id
            assert len(pool.nodes) == 3 and lost_node in pool.nodes

            async def remove_when_busy() -> None:
                await enough.wait()
                while not held.exists():
                    await anyio.sleep(0.02)
                await anyio.to_thread.run_sync(
                    lambda: cluster.remove_node(doomed, allow_graceful=False)
                )

            async with anyio.create_task_group() as tg:
                tg.start_soon(remove_when_busy)
                result = await rescore_files(files, dataset, pool=pool, on_verdict=counted)
            assert pool.chunks_lost >= 1  # chunks really were in flight on the lost node
            assert lost_node not in pool.nodes and len(pool.nodes) == 2
    finally:
        if doomed in cluster.worker_nodes:
            cluster.remove_node(doomed)
    keys = [(v.model, v.trial, v.custom_id) for v in result.verdicts]
    assert len(keys) == len(set(keys)) == 600 == seen
    assert [(v.status, v.reason) for v in result.verdicts] == [
        (v.status, v.reason) for v in local.verdicts
    ]


@pytest.mark.slow
def test_the_reward_on_the_cluster_scores_as_locally(cluster: Any) -> None:
    completions = [
        GOOD,
        f"<answer>```\n{TRUTH}\n```</answer>",
        "<answer>(assert false)</answer>",
        "nothing",
        HARD,
    ] * 6
    columns = {"answer": [TRUTH] * len(completions), "constants": [CONSTANTS] * len(completions)}
    limits = VerifyLimits.with_budget(2.0)
    with EquivalenceReward(limits=limits, workers=2) as local:
        want = local(completions=completions, **columns)
    # From a thread of its own, as a trainer calls it (the reward's loop thread connects).
    got: list[list[float]] = []
    with EquivalenceReward(limits=limits, ray_address=cluster.address) as remote:
        worker = threading.Thread(
            target=lambda: got.append(remote(completions=completions, **columns))
        )
        worker.start()
        worker.join(120)
        assert remote.worker_pids == ()  # none in this process
        stats = remote.last_stats
    assert got == [want]
    # The fenced ones are equivalent after a repair: not correct in the strict reading.
    assert stats is not None and stats.statuses["equivalent"] == 12 and stats.correct == 6


@pytest.mark.slow
def test_a_cluster_that_goes_away_stops_the_run_in_one_line_and_resume_finishes(
    cluster: Any, tmp_path: Path
) -> None:
    # A cluster of its own: this one is shut down under the run.
    from ray.cluster_utils import Cluster

    doomed = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 0, "node_ip_address": "127.0.0.1", "include_dashboard": False},
    )
    pids = _node_pids(doomed.head_node)
    pids += _node_pids(doomed.add_node(num_cpus=1, node_ip_address="127.0.0.1"))
    doomed.wait_for_nodes()
    address = doomed.address
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_KEY")}
    env.pop("OPENAI_BASE_URL", None)
    env.update(LOOPBACK_ENV, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    run_dir = tmp_path / "gone"
    base = [sys.executable, "-m", "aeval"]
    proc = subprocess.Popen(
        [*base, "run", "--out", str(tmp_path), "--run-id", "gone", "--ray", address],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        verdicts = run_dir / "verdicts.jsonl"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if verdicts.exists() and len(verdicts.read_bytes().splitlines()) >= 50:
                break
            time.sleep(0.1)
        assert proc.poll() is None, proc.communicate()
        doomed.shutdown()
        _, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        doomed.shutdown()
    assert not [pid for pid in pids if _alive(pid)]
    assert proc.returncode == 2, stderr
    last = stderr.strip().splitlines()[-1]
    assert last.startswith(f"aeval: error: the Ray cluster at {address} is gone"), stderr
    assert "resume" in last
    stored = len(verdicts.read_bytes().splitlines())
    assert 50 <= stored < 360  # stopped part-way, what it had is kept

    resumed = subprocess.run(
        [*base, "resume", str(run_dir), "--display", "plain"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr
    frame = pl.read_parquet(run_dir / "verdicts.parquet")
    assert frame.height == 360  # the demo: 3 models x 120 rows, one trial
    assert not frame.select("model", "trial", "custom_id").is_duplicated().any()
