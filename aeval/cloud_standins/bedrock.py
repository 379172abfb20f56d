"""Amazon Bedrock's batch inference control plane, as aeval's stand-in, over a real S3 emulator.

Bedrock's jobs exist in no emulator (moto implements S3 but not model invocation jobs), so
this module answers boto3's ``bedrock`` client at the four routes of botocore's service
model (tests/conformance/bedrock/service-model.json holds them): ``CreateModelInvocationJob``
(``POST /model-invocation-job``), ``GetModelInvocationJob`` (``GET
/model-invocation-job/{jobIdentifier}``), ``ListModelInvocationJobs`` (``GET
/model-invocation-jobs``) and ``StopModelInvocationJob`` (``POST
/model-invocation-job/{jobIdentifier}/stop``), in restJson1 (errors name their type in
``x-amzn-ErrorType``). The records are read from, and the results written to, the S3
emulator (moto's server, :mod:`aeval.cloud_standins.emulators`) through boto3's ``s3``
client: ``<output>/<job id>/<input name>.out`` with ``modelOutput`` or ``error`` per
record, in an order of their own, and ``manifest.json.out``.

A job moves Submitted, Validating, Scheduled, InProgress and ends Completed (or
PartiallyCompleted when a record failed), Failed (records unreadable, fewer than the
minimum), Stopped (``StopModelInvocationJob``: the records answered by then are written) or
Expired (:class:`BedrockFaults`: half the records answered). It moves when it is read,
by the time since it was submitted (:class:`BedrockTiming`), so no task runs between
requests. A ``clientRequestToken`` seen before returns the job it created, as Bedrock
documents. Jobs are kept as JSON files in ``state_dir``; so are the input and result
objects, put back into a fresh emulator at start-up (moto keeps S3 in memory).

What only the real service can confirm is listed in docs/providers/bedrock.md.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import botocore.config
import polars as pl
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from aeval.batch.providers.cloud_storage import unhex_id
from aeval.cloud_standins.job_table import (
    JobShape,
    JobTable,
    iso,
    json_body,
    jsonl_values,
    page,
    phase_at,
    split_location,
)
from aeval.local.chat import ChatRequest, Completion, HttpFailure
from aeval.local.models import ModelRouter, ModelSpec
from aeval.local.wire import estimate_tokens, random_hex
from aeval.uvicorn_thread import BackgroundServer

__all__ = ["BedrockFaults", "BedrockStandIn", "BedrockTiming", "chat_of", "claude_output"]

ACCOUNT = "123456789012"
_TERMINAL = ("Completed", "PartiallyCompleted", "Failed", "Stopped", "Expired")
_PHASES = ("Submitted", "Validating", "Scheduled", "InProgress")
_SHAPE = JobShape(
    key="jobArn", state="status", stamp="lastModifiedTime", terminal=_TERMINAL,
    ending="Stopping", ended="Stopped", done="Completed", expired="Expired",
    # Kept from the create; not in GetModelInvocationJob's output (botocore's service model).
    hidden=("tags",),
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class BedrockTiming:
    """Seconds a job spends in each state before the next (read lazily)."""

    submitted_s: float = 0.1
    validating_s: float = 0.1
    scheduled_s: float = 0.1
    in_progress_s: float = 0.2

    def state_at(self, elapsed: float) -> str:
        edges = (self.submitted_s, self.validating_s, self.scheduled_s, self.in_progress_s)
        return phase_at(elapsed, tuple(zip(_PHASES, edges, strict=True)), "Completed")


@dataclass(frozen=True, slots=True)
class BedrockFaults:
    """What goes wrong, on purpose.

    :param create_errors: creates that answer 500 after creating the job (botocore retries
        them with the same ``clientRequestToken``).
    :param create_delay_s: a wait after the job is created, before the create answers (a
        client killed in it never learns the job's ARN).
    :param expire: every job expires with half its records answered.
    :param shuffle: results written in an order of their own (as Bedrock documents).
    """

    create_errors: int = 0
    create_delay_s: float = 0.0
    expire: bool = False
    shuffle: bool = True


def _error(status: int, kind: str, message: str) -> Response:
    return JSONResponse({"message": message}, status, headers={"x-amzn-ErrorType": kind})


def chat_of(model_input: Mapping[str, Any]) -> dict[str, Any]:
    """A Claude or Nova ``modelInput`` as the chat body the responders read."""

    def text(content: object) -> str:
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            return "".join(str(b.get("text") or "") for b in content if isinstance(b, Mapping))
        return ""

    messages: list[dict[str, Any]] = []
    system = model_input.get("system")
    if system:
        messages.append({"role": "system", "content": text(system)})
    for message in model_input.get("messages") or ():
        if isinstance(message, Mapping):
            messages.append({"role": message.get("role"), "content": text(message.get("content"))})
    body: dict[str, Any] = {"messages": messages}
    thinking = model_input.get("thinking")
    if isinstance(thinking, Mapping) and thinking.get("budget_tokens"):
        body["thinking_budget"] = thinking["budget_tokens"]
    return body


def claude_output(model: str, model_input: Mapping[str, Any], reply: Completion) -> Any:
    """A Claude Messages response (what Bedrock's ``modelOutput`` and Vertex AI's
    ``response`` hold for Claude) for ``reply``."""
    prompt = estimate_tokens(json.dumps(model_input))
    answered = estimate_tokens(reply.content) + reply.reasoning_tokens
    return {
        "id": f"msg_{random_hex(24)}", "type": "message", "role": "assistant", "model": model,
        "content": [{"type": "text", "text": reply.content}],
        "stop_reason": "max_tokens" if reply.finish_reason == "length" else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": prompt, "output_tokens": answered},
    }  # fmt: skip


def _model_output(model_id: str, model_input: Mapping[str, Any], reply: Completion) -> Any:
    """The ``InvokeModel`` response body of ``model_id``'s family for ``reply``."""
    if "anthropic_version" in model_input:  # Claude's Messages response
        return claude_output(model_id.split(".", 1)[-1], model_input, reply)
    prompt = estimate_tokens(json.dumps(model_input))
    answered = estimate_tokens(reply.content) + reply.reasoning_tokens
    stop = "max_tokens" if reply.finish_reason == "length" else "end_turn"
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": reply.content}]}},
        "stopReason": stop,
        "usage": {"inputTokens": prompt, "outputTokens": answered,
                  "totalTokens": prompt + answered},
    }  # fmt: skip


