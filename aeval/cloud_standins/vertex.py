"""Vertex AI's batch prediction control plane, as aeval's stand-in, over a real GCS emulator.

No emulator has Vertex AI's ``batchPredictionJobs``, so this module answers google-genai's
Vertex client (``vertexai=True``) at the routes it calls (google-genai 3.6.1
``batches.py``): ``POST /v1beta1/projects/P/locations/L/batchPredictionJobs`` (create),
``GET …/batchPredictionJobs/ID`` (get), ``GET …/batchPredictionJobs`` (list, with
``filter``/``pageSize``/``pageToken``) and ``POST …/batchPredictionJobs/ID:cancel``, and
the OAuth token endpoint an Application Default Credentials file names as its
``token_uri`` (``POST /token``): requests without the bearer token it hands out are
refused, so the client's real ADC refresh is what reaches it. Requests are read from, and
predictions written to, the GCS emulator (gcp-storage-emulator) through
google-cloud-storage.

A job moves JOB_STATE_QUEUED, PENDING, RUNNING and ends SUCCEEDED (PARTIALLY_SUCCEEDED when
a request failed), FAILED (unreadable input), CANCELLED (``:cancel``, after CANCELLING: the
requests answered by then are written) or EXPIRED (:class:`VertexFaults`: half answered).
Predictions go to ``<outputUriPrefix>/prediction-model-<time>/predictions.jsonl``
(``outputInfo.gcsOutputDirectory``), one line per request with the request echoed and
``response`` or a ``status`` message, in an order of their own. Jobs move when read, by
their age; they are kept as JSON files in ``state_dir``.
"""

from __future__ import annotations

import json
import random
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp

from aeval.batch.providers.cloud_storage import unhex_id
from aeval.cloud_standins.bedrock import chat_of, claude_output
from aeval.cloud_standins.job_table import (
    JobShape,
    JobTable,
    iso,
    json_body,
    jsonl_values,
    page,
    phase_at,
    read_body,
    split_location,
)
from aeval.local.chat import ChatRequest, Completion, HttpFailure
from aeval.local.models import ModelRouter, ModelSpec
from aeval.local.wire import chat_completion, estimate_tokens, random_hex
from aeval.local.wire_gemini import chat_body, generate_content_response
from aeval.uvicorn_thread import BackgroundServer

__all__ = ["TOKEN", "VertexFaults", "VertexStandIn", "VertexTiming", "adc_file"]

TOKEN = "aeval-offline-vertex-token"
_PHASES = ("JOB_STATE_QUEUED", "JOB_STATE_PENDING", "JOB_STATE_RUNNING")
_TERMINAL = ("JOB_STATE_SUCCEEDED", "JOB_STATE_PARTIALLY_SUCCEEDED", "JOB_STATE_FAILED",
             "JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED")  # fmt: skip
_SHAPE = JobShape(
    key="name", state="state", stamp="updateTime", terminal=_TERMINAL,
    ending="JOB_STATE_CANCELLING", ended="JOB_STATE_CANCELLED", done="JOB_STATE_SUCCEEDED",
    expired="JOB_STATE_EXPIRED",
)  # fmt: skip
_JOB_PATH = "/v1beta1/projects/{project}/locations/{location}/batchPredictionJobs"


@dataclass(frozen=True, slots=True)
class VertexTiming:
    """Seconds a job spends in each state before the next (read lazily)."""

    queued_s: float = 0.1
    pending_s: float = 0.1
    running_s: float = 0.3

    def state_at(self, elapsed: float) -> str:
        edges = (self.queued_s, self.pending_s, self.running_s)
        return phase_at(elapsed, tuple(zip(_PHASES, edges, strict=True)), "JOB_STATE_SUCCEEDED")


