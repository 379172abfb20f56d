"""OpenRLHF's remote reward, as its current source calls ``aeval serve-reward``.

OpenRLHF/OpenRLHF at 3c3be6234e0cb353e76bb8019947db9dfe99fca7:

- ``openrlhf/utils/agent.py`` ``SingleTurnAgentExecutor.execute``: the prompt is tokenized and,
  when longer than ``max_length - max_tokens``, cut from the left
  (``prompt_token_ids[-max_prompt_length:]``); the query is
  ``decode(prompt_token_ids + action_token_ids, skip_special_tokens=False)``; one request per
  sample, ``{"query": [query], "prompts": [prompt], "labels": [label]}`` with the *whole* prompt;
  ``rewards``, ``scores`` and ``extra_logs`` are read back. ``_post_request`` retries any
  ``aiohttp.ClientError`` (4xx and 5xx alike, ``raise_for_status``) five times a second apart,
  then raises; ``execute`` logs it and leaves the sample's reward ``None``.
- ``openrlhf/trainer/ppo_utils/samples_generator.py`` ``_process_response_into_experience``: each
  ``extra_logs`` value becomes ``info[key] = torch.tensor([value])`` (numbers only);
- ``openrlhf/trainer/ppo_utils/experience.py``: ``Experience.concat_experiences`` merges ``info``
  key by key over the samples that have each key, and ``split_experience_batch`` raises
  ``ValueError`` when a key's length is not the batch size.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import polars as pl
import pytest

from aeval.prompts import messages
from aeval.reward import EquivalenceReward
from aeval.reward.server import RewardServer
from aeval.reward.service import ServiceLimits, response_of

TRUTH = "(assert (and (> x 1) (< y 10)))"
CONSTANTS = "(declare-const x Int)\n(declare-const y Int)\n(declare-const z Int)"
LABEL = {"answer": TRUTH, "constants": CONSTANTS}
BENCHMARK = pl.read_parquet("tests/data/warp-benchmark.parquet")
NO_ANSWER = "<think>I cannot tell.</think><|im_end|>"


def chatml(question: str) -> str:
    """The prompt after a ChatML chat template (Qwen's), with the generation header."""
    turns = "".join(
        f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages(question)
    )
    return turns + "<|im_start|>assistant\n"


def answered(truth: str) -> str:
    return f"<think>.</think><answer>{truth}</answer><|im_end|>"


def cut_from_left(prompt: str, keep: int, garble: bool) -> str:
    """What decoding a left-cut prompt gives: its last ``keep`` characters, the first of them
    garbled when the cut went through a multi-byte character."""
    kept = prompt[-keep:]
    return "\ufffd" + kept[1:] if garble else kept


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, str]]:
    with (
        EquivalenceReward(workers=2) as strict,
        EquivalenceReward(workers=2, reading="lenient") as lenient,
        RewardServer(strict) as s,
        RewardServer(lenient) as l_,
    ):
        yield {"strict": s.url, "lenient": l_.url}


def post_one(client: httpx.Client, url: str, query: str, prompt: str, label: Any) -> dict[str, Any]:
    """One sample's request, as the single-turn executor sends it."""
    reply = client.post(url, json={"query": [query], "prompts": [prompt], "labels": [label]})
    assert reply.status_code == 200, reply.text
    return reply.json()


def test_every_row_left_truncated_finds_its_response_never_the_example() -> None:
    # All 671 rows, cut at several places (inside the instruction before its <answer> example,
    # after it, inside the chat template's header), the cut's first character garbled or not.
    for row in BENCHMARK.iter_rows(named=True):
        prompt = chatml(row["question"])
        example = prompt.rindex("<answer>")
        for keep in (len(prompt) - example + 40, len(prompt) - example - 5, 30, 23):
            for garble in (False, True):
                head = cut_from_left(prompt, keep, garble)
                for response in (answered(row["answer"]), NO_ANSWER):
                    found, seen = response_of(head + response, prompt)
                    assert seen and found == response.removesuffix("<|im_end|>"), (keep, garble)
        # The whole prompt, as before.
        assert response_of(prompt + NO_ANSWER, prompt) == ("<think>I cannot tell.</think>", True)
    # A query that holds no end of its prompt is not an answer (nor is the example in it).
    assert response_of("unrelated " + answered(TRUTH), chatml("q")) == (None, False)


