"""Fault injection through the SDK, including the SDK's own retries, and its seeding."""

from __future__ import annotations

import json
import time

import httpx
import openai
import polars as pl
import pytest
from test_local_server import jsonl, wait_terminal

from aeval.errors import ConfigError
from aeval.local import FaultPlan, FaultRule, LocalBatchServer, Timing, parse_faults
from aeval.local.faults import FaultInjector


def client_for(
    server: LocalBatchServer, retries: int | None = None, timeout: float | None = None
) -> openai.OpenAI:
    """The SDK's client with its production retries and timeout, unless a test about
    one of them sets it."""
    return openai.OpenAI(
        base_url=server.base_url,
        api_key="local",
        max_retries=openai.DEFAULT_MAX_RETRIES if retries is None else retries,
        timeout=openai.DEFAULT_TIMEOUT if timeout is None else timeout,
    )


def upload(client: openai.OpenAI, dataset: pl.DataFrame, n: int = 5) -> str:
    return client.files.create(file=("in.jsonl", jsonl(dataset, n)), purpose="batch").id


def create(client: openai.OpenAI, file_id: str, metadata: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return client.batches.create(
        input_file_id=file_id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata=metadata,
    )


@pytest.mark.parametrize("status", [429, 500, 503])
def test_sdk_retries_http_errors_after_retry_after(dataset: pl.DataFrame, status: int) -> None:
    rule = FaultRule("http", endpoint="POST /v1/batches", status=status, retry_after=0.2, times=2)
    with LocalBatchServer(dataset=dataset, faults=FaultPlan((rule,))) as server:
        client = client_for(server, retries=2)
        file_id = upload(client, dataset)
        started = time.monotonic()
        batch = create(client, file_id, {"aeval_shard": "j"})
        # two refusals, each honoured for its Retry-After before the SDK tried again
        assert time.monotonic() - started >= 0.4
        assert wait_terminal(client, batch.id).status == "completed"
        counters = server.counters()
        assert counters.faults_injected == {f"http:{status}": 2}
        assert counters.batches == 1 and counters.batches_with("aeval_shard", "j") == 1


def test_http_error_shape_and_retry_after_header(dataset: pl.DataFrame) -> None:
    rule = FaultRule("http", endpoint="GET /v1/batches", status=429, retry_after=3, times=1)
    with LocalBatchServer(dataset=dataset, faults=FaultPlan((rule,))) as server:
        # The wire itself, with no SDK between: its retries would hide the refusal (how the
        # SDK reads such a body: test_quota_errors_are_429s_with_their_own_code).
        url, auth = server.base_url + "/batches", {"Authorization": "Bearer local"}
        refused = httpx.get(url, headers=auth)
        assert refused.status_code == 429 and refused.headers["retry-after"] == "3"
        assert refused.json() == {
            "error": {
                "message": "Rate limit reached for requests. Please try again later.",
                "type": "requests",
                "param": None,
                "code": "rate_limit_exceeded",
            }
        }
        assert client_for(server).batches.list().data == []  # times=1: the next call passes


def test_dropped_connection_is_retried_by_the_sdk(dataset: pl.DataFrame) -> None:
    rule = FaultRule("drop", endpoint="GET /v1/batches/*", times=1)
    with LocalBatchServer(dataset=dataset, faults=FaultPlan((rule,))) as server:
        bare = client_for(server, retries=0)
        batch = create(bare, upload(bare, dataset))
        with pytest.raises(openai.APIConnectionError):
            bare.batches.retrieve(batch.id)
        rule2 = FaultRule("drop", endpoint="GET /v1/files/*/content", times=1)
    with LocalBatchServer(dataset=dataset, faults=FaultPlan((rule2,))) as server:
        client = client_for(server, retries=2)
        batch = wait_terminal(client, create(client, upload(client, dataset)).id)
        assert batch.output_file_id is not None
        assert len(client.files.content(batch.output_file_id).text.splitlines()) == 5
        assert server.counters().faults_injected == {"drop": 1}


def test_slow_response_times_out_or_arrives_late(dataset: pl.DataFrame) -> None:
    rule = FaultRule("slow", endpoint="GET /v1/files", delay=0.5)
    with LocalBatchServer(dataset=dataset, faults=FaultPlan((rule,))) as server:
        with pytest.raises(openai.APITimeoutError):
            client_for(server, timeout=0.15).files.list()
        started = time.monotonic()
        assert client_for(server).files.list().data == []
        assert time.monotonic() - started >= 0.5


def test_token_limit_fails_only_the_matching_run(dataset: pl.DataFrame) -> None:
    rule = FaultRule("token_limit", metadata={"aeval_run": "r2"})
    with LocalBatchServer(dataset=dataset, faults=FaultPlan((rule,))) as server:
        client = client_for(server)
        file_id = upload(client, dataset)
        other = wait_terminal(client, create(client, file_id, {"aeval_run": "r1"}).id)
        hit = wait_terminal(client, create(client, file_id, {"aeval_run": "r2"}).id)
        assert other.status == "completed"
        assert hit.status == "failed" and hit.errors and hit.errors.data
        assert hit.errors.data[0].code == "token_limit_exceeded"
        assert "Enqueued token limit" in (hit.errors.data[0].message or "")


def test_batch_stuck_in_finalizing(dataset: pl.DataFrame) -> None:
    rule = FaultRule("stuck_finalizing", delay=0.6)
    with LocalBatchServer(dataset=dataset, faults=FaultPlan((rule,))) as server:
        client = client_for(server)
        file_id = upload(client, dataset)
        started = time.monotonic()
        batch = create(client, file_id)
        statuses = set()
        while batch.status != "completed":
            statuses.add(batch.status)
            time.sleep(0.05)
            batch = client.batches.retrieve(batch.id)
        assert "finalizing" in statuses and time.monotonic() - started >= 0.55


def test_a_batch_held_in_finalizing_ends_cancelled_once_cancelled(dataset: pl.DataFrame) -> None:
    # Held for 10 minutes: the cancel ends the wait (wait_terminal's 30 s bound), and
    # every request, answered before finalizing, is in the output file.
    rule = FaultRule("stuck_finalizing", delay=600.0)
    with LocalBatchServer(dataset=dataset, faults=FaultPlan((rule,))) as server:
        client = client_for(server)
        batch = create(client, upload(client, dataset))
        while batch.status != "finalizing":
            assert batch.status in ("validating", "in_progress"), batch.status
            time.sleep(0.02)
            batch = client.batches.retrieve(batch.id)
        client.batches.cancel(batch.id)
        ended = wait_terminal(client, batch.id)
        assert ended.status == "cancelled" and ended.output_file_id is not None
        output = client.files.content(ended.output_file_id).content
    lines = [json.loads(line) for line in output.splitlines()]
    assert ended.request_counts is not None and ended.request_counts.completed == 5
    assert len(lines) == 5 and {line["response"]["status_code"] for line in lines} == {200}


def test_server_side_batch_failure(dataset: pl.DataFrame) -> None:
    with LocalBatchServer(dataset=dataset, faults=FaultPlan((FaultRule("fail"),))) as server:
        client = client_for(server)
        batch = wait_terminal(client, create(client, upload(client, dataset)).id)
        assert batch.status == "failed" and batch.errors and batch.errors.data
        assert batch.errors.data[0].code == "server_error"


def fired(plan: FaultPlan, events: int, path: str = "/v1/batches") -> list[int]:
    injector = FaultInjector(plan)
    return [n for n in range(events) if injector.for_request("GET", path) is not None]


def test_faults_are_seeded_and_replay_exactly() -> None:
    rule = FaultRule("http", rate=0.3, skip=2, times=10)
    first = fired(FaultPlan((rule,), seed=7), 200)
    assert first == fired(FaultPlan((rule,), seed=7), 200)
    assert first != fired(FaultPlan((rule,), seed=8), 200)
    assert len(first) == 10 and min(first) >= 2


def test_fault_rate_over_real_requests(dataset: pl.DataFrame) -> None:
    plan = FaultPlan((FaultRule("http", endpoint="GET /v1/files", status=503, rate=0.5),), seed=3)
    expected = fired(plan, 30, path="/v1/files")
    with LocalBatchServer(dataset=dataset, faults=plan) as server:
        got = [n for n in range(30) if httpx.get(f"{server.base_url}/files").status_code == 503]
    assert got == expected and 5 < len(got) < 25


def test_parse_faults_from_command_line_values() -> None:
    plan = parse_faults(
        [
            "http@POST /v1/batches:status=503,retry_after=none,times=2;drop@/v1/files*:rate=0.5",
            "expire:fraction=0.25,model=gpt-4o*,metadata.aeval_run=r9",
        ],
        seed=4,
    )
    assert plan.seed == 4
    http, drop, expire = plan.rules
    assert (http.kind, http.endpoint, http.status, http.retry_after, http.times) == (
        "http",
        "POST /v1/batches",
        503,
        None,
        2,
    )
    assert http.matches_request("POST", "/v1/batches")
    assert not http.matches_request("GET", "/v1/batches")
    assert drop.matches_request("GET", "/v1/files/file-1/content") and drop.rate == 0.5
    assert expire.fraction == 0.25 and expire.metadata == {"aeval_run": "r9"}
    assert expire.matches_batch("gpt-4o-mini", {"aeval_run": "r9"})
    assert not expire.matches_batch("gpt-4o-mini", {"aeval_run": "r1"})
    with pytest.raises(ConfigError, match="unknown fault kind"):
        parse_faults(["explode"])
    with pytest.raises(ConfigError, match="colour"):
        parse_faults(["http:colour=red"])


def test_drop_after_acting_makes_a_naive_retry_submit_twice(dataset: pl.DataFrame) -> None:
    rule = FaultRule("drop", endpoint="POST /v1/batches", after=True, times=1)
    assert parse_faults(["drop@POST /v1/batches:after=1,times=1"]).rules == (rule,)
    with LocalBatchServer(dataset=dataset, faults=FaultPlan((rule,))) as server:
        client = client_for(server, retries=2)
        file_id = upload(client, dataset)
        create(client, file_id, {"aeval_shard": "once"})  # the SDK retried the lost response
        counters = server.counters()
        assert counters.batches == 2 and counters.batches_with("aeval_shard", "once") == 2
        listed = [
            b for b in client.batches.list() if (b.metadata or {}).get("aeval_shard") == "once"
        ]
        assert len(listed) == 2


def test_quota_errors_are_429s_with_their_own_code(dataset: pl.DataFrame) -> None:
    plan = parse_faults(["http@POST /v1/files:status=429,code=insufficient_quota,retry_after=none"])
    with LocalBatchServer(dataset=dataset, faults=plan) as server:
        with pytest.raises(openai.RateLimitError) as caught:
            upload(client_for(server), dataset)  # the SDK's own retries, all refused too
        assert caught.value.code == "insufficient_quota"
        assert "retry-after" not in caught.value.response.headers
        assert server.counters().faults_injected == {"http:429": 3}  # first try + 2 retries


def test_a_failing_cancel_answers_500_on_every_try_and_leaves_the_batch_running(
    dataset: pl.DataFrame,
) -> None:
    rule = FaultRule("cancel_fail", metadata={"aeval_shard": "stuck"})
    assert parse_faults(["cancel_fail:metadata.aeval_shard=stuck"]).rules == (rule,)
    slow = Timing(validating_s=0.2, requests_per_second=2.0)
    with LocalBatchServer(dataset=dataset, faults=FaultPlan((rule,)), timing=slow) as server:
        client = client_for(server)
        batch = create(client, upload(client, dataset), {"aeval_shard": "stuck"})
        with pytest.raises(openai.InternalServerError):
            client.batches.cancel(batch.id)
        assert client.batches.retrieve(batch.id).status in ("validating", "in_progress")
        counters = server.counters()
        assert counters.cancels == 0 and counters.faults_injected == {"cancel_fail": 3}
        other = create(client, upload(client, dataset), {"aeval_shard": "free"})
        assert client.batches.cancel(other.id).status == "cancelling"