@dataclass(frozen=True, slots=True)
class VertexFaults:
    """What goes wrong, on purpose: ``create_errors`` creates answer 500 after creating the
    job; ``create_delay_s`` a wait before a create answers; ``expire``: every job expires
    with half its requests answered; ``shuffle``: predictions in an order of their own."""

    create_errors: int = 0
    create_delay_s: float = 0.0
    expire: bool = False
    shuffle: bool = True


def adc_file(path: Path, token_uri: str) -> Path:
    """Write an Application Default Credentials file (a ``service_account`` key, as the
    Cloud console writes one) whose ``token_uri`` is the stand-in's: google-auth signs a
    JWT with its fresh RSA key and exchanges it there for the stand-in's token, as it
    would at Google's (an ``authorized_user`` file always refreshes at Google's own
    endpoint: google-auth 2.63 ``oauth2/credentials.py``)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()  # fmt: skip
    path.write_text(json.dumps({
        "type": "service_account", "project_id": "aeval-offline",
        "private_key_id": random_hex(40), "private_key": pem,
        "client_email": "aeval-offline@aeval-offline.iam.gserviceaccount.com",
        "client_id": "1", "token_uri": token_uri,
    }), encoding="utf-8")  # fmt: skip
    path.chmod(0o600)
    return path


def _error(status: int, message: str, reason: str) -> Response:
    return JSONResponse({"error": {"code": status, "message": message, "status": reason}}, status)


def _row_of(line: Mapping[str, Any]) -> str | None:
    """The dataset row a line asks about, where its id is aeval's (a Claude line's
    ``custom_id``; a Gemini request's ``aeval_id`` label, hex)."""
    if isinstance(line.get("custom_id"), str):
        return str(line["custom_id"])
    labels = (line.get("request") or {}).get("labels") or {}
    return unhex_id(labels.get("aeval_id"))


class _Jobs(JobTable):
    def __init__(self, root: Path, gcs: storage.Client, router: ModelRouter,
                 timing: VertexTiming, faults: VertexFaults) -> None:  # fmt: skip
        super().__init__(root, _SHAPE, create_errors=faults.create_errors,
                         create_delay_s=faults.create_delay_s, expire=faults.expire)  # fmt: skip
        self.gcs, self.router, self.timing, self.faults = gcs, router, timing, faults

    def phase(self, elapsed: float) -> str:
        return self.timing.state_at(elapsed)

    def entering(self, job: dict[str, Any], state: str) -> bool:
        if state == "JOB_STATE_RUNNING":
            job["startTime"] = iso(time.time())
        return True

    def _lines(self, job: dict[str, Any]) -> list[Any] | None:
        bucket, path = split_location(job["inputConfig"]["gcsSource"]["uris"][0])
        try:
            data = self.gcs.bucket(bucket).blob(path).download_as_bytes()
        except Exception:
            return None
        return jsonl_values(data)

    def finish(self, job: dict[str, Any], state: str, *, share: float) -> None:
        lines = self._lines(job)
        if lines is None or any(not isinstance(x, dict) or "request" not in x for x in lines):
            job.update(state="JOB_STATE_FAILED", endTime=iso(time.time()),
                       error={"code": 3, "message": "The input file could not be read as "
                              "JSONL lines {\"request\": …}."})  # fmt: skip
            self.save(job)
            return
        keep = len(lines) if share >= 1 else len(lines) // 2
        model = job["model"].rsplit("/", 1)[-1]
        responder = self.router.responder_for(model)
        out, ok, failed = [], 0, 0
        for line in lines[:keep]:
            request = line["request"]
            claude = "anthropic_version" in request
            chat, _ = (chat_of(request), False) if claude else chat_body(model, request)
            reply: Completion | HttpFailure = HttpFailure(
                400, "The request is not a valid GenerateContentRequest."
            )
            if chat is not None and responder is not None:
                reply = responder.respond(ChatRequest(model, {"model": model, **chat},
                                                      _row_of(line)))  # fmt: skip
            result: dict[str, Any] = {"request": request, "processed_time": iso(time.time())}
            if claude:
                result["custom_id"] = line.get("custom_id")
            if isinstance(reply, Completion):
                prompt = estimate_tokens(json.dumps(request))
                if claude:
                    result["response"] = claude_output(model, request, reply)
                else:
                    completion = chat_completion(model, reply, prompt)
                    result["response"] = generate_content_response(completion, model,
                                                                   thoughts=False)  # fmt: skip
                result["status"] = ""
                ok += 1
            else:
                result["status"] = f"Bad Request: {json.dumps({'error': reply.message})}"
                failed += 1
            out.append(result)
        if self.faults.shuffle:
            random.Random(job["name"]).shuffle(out)
        prefix = job["outputConfig"]["gcsDestination"]["outputUriPrefix"].rstrip("/")
        folder = f"{prefix}/prediction-model-{datetime.now(UTC):%Y-%m-%dT%H:%M:%S.%fZ}"
        bucket, path = split_location(folder)
        body = "".join(json.dumps(r) + "\n" for r in out)
        self.gcs.bucket(bucket).blob(f"{path}/predictions.jsonl").upload_from_string(body)
        if state == "JOB_STATE_SUCCEEDED" and failed:
            state = "JOB_STATE_PARTIALLY_SUCCEEDED"
        job.update(state=state, endTime=iso(time.time()),
                   outputInfo={"gcsOutputDirectory": folder},
                   completionStats={"successfulCount": str(ok), "failedCount": str(failed),
                                    "incompleteCount": str(len(lines) - keep)})  # fmt: skip
        self.save(job)