@pytest.mark.parametrize("reading", ["strict", "lenient"])
def test_left_truncated_queries_over_http_score_the_response(
    servers: dict[str, str], reading: str
) -> None:
    url = servers[reading]
    # Every row without an answer scores 0 under both readings (today, leniently, 47 rows
    # scored 1.0 from the instruction's example); a correct answer scores 1.0 strictly.
    queries, prompts, labels, expected = [], [], [], []
    for k, row in enumerate(BENCHMARK.iter_rows(named=True)):
        prompt = chatml(row["question"])
        head = cut_from_left(prompt, len(prompt) - prompt.rindex("<answer>") + 40, k % 2 == 1)
        label = {"answer": row["answer"], "constants": row["constants"]}
        queries.append(head + NO_ANSWER)
        prompts.append(prompt)
        labels.append(label)
        expected.append(0.0)
        if k % 8 == 0:  # a correct answer on every eighth row
            queries.append(head + answered(row["answer"]))
            prompts.append(prompt)
            labels.append(label)
            expected.append(1.0)
    reply = httpx.post(
        url, json={"query": queries, "prompts": prompts, "labels": labels}, timeout=300
    )
    assert reply.status_code == 200, reply.text
    got = reply.json()
    assert got["rewards"] == expected
    assert got["extra_logs"]["prompt_not_found"] == [0.0] * len(expected)


