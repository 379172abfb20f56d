"""Amazon Bedrock batch inference through boto3 (``bedrock`` and ``s3`` clients).

A shard's request file becomes one JSONL object of records ``{"recordId",
"modelInput"}`` under the run's S3 prefix, and one model invocation job
(``CreateModelInvocationJob``) reads it and writes ``<input name>.out`` and
``manifest.json.out`` under ``<output prefix>/<job id>/`` ("View the results of a
batch inference job",
https://docs.aws.amazon.com/bedrock/latest/userguide/batch-inference-results.html).
Every call's shape is botocore's own service model for ``bedrock`` (the fixtures in
tests/conformance/bedrock/ are taken from it); boto3 validates every call's
parameters against it before anything is sent.

- **recordId**: the request's ``custom_id``, hex-encoded (Bedrock documents a record id
  as an "alphanumeric string"; aeval's ids may hold ``-`` or ``_``), and decoded on the
  way back: the output "is not guaranteed to match the order of records in the input"
  (the page above), so each result is joined to its row by its record id alone.
- **Never paying twice**: the job is named ``aeval-<digest>`` (run, shard, attempt:
  :attr:`~aeval.batch.providers.base.BatchTag.digest`) and created with that name as its
  ``clientRequestToken`` too ("If this token matches a previous request, Amazon Bedrock
  ignores the request, but does not return an error": botocore's documentation of the
  parameter), so botocore's own retries of a lost create cannot start a second job, and
  a create whose response never arrived is found again by ``ListModelInvocationJobs``
  with ``nameContains``. The job also carries the run and digest as tags.
- **What a job finished is kept**: Completed, PartiallyCompleted, Expired, Stopped and
  Failed jobs are all read; a record with no result in an Expired or Stopped job is
  reported as ``batch_expired`` / ``batch_cancelled`` (read from the input object), not
  lost silently.
- **Limits** (:mod:`aeval.batch.providers.bedrock_limits`): a job below the minimum
  record count, or over the record or size limits, is refused before it is created,
  naming the limit. The offline stand-in states its own minimum (option
  ``min_records``).

boto3 is synchronous: each call runs in a worker thread (clients are thread-safe).
botocore's retries stay on (``standard`` mode, ``RetrySettings.sdk_max_retries`` + 1
attempts, as every other adapter gives its SDK).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import anyio.to_thread
import boto3
import botocore.config
import botocore.exceptions

from aeval.api_settings import Credentials, RetrySettings
from aeval.batch.providers.base import BatchInput, BatchTag, RemoteBatch, RemoteBatchError
from aeval.batch.providers.bedrock_limits import (
    MAX_FILE_BYTES,
    MAX_RECORDS_PER_JOB,
    MIN_RECORDS_PER_JOB,
)
from aeval.batch.providers.bedrock_spec import family
from aeval.batch.providers.claude_messages import FINISH, claude_answer_line, is_claude_message
from aeval.batch.providers.cloud_storage import (
    StorageBatchAdapter,
    StoragePrefix,
    hex_id,
    paced,
    result_lines,
    unhex_id,
)
from aeval.batch.providers.lines import answer_line, error_line
from aeval.batch.providers.request_lines import rewritten
from aeval.batch.providers.sdk_errors import guard_lines, http_failure
from aeval.batch.transient import TransientApiError
from aeval.errors import ApiError
from aeval.model_names import parse_model

__all__ = ["BedrockBatchProvider", "decode_record_id", "encode_record_id", "result_line"]

T = TypeVar("T")

_NO_PREFIX = (
    "bedrock/ models need an S3 prefix for the records and results: "
    "--bedrock-s3 s3://BUCKET/PREFIX (or AEVAL_BEDROCK_S3)"
)
_CHECK = (
    "the AWS credentials (AWS_ACCESS_KEY_ID / AWS_PROFILE), AWS_REGION, "
    "--bedrock-role-arn (AEVAL_BEDROCK_ROLE_ARN) and AWS_ENDPOINT_URL_BEDROCK"
)
# botocore's bedrock service model, ModelInvocationJobStatus -> aeval's (OpenAI's) words.
STATES: dict[str, str] = {
    "Submitted": "validating",
    "Validating": "validating",
    "Scheduled": "validating",
    "InProgress": "in_progress",
    "Completed": "completed",
    "PartiallyCompleted": "completed",
    "Failed": "failed",
    "Stopping": "cancelling",
    "Stopped": "cancelled",
    "Expired": "expired",
}
# A record's errorCode (an HTTP status) -> aeval's error code.
_ERROR_CODES = {
    400: "invalid_request",
    403: "permission_denied",
    404: "not_found",
    408: "timeout",
    424: "model_error",
    429: "rate_limit_exceeded",
    500: "server_error",
    503: "server_error",
}


def encode_record_id(custom_id: str) -> str:
    """The record id a request is sent with: its custom id as hex (alphanumeric)."""
    return hex_id(custom_id)


def decode_record_id(record_id: str) -> str | None:
    """The custom id behind a record id; ``None`` for one aeval did not write."""
    return unhex_id(record_id)


def _record(line: dict[str, Any]) -> dict[str, Any]:
    return {"recordId": encode_record_id(str(line["custom_id"])), "modelInput": line["body"]}


def _text(blocks: object) -> str | None:
    """Nova's text blocks (its reasoning blocks are not the answer)."""
    if not isinstance(blocks, list):
        return None
    parts = [
        b.get("text") for b in blocks if isinstance(b, Mapping) and "reasoningContent" not in b
    ]
    text = "".join(p for p in parts if isinstance(p, str))
    return text or None


