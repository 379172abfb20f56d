"""Bedrock and Vertex AI batches end to end: boto3 and google-genai / google-cloud-storage, with
their production retry settings, against aeval's control-plane stand-ins over real storage
emulators (moto's S3 server and gcp-storage-emulator, started once per session and
stopped by their PIDs).

A whole run through each adapter (upload to the bucket, create, poll, read the results the
stand-in wrote back to the bucket, verify), with results in an order of their own and a
create that fails after the job exists; an expired job and a stopped one keep what they
finished; the create call is botocore's own (its parameter validation, a Stubber); the
stand-ins answer malformed input with a 4xx. Every "paid once" is counted by listing
jobs through the SDK.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import boto3
import httpx
import polars as pl
import pytest
from botocore.stub import ANY, Stubber
from cloud_fixtures import (
    KEYS,
    REGION,
    bedrock_stand_in,
    gcs_client,
    gcs_emulator,
    s3_client,
    s3_emulator,
    vertex_stand_in,
)
from engine_helpers import FAST_POLL, FAST_RETRY, SPECS, benchmark_slice

from aeval.batch.providers.base import BatchInput, BatchTag
from aeval.batch.providers.bedrock_api import BedrockBatchProvider, encode_record_id
from aeval.batch.providers.vertex_api import VertexBatchProvider
from aeval.batch.shard import batch_line
from aeval.cloud_standins.bedrock import BedrockFaults
from aeval.cloud_standins.vertex import VertexFaults
from aeval.config import Credentials, RunConfig
from aeval.engine import Run
from aeval.local import EXPECTED_VERDICTS
from aeval.local.questions import QuestionIndex
from aeval.prompts import GenerationSettings, PromptSettings
from aeval.verify import VerifyLimits

__all__ = ["gcs_emulator", "s3_emulator"]  # the session's emulators, as fixtures here

CLAUDE = "anthropic.claude-sonnet-4-5-20250929-v1:0"
ANSWERS = {"model-a": SPECS["model-a"]}  # one synthetic model answers every name
MODELS = {"*": SPECS["model-a"]}


def expected(frame: pl.DataFrame, model: str, trials: int) -> dict[tuple[str, int, str], str]:
    """What the synthetic responder was told to say: neither stand-in knows a request's
    trial (a record or a prediction line carries none), so both trials are alike."""
    responder = SPECS["model-a"].build(QuestionIndex.from_frame(frame))
    out = {}
    for cid in frame["id"].to_list():
        intent = responder.intent(model.split("/", 1)[1], cid, trial=None)  # type: ignore[attr-defined]
        for trial in range(1, trials + 1):
            out[(model, trial, cid)] = EXPECTED_VERDICTS[intent].status.value
    return out


def _config(data: Path, tmp: Path, model: str, creds: Credentials, trials: int) -> RunConfig:
    return RunConfig(
        models=(model,), trials=trials, dataset=str(data), poll=FAST_POLL, retry=FAST_RETRY,
        limits=VerifyLimits(timeout_s=20.0), out_dir=tmp / "results", workers=2,
        credentials={model.split("/", 1)[0]: creds},
    )  # fmt: skip


def _verdicts(frame: pl.DataFrame) -> dict[tuple[str, int, str], str]:
    return {
        (r["model"], r["trial"], r["custom_id"]): r["status"] for r in frame.iter_rows(named=True)
    }


def bedrock_jobs(base_url: str) -> list[dict[str, Any]]:
    client = boto3.session.Session(
        aws_access_key_id=KEYS[0], aws_secret_access_key=KEYS[1], region_name=REGION
    ).client("bedrock", endpoint_url=base_url)
    jobs: list[dict[str, Any]] = []
    for page in client.get_paginator("list_model_invocation_jobs").paginate(maxResults=1):
        jobs += page["invocationJobSummaries"]
    return jobs


async def vertex_jobs(creds: Credentials) -> list[Any]:
    adapter = VertexBatchProvider(creds)
    try:
        pager = await adapter._client.aio.batches.list(config={"page_size": 1})
        return [job async for job in pager]
    finally:
        await adapter.aclose()


# -- whole runs ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_bedrock_run_joins_reordered_records_by_id_and_pays_once_after_a_failed_create(
    benchmark_path: Path, tmp_path: Path, s3_emulator: Any
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=8)
    model = f"bedrock/{CLAUDE}"
    faults = BedrockFaults(create_errors=1)  # a 500 after the job exists: botocore retries
    with bedrock_stand_in(s3_emulator, tmp_path, frame, MODELS, faults=faults) as (
        stand_in, creds, bucket,
    ):  # fmt: skip
        with anyio.fail_after(120):
            result = await Run(_config(data, tmp_path, model, creds, trials=2)).run()
        jobs = bedrock_jobs(stand_in.base_url)
        s3 = s3_client(s3_emulator)
        outputs = [o["Key"] for o in s3.list_objects_v2(Bucket=bucket)["Contents"]]  # type: ignore[attr-defined]
        out_key = next(k for k in outputs if k.endswith(".jsonl.out"))
        body = s3.get_object(Bucket=bucket, Key=out_key)["Body"].read()  # type: ignore[attr-defined]
    assert _verdicts(result.verdicts) == expected(frame, model, trials=2)
    assert len(jobs) == 2, "one job per shard, the failed create's retry included"
    assert {j["status"] for j in jobs} == {"Completed"}
    assert any(k.endswith("manifest.json.out") for k in outputs)
    written = [json.loads(line)["recordId"] for line in body.splitlines()]
    asked = [encode_record_id(cid) for cid in frame["id"].to_list()]
    assert sorted(written) == sorted(asked) and written != asked  # reordered, all there
    assert result.outcome == "finished"


@pytest.mark.anyio
async def test_a_vertex_run_joins_predictions_by_label_and_pays_once_after_a_failed_create(
    benchmark_path: Path, tmp_path: Path, gcs_emulator: Any
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=8)
    model = "vertex/gemini-2.5-flash"
    faults = VertexFaults(create_errors=1)  # a 500 after the job exists: aeval looks it up
    with vertex_stand_in(gcs_emulator, tmp_path, frame, MODELS, faults=faults) as (
        _, creds, bucket,
    ):  # fmt: skip
        with anyio.fail_after(120):
            result = await Run(_config(data, tmp_path, model, creds, trials=2)).run()
        jobs = await vertex_jobs(creds)
        blobs = [b.name for b in gcs_client(gcs_emulator).list_blobs(bucket)]
    assert _verdicts(result.verdicts) == expected(frame, model, trials=2)
    assert len(jobs) == 2, "one job per shard, the failed create included"
    assert any(b.endswith("/predictions.jsonl") for b in blobs)
    assert result.outcome == "finished"


@pytest.mark.anyio
@pytest.mark.parametrize("model", ["vertex/claude-sonnet-4-5", "bedrock/amazon.nova-pro-v1:0"])
async def test_the_second_family_on_each_cloud_runs_through_the_same_path(
    model: str, benchmark_path: Path, tmp_path: Path, s3_emulator: Any, gcs_emulator: Any
) -> None:
    # Claude on Vertex: {"custom_id", "request"} lines on the same batchPredictionJobs path;
    # Nova on Bedrock: the messages-v1 body in the same records.
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=4)
    if model.startswith("vertex/"):
        cm: Any = vertex_stand_in(gcs_emulator, tmp_path, frame, MODELS)
    else:
        cm = bedrock_stand_in(s3_emulator, tmp_path, frame, MODELS)
    with cm as (_, creds, _):
        with anyio.fail_after(120):
            result = await Run(_config(data, tmp_path, model, creds, trials=1)).run()
    assert _verdicts(result.verdicts) == expected(frame, model, trials=1)
    assert result.outcome == "finished"


@pytest.mark.anyio
@pytest.mark.parametrize("provider", ["bedrock", "vertex"])
async def test_an_expired_job_keeps_what_it_finished(
    provider: str, benchmark_path: Path, tmp_path: Path, s3_emulator: Any, gcs_emulator: Any
) -> None:
    data, frame = benchmark_slice(benchmark_path, tmp_path, rows=8)
    if provider == "bedrock":
        model = f"bedrock/{CLAUDE}"
        cm = bedrock_stand_in(
            s3_emulator, tmp_path, frame, MODELS, faults=BedrockFaults(expire=True)
        )
    else:
        model = "vertex/gemini-2.5-flash"
        cm = vertex_stand_in(
            gcs_emulator, tmp_path, frame, MODELS, faults=VertexFaults(expire=True)
        )
    with cm as (_, creds, _):
        with anyio.fail_after(120):
            result = await Run(_config(data, tmp_path, model, creds, trials=1)).run()
    got = _verdicts(result.verdicts)
    want = expected(frame, model, trials=1)
    kept = {k: v for k, v in got.items() if v not in ("api_error", "missing")}
    assert len(got) == 8 and len(kept) == 4, got  # half answered before the job expired
    assert all(want[k] == v for k, v in kept.items())
    assert "missing" not in got.values()  # the rest said expired, not lost


@pytest.mark.anyio
@pytest.mark.parametrize("provider", ["bedrock", "vertex"])
async def test_cancel_stops_a_job_and_keeps_what_it_finished(
    provider: str, tmp_path: Path, s3_emulator: Any, gcs_emulator: Any
) -> None:
    rows = [f"row-{i}" for i in range(6)]
    path = tmp_path / "requests.jsonl"
    if provider == "bedrock":
        from aeval.batch.providers.bedrock_spec import request_body

        model, cm = CLAUDE, bedrock_stand_in(s3_emulator, tmp_path, None, {"*": SPECS["model-a"]})
        adapter_type: Any = BedrockBatchProvider
    else:
        from aeval.batch.providers.vertex_spec import request_body  # type: ignore[assignment]

        model, cm = "gemini-2.5-flash", vertex_stand_in(gcs_emulator, tmp_path, None, MODELS)
        adapter_type = VertexBatchProvider
    body = request_body(model, "Q?", PromptSettings(), GenerationSettings())
    path.write_bytes(b"".join(batch_line(r, body) for r in rows))
    tag = BatchTag("run", f"{provider}/{model}|t1|s0", 0, requests=6, intent_at=time.time())
    with cm as (_, creds, _):
        adapter = adapter_type(creds)
        try:
            file_id = await adapter.upload(path, filename="run-cancel.jsonl")
            job = await adapter.create(BatchInput(path, file_id, 6, path.stat().st_size), tag)
            stopping = await adapter.cancel(job.id)
            assert stopping.status in ("cancelling", "cancelled")
            ended = await adapter.retrieve(job.id)
            assert (ended.status, ended.terminal) == ("cancelled", True)
            assert ended.output_file_id is not None
            async with adapter.open_lines(ended.output_file_id, tag) as lines:
                read = [json.loads(line) async for line in lines]
            again = await adapter.cancel(job.id)  # already ended: no error, as it is
            assert again.status == "cancelled"
        finally:
            await adapter.aclose()
    assert sorted(r["custom_id"] for r in read) == rows
    answered = [r for r in read if r["error"] is None]
    stopped = [r for r in read if r["error"] is not None]
    assert len(answered) == 3 and {r["error"]["code"] for r in stopped} == {"batch_cancelled"}


# -- the calls themselves ------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_bedrock_create_is_a_call_botocore_validates(tmp_path: Path) -> None:
    """The create's parameters as botocore's Stubber sees them, after botocore's own
    validation against the service model (a parameter it would refuse raises before)."""
    creds = Credentials("s", "http://127.0.0.1:9", options=(
        ("aws_access_key_id", "k"), ("region", REGION), ("s3", "s3://aeval-b/p"),
        ("role_arn", "arn:aws:iam::123456789012:role/r"), ("min_records", "1"),
        ("s3_endpoint", "http://127.0.0.1:9"),
    ))  # fmt: skip
    adapter = BedrockBatchProvider(creds)
    tag = BatchTag("20260101-000000-abcd", f"bedrock/{CLAUDE}|t1|s0", 0, requests=2)
    arn = "arn:aws:bedrock:us-east-1:123456789012:model-invocation-job/abc"
    source = BatchInput(tmp_path / "r.jsonl", "s3://aeval-b/p/r.jsonl", 2, 100)
    with Stubber(adapter._bedrock) as bedrock, Stubber(adapter._s3) as s3:
        s3.add_response("head_object", {}, {"Bucket": "aeval-b", "Key": "p/r.jsonl"})
        bedrock.add_response(
            "create_model_invocation_job",
            {"jobArn": arn},
            {
                "jobName": tag.display_name, "clientRequestToken": tag.display_name,
                "roleArn": "arn:aws:iam::123456789012:role/r", "modelId": CLAUDE,
                "inputDataConfig": {"s3InputDataConfig": {"s3Uri": "s3://aeval-b/p/r.jsonl",
                                                          "s3InputFormat": "JSONL"}},
                "outputDataConfig": {"s3OutputDataConfig": {"s3Uri": "s3://aeval-b/p/results/"}},
                "tags": ANY,
            },
        )  # fmt: skip
        bedrock.add_response(
            "get_model_invocation_job",
            {"jobArn": arn, "jobName": tag.display_name, "modelId": CLAUDE,
             "roleArn": "arn:aws:iam::123456789012:role/r", "status": "Submitted",
             "submitTime": "2026-01-01T00:00:00Z",
             "inputDataConfig": {"s3InputDataConfig": {"s3Uri": "s3://aeval-b/p/r.jsonl"}},
             "outputDataConfig": {"s3OutputDataConfig": {"s3Uri": "s3://aeval-b/p/results/"}}},
            {"jobIdentifier": arn},
        )  # fmt: skip
        remote = await adapter.create(source, tag)
        bedrock.assert_no_pending_responses()
    await adapter.aclose()
    assert (remote.id, remote.status) == (arn, "validating")


@pytest.mark.anyio
async def test_a_bedrock_job_below_the_minimum_is_refused_before_it_is_created(
    tmp_path: Path,
) -> None:
    creds = Credentials("s", "http://127.0.0.1:9", options=(
        ("aws_access_key_id", "k"), ("region", REGION), ("s3", "s3://aeval-b/p"),
        ("role_arn", "arn:aws:iam::123456789012:role/r"),
    ))  # fmt: skip
    adapter = BedrockBatchProvider(creds)  # the quota's default minimum, 100
    tag = BatchTag("run", f"bedrock/{CLAUDE}|t1|s0", 0, requests=8)
    with Stubber(adapter._bedrock) as bedrock:  # no response queued: nothing may be sent
        with pytest.raises(Exception, match="at least 100"):
            await adapter.create(BatchInput(tmp_path / "r.jsonl", "s3://aeval-b/p/r", 8, 9), tag)
        bedrock.assert_no_pending_responses()
    await adapter.aclose()


# -- hostile input -----------------------------------------------------------------------------


def test_the_stand_ins_answer_malformed_requests_with_a_4xx(
    tmp_path: Path, s3_emulator: Any, gcs_emulator: Any
) -> None:
    with bedrock_stand_in(s3_emulator, tmp_path, None, MODELS) as (bedrock, _, _):
        url = bedrock.base_url
        assert httpx.post(f"{url}/model-invocation-job", content=b"{not json").status_code == 400
        assert httpx.post(f"{url}/model-invocation-job", json=[1]).status_code == 400
        assert httpx.post(f"{url}/model-invocation-job", json={"jobName": "x"}).status_code == 400
        big = b'{"jobName": "' + b"x" * (2 * 1024 * 1024) + b'"}'
        assert httpx.post(f"{url}/model-invocation-job", content=big).status_code == 400
        missing = httpx.get(
            f"{url}/model-invocation-job/arn:aws:bedrock:x:1:model-invocation-job/n"
        )
        assert missing.status_code == 404 and missing.headers["x-amzn-ErrorType"]
        assert httpx.get(f"{url}/model-invocation-jobs?maxResults=x").status_code == 400
    with vertex_stand_in(gcs_emulator, tmp_path, None, MODELS) as (vertex, _, _):
        jobs = f"{vertex.base_url}/v1beta1/projects/p/locations/l/batchPredictionJobs"
        assert httpx.get(jobs).status_code == 401  # no token from the ADC exchange
        auth = {"Authorization": "Bearer aeval-offline-vertex-token"}
        assert httpx.post(jobs, content=b"{", headers=auth).status_code == 400
        assert httpx.post(jobs, json={"model": "m"}, headers=auth).status_code == 400
        assert httpx.get(f"{jobs}/404", headers=auth).status_code == 404
        assert httpx.get(f"{jobs}?filter=state%3D1", headers=auth).status_code == 400
        assert httpx.post(f"{vertex.base_url}/token", data={"grant_type": "x"}).status_code == 400