def merge_and_split(replies: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """OpenRLHF's handling of ``extra_logs``: one ``info`` per sample, merged key by key over
    the samples that have the key, then split back: every key must have one value per sample."""
    infos = [dict(reply["extra_logs"]) for reply in replies]
    for info in infos:
        for value in info.values():
            assert isinstance(value, list) and all(isinstance(v, int | float) for v in value)
    merged: dict[str, list[Any]] = {}
    for info in infos:
        for key, value in info.items():
            merged.setdefault(key, []).extend(value)
    for key, values in merged.items():
        if len(values) != len(replies):
            raise ValueError(f"Size of info[{key}] ({len(values)}) does not match batch_size")
    return merged


def test_a_mixed_batch_of_samples_merges_and_splits(servers: dict[str, str]) -> None:
    prompt = chatml("What is the constraint for N=28?")
    with httpx.Client(timeout=60) as client:
        url = servers["strict"]
        replies = [
            post_one(client, url, prompt + answered(TRUTH), prompt, LABEL),  # found, correct
            post_one(client, url, "elsewhere " + answered(TRUTH), prompt, LABEL),  # not found
            post_one(client, url, prompt + answered(TRUTH), prompt, {"answer": TRUTH}),  # bad
            post_one(client, url, prompt[-40:] + answered(TRUTH), prompt, LABEL),  # cut
        ]
    merged = merge_and_split(replies)
    assert merged["correct"] == [1.0, 0.0, 0.0, 1.0]
    assert merged["prompt_not_found"] == [0.0, 1.0, 0.0, 0.0]
    assert merged["bad_label"] == [0.0, 0.0, 1.0, 0.0]
    assert [r["rewards"][0] for r in replies] == [1.0, 0.0, 0.0, 1.0]


def test_a_bad_label_in_a_batch_scores_zero_with_its_reason(servers: dict[str, str]) -> None:
    prompt = chatml("q")
    bad_labels: list[Any] = [
        42,
        "(assert true)",
        {"answer": TRUTH},
        {"answer": [], "constants": ""},
    ]
    reasons = [
        "labels[1]: expected",
        "labels[2] is not valid JSON",
        "labels[3].constants: expected a string, got nothing",
        "labels[4].answer: expected a string, got list",
    ]
    labels = [LABEL, *bad_labels, LABEL]
    queries = [prompt + answered(TRUTH)] * len(labels)
    reply = httpx.post(
        servers["strict"],
        json={"query": queries, "prompts": [prompt] * len(labels), "labels": labels},
        timeout=60,
    )
    assert reply.status_code == 200, reply.text
    got = reply.json()
    assert got["rewards"] == [1.0, 0.0, 0.0, 0.0, 0.0, 1.0]
    assert got["extra_logs"]["bad_label"] == [0.0, 1.0, 1.0, 1.0, 1.0, 0.0]
    assert got["label_errors"][0] is None and got["label_errors"][5] is None
    for error, reason in zip(got["label_errors"][1:5], reasons, strict=True):
        assert reason in error
    # A malformed request is still the caller's to fix: a 4xx, naming what and where.
    reply = httpx.post(servers["strict"], json={"query": "text", "labels": []}, timeout=60)
    assert reply.status_code == 422 and "query: expected a list" in reply.json()["error"]


def raw_post_head(port: int, length: int) -> socket.socket:
    """A request whose headers are sent and whose body is not (yet)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(
        b"POST /get_reward HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {length}\r\n\r\n".encode()
    )
    return sock


def test_a_full_server_says_so_before_it_reads_and_health_stays_up() -> None:
    with (
        EquivalenceReward(workers=1) as reward,
        RewardServer(
            reward, limits=ServiceLimits(max_concurrency=1, max_waiting=0, max_reading=1)
        ) as server,
        httpx.Client(timeout=30) as client,
    ):
        port = int(server.url.split(":")[2].split("/")[0])
        stats_url = server.url.replace("/get_reward", "/stats")
        body = httpx.Request(
            "POST", server.url, json={"query": [answered(TRUTH)], "labels": [LABEL]}
        ).read()
        # admitted: it holds the only place to be read while it uploads (issue #46: never a
        # scoring slot, which a body takes only once it is read whole)
        slow = raw_post_head(port, len(body))
        slow.sendall(body[:10])
        for _ in range(600):
            if client.get(stats_url).json()["reading"] == 1:
                break
            time.sleep(0.01)
        assert client.get(stats_url).json()["reading"] == 1
        assert client.get(stats_url).json()["in_flight"] == 0
        # A 50 MB body that is never sent: a full server answers now, without reading it.
        big = raw_post_head(port, 50 * 1024 * 1024)
        head = big.recv(65536)
        assert head.startswith(b"HTTP/1.1 503") and b"retry-after: 1" in head.lower()
        big.close()
        assert client.get(server.url.replace("/get_reward", "/health")).json()["status"] == "ok"
        slow.sendall(body[10:])
        reply = b""
        while b"label_errors" not in reply:  # the head and the body may come apart
            part = slow.recv(65536)
            if not part:
                break
            reply += part
        slow.close()
        assert reply.startswith(b"HTTP/1.1 200") and b'"rewards":[1.0]' in reply


def test_a_large_batch_is_parsed_off_the_event_loop() -> None:
    with EquivalenceReward(workers=2) as reward, RewardServer(reward) as server:
        stats_url = server.url.replace("/get_reward", "/stats")
        prompt = chatml("q")
        # 512 samples with long responses: over a megabyte, as a whole step's batch is.
        queries = [prompt + " " * 3000 + answered(TRUTH)] * 512
        result: dict[str, Any] = {}

        def post() -> None:
            result["reply"] = httpx.post(
                server.url,
                json={"query": queries, "prompts": [prompt] * 512, "labels": [LABEL] * 512},
                timeout=120,
            )

        thread = threading.Thread(target=post)
        thread.start()
        health = httpx.get(server.url.replace("/get_reward", "/health"), timeout=30)
        thread.join(120)
        assert health.json()["status"] == "ok"
        assert result["reply"].json()["rewards"] == [1.0] * 512
        # A large body that is malformed says so from the worker process, as a small one does.
        bad = httpx.post(
            server.url,
            json={"query": [*queries, 7], "labels": [LABEL] * 513},
            timeout=120,
        )
        assert bad.status_code == 422 and "query[512]: expected a string" in bad.json()["error"]
        assert httpx.get(stats_url, timeout=30).json()["parsed_in_process"] == 2