def _answer(custom_id: str, output: Mapping[str, Any], model: str | None) -> str:
    """A ``modelOutput`` (Claude's Messages response, or Nova's) as an output line."""
    if is_claude_message(output):
        return claude_answer_line(custom_id, output, model)
    message = (output.get("output") or {}).get("message") or {}  # Nova
    raw = output.get("usage")
    usage: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    return answer_line(
        custom_id,
        text=_text(message.get("content")),
        model=model,
        finish_reason=FINISH.get(str(output.get("stopReason")), "stop"),
        prompt_tokens=int(usage.get("inputTokens") or 0),
        completion_tokens=int(usage.get("outputTokens") or 0),
    )


def result_line(raw: str | bytes, model: str | None = None) -> tuple[str | None, str | None]:
    """One ``.jsonl.out`` record as (its custom id, an OpenAI output line); ``(None,
    None)`` for a line that is not a record aeval wrote (hostile input: its row is
    then reported ``missing`` or not run)."""
    try:
        record = json.loads(raw)
    except (ValueError, RecursionError):
        return None, None
    if not isinstance(record, dict) or not isinstance(record.get("recordId"), str):
        return None, None
    custom_id = decode_record_id(record["recordId"])
    if custom_id is None:
        return None, None
    output = record.get("modelOutput")
    if isinstance(output, Mapping):
        return custom_id, _answer(custom_id, output, model)
    raw_error = record.get("error")
    error: Mapping[str, Any] = raw_error if isinstance(raw_error, Mapping) else {}
    try:
        status = int(error.get("errorCode") or 500)
    except (TypeError, ValueError):
        status = 500
    message = error.get("errorMessage")
    return custom_id, error_line(
        custom_id,
        code=_ERROR_CODES.get(status, "server_error" if status >= 500 else "invalid_request"),
        message=message if isinstance(message, str) else None,
        status_code=status,
    )


def _translate(err: Exception, what: str) -> Exception:
    if isinstance(err, botocore.exceptions.ClientError):
        info = err.response.get("Error") or {}
        status = int((err.response.get("ResponseMetadata") or {}).get("HTTPStatusCode") or 0)
        code = str(info.get("Code") or "")
        message = f"{code}: {info.get('Message') or ''}".strip(": ")
        if code in ("ThrottlingException", "ServiceUnavailableException") and status < 500:
            status = 429
        headers = (err.response.get("ResponseMetadata") or {}).get("HTTPHeaders")
        return http_failure(what, status or 500, message, headers=headers, check=_CHECK)
    if isinstance(err, botocore.exceptions.ParamValidationError):
        return ApiError(f"{what}: botocore refused the call: {err}")
    if isinstance(err, botocore.exceptions.NoCredentialsError | botocore.exceptions.NoRegionError):
        return ApiError(f"{what}: {err} — check {_CHECK}")
    if isinstance(
        err,
        botocore.exceptions.EndpointConnectionError
        | botocore.exceptions.ConnectTimeoutError
        | botocore.exceptions.ConnectionClosedError,
    ):
        connect = not isinstance(err, botocore.exceptions.ConnectionClosedError)
        return TransientApiError(f"{what}: connection problem: {err}", connection=connect)
    if isinstance(err, botocore.exceptions.ReadTimeoutError | botocore.exceptions.ConnectionError):
        return TransientApiError(f"{what}: connection problem: {err}", connection=False)
    return err


