"""``aeval serve-reward``: OpenRLHF's remote reward protocol over real HTTP on 127.0.0.1 —
agreement with ``aeval rescore`` item for item, hostile bodies (4xx, never 500), the size
limits, the concurrency bound, and the command itself, started and stopped by its PID."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import polars as pl
import pytest
from rescored_answers import ANSWER_KINDS, rescored

from aeval.reward import EquivalenceReward
from aeval.reward.server import RewardServer
from aeval.reward.service import ServiceLimits

TRUTH = "(assert (and (> x 1) (< y 10)))"
CONSTANTS = "(declare-const x Int)\n(declare-const y Int)\n(declare-const z Int)"
LABEL = {"answer": TRUTH, "constants": CONSTANTS}
# The evaluation's instruction shows an <answer> example: the response must be cut from the
# query, or a strict reading would see two answers.
PROMPT = "<|im_start|>user\nAnswer like <answer>(assert (> a 0))</answer>.<|im_end|>\n<|im_start|>"
GOOD = f"assistant\n<think>x above one</think><answer>{TRUTH}</answer><|im_end|>"
WRONG = "assistant\n<think>.</think><answer>(assert (> x 1))</answer><|im_end|>"
HARD = (
    "<answer>(assert (or (and (> x 1) (< y 10)) (= (+ (* x x x) (* y y y) (* z z z)) 33)))</answer>"
)


def body(responses: list[str], labels: list[Any] | None = None) -> dict[str, Any]:
    return {
        "query": [PROMPT + r for r in responses],
        "prompts": [PROMPT] * len(responses),
        "labels": labels if labels is not None else [LABEL] * len(responses),
    }


@pytest.fixture(scope="module")
def reward() -> Iterator[EquivalenceReward]:
    with EquivalenceReward(workers=2) as r:
        yield r


@pytest.fixture(scope="module")
def url(reward: EquivalenceReward) -> Iterator[str]:
    limits = ServiceLimits(max_body_bytes=1_000_000, max_items=100)
    with RewardServer(reward, limits=limits) as server:
        yield server.url


def test_scores_a_request_as_openrlhf_sends_it(url: str) -> None:
    labels = [LABEL, json.dumps(LABEL), LABEL]  # an object, or its JSON string
    reply = httpx.post(url, json=body([GOOD, GOOD, WRONG], labels), timeout=60)
    assert reply.status_code == 200
    assert reply.json() == {
        "rewards": [1.0, 1.0, 0.0],
        "scores": [1.0, 1.0, 0.0],
        "extra_logs": {
            "correct": [1.0, 1.0, 0.0],
            "undecided": [0.0, 0.0, 0.0],
            "well_formed": [1.0, 1.0, 1.0],  # the end-of-turn marker is not the model's text
            "prompt_not_found": [0.0, 0.0, 0.0],
            "bad_label": [0.0, 0.0, 0.0],
        },
        "label_errors": [None, None, None],
    }
    # OpenRLHF's single-turn executor posts one sample per request, many at once.
    with httpx.Client(timeout=60) as client:
        replies: list[dict[str, Any]] = []
        threads = [
            threading.Thread(
                target=lambda k=k: replies.append(
                    client.post(url, json=body([GOOD if k % 2 else WRONG])).json()
                )
            )
            for k in range(16)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert sorted(r["rewards"][0] for r in replies) == [0.0] * 8 + [1.0] * 8


def test_a_query_without_its_prompt_is_no_answer_and_logged(url: str) -> None:
    reply = httpx.post(
        url,
        json={"query": [GOOD], "prompts": ["another prompt"], "labels": [LABEL]},
        timeout=60,
    ).json()
    assert reply["rewards"] == [0.0]  # never scored whole: the prompt may hold an <answer>
    assert reply["extra_logs"]["prompt_not_found"] == [1.0]
    # No prompts at all: each query is the response.
    reply = httpx.post(url, json={"query": [GOOD], "labels": [LABEL]}, timeout=60).json()
    assert reply["rewards"] == [1.0] and reply["extra_logs"]["prompt_not_found"] == [0.0]


HOSTILE_BODIES: list[tuple[bytes, int, str]] = [
    (b"", 400, "not valid JSON"),
    (b"{", 400, "not valid JSON"),
    (b"\xff\xfe\x00garbage", 400, "not valid JSON"),
    (b"[" * 200_00 + b"]" * 200_00, 400, "nested too deeply"),
    (b'{"query": [], "labels": [' + b"1" * 5000 + b"]}", 400, "not valid JSON"),
    (b"null", 422, "must be a JSON object"),
    (b'[{"query": []}]', 422, "must be a JSON object"),
    (b'{"labels": []}', 422, 'no "query" list'),
    (b'{"query": []}', 422, 'no "labels" list'),
    (b'{"query": "text", "labels": []}', 422, "query: expected a list"),
    (b'{"query": ["a", 7], "labels": [{}, {}]}', 422, "query[1]: expected a string"),
    (b'{"query": ["a"], "prompts": ["p", "q"], "labels": [{}]}', 422, "prompts: 2 values"),
    (b'{"query": ["a"], "labels": []}', 422, "labels: 0 values for 1 queries"),
    (b'{"query": ["a"], "labels": {"answer": "x"}}', 422, "labels: expected a list"),
    # A bad label is its query's verdict, not the request's error: tests/test_reward_openrlhf.py.
]


@pytest.mark.parametrize(("raw", "status", "message"), HOSTILE_BODIES)
def test_malformed_bodies_get_a_4xx_naming_what_and_where(
    url: str, raw: bytes, status: int, message: str
) -> None:
    reply = httpx.post(url, content=raw, headers={"content-type": "application/json"}, timeout=60)
    assert reply.status_code == status, reply.text
    assert message in reply.json()["error"]


def test_hostile_answers_and_truths_are_verdicts_not_errors(url: str) -> None:
    answers = [
        f"<answer>(assert (> x {'9' * 50_000}))</answer>",
        "<answer>(assert " + "(not " * 20_000 + "true" + ")" * 20_001 + "</answer>",
        "<answer>(check-sat)</answer>",
        "\x00\ud800 nothing here",
        # Long runs where the end markers are looked for: linear, not quadratic.
        " " * 200_000 + "x",
        "</s>" * 50_000,
        f"<answer>{TRUTH}</answer>" + "\n<|im_end|>" * 20_000,
    ]
    bad_truth = {"answer": "(assert (> nope", "constants": "(declare-const x Int)"}
    labels = [LABEL] * len(answers) + [bad_truth]
    # json.dumps escapes the lone surrogate, as a Python client's JSON would.
    raw = json.dumps(body([*answers, GOOD], labels)).encode()
    reply = httpx.post(url, content=raw, timeout=60)
    assert reply.status_code == 200
    assert reply.json()["rewards"] == [0.0] * 6 + [1.0, 0.0]


def test_size_limits(url: str) -> None:
    big = body([GOOD + " " * 1_000_000])
    reply = httpx.post(url, json=big, timeout=60)
    assert reply.status_code == 413 and "limit" in reply.json()["error"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit holds while reading
        yield b'{"query": ["'
        for _ in range(1100):
            yield b"x" * 1000
        yield b'"], "labels": [{}]}'

    reply = httpx.post(url, content=chunks(), timeout=60)
    assert reply.status_code == 413
    reply = httpx.post(url, json=body([WRONG] * 101), timeout=60)
    assert reply.status_code == 413 and "101 queries" in reply.json()["error"]
    assert httpx.post(url, json=body([GOOD]), timeout=60).json()["rewards"] == [1.0]


def test_other_methods_and_paths(url: str) -> None:
    assert httpx.get(url, timeout=10).status_code == 405
    assert httpx.post(url.replace("/get_reward", "/nope"), json={}, timeout=10).status_code == 404
    assert httpx.get(url.replace("/get_reward", "/health"), timeout=10).json()["status"] == "ok"


def test_concurrency_is_bounded_and_a_full_queue_says_retry() -> None:
    # A check Z3 cannot decide runs to the reward's deadline: requests stay in flight.
    with (
        EquivalenceReward(workers=1, deadline_s=0.5, first_budget_s=0.1) as slow,
        RewardServer(slow, limits=ServiceLimits(max_concurrency=2, max_waiting=1)) as server,
        httpx.Client(timeout=60) as client,
    ):
        stats_url = server.url.replace("/get_reward", "/stats")
        results: list[int] = []
        threads = [
            threading.Thread(
                target=lambda: results.append(
                    client.post(server.url, json=body([HARD])).status_code
                )
            )
            for _ in range(3)
        ]
        for t in threads:
            t.start()
        for _ in range(600):  # until two are scored and one waits for a turn
            stats = client.get(stats_url).json()
            if (stats["in_flight"], stats["waiting"]) == (2, 1):
                break
            time.sleep(0.01)
        assert (stats["in_flight"], stats["waiting"]) == (2, 1)
        full = client.post(server.url, json=body([GOOD]))
        assert full.status_code == 503 and full.headers["retry-after"] == "1"
        assert "full" in full.json()["error"]
        for t in threads:
            t.join(60)
        stats = client.get(stats_url).json()
        assert results == [200, 200, 200]
        assert stats["peak_in_flight"] == 2 and stats["requests"] == 3
        assert client.post(server.url, json=body([GOOD])).json()["rewards"] == [1.0]


@pytest.mark.anyio
async def test_rewards_agree_with_rescore_item_for_item(
    dataset: pl.DataFrame, tmp_path: Path, url: str
) -> None:
    rows = dataset.head(8)
    truths, decls = rows["answer"].to_list(), rows["constants"].to_list()
    answers, verdicts = await rescored(rows, ANSWER_KINDS, tmp_path)
    made = [a for kind in answers for a in kind]
    labels = [{"answer": t, "constants": c} for t, c in zip(truths, decls, strict=True)]
    request = {
        "query": [PROMPT + a + "<|im_end|>" for a in made],
        "prompts": [PROMPT] * len(made),
        "labels": labels * len(ANSWER_KINDS),
    }
    async with httpx.AsyncClient(timeout=60) as client:
        reply = (await client.post(url, json=request)).json()
    expected = [
        1.0 if verdicts[(k + 1, str(i))].correct and not verdicts[(k + 1, str(i))].repaired else 0.0
        for k in range(len(ANSWER_KINDS))
        for i in range(rows.height)
    ]
    assert reply["rewards"] == expected and reply["scores"] == expected
    assert 0 < sum(expected) < len(expected)


def test_the_command_serves_until_stopped_by_its_pid(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "aeval", "serve-reward", "--port", "0", "--workers", "1"]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        served = proc.stdout.readline().strip()
        assert served.startswith("http://127.0.0.1:") and served.endswith("/get_reward")
        assert httpx.post(served, json=body([GOOD, WRONG]), timeout=60).json()["rewards"] == [
            1.0,
            0.0,
        ]
    finally:
        os.kill(proc.pid, signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.returncode in (0, -signal.SIGINT, 130)


def test_the_command_refuses_bad_settings_in_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "aeval", "serve-reward", "--workers", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["aeval: error: --workers must be at least 1, got 0"]