class _Jobs(JobTable):
    """The jobs, their files in ``root`` and the S3 emulator behind them (thread-safe)."""

    def __init__(self, root: Path, s3: Any, router: ModelRouter, timing: BedrockTiming,
                 faults: BedrockFaults, min_records: int, region: str) -> None:  # fmt: skip
        super().__init__(root, _SHAPE, create_errors=faults.create_errors,
                         create_delay_s=faults.create_delay_s, expire=faults.expire)  # fmt: skip
        self.s3, self.router = s3, router
        self.timing, self.faults, self.min_records, self.region = (
            timing,
            faults,
            min_records,
            region,
        )
        (root / "objects").mkdir(parents=True, exist_ok=True)
        self._restore_objects()

    # -- S3 objects kept beside the jobs (moto keeps S3 in memory) ------------------

    def _kept(self, bucket: str, key: str) -> Path:
        return self.root / "objects" / bucket / key

    def _restore_objects(self) -> None:
        base = self.root / "objects"
        for path in base.rglob("*"):
            if path.is_file():
                bucket, _, key = str(path.relative_to(base)).partition("/")
                self._ensure_bucket(bucket)
                self.s3.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())

    def _ensure_bucket(self, bucket: str) -> None:
        try:
            self.s3.head_bucket(Bucket=bucket)
        except Exception:
            self.s3.create_bucket(Bucket=bucket)

    def put(self, bucket: str, key: str, data: bytes) -> None:
        kept = self._kept(bucket, key)
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_bytes(data)
        self.s3.put_object(Bucket=bucket, Key=key, Body=data)

    def get(self, bucket: str, key: str) -> bytes | None:
        try:
            data: bytes = self.s3.get_object(Bucket=bucket, Key=key)["Body"].read()
        except Exception:
            return None
        kept = self._kept(bucket, key)
        if not kept.exists():
            kept.parent.mkdir(parents=True, exist_ok=True)
            kept.write_bytes(data)
        return data

    # -- jobs -------------------------------------------------------------------------

    def find(self, identifier: str) -> dict[str, Any] | None:
        if identifier in self.jobs:
            return self.jobs[identifier]
        return next((j for j in self.jobs.values() if identifier in (
            j["jobArn"].rsplit("/", 1)[-1], j["jobName"])), None)  # fmt: skip

    def phase(self, elapsed: float) -> str:
        return self.timing.state_at(elapsed)

    def entering(self, job: dict[str, Any], state: str) -> bool:
        """A job leaving Submitted is validated first (and fails there)."""
        return job["status"] != "Submitted" or self._validate(job)

    def _records(self, job: dict[str, Any]) -> list[Any] | None:
        bucket, key = split_location(job["inputDataConfig"]["s3InputDataConfig"]["s3Uri"])
        data = self.get(bucket, key)
        return None if data is None else jsonl_values(data)

    def _validate(self, job: dict[str, Any]) -> bool:
        records = self._records(job)
        why = None
        if records is None:
            why = "The input S3 object could not be read."
        elif any(not isinstance(r, dict) or "modelInput" not in r for r in records):
            why = "The input file holds a line that is not a record {recordId, modelInput}."
        elif len(records) < self.min_records:
            why = (f"The job has {len(records)} records; the minimum number of records per "
                   f"batch inference job is {self.min_records}.")  # fmt: skip
        if why is None:
            return True
        job.update(status="Failed", message=why, endTime=iso(time.time()))
        self.save(job)
        return False

    def finish(self, job: dict[str, Any], status: str, *, share: float) -> None:
        records = self._records(job) or []
        keep = len(records) if share >= 1.0 else len(records) // 2
        responder = self.router.responder_for(job["modelId"])
        lines, succeeded, failed, tokens_in, tokens_out = [], 0, 0, 0, 0
        for record in records[:keep]:
            record_id, model_input = record.get("recordId") or random_hex(11), record["modelInput"]
            chat = {"model": job["modelId"], **chat_of(model_input)}
            asked = ChatRequest(job["modelId"], chat, unhex_id(record_id))
            reply = responder.respond(asked) if responder is not None else HttpFailure(
                400, f"The provided model identifier {job['modelId']} is invalid.")  # fmt: skip
            line: dict[str, Any] = {"recordId": record_id, "modelInput": model_input}
            if isinstance(reply, Completion):
                output = _model_output(job["modelId"], model_input, reply)
                usage = output["usage"]
                tokens_in += usage.get("input_tokens", usage.get("inputTokens", 0))
                tokens_out += usage.get("output_tokens", usage.get("outputTokens", 0))
                line["modelOutput"] = output
                succeeded += 1
            else:
                line["error"] = {"errorCode": reply.status_code, "errorMessage": reply.message}
                failed += 1
            lines.append(line)
        if self.faults.shuffle:
            random.Random(job["jobArn"]).shuffle(lines)
        bucket, prefix = split_location(job["outputDataConfig"]["s3OutputDataConfig"]["s3Uri"])
        folder = f"{prefix.rstrip('/')}/{job['jobArn'].rsplit('/', 1)[-1]}".lstrip("/")
        name = job["inputDataConfig"]["s3InputDataConfig"]["s3Uri"].rsplit("/", 1)[-1]
        body = "".join(json.dumps(line) + "\n" for line in lines).encode()
        self.put(bucket, f"{folder}/{name}.out", body)
        manifest = {"totalRecordCount": len(records), "processedRecordCount": len(lines),
                    "successRecordCount": succeeded, "errorRecordCount": failed,
                    "inputTokenCount": tokens_in, "outputTokenCount": tokens_out}  # fmt: skip
        self.put(bucket, f"{folder}/manifest.json.out", json.dumps(manifest).encode())
        if status == "Completed" and failed:
            status = "PartiallyCompleted"
        job.update(status=status, endTime=iso(time.time()), totalRecordCount=len(records),
                   processedRecordCount=len(lines), successRecordCount=succeeded,
                   errorRecordCount=failed)  # fmt: skip
        self.save(job)


