"""Vertex AI batch prediction through google-genai (``vertexai=True``) and google-cloud-storage.

A shard's request file becomes one JSONL object under the run's ``gs://`` prefix, and
one ``batchPredictionJobs`` job (``client.aio.batches.create(model, src="gs://…",
config={display_name, dest})``) reads it and writes ``predictions.jsonl`` files under
the job's output directory (``outputInfo.gcsOutputDirectory``), one line per request
with the request echoed and ``response`` or ``status`` (an error's message): "Batch
inference from Cloud Storage" (see :mod:`aeval.batch.providers.vertex_spec`).

- **Joining**: a Gemini line carries its custom id in the request's ``labels``
  (``aeval_id``, hex, so that any id fits the label's lowercase alphabet), which the
  output echoes; litellm's Vertex batches do the same (BerriAI/litellm #25627). A Claude
  line has its own ``custom_id`` (the Claude batch page). Output order is never relied on.
- **Never paying twice**: the job's display name is the shard's digest
  (:attr:`~aeval.batch.providers.base.BatchTag.display_name`); a create whose response
  was lost is found by listing jobs (``filter: display_name="…"``), newest first since
  the intent. google-genai retries nothing by default; aeval's policy decides.
- **What a job finished is kept**: "If the batch prediction job is terminated, all
  completed rows are exported" (the page above): every ended job's output is read, and
  a request with no line in an expired or cancelled job is ``batch_expired`` /
  ``batch_cancelled``.

Credentials are Application Default Credentials unless the credentials name a file
(option ``adc_file``: the offline stand-in's). Cloud Storage calls are synchronous and
run in worker threads; google-cloud-storage honours ``STORAGE_EMULATOR_HOST``.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import google.auth
import httpx
from google import genai
from google.api_core import exceptions as gcs_errors
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage
from google.genai import errors as genai_errors
from google.genai import types
from google.oauth2 import service_account

from aeval.api_settings import Credentials, RetrySettings
from aeval.batch.providers.base import BatchInput, BatchTag, RemoteBatch, RemoteBatchError
from aeval.batch.providers.claude_messages import claude_answer_line
from aeval.batch.providers.cloud_storage import (
    StorageBatchAdapter,
    StoragePrefix,
    hex_id,
    paced,
    result_lines,
    unhex_id,
)
from aeval.batch.providers.gemini_api import gemini_result_line
from aeval.batch.providers.lines import error_line
from aeval.batch.providers.request_lines import rewritten
from aeval.batch.providers.sdk_errors import guard_lines, http_failure, transport_failure
from aeval.batch.providers.vertex_spec import family, job_model
from aeval.errors import ApiError
from aeval.model_names import parse_model

__all__ = ["VertexBatchProvider", "label_of", "prediction_line"]

T = TypeVar("T")

_NO_PREFIX = (
    "vertex/ models need a Cloud Storage prefix for the requests and results: "
    "--vertex-gcs gs://BUCKET/PREFIX (or AEVAL_VERTEX_GCS)"
)
_CHECK = (
    "GOOGLE_CLOUD_PROJECT, GOOGLE_CLOUD_LOCATION, Application Default Credentials "
    "(GOOGLE_APPLICATION_CREDENTIALS) and --vertex-gcs"
)
_SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)
# google-genai JobState -> aeval's (OpenAI's) words; tests/conformance/vertex holds each.
STATES: dict[str, str] = {
    "JOB_STATE_UNSPECIFIED": "in_progress",
    "JOB_STATE_QUEUED": "validating",
    "JOB_STATE_PENDING": "validating",
    "JOB_STATE_RUNNING": "in_progress",
    "JOB_STATE_SUCCEEDED": "completed",
    "JOB_STATE_PARTIALLY_SUCCEEDED": "completed",
    "JOB_STATE_FAILED": "failed",
    "JOB_STATE_CANCELLING": "cancelling",
    "JOB_STATE_CANCELLED": "cancelled",
    "JOB_STATE_PAUSED": "in_progress",
    "JOB_STATE_EXPIRED": "expired",
    "JOB_STATE_UPDATING": "in_progress",
}
LABEL = "aeval_id"
LABEL_MAX = 63  # GenerateContentRequest.labels: values of at most 63 characters
# The start of a failed line's status (an HTTP reason phrase) -> (aeval's code, status).
_STATUS_WORDS = (
    ("Bad Request", ("invalid_request", 400)),
    ("INVALID_ARGUMENT", ("invalid_request", 400)),
    ("Permission", ("permission_denied", 403)),
    ("Not Found", ("not_found", 404)),
    ("Too Many Requests", ("rate_limit_exceeded", 429)),
    ("RESOURCE_EXHAUSTED", ("rate_limit_exceeded", 429)),
    ("Deadline", ("timeout", 504)),
)


def label_of(custom_id: str) -> str:
    """The label value a Gemini request carries its custom id in (hex)."""
    return hex_id(custom_id)


def _gemini_line(line: dict[str, Any]) -> dict[str, Any]:
    custom_id = str(line["custom_id"])
    value = label_of(custom_id)
    if len(value) > LABEL_MAX:
        raise ApiError(
            f"request {custom_id!r} cannot be sent to Vertex AI: its id is carried in a "
            f"request label of at most {LABEL_MAX} characters, so at most "
            f"{LABEL_MAX // 2} bytes long"
        )
    labels = {**(line["body"].get("labels") or {}), LABEL: value}
    return {"request": {**line["body"], "labels": labels}}


def _claude_line(line: dict[str, Any]) -> dict[str, Any]:
    return {"custom_id": str(line["custom_id"]), "request": line["body"]}


def _status_error(custom_id: str, status: str) -> str:
    code, http = next(
        (meaning for word, meaning in _STATUS_WORDS if status.startswith(word)),
        ("server_error", 500),
    )
    return error_line(custom_id, code=code, message=status or None, status_code=http)


def prediction_line(raw: str | bytes, model: str | None = None) -> tuple[str | None, str | None]:
    """One ``predictions.jsonl`` line as (its custom id, an OpenAI output line); ``(None,
    None)`` for a line aeval did not write (hostile input: its row is then reported
    ``missing`` or not run)."""
    try:
        record = json.loads(raw)
    except (ValueError, RecursionError):
        return None, None
    if not isinstance(record, dict):
        return None, None
    raw_request = record.get("request")
    request: Mapping[str, Any] = raw_request if isinstance(raw_request, Mapping) else {}
    custom_id: str | None
    if isinstance(record.get("custom_id"), str):  # Claude's own id
        custom_id = record["custom_id"]
    else:
        raw_labels = request.get("labels")
        labels: Mapping[str, Any] = raw_labels if isinstance(raw_labels, Mapping) else {}
        custom_id = unhex_id(labels.get(LABEL)) if LABEL in labels else None
    if custom_id is None:
        return None, None
    response = record.get("response")
    status = record.get("status")
    if isinstance(response, Mapping) and response and not status:
        if "candidates" in response or "usageMetadata" in response:
            try:
                return custom_id, gemini_result_line({"key": custom_id, "response": response})
            except (ValueError, TypeError, AttributeError):
                return None, None
        return custom_id, claude_answer_line(custom_id, response, model)
    return custom_id, _status_error(custom_id, str(status or "no response"))


def _translate(err: Exception, what: str) -> Exception:
    if isinstance(err, genai_errors.APIError):
        response = getattr(err, "response", None)
        message = err.message or str(err.status or "")
        headers = getattr(response, "headers", None)
        return http_failure(what, int(err.code or 0), message, headers=headers, check=_CHECK)
    if isinstance(err, gcs_errors.GoogleAPICallError):
        status = int(getattr(err, "code", 0) or 500)
        return http_failure(what, status, str(err.message), check=_CHECK)
    if isinstance(err, google.auth.exceptions.GoogleAuthError):
        return ApiError(f"{what}: {err} — check {_CHECK}")
    transport = transport_failure(err, what)
    if transport is not None:
        return transport
    if isinstance(err, ConnectionError):
        return ApiError(f"{what}: {err}")
    return err


def _epoch(value: datetime | None) -> float | None:
    return value.timestamp() if value is not None else None


class VertexBatchProvider(StorageBatchAdapter):
    """Batch calls through ``genai.Client(vertexai=True).aio`` and a Cloud Storage client."""

    name = "vertex"
    _fail = staticmethod(_translate)

    def __init__(self, credentials: Credentials, retry: RetrySettings | None = None) -> None:
        retry = retry or RetrySettings()
        project = credentials.option("project") or credentials.api_key
        location = credentials.option("location")
        adc_file = credentials.option("adc_file")
        auth = None
        if adc_file:  # a service-account key of ours (the offline stand-in's), no other kind
            auth = service_account.Credentials.from_service_account_file(adc_file, scopes=_SCOPES)
        self._http = httpx.AsyncClient(timeout=retry.request_timeout_s)
        options = types.HttpOptions(
            base_url=credentials.base_url,
            timeout=int(retry.request_timeout_s * 1000),
            httpx_async_client=self._http,
        )
        self._client = genai.Client(
            vertexai=True,
            project=project,
            location=location or None,
            credentials=auth,
            http_options=options,
        )
        endpoint = credentials.option("gcs_endpoint")
        if endpoint:  # an emulator: no credentials (as STORAGE_EMULATOR_HOST would have it)
            self._gcs = storage.Client(
                project=project,
                credentials=AnonymousCredentials(),
                client_options={"api_endpoint": endpoint},
            )
        else:
            self._gcs = storage.Client(project=project, credentials=auth)
        self._endpoint = (credentials.base_url or "https://aiplatform.googleapis.com").rstrip("/")
        self._requests: dict[str, int] = {}
        self._storage = StoragePrefix(
            "gs", "a Cloud Storage location", credentials.option("gcs"), _NO_PREFIX
        )

    async def upload(self, path: Path, *, filename: str | None = None) -> str:
        name = filename or Path(path).name
        bucket, blob = self._storage.key(name)
        model = _first_model_of(Path(path))
        shape = _claude_line if family(model) == "claude" else _gemini_line
        async with rewritten(Path(path), name, shape) as converted:
            await self._call(
                f"uploading {name} to gs://{bucket}/{blob}",
                lambda: (
                    self._gcs.bucket(bucket)
                    .blob(blob)
                    .upload_from_filename(str(converted), content_type="application/jsonl")
                ),
            )
        return f"gs://{bucket}/{blob}"

    async def find_files(self, filename: str) -> list[str]:
        bucket, blob = self._storage.key(filename)
        listed = await self._call(
            f"listing gs://{bucket}/{blob}",
            lambda: [b.name for b in self._gcs.list_blobs(bucket, prefix=blob)],
        )
        return [f"gs://{bucket}/{name}" for name in listed if name == blob]

    async def delete_file(self, file_id: str) -> None:
        if file_id.startswith("projects/"):  # a job's results: every file it wrote
            job = await self._get(file_id)
            folder = _output_dir(job)
            if folder is None:
                return
            bucket, prefix = self._storage.split(folder)
            names = await self._list(bucket, prefix)
        else:
            bucket, name = self._storage.split(file_id)
            names = [name]
        for name in names:
            try:
                await self._call(
                    f"deleting gs://{bucket}/{name}",
                    lambda name=name: self._gcs.bucket(bucket).blob(name).delete(),  # type: ignore[misc]
                )
            except ApiError as err:
                if "HTTP 404" not in str(err):
                    raise

    async def create(self, source: BatchInput, tag: BatchTag) -> RemoteBatch:
        model = parse_model(tag.shard.rsplit("|", 2)[0]).name
        if source.file_id is None:
            raise ApiError(f"{tag.shard}: Vertex AI jobs need the requests uploaded first")
        bucket, prefix = self._storage.root()
        dest = f"gs://{bucket}/{prefix + '/' if prefix else ''}results/{tag.digest}"
        what = f"creating a Vertex AI batch job for {tag.shard}"
        try:
            job = await self._client.aio.batches.create(
                model=job_model(model),
                src=source.file_id,
                config=types.CreateBatchJobConfig(display_name=tag.display_name, dest=dest),
            )
        except Exception as err:
            raise _translate(err, what) from err
        if job.name:
            self._requests[job.name] = source.requests
        return self._to_remote(job)

    async def _get(self, name: str) -> types.BatchJob:
        try:
            return await self._client.aio.batches.get(name=name)
        except Exception as err:
            raise _translate(err, f"polling Vertex AI job {name}") from err

    async def retrieve(self, batch_id: str) -> RemoteBatch:
        return self._to_remote(await self._get(batch_id))

    async def find(self, tag: BatchTag) -> RemoteBatch | None:
        named: list[RemoteBatch] = []
        config = {"page_size": 100, "filter": f'display_name="{tag.display_name}"'}
        try:
            async for job in await self._client.aio.batches.list(config=config):  # type: ignore[arg-type]
                if job.display_name == tag.display_name and job.name:
                    named.append(self._to_remote(job))
        except Exception as err:
            raise _translate(err, "listing Vertex AI jobs") from err
        best = tag.newest_unclaimed(named)
        if best is None:
            return None
        self._requests.setdefault(best.id, tag.requests)
        return await self.retrieve(best.id)

    async def cancel(self, batch_id: str) -> RemoteBatch:
        try:
            await self._client.aio.batches.cancel(name=batch_id)
        except genai_errors.APIError as err:
            remote = await self.retrieve(batch_id)
            if remote.terminal:  # it ended meanwhile: nothing left to cancel
                return remote
            raise _translate(err, f"cancelling Vertex AI job {batch_id}") from err
        except Exception as err:
            raise _translate(err, f"cancelling Vertex AI job {batch_id}") from err
        return await self.retrieve(batch_id)

    async def _list(self, bucket: str, prefix: str) -> list[str]:
        return await self._call(
            f"listing gs://{bucket}/{prefix}",
            lambda: [b.name for b in self._gcs.list_blobs(bucket, prefix=prefix)],
        )

    async def _download(self, uri: str, dest: Path, what: str) -> None:
        bucket, name = self._storage.split(uri)
        await self._call(
            what, lambda: self._gcs.bucket(bucket).blob(name).download_to_filename(str(dest))
        )

    @asynccontextmanager
    async def open_lines(
        self, file_id: str, tag: BatchTag | None = None
    ) -> AsyncIterator[AsyncIterator[str]]:
        what = f"reading the results of Vertex AI job {file_id}"
        job = await self._get(file_id)
        state = job.state.name if job.state is not None else "JOB_STATE_UNSPECIFIED"
        unfinished = {
            "JOB_STATE_EXPIRED": "batch_expired",
            "JOB_STATE_CANCELLED": "batch_cancelled",
            "JOB_STATE_FAILED": "batch_failed",
        }.get(state)
        folder = _output_dir(job)
        names: list[str] = []
        bucket = ""
        if folder is not None:
            bucket, prefix = self._storage.split(folder)
            names = [
                n
                for n in await self._list(bucket, prefix.rstrip("/") + "/")
                if n.rsplit("/", 1)[-1].startswith("predictions") and n.endswith(".jsonl")
            ]
        with tempfile.TemporaryDirectory(prefix="aeval-vertex-") as tmp:
            paths = []
            for n, name in enumerate(names):
                dest = Path(tmp) / f"{n}.jsonl"
                await self._download(f"gs://{bucket}/{name}", dest, what)
                paths.append(dest)
            asked: Path | None = None
            sources = (job.src.gcs_uri if job.src is not None else None) or []
            if unfinished is not None and sources:
                asked = Path(tmp) / "input.jsonl"
                await self._download(sources[0], asked, what)
            model = job.model
            lines = result_lines(
                paths,
                lambda raw: prediction_line(raw, model),
                asked=asked,
                asked_id=_asked_id,
                unfinished=unfinished,
                why="the job ended before it ran",
            )
            yield guard_lines(paced(lines), what)

    async def aclose(self) -> None:
        await self._http.aclose()
        self._gcs.close()

    def _to_remote(self, job: types.BatchJob) -> RemoteBatch:
        state = job.state.name if job.state is not None else "JOB_STATE_UNSPECIFIED"
        status = STATES.get(state, "in_progress")
        stats = job.completion_stats
        succeeded = int(stats.successful_count or 0) if stats else 0
        failed = int(stats.failed_count or 0) if stats else 0
        incomplete = int(stats.incomplete_count or 0) if stats else 0
        total = self._requests.get(job.name or "", 0) or succeeded + failed + incomplete
        errors: tuple[RemoteBatchError, ...] = ()
        if status == "failed":
            detail = job.error.message if job.error is not None and job.error.message else ""
            errors = (RemoteBatchError("batch_failed", detail or "the Vertex AI job failed"),)
        ended = status in ("completed", "expired", "cancelled", "failed")
        return RemoteBatch(
            id=str(job.name),
            status=status,
            completed=succeeded,
            failed=failed,
            total=total,
            created_at=_epoch(job.create_time),
            output_file_id=str(job.name) if ended else None,
            errors=errors,
            metadata={"display_name": job.display_name or "", "state": state},
        )


def _output_dir(job: types.BatchJob) -> str | None:
    """Where the job wrote its predictions: ``outputInfo.gcsOutputDirectory``."""
    info = job.output_info
    if info is not None and info.gcs_output_directory:
        return info.gcs_output_directory
    return None


def _first_model_of(path: Path) -> str:
    """The model of a request file, from its shard's lines (every line is one model's):
    a Claude body has ``anthropic_version``."""
    with path.open("rb") as handle:
        for raw in handle:
            if raw.strip():
                body = json.loads(raw).get("body") or {}
                return "claude" if "anthropic_version" in body else "gemini"
    return "gemini"


def _asked_id(raw: bytes) -> str | None:
    """The custom id of one line of the input file: a Claude line's own, or a Gemini
    request's label."""
    record = json.loads(raw)
    labels = (record.get("request") or {}).get("labels") or {}
    custom_id = record.get("custom_id") or unhex_id(labels.get(LABEL))
    return custom_id if isinstance(custom_id, str) else None