class VertexStandIn(BackgroundServer):
    """Vertex AI's batch prediction control plane on loopback, over the GCS emulator at
    ``gcs_endpoint``.

    :param state_dir: where jobs are kept; given again, a restarted stand-in carries on.
    """

    def __init__(
        self,
        *,
        gcs_endpoint: str,
        state_dir: Path,
        dataset: pl.DataFrame | None = None,
        models: Mapping[str, ModelSpec] | None = None,
        timing: VertexTiming | None = None,
        faults: VertexFaults | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        super().__init__("the Vertex AI stand-in", "aeval-vertex-standin", host=host, port=port,
                         log_level="warning", start_timeout_s=30.0)  # fmt: skip
        self._router = ModelRouter(models, dataset)
        self._gcs_endpoint, self._state_dir = gcs_endpoint, Path(state_dir)
        self._timing, self._faults = timing or VertexTiming(), faults or VertexFaults()
        self.jobs: _Jobs | None = None
        self.base_url = ""

    def _app(self) -> ASGIApp:
        gcs = storage.Client(project="aeval-offline",
                             credentials=AnonymousCredentials(),
                             client_options={"api_endpoint": self._gcs_endpoint})  # fmt: skip
        self.jobs = _Jobs(self._state_dir, gcs, self._router, self._timing, self._faults)
        return _build_app(self.jobs)

    def _bound(self, root: str) -> str:
        self.base_url = root
        return root


def _build_app(jobs: _Jobs) -> ASGIApp:
    def authorised(request: Request) -> bool:
        return request.headers.get("authorization") == f"Bearer {TOKEN}"

    async def token(request: Request) -> Response:
        try:
            raw = await read_body(request)
        except ValueError:
            return JSONResponse({"error": "invalid_request"}, 400)
        form = urllib.parse.parse_qs(raw.decode("utf-8", "replace"))
        if form.get("grant_type") != ["urn:ietf:params:oauth:grant-type:jwt-bearer"]:
            return JSONResponse({"error": "unsupported_grant_type"}, 400)
        scope = "https://www.googleapis.com/auth/cloud-platform"
        return JSONResponse({"access_token": TOKEN, "expires_in": 3600, "token_type": "Bearer",
                             "scope": scope})  # fmt: skip

    async def create(request: Request) -> Response:
        if not authorised(request):
            return _error(401, "Request had invalid authentication credentials.",
                          "UNAUTHENTICATED")  # fmt: skip
        try:
            body = await json_body(request)
        except (ValueError, RecursionError):
            return _error(400, "Invalid JSON payload received.", "INVALID_ARGUMENT")
        try:
            uris = body["inputConfig"]["gcsSource"]["uris"]
            prefix = body["outputConfig"]["gcsDestination"]["outputUriPrefix"]
            model, display = str(body["model"]), str(body["displayName"])
        except (KeyError, TypeError):
            return _error(400, "displayName, model, inputConfig.gcsSource.uris and outputConfig"
                          ".gcsDestination.outputUriPrefix are required.",
                          "INVALID_ARGUMENT")  # fmt: skip
        if not (isinstance(uris, list) and uris and str(uris[0]).startswith("gs://")
                and str(prefix).startswith("gs://")):  # fmt: skip
            return _error(400, "Cloud Storage locations must be gs:// URIs.", "INVALID_ARGUMENT")
        project, location = request.path_params["project"], request.path_params["location"]

        def make() -> tuple[dict[str, Any], bool]:
            now = time.time()
            number = str(random.getrandbits(60))
            return {
                "name": f"projects/{project}/locations/{location}/batchPredictionJobs/{number}",
                "displayName": display, "model": model, "inputConfig": body["inputConfig"],
                "outputConfig": body["outputConfig"], "state": "JOB_STATE_QUEUED",
                "createTime": iso(now), "labels": body.get("labels") or {}, "_created": now,
            }, True  # fmt: skip

        job, fail = await jobs.create(make)
        if fail:
            return _error(500, "Injected error after the create.", "INTERNAL")
        return JSONResponse(jobs.public(job))

    async def one(request: Request) -> Response:
        if not authorised(request):
            return _error(401, "Request had invalid authentication credentials.",
                          "UNAUTHENTICATED")  # fmt: skip
        ident: str = request.path_params["job"]
        cancel = request.method == "POST"
        if cancel != ident.endswith(":cancel"):
            return _error(404, "Unknown method.", "NOT_FOUND")
        ident = ident.removesuffix(":cancel")
        name = request.url.path.removeprefix("/v1beta1/").rsplit("/", 1)[0] + f"/{ident}"

        try:
            job = await jobs.read(name, end=cancel)
        except ValueError as err:
            return _error(400, f"The job has already ended ({err}).", "FAILED_PRECONDITION")
        if job is None:
            return _error(404, f"The BatchPredictionJob {name} does not exist.", "NOT_FOUND")
        return JSONResponse({} if cancel else jobs.public(job))

    async def listing(request: Request) -> Response:
        if not authorised(request):
            return _error(401, "Request had invalid authentication credentials.",
                          "UNAUTHENTICATED")  # fmt: skip
        query = request.query_params
        wanted = None
        text = query.get("filter") or ""
        if text.startswith("display_name="):
            wanted = text.removeprefix("display_name=").strip('"')
        elif text:
            return _error(400, f"Unsupported filter {text!r}.", "INVALID_ARGUMENT")
        try:
            size = max(1, min(100, int(query.get("pageSize") or 100)))
            start = int(query.get("pageToken") or 0)
        except ValueError:
            return _error(400, "pageSize and pageToken are numbers.", "INVALID_ARGUMENT")

        def named(job: Mapping[str, Any]) -> bool:
            return wanted is None or job["displayName"] == wanted

        found = await jobs.listed(named)
        return JSONResponse(page(found, start, size, "batchPredictionJobs", "nextPageToken"))

    routes = [
        Route("/token", token, methods=["POST"]),
        Route(_JOB_PATH, create, methods=["POST"]),
        Route(_JOB_PATH, listing, methods=["GET"]),
        Route(_JOB_PATH + "/{job}", one, methods=["GET", "POST"]),
    ]
    return Starlette(routes=routes)
