"""``aeval serve-reward`` holds against idle sockets, huge bodies and strangers (issue #46), over
real HTTP on 127.0.0.1. Each test sends the bad input and asserts the clear answer; each failed
before the change (a slot taken before the body was read, with no deadline; no token; prompt
matching on the event loop, unbounded in what it scanned).

The OpenRLHF side is OpenRLHF/OpenRLHF ``openrlhf/utils/agent.py`` (commit 04655bc3):
``SingleTurnAgentExecutor`` loads ``reward_func(queries, prompts, labels)`` from a ``.py`` path
given as the remote URL (``spec_from_file_location``), and otherwise posts with
``aiohttp.ClientSession().post(url, json=data)``, no header.
"""

from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

import aeval.reward.client
import aeval.reward.service as service
from aeval.commands.serve_reward_args import TOKEN_ENV as ARGS_TOKEN_ENV
from aeval.errors import ConfigError
from aeval.reward import EquivalenceReward
from aeval.reward.client import TOKEN_ENV, RewardClient
from aeval.reward.server import RewardServer
from aeval.reward.service import ServiceLimits, response_of

TRUTH = "(assert (and (> x 1) (< y 10)))"
LABEL = {"answer": TRUTH, "constants": "(declare-const x Int)\n(declare-const y Int)"}
PROMPT = "<|im_start|>user\nWrite the constraint.<|im_end|>\n<|im_start|>assistant\n"
GOOD = f"<think>.</think><answer>{TRUTH}</answer><|im_end|>"
WRONG = "<think>.</think><answer>(assert (> x 1))</answer><|im_end|>"


def body(response: str) -> dict[str, Any]:
    return {"query": [PROMPT + response], "prompts": [PROMPT], "labels": [LABEL]}


@pytest.fixture(scope="module")
def reward() -> Iterator[EquivalenceReward]:
    with EquivalenceReward(workers=1) as judge:
        yield judge