class BedrockStandIn(BackgroundServer):
    """Bedrock's batch inference control plane on loopback, over the S3 emulator at
    ``s3_endpoint``.

    :param dataset: the benchmark rows the responders answer from.
    :param models: model id (or glob) → :class:`~aeval.local.models.ModelSpec`.
    :param state_dir: where jobs (and copies of their S3 objects) are kept; given, a
        restarted stand-in carries on with them.
    :param min_records: the minimum records per job it accepts (Bedrock's default quota
        is 100; the offline demo's is 1).
    """

    def __init__(
        self,
        *,
        s3_endpoint: str,
        dataset: pl.DataFrame | None = None,
        models: Mapping[str, ModelSpec] | None = None,
        state_dir: Path,
        timing: BedrockTiming | None = None,
        faults: BedrockFaults | None = None,
        min_records: int = 100,
        region: str = "us-east-1",
        access_key: str = "aeval-offline",
        secret_key: str = "aeval-offline-secret",
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        super().__init__("the Bedrock stand-in", "aeval-bedrock-standin", host=host, port=port,
                         log_level="warning", start_timeout_s=30.0)  # fmt: skip
        self._router = ModelRouter(models, dataset)
        self._s3_endpoint, self._state_dir, self._region = s3_endpoint, Path(state_dir), region
        self._timing, self._faults = timing or BedrockTiming(), faults or BedrockFaults()
        self._min_records, self._keys = min_records, (access_key, secret_key)
        self.jobs: _Jobs | None = None
        self.base_url = ""

    def _app(self) -> ASGIApp:
        s3 = boto3.session.Session(
            aws_access_key_id=self._keys[0], aws_secret_access_key=self._keys[1],
            region_name=self._region,
        ).client("s3", endpoint_url=self._s3_endpoint,
                 config=botocore.config.Config(s3={"addressing_style": "path"}))  # fmt: skip
        self.jobs = _Jobs(self._state_dir, s3, self._router, self._timing, self._faults,
                          self._min_records, self._region)  # fmt: skip
        return _build_app(self.jobs)

    def _bound(self, root: str) -> str:
        self.base_url = root
        return root


def _build_app(jobs: _Jobs) -> ASGIApp:
    async def create(request: Request) -> Response:
        try:
            body = await json_body(request)
        except (ValueError, RecursionError):
            return _error(400, "ValidationException", "The request body is not valid JSON.")
        if not isinstance(body, dict):
            return _error(400, "ValidationException", "The request body must be an object.")
        missing = [k for k in ("jobName", "roleArn", "modelId", "inputDataConfig",
                               "outputDataConfig") if not body.get(k)]  # fmt: skip
        if missing:
            return _error(400, "ValidationException", f"Missing required field(s): {missing}")
        try:
            source = body["inputDataConfig"]["s3InputDataConfig"]["s3Uri"]
            target = body["outputDataConfig"]["s3OutputDataConfig"]["s3Uri"]
        except (KeyError, TypeError):
            return _error(
                400, "ValidationException", "inputDataConfig/outputDataConfig need s3Uri."
            )
        if not (str(source).startswith("s3://") and str(target).startswith("s3://")):
            return _error(400, "ValidationException", "s3Uri must be an s3:// location.")

        def make() -> tuple[dict[str, Any], bool]:
            token = body.get("clientRequestToken")
            same = token and next(
                (j for j in jobs.jobs.values() if j.get("clientRequestToken") == token), None
            )
            if same:
                return same, False
            if any(j["jobName"] == body["jobName"] for j in jobs.jobs.values()):
                raise LookupError(body["jobName"])
            now = time.time()
            job_id = random_hex(12)
            arn = f"arn:aws:bedrock:{jobs.region}:{ACCOUNT}:model-invocation-job/{job_id}"
            return {
                "jobArn": arn, "jobName": body["jobName"], "modelId": body["modelId"],
                "clientRequestToken": token, "roleArn": body["roleArn"],
                "status": "Submitted", "submitTime": iso(now),
                "inputDataConfig": body["inputDataConfig"],
                "outputDataConfig": body["outputDataConfig"],
                "timeoutDurationInHours": body.get("timeoutDurationInHours", 168),
                "jobExpirationTime": iso(now + 3600 * body.get("timeoutDurationInHours", 168)),
                "tags": body.get("tags") or [], "_created": now,
            }, True  # fmt: skip

        try:
            job, fail = await jobs.create(make)
        except LookupError as err:
            return _error(409, "ConflictException", f"A job named {err} already exists.")
        if fail:
            return _error(500, "InternalServerException", "Injected error after the create.")
        return JSONResponse({"jobArn": job["jobArn"]})

    async def one(request: Request) -> Response:
        rest: str = request.path_params["rest"]
        stop = request.method == "POST"
        if stop:
            if not rest.endswith("/stop"):
                return _error(404, "UnknownOperationException", "Unknown operation.")
            rest = rest.removesuffix("/stop")

        try:
            job = await jobs.read(rest, end=stop)
        except ValueError as err:
            return _error(400, "ValidationException", f"The job has already ended ({err}).")
        if job is None:
            return _error(404, "ResourceNotFoundException", f"Job {rest} not found.")
        return JSONResponse({} if stop else jobs.public(job))

    async def listing(request: Request) -> Response:
        query = request.query_params
        contains = query.get("nameContains") or ""
        try:
            size = max(1, min(1000, int(query.get("maxResults") or 100)))
            start = int(query.get("nextToken") or 0)
        except ValueError:
            return _error(400, "ValidationException", "maxResults and nextToken are numbers.")

        found = await jobs.listed(lambda j: contains in j["jobName"])
        return JSONResponse(page(found, start, size, "invocationJobSummaries", "nextToken"))

    routes = [
        Route("/model-invocation-job", create, methods=["POST"]),
        Route("/model-invocation-jobs", listing, methods=["GET"]),
        Route("/model-invocation-job/{rest:path}", one, methods=["GET", "POST"]),
    ]
    return Starlette(routes=routes)
