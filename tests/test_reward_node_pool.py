"""One verifier pool per machine, shared by every reward process on it.

verl (volcengine/verl b178a3cd) starts one ``RewardLoopWorker`` Ray actor per agent-loop
worker on that worker's node (``verl/experimental/agent_loop/agent_loop.py``,
``AgentLoopWorker.__init__``; ``actor_rollout_ref.rollout.agent.num_workers`` is 8 by default in
``verl/trainer/config/rollout/rollout.yaml``): eight processes on one node, each awaiting the
custom reward function per sample. Here eight processes call ``compute_score_async`` at once,
and the machine's processes are counted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import psutil

WORKER = """
import asyncio, json, sys
from aeval.reward import compute_score_async
from aeval.reward.verl import shared_reward

TRUTH = "(assert (and (> x 1) (< y 10)))"
GT = {"answer": TRUTH, "constants": "(declare-const x Int)(declare-const y Int)"}
GOOD = f"<think>.</think><answer>{TRUTH}</answer>"

async def step():
    samples = [GOOD if k % 2 else "no answer" for k in range(16)]
    return await asyncio.gather(*(compute_score_async("warp", s, GT, {}) for s in samples))

scores = asyncio.run(step())
reward = shared_reward()
print(json.dumps({"scores": scores, "server": reward.pool_server_pid}), flush=True)
sys.stdin.readline()  # alive until the test has counted
"""


def test_eight_reward_workers_on_one_machine_start_one_pool() -> None:
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        for _ in range(8)
    ]
    server = 0
    try:
        replies = [json.loads(w.stdout.readline()) for w in workers if w.stdout is not None]
        assert len(replies) == 8
        assert all(r["scores"] == [0.0, 1.0] * 8 for r in replies)
        servers = {r["server"] for r in replies}
        assert len(servers) == 1  # every worker used the same pool server
        server = servers.pop()
        pool_dir = os.environ["AEVAL_POOL_DIR"]
        running = [
            p
            for p in psutil.process_iter(["cmdline"])
            if any("aeval.reward.node_pool" in a for a in p.info["cmdline"] or [])
            and pool_dir in " ".join(p.info["cmdline"] or [])
        ]
        assert [p.pid for p in running] == [server]
        # One pool's workers (the CPU count), in the server; none of the eight reward workers
        # has a process of its own beside it (the one that started the server is its parent).
        verifiers = psutil.Process(server).children()
        assert len(verifiers) == (os.cpu_count() or 1)
        pool = {server, *(v.pid for v in verifiers)}
        for w in workers:
            assert {c.pid for c in psutil.Process(w.pid).children(recursive=True)} <= pool
    finally:
        for w in workers:
            if w.stdin is not None:
                w.stdin.close()
        for w in workers:
            try:
                w.wait(30)
            except subprocess.TimeoutExpired:
                w.kill()
                w.wait()
        if server:
            # The server outlives its clients for a while (the next step reuses it): stopped here.
            psutil.Process(server).kill()
            psutil.Process(server).wait(10) if psutil.pid_exists(server) else None


def test_a_pool_server_that_died_is_started_again_by_the_next_call() -> None:
    from aeval.reward import EquivalenceReward

    truth, constants = "(assert (> x 1))", "(declare-const x Int)"
    good = f"<answer>{truth}</answer>"
    servers: list[int] = []
    with EquivalenceReward(workers=1, shared_pool=True) as reward:
        try:
            assert reward(completions=[good], answer=[truth], constants=[constants]) == [1.0]
            first = reward.pool_server_pid
            assert first is not None and first != os.getpid()
            servers.append(first)
            assert reward.worker_pids and all(
                psutil.Process(pid).ppid() == first for pid in reward.worker_pids
            )
            psutil.Process(first).kill()
            psutil.Process(first).wait(10)
            # The call finds the connection gone, starts a server and scores on it.
            assert reward(completions=[good], answer=[truth], constants=[constants]) == [1.0]
            second = reward.pool_server_pid
            assert second is not None and second != first
            servers.append(second)
        finally:
            reward.close()
            for pid in servers:
                if psutil.pid_exists(pid):
                    psutil.Process(pid).kill()