def _epoch(value: object) -> float | None:
    return value.timestamp() if isinstance(value, datetime) else None


def job_id_of(job_arn: str) -> str:
    """The job id in a job ARN (the folder Bedrock writes the job's results to)."""
    return job_arn.rsplit("/", 1)[-1]


class BedrockBatchProvider(StorageBatchAdapter):
    """Batch calls through boto3's ``bedrock`` and ``s3`` clients; one per run."""

    name = "bedrock"
    _fail = staticmethod(_translate)

    def __init__(self, credentials: Credentials, retry: RetrySettings | None = None) -> None:
        retry = retry or RetrySettings()
        self._credentials = credentials
        key_id = credentials.option("aws_access_key_id")
        session = boto3.session.Session(
            aws_access_key_id=key_id,
            aws_secret_access_key=credentials.api_key if key_id else None,
            region_name=credentials.option("region"),
        )
        config = botocore.config.Config(
            connect_timeout=min(60.0, retry.request_timeout_s),
            read_timeout=retry.request_timeout_s,
            retries={"mode": "standard", "total_max_attempts": retry.sdk_max_retries + 1},
        )
        # None: boto3's own endpoint resolution (AWS_ENDPOINT_URL_BEDROCK / _S3 honoured).
        self._bedrock = session.client("bedrock", endpoint_url=credentials.base_url, config=config)
        s3_config = config.merge(botocore.config.Config(s3={"addressing_style": "path"}))
        self._s3 = session.client(
            "s3", endpoint_url=credentials.option("s3_endpoint"), config=s3_config
        )
        self._endpoint = str(self._bedrock.meta.endpoint_url)
        self._min_records = int(credentials.option("min_records") or MIN_RECORDS_PER_JOB)
        self._storage = StoragePrefix("s3", "an S3 location", credentials.option("s3"), _NO_PREFIX)

    # -- the protocol --------------------------------------------------------------

    async def upload(self, path: Path, *, filename: str | None = None) -> str:
        name = filename or Path(path).name
        bucket, key = self._storage.key(name)
        async with rewritten(Path(path), name, _record) as converted:
            await self._call(
                f"uploading {name} to s3://{bucket}/{key}",
                lambda: self._s3.upload_file(str(converted), bucket, key),
            )
        return f"s3://{bucket}/{key}"

    async def find_files(self, filename: str) -> list[str]:
        bucket, key = self._storage.key(filename)
        listed = await self._call(
            f"listing s3://{bucket}/{key}",
            lambda: self._s3.list_objects_v2(Bucket=bucket, Prefix=key),
        )
        return [
            f"s3://{bucket}/{o['Key']}" for o in listed.get("Contents") or () if o["Key"] == key
        ]

    async def delete_file(self, file_id: str) -> None:
        if file_id.startswith("arn:"):  # a job's results: every object it wrote
            job = await self._describe(file_id)
            bucket, prefix = self._output_prefix(job)
            keys = await self._list_keys(bucket, prefix)
        else:
            bucket, key = self._storage.split(file_id)
            keys = [key]
        for key in keys:  # deleting a key that is gone is no error in S3
            await self._call(
                f"deleting s3://{bucket}/{key}",
                lambda key=key: self._s3.delete_object(Bucket=bucket, Key=key),  # type: ignore[misc]
            )

    async def create(self, source: BatchInput, tag: BatchTag) -> RemoteBatch:
        model = parse_model(tag.shard.rsplit("|", 2)[0]).name
        if family(model) is None:
            raise ApiError(f"{tag.shard}: {model} is not a model aeval writes Bedrock records for")
        self._check_limits(source, tag)
        role = self._credentials.option("role_arn")
        if not role:
            raise ApiError(
                f"{tag.shard}: a Bedrock job needs a service role it can read and write the S3 "
                "prefix with: --bedrock-role-arn arn:aws:iam::ACCOUNT:role/NAME "
                "(or AEVAL_BEDROCK_ROLE_ARN)"
            )
        if source.file_id is None:
            raise ApiError(f"{tag.shard}: Bedrock jobs need the records uploaded to S3 first")
        await self._ensure_input(source)
        bucket, prefix = self._storage.root()
        output = f"s3://{bucket}/{prefix}/results/" if prefix else f"s3://{bucket}/results/"
        name = tag.display_name
        created = await self._call(
            f"creating a Bedrock job for {tag.shard}",
            lambda: self._bedrock.create_model_invocation_job(
                jobName=name,
                clientRequestToken=name,
                roleArn=role,
                modelId=model,
                inputDataConfig={
                    "s3InputDataConfig": {"s3Uri": source.file_id, "s3InputFormat": "JSONL"}
                },
                outputDataConfig={"s3OutputDataConfig": {"s3Uri": output}},
                tags=[
                    {"key": "aeval_run", "value": tag.run_id},
                    {"key": "aeval_digest", "value": tag.digest},
                ],
            ),
        )
        return await self.retrieve(str(created["jobArn"]))

    async def _ensure_input(self, source: BatchInput) -> None:
        """Upload the records again when their object is gone (a bucket lifecycle rule,
        an emulator restarted between the upload and the create): a job over a missing
        object would fail in validation, the shard with it."""
        assert source.file_id is not None
        bucket, key = self._storage.split(source.file_id)
        try:
            await anyio.to_thread.run_sync(lambda: self._s3.head_object(Bucket=bucket, Key=key))
        except botocore.exceptions.ClientError as err:
            status = (err.response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
            if status != 404:
                raise _translate(err, f"looking up {source.file_id}") from err
            async with rewritten(source.path, key.rsplit("/", 1)[-1], _record) as converted:
                await self._call(
                    f"uploading {source.file_id} again",
                    lambda: self._s3.upload_file(str(converted), bucket, key),
                )
        except Exception as err:
            failure = _translate(err, f"looking up {source.file_id}")
            if failure is err:
                raise
            raise failure from err

    def _check_limits(self, source: BatchInput, tag: BatchTag) -> None:
        low, high = self._min_records, MAX_RECORDS_PER_JOB
        if source.requests < low:
            raise ApiError(
                f"{tag.shard}: {source.requests} records; a Bedrock batch inference job needs "
                f"at least {low} (the service quota 'Minimum number of records per batch "
                "inference job'): run more rows or trials, or use the model on demand"
            )
        if source.requests > high or source.bytes > MAX_FILE_BYTES:
            raise ApiError(
                f"{tag.shard}: {source.requests:,} records, {source.bytes:,} bytes: over one "
                f"Bedrock job's limits ({high:,} records, {MAX_FILE_BYTES:,} bytes a file); "
                "lower RunConfig.shard_limits"
            )

    async def _describe(self, job_id: str) -> Mapping[str, Any]:
        return await self._call(
            f"polling Bedrock job {job_id}",
            lambda: self._bedrock.get_model_invocation_job(jobIdentifier=job_id),
        )

    async def retrieve(self, batch_id: str) -> RemoteBatch:
        return _to_remote(await self._describe(batch_id))

    async def find(self, tag: BatchTag) -> RemoteBatch | None:
        name = tag.display_name

        def listed() -> list[Mapping[str, Any]]:
            jobs: list[Mapping[str, Any]] = []
            pages = self._bedrock.get_paginator("list_model_invocation_jobs")
            for page in pages.paginate(nameContains=name):
                jobs.extend(page.get("invocationJobSummaries") or ())
            return jobs

        jobs = await self._call("listing Bedrock jobs", listed)
        best = tag.newest_unclaimed(_to_remote(j) for j in jobs if j.get("jobName") == name)
        return None if best is None else await self.retrieve(best.id)

    async def cancel(self, batch_id: str) -> RemoteBatch:
        try:
            await self._call(
                f"stopping Bedrock job {batch_id}",
                lambda: self._bedrock.stop_model_invocation_job(jobIdentifier=batch_id),
            )
        except ApiError:
            remote = await self.retrieve(batch_id)
            if remote.terminal:  # it ended meanwhile: nothing left to stop
                return remote
            raise
        return await self.retrieve(batch_id)

    def _output_prefix(self, job: Mapping[str, Any]) -> tuple[str, str]:
        uri = job["outputDataConfig"]["s3OutputDataConfig"]["s3Uri"]
        bucket, key = self._storage.split(str(uri))
        key = key.rstrip("/")
        job_id = job_id_of(str(job["jobArn"]))
        return bucket, f"{key}/{job_id}/" if key else f"{job_id}/"

    async def _list_keys(self, bucket: str, prefix: str) -> list[str]:
        def listed() -> list[str]:
            keys: list[str] = []
            for page in self._s3.get_paginator("list_objects_v2").paginate(
                Bucket=bucket, Prefix=prefix
            ):
                keys += [o["Key"] for o in page.get("Contents") or ()]
            return keys

        return await self._call(f"listing s3://{bucket}/{prefix}", listed)

    @asynccontextmanager
    async def open_lines(
        self, file_id: str, tag: BatchTag | None = None
    ) -> AsyncIterator[AsyncIterator[str]]:
        what = f"reading the results of Bedrock job {file_id}"
        job = await self._describe(file_id)
        status = str(job.get("status"))
        bucket, prefix = self._output_prefix(job)
        outputs = [k for k in await self._list_keys(bucket, prefix) if k.endswith(".jsonl.out")]
        unfinished = {"Expired": "batch_expired", "Stopped": "batch_cancelled"}.get(status)
        with tempfile.TemporaryDirectory(prefix="aeval-bedrock-") as tmp:
            paths = []
            for n, key in enumerate(outputs):
                dest = Path(tmp) / f"{n}.jsonl.out"
                await self._call(
                    what,
                    lambda key=key, dest=dest: self._s3.download_file(bucket, key, str(dest)),  # type: ignore[misc]
                )
                paths.append(dest)
            asked: Path | None = None
            if unfinished is not None:  # which records never got a result
                source = job["inputDataConfig"]["s3InputDataConfig"]["s3Uri"]
                in_bucket, in_key = self._storage.split(str(source))
                asked = Path(tmp) / "input.jsonl"
                await self._call(
                    what, lambda: self._s3.download_file(in_bucket, in_key, str(asked))
                )
            model = str(job.get("modelId") or "")
            why = "the job expired" if unfinished == "batch_expired" else "the job was stopped"
            lines = result_lines(
                paths,
                lambda raw: result_line(raw, model),
                asked=asked,
                asked_id=_asked_id,
                unfinished=unfinished,
                why=f"{why} before this record ran",
            )
            yield guard_lines(paced(lines), what)

    async def aclose(self) -> None:
        self._bedrock.close()
        self._s3.close()


def _to_remote(job: Mapping[str, Any]) -> RemoteBatch:
    raw = str(job.get("status") or "Submitted")
    status = STATES.get(raw, "in_progress")
    errors: tuple[RemoteBatchError, ...] = ()
    if status == "failed":
        errors = (RemoteBatchError("batch_failed", str(job.get("message") or "the job failed")),)
    total = int(job.get("totalRecordCount") or 0)
    succeeded = int(job.get("successRecordCount") or 0)
    failed = int(job.get("errorRecordCount") or 0)
    return RemoteBatch(
        id=str(job["jobArn"]),
        status=status,
        completed=succeeded,
        failed=failed,
        total=total,
        created_at=_epoch(job.get("submitTime")),
        # Every ended job is read: what it finished is kept (an expired, stopped or
        # failed job's results included).
        output_file_id=str(job["jobArn"])
        if status in ("completed", "expired", "cancelled", "failed")
        else None,
        errors=errors,
        metadata={"display_name": str(job.get("jobName") or ""), "state": raw},
    )


def _asked_id(raw: bytes) -> str | None:
    """The custom id of one line of the input object (a record aeval wrote)."""
    return decode_record_id(str(json.loads(raw)["recordId"]))
