"""Batch lifecycle through the SDK: validation failures, partial results, pace, counts."""

from __future__ import annotations

import json
import time

import openai
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_local_server import jsonl, request_line, wait_terminal

from aeval.local import (
    FaultPlan,
    FaultRule,
    Intent,
    Limits,
    LocalBatchServer,
    ModelSpec,
    Timing,
)
from aeval.local.simulated_batch import validate_input


def client_for(server: LocalBatchServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key="local")


def submit(client: openai.OpenAI, content: bytes, metadata: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    upload = client.files.create(file=("in.jsonl", content), purpose="batch")
    return client.batches.create(
        input_file_id=upload.id,
        endpoint="/v1/chat/completions",
        completion_window="24h",
        metadata=metadata,
    )


def lines_of(client: openai.OpenAI, file_id: str | None) -> list[dict]:  # type: ignore[type-arg]
    if file_id is None:
        return []
    return [json.loads(line) for line in client.files.content(file_id).text.splitlines()]


def good(i: int, question: str = "What is the constraint for N=3?", model: str = "m") -> dict:  # type: ignore[type-arg]
    return json.loads(request_line(f"r{i}", question, model))


def as_jsonl(items: list[object]) -> bytes:
    return "\n".join(item if isinstance(item, str) else json.dumps(item) for item in items).encode()


INVALID_FILES = {
    "invalid_json_line": ([good(0), "{not json", good(2)], 2),
    "missing_required_parameter": (
        [good(0), {k: v for k, v in good(1).items() if k != "custom_id"}],
        2,
    ),
    "invalid_url": ([good(0), {**good(1), "url": "/v1/embeddings"}], 2),
    "duplicate_custom_id": ([good(0), good(1), {**good(2), "custom_id": "r0"}], 3),
    "model_mismatch": ([good(0), good(1, model="other")], 2),
}


@pytest.mark.parametrize("code", sorted(INVALID_FILES))
def test_invalid_input_fails_the_batch_naming_code_and_line(code: str) -> None:
    items, line = INVALID_FILES[code]
    with LocalBatchServer() as server:
        client = client_for(server)
        batch = wait_terminal(client, submit(client, as_jsonl(items)).id)
        assert batch.status == "failed" and batch.failed_at is not None
        assert batch.output_file_id is None and batch.error_file_id is None
        assert batch.errors is not None and batch.errors.data
        error = batch.errors.data[0]
        assert (error.code, error.line) == (code, line)
        assert error.message


def test_too_many_requests_fails_validation() -> None:
    with LocalBatchServer(limits=Limits(max_requests=5)) as server:
        client = client_for(server)
        batch = wait_terminal(client, submit(client, as_jsonl([good(i) for i in range(6)])).id)
        assert batch.status == "failed"
        assert batch.errors and batch.errors.data
        assert [e.code for e in batch.errors.data] == ["too_many_requests"]
        assert "6 requests" in (batch.errors.data[0].message or "")


def test_unknown_model_fails_the_batch() -> None:
    with LocalBatchServer(models={"gpt-*": ModelSpec()}) as server:
        client = client_for(server)
        batch = wait_terminal(client, submit(client, as_jsonl([good(0, model="llama")])).id)
        assert batch.status == "failed"
        assert batch.errors and batch.errors.data and batch.errors.data[0].code == "model_not_found"


def test_request_counts_move_while_the_batch_runs(dataset: pl.DataFrame) -> None:
    timing = Timing(validating_s=0.2, requests_per_second=150, finalizing_s=0.2)
    with LocalBatchServer(dataset=dataset, timing=timing) as server:
        client = client_for(server)
        batch = submit(client, jsonl(dataset, 60))
        seen_status: list[str] = []
        seen_completed: set[int] = set()
        while batch.status not in ("completed", "failed"):
            seen_status.append(batch.status)
            assert batch.request_counts is not None
            seen_completed.add(batch.request_counts.completed)
            time.sleep(0.03)
            batch = client.batches.retrieve(batch.id)
        assert batch.status == "completed"
        assert [s for i, s in enumerate(seen_status) if i == 0 or seen_status[i - 1] != s] == [
            "validating",
            "in_progress",
            "finalizing",
        ]
        assert any(0 < c < 60 for c in seen_completed), seen_completed
        assert batch.in_progress_at and batch.finalizing_at and batch.completed_at
        assert batch.created_at <= batch.in_progress_at <= batch.finalizing_at <= batch.completed_at


def test_cancel_keeps_partial_results(dataset: pl.DataFrame) -> None:
    timing = Timing(requests_per_second=100)
    with LocalBatchServer(dataset=dataset, timing=timing) as server:
        client = client_for(server)
        batch = submit(client, jsonl(dataset, 300))
        while client.batches.retrieve(batch.id).request_counts.completed < 10:  # type: ignore[union-attr]
            time.sleep(0.02)
        cancelling = client.batches.cancel(batch.id)
        assert cancelling.status == "cancelling" and cancelling.cancelling_at is not None
        batch = wait_terminal(client, batch.id)
        assert batch.status == "cancelled" and batch.cancelled_at is not None
        done = lines_of(client, batch.output_file_id)
        rest = lines_of(client, batch.error_file_id)
        assert 10 <= len(done) < 300
        assert len(done) + len(rest) == 300
        assert {r["custom_id"] for r in done} | {r["custom_id"] for r in rest} == {
            f"row-{i}" for i in range(300)
        }
        assert all(r["error"]["code"] == "batch_cancelled" and r["response"] is None for r in rest)
        with pytest.raises(openai.BadRequestError, match="cancelled"):
            client.batches.cancel(batch.id)
        assert server.counters().cancels == 1


def test_cancel_while_validating_reports_every_request_cancelled(
    dataset: pl.DataFrame,
) -> None:
    with LocalBatchServer(dataset=dataset, timing=Timing(validating_s=0.5)) as server:
        client = client_for(server)
        batch = submit(client, jsonl(dataset, 30))
        assert client.batches.cancel(batch.id).status == "cancelling"
        batch = wait_terminal(client, batch.id)
        assert batch.status == "cancelled" and batch.in_progress_at is None
        assert batch.output_file_id is None
        rest = lines_of(client, batch.error_file_id)
        assert {r["custom_id"] for r in rest} == {f"row-{i}" for i in range(30)}
        assert all(r["error"]["code"] == "batch_cancelled" for r in rest)


def test_expired_half_way_keeps_partial_results(dataset: pl.DataFrame) -> None:
    faults = FaultPlan((FaultRule("expire", fraction=0.5),))
    with LocalBatchServer(dataset=dataset, faults=faults) as server:
        client = client_for(server)
        batch = wait_terminal(client, submit(client, jsonl(dataset, 40)).id)
        assert batch.status == "expired" and batch.expired_at is not None
        done = lines_of(client, batch.output_file_id)
        rest = lines_of(client, batch.error_file_id)
        assert (len(done), len(rest)) == (20, 20)
        assert all(r["error"]["code"] == "batch_expired" for r in rest)
        # the finished half is a scattered subset, not the first half of the input
        assert {r["custom_id"] for r in done} != {f"row-{i}" for i in range(20)}


def test_completion_window_expires_a_slow_batch(dataset: pl.DataFrame) -> None:
    timing = Timing(requests_per_second=50, completion_window_s=0.3)
    with LocalBatchServer(dataset=dataset, timing=timing) as server:
        client = client_for(server)
        batch = wait_terminal(client, submit(client, jsonl(dataset, 60)).id)
        assert batch.status == "expired"
        done, rest = lines_of(client, batch.output_file_id), lines_of(client, batch.error_file_id)
        assert 0 < len(done) < 60 and len(done) + len(rest) == 60


def test_batch_whose_every_request_failed_is_completed_with_only_an_error_file(
    dataset: pl.DataFrame,
) -> None:
    models = {"*": ModelSpec("synthetic", accuracy=0.0, failure_mix={Intent.HTTP_ERROR: 1.0})}
    with LocalBatchServer(dataset=dataset, models=models) as server:
        client = client_for(server)
        batch = wait_terminal(client, submit(client, jsonl(dataset, 30)).id)
        assert batch.status == "completed"
        assert batch.output_file_id is None and batch.error_file_id is not None
        assert batch.request_counts is not None
        assert (batch.request_counts.completed, batch.request_counts.failed) == (0, 30)
        errors = lines_of(client, batch.error_file_id)
        assert len(errors) == 30
        for record in errors:
            assert record["response"]["status_code"] == 500
            assert record["response"]["body"]["error"]["type"] == "server_error"


def test_enqueued_token_limit_fails_a_batch_that_would_go_over(dataset: pl.DataFrame) -> None:
    content = jsonl(dataset, 40)
    with LocalBatchServer(dataset=dataset) as server:
        client = client_for(server)
        usage = wait_terminal(client, submit(client, content).id).usage
        assert usage is not None and usage.input_tokens > 0 and usage.output_tokens > 0
        per_batch = usage.input_tokens
    limits = Limits(enqueued_tokens=int(per_batch * 1.5))
    with LocalBatchServer(
        dataset=dataset, limits=limits, timing=Timing(requests_per_second=20)
    ) as server:
        client = client_for(server)
        first = submit(client, content)
        while client.batches.retrieve(first.id).status != "in_progress":
            time.sleep(0.02)
        second = wait_terminal(client, submit(client, content).id)
        assert second.status == "failed" and second.errors and second.errors.data
        assert second.errors.data[0].code == "token_limit_exceeded"
        assert wait_terminal(client, first.id).status == "completed"
        # once the first batch is done, its tokens are no longer enqueued
        assert wait_terminal(client, submit(client, content).id).status == "completed"


line_items = st.one_of(
    st.builds(lambda i: json.dumps(good(i)), st.integers(0, 5)),
    st.builds(
        lambda i, key: json.dumps({k: v for k, v in good(i).items() if k != key}),
        st.integers(0, 5),
        st.sampled_from(["custom_id", "method", "url", "body"]),
    ),
    st.builds(
        lambda d: json.dumps({**good(0), "body": d}),
        st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
    ),
    st.builds(
        json.dumps,
        st.recursive(
            st.none() | st.integers() | st.text(max_size=5),
            lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=4), c, max_size=3),
            max_leaves=6,
        ),
    ),
    st.text(max_size=40),
)


@settings(max_examples=150, deadline=None)
@given(st.lists(line_items, max_size=8), st.binary(max_size=30))
def test_validation_never_raises_on_hostile_input(
    tmp_path_factory: pytest.TempPathFactory, lines: list[str], junk: bytes
) -> None:
    path = tmp_path_factory.mktemp("v") / "in.jsonl"
    content = "\n".join(lines).encode() + b"\n" + junk
    path.write_bytes(content)
    result = validate_input(path, "/v1/chat/completions", Limits().requests("openai"))
    assert result.total >= 0
    for error in result.errors:
        assert error["code"] and error["message"]
        assert error["line"] is None or 1 <= error["line"] <= content.count(b"\n") + 1
    if not result.errors:
        assert result.model is not None and result.total > 0
