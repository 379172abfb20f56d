"""The RL entry points on a real two-node Ray cluster on loopback: TRL's async reward, verl's
batched ``compute_score_async`` and ``serve-reward``, each agreeing with the local pool item
for item (slow: a cluster takes seconds to start)."""

from __future__ import annotations

import asyncio
import functools
import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from aeval.reward import EquivalenceReward, compute_score_async
from aeval.reward.server import RewardServer
from aeval.reward.verl import close_shared, shared_reward

# Every Ray cluster here starts from Ray's defaults, not from a token left in ~/.ray
# (conftest.ray_home).
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ray_home")]

TRUTH = "(assert (and (> x 1) (< y 10)))"
CONSTANTS = "(declare-const x Int)\n(declare-const y Int)\n(declare-const z Int)"
ANSWERS = [
    f"<think>.</think><answer>{TRUTH}</answer>",
    "<think>.</think><answer>(assert (< y 10))\n(assert (not (<= x 1)))</answer>",
    "<think>.</think><answer>(assert (> x 1))</answer>",
    f"<think>.</think><answer>```smt2\n{TRUTH}\n```</answer>",
    "no answer at all",
    f"<answer>(assert (> x {'9' * 300_000}))</answer>",
]
EXPECTED = [1.0, 1.0, 0.0, 0.0, 0.0, 0.0]


@pytest.fixture(scope="module")
def cluster_address() -> Iterator[str]:
    # Loopback only: without this, Ray's own address detection points the nodes at the
    # machine's external interface.
    saved = os.environ.get("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 0, "node_ip_address": "127.0.0.1", "include_dashboard": False},
    )
    nodes = [cluster.head_node]
    try:
        for _ in range(2):
            nodes.append(cluster.add_node(num_cpus=1, node_ip_address="127.0.0.1"))
        cluster.wait_for_nodes()
        yield str(cluster.address)
    finally:
        pids = [p.process.pid for node in nodes for ps in node.all_processes.values() for p in ps]
        close_shared()
        ray.shutdown()
        cluster.shutdown()
        if saved is None:
            os.environ.pop("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", None)
        else:
            os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = saved
    left = [pid for pid in pids if os.path.exists(f"/proc/{pid}") and not _zombie(pid)]
    assert not left, f"Ray processes still running after shutdown: {left}"


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ", 1)[1][0] == "Z"
    except FileNotFoundError:
        return True


@pytest.fixture(scope="module")
def on_cluster(cluster_address: str) -> Iterator[EquivalenceReward]:
    with EquivalenceReward(ray_address=cluster_address, workers=1) as reward:
        yield reward


def test_trl_async_reward_on_the_cluster(on_cluster: EquivalenceReward) -> None:
    func = on_cluster.as_async()
    n = len(ANSWERS)

    async def step() -> list[list[float]]:
        columns = {"answer": [TRUTH] * n, "constants": [CONSTANTS] * n}
        return await asyncio.gather(*(func(completions=ANSWERS, **columns) for _ in range(4)))

    assert asyncio.run(step()) == [EXPECTED] * 4
    assert on_cluster.worker_pids == ()  # nothing verified in this process


def test_verl_awaits_share_chunks_on_the_cluster(cluster_address: str) -> None:
    loaded = functools.partial(compute_score_async, ray_address=cluster_address)

    def item(k: int) -> dict[str, Any]:
        return {
            "data_source": "warp",
            "solution_str": ANSWERS[k % len(ANSWERS)],
            "ground_truth": {"answer": TRUTH, "constants": CONSTANTS},
            "extra_info": {},
        }

    async def step() -> tuple[list[float], int, int]:
        scores = await asyncio.gather(*(loaded(**item(k)) for k in range(48)))
        reward = shared_reward(ray_address=cluster_address)
        batcher = reward.batcher(1024, 0.02)
        return list(scores), batcher.chunks_sent, batcher.checks_sent

    try:
        scores, chunks, checks = asyncio.run(step())
    finally:
        # Before the module's reward: the pool that connected this process to Ray
        # disconnects it when it closes, so it must be the last one on the cluster.
        close_shared()
    assert scores == [EXPECTED[k % len(ANSWERS)] for k in range(48)]
    assert (chunks, checks) == (1, 48)


def test_serve_reward_on_the_cluster_agrees_with_the_local_pool(
    on_cluster: EquivalenceReward,
) -> None:
    labels = [{"answer": TRUTH, "constants": CONSTANTS}] * len(ANSWERS)
    with RewardServer(on_cluster) as server, EquivalenceReward(workers=1) as local:
        reply = httpx.post(
            server.url, json={"query": ANSWERS, "prompts": [""] * 6, "labels": labels}, timeout=120
        )
        here = local(completions=ANSWERS, answer=[TRUTH] * 6, constants=[CONSTANTS] * 6)
    assert reply.status_code == 200
    assert reply.json()["rewards"] == here == EXPECTED


def _verifier_actors(cluster_address: str) -> set[int]:
    """Process ids of the NodeVerifier actors of this cluster (Ray titles an actor's
    process ``ray::<class>``, or ``ray::<class>.<method>`` while it runs one; its parent
    is its node's raylet, started with the cluster's address)."""
    import psutil

    found = set()
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if not (cmdline and cmdline[0].startswith("ray::NodeVerifier")):
            continue
        try:
            parent = proc.parent()
            if parent is not None and any(cluster_address in a for a in parent.cmdline()):
                found.add(proc.pid)
        except psutil.Error:
            continue
    return found


def test_reward_workers_of_a_job_share_one_verifier_actor_per_node(
    on_cluster: EquivalenceReward, cluster_address: str
) -> None:
    """verl's reward loop starts several reward workers, each a Ray actor of the
    trainer's job calling ``compute_score_async(..., ray_address="auto")``: they share
    one NodeVerifier (one pool) per node instead of starting one each."""
    import sys

    import ray
    from ray import cloudpickle

    on_cluster(completions=ANSWERS[:1], answer=[TRUTH], constants=[CONSTANTS])  # connects
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # this module, on the nodes

    @ray.remote(num_cpus=0)
    class RewardWorker:  # the call shape of verl's reward loop worker: one await per sample
        async def score(self, n: int) -> list[float]:
            from aeval.reward import compute_score_async

            return list(
                await asyncio.gather(
                    *(
                        compute_score_async(
                            "warp",
                            ANSWERS[k % len(ANSWERS)],
                            {"answer": TRUTH, "constants": CONSTANTS},
                            {},
                            ray_address="auto",
                        )
                        for k in range(n)
                    )
                )
            )

        def close(self) -> None:
            from aeval.reward.verl import close_shared

            close_shared()

    workers = [RewardWorker.remote() for _ in range(3)]
    try:
        scores = ray.get([w.score.remote(12) for w in workers], timeout=180)
        in_use = _verifier_actors(cluster_address)  # every reward worker's pool still open
        ray.get([w.close.remote() for w in workers], timeout=60)
    finally:
        for w in workers:
            ray.kill(w)
    assert scores == [[EXPECTED[k % len(ANSWERS)] for k in range(12)]] * 3
    # One per node with CPUs for the whole job (the reward workers and this process's
    # reward have the same settings), not one per reward and node.
    assert len(in_use) == 2