def port_of(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


def half_sent(url: str, declared: int = 4096) -> socket.socket:
    """A connection that sends a request head and part of its body, then waits."""
    sock = socket.create_connection(("127.0.0.1", port_of(url)), timeout=30)
    head = (f"POST /get_reward HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {declared}\r\n\r\n")  # fmt: skip
    sock.sendall(head.encode() + b'{"query": ["')
    return sock


def wait_for(url: str, key: str, value: int, client: httpx.Client) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while True:
        stats: dict[str, Any] = client.get(url.replace("/get_reward", "/stats")).json()
        if stats[key] >= value or time.monotonic() > deadline:
            return stats
        time.sleep(0.02)


# ---------------------------------------------------------------- idle clients hold no slot


@pytest.mark.parametrize(
    "idle",
    [pytest.param(40, id="40-idle"), pytest.param(300, id="300-idle", marks=pytest.mark.slow)],
)  # fmt: skip
def test_scoring_goes_on_while_half_sent_bodies_wait(reward: EquivalenceReward, idle: int) -> None:
    # Fewer slots than idle clients: before, each idle client held a slot, with no deadline,
    # and a real request waited until they left (15 s and more in the probe).
    limits = ServiceLimits(max_concurrency=min(idle - 10, 256), read_timeout_s=60)
    with RewardServer(reward, limits=limits) as server, httpx.Client(timeout=30) as client:
        assert client.post(server.url, json=body(WRONG)).json()["rewards"] == [0.0]  # warm
        sockets = [half_sent(server.url) for _ in range(idle)]
        try:
            stats = wait_for(server.url, "reading", idle, client)
            assert (stats["reading"], stats["in_flight"]) == (idle, 0)
            started = time.monotonic()
            reply = client.post(server.url, json=body(GOOD), timeout=2)
            took = time.monotonic() - started
            assert reply.json()["rewards"] == [1.0] and took < 2
        finally:
            for sock in sockets:
                sock.close()


def test_a_half_sent_body_is_answered_408_at_its_deadline(reward: EquivalenceReward) -> None:
    limits = ServiceLimits(read_timeout_s=0.5)
    with RewardServer(reward, limits=limits) as server:
        sock = half_sent(server.url)
        answer = ""
        with sock:
            while part := sock.recv(65536).decode():  # until the server closes: head and body
                answer += part
        status_line, _, rest = answer.partition("\r\n")
        assert " 408 " in status_line and "connection: close" in rest.lower()
        assert (
            "did not arrive whole within 1 seconds"
            in json.loads(rest.split("\r\n\r\n")[1])["error"]
        )
        stats = httpx.get(server.url.replace("/get_reward", "/stats")).json()
        assert stats["reading"] == 0 and stats["rejected"] == 1


def test_beyond_max_reading_a_request_is_told_to_retry(reward: EquivalenceReward) -> None:
    limits = ServiceLimits(max_reading=2, read_timeout_s=30)
    with RewardServer(reward, limits=limits) as server, httpx.Client(timeout=30) as client:
        sockets = [half_sent(server.url) for _ in range(2)]
        try:
            wait_for(server.url, "reading", 2, client)
            full = client.post(server.url, json=body(GOOD))
            assert full.status_code == 503 and full.headers["retry-after"] == "1"
            assert "2 request bodies being read" in full.json()["error"]
        finally:
            for sock in sockets:
                sock.close()


# ---------------------------------------------------------------- prompt matching


def test_prompt_matching_runs_off_the_event_loop(
    reward: EquivalenceReward, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The parse is held until /health has answered: on the event loop, /health would wait.
    entered, release = threading.Event(), threading.Event()
    original = service.parse_request

    def held(raw: bytes, max_items: int) -> service.ParsedRequest:
        entered.set()
        release.wait(20)
        return original(raw, max_items)

    monkeypatch.setattr(service, "parse_request", held)
    with RewardServer(reward) as server, httpx.Client(timeout=30) as client:
        replies: list[httpx.Response] = []
        poster = threading.Thread(
            target=lambda: replies.append(client.post(server.url, json=body(GOOD)))
        )
        poster.start()
        try:
            assert entered.wait(20)
            health = httpx.get(server.url.replace("/get_reward", "/health"), timeout=5)
            assert health.json()["status"] == "ok"
        finally:
            release.set()
            poster.join(30)
        assert replies[0].json()["rewards"] == [1.0]


def crafted(blocks: int) -> tuple[str, str]:
    """A prompt and a query that match poorly: the prompt's last characters end every block,
    so each block of the query's head is a candidate end of the prompt, and each candidate
    matches for a whole block before it fails (the query's first block differs at its end)."""
    block = "a" * 1000 + "<|im_start|>assistant\n"
    prompt = block * blocks
    query = "a" * 999 + "c" + block[1000:] + block * (blocks - 1) + GOOD
    return prompt, query


def test_prompt_matching_is_bounded_in_what_it_compares(monkeypatch: pytest.MonkeyPatch) -> None:
    prompt, query = crafted(500)  # 0.5 MB each: before, 0.6 s of pure-Python matching a MB
    compared = 0
    original = service._ends_at

    def counting(prompt: str, head: str, at: int) -> tuple[bool, int]:
        nonlocal compared
        found, cost = original(prompt, head, at)
        compared += cost
        return found, cost

    monkeypatch.setattr(service, "_ends_at", counting)
    assert response_of(query, prompt) == (None, False)
    budget = service._SCAN_PER_PROMPT_CHAR * (len(prompt) + service._MIN_KEPT_CHARS)
    assert 0 < compared <= budget + 4 * len(prompt)  # the last comparison may overshoot once
    # a long prompt of real text, cut from the left, is still found under the bound
    lines = "".join(f"Step {i}: the loop keeps x below {i * 7}.\n" for i in range(20_000))
    real = f"<|im_start|>user\n{lines}<|im_end|>\n<|im_start|>assistant\n"
    compared = 0
    assert response_of(real[-3000:] + GOOD, real) == (GOOD.removesuffix("<|im_end|>"), True)
    assert compared < 4 * 3000


# ---------------------------------------------------------------- strangers


def test_with_a_token_every_route_but_health_needs_it(reward: EquivalenceReward) -> None:
    with RewardServer(reward, token="s3cret-token") as server:
        url = server.url
        missing = httpx.post(url, json=body(GOOD))
        assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
        assert "no token" in missing.json()["error"]
        wrong = httpx.post(url, json=body(GOOD), headers={"Authorization": "Bearer s3cret"})
        assert wrong.status_code == 401 and "a wrong token" in wrong.json()["error"]
        stats = url.replace("/get_reward", "/stats")
        assert httpx.get(stats).status_code == 401
        assert httpx.get(url.replace("/get_reward", "/health")).status_code == 200  # probes
        right = httpx.post(url, json=body(GOOD), headers={"Authorization": "Bearer s3cret-token"})
        assert right.json()["rewards"] == [1.0]
        # OpenRLHF's aiohttp client sends a URL's credentials as Basic: the password is the token
        in_url = url.replace("http://", "http://aeval:s3cret-token@")
        assert httpx.post(in_url, json=body(GOOD)).json()["rewards"] == [1.0]


def test_the_reward_clients_send_the_token_from_the_variable(
    reward: EquivalenceReward, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert ARGS_TOKEN_ENV == TOKEN_ENV == "AEVAL_REWARD_TOKEN"
    monkeypatch.setenv(TOKEN_ENV, "from-the-variable")
    with RewardServer(reward, token="from-the-variable") as server:
        with RewardClient(server.url) as client:
            assert client.score([PROMPT + GOOD], [PROMPT], [LABEL])["rewards"] == [1.0]
        # OpenRLHF: the function loaded from this file's path, as its executor loads it
        monkeypatch.setenv("AEVAL_REWARD_URL", server.url)
        spec = importlib.util.spec_from_file_location("reward_func", aeval.reward.client.__file__)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        reply = module.reward_func([PROMPT + WRONG], [PROMPT], [LABEL])
        assert reply["rewards"] == [0.0]
        monkeypatch.setenv(TOKEN_ENV, "not-it")
        with RewardClient(server.url) as client, pytest.raises(httpx.HTTPStatusError):
            client.score([PROMPT + GOOD], [PROMPT], [LABEL])


def test_a_loopback_service_refuses_a_foreign_host_header(reward: EquivalenceReward) -> None:
    with RewardServer(reward) as server:
        foreign = httpx.post(server.url, json=body(GOOD), headers={"host": "rebind.example"})
        assert foreign.status_code == 400 and "invalid Host header" in foreign.json()["error"]


def test_off_loopback_without_a_token_it_refuses_to_start(reward: EquivalenceReward) -> None:
    with pytest.raises(ConfigError, match=r"refusing to listen on 0\.0\.0\.0 without a token"):
        RewardServer(reward, host="0.0.0.0")
    RewardServer(reward, host="0.0.0.0", token="t")  # built, never started: no socket opened
    RewardServer(reward, host="0.0.0.0", allow_no_token=True)


def test_the_command_refuses_a_public_host_without_a_token_in_one_line() -> None:
    env = {k: v for k, v in __import__("os").environ.items() if k != TOKEN_ENV}
    done = subprocess.run(
        [sys.executable, "-m", "aeval", "serve-reward", "--host", "0.0.0.0", "--port", "0"],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "aeval: error: serve-reward: refusing to listen on 0.0.0.0 without a token: set "
        "AEVAL_REWARD_TOKEN or --token-file FILE (or say --no-auth)"
    ]
