"""Vertex AI batch prediction (``vertex/MODEL``): what aeval knows before talking to it.

Gemini on Vertex reads one JSONL file from Cloud Storage whose lines are
``{"request": GenerateContentRequest}`` ("Batch inference from Cloud Storage",
https://cloud.google.com/vertex-ai/generative-ai/docs/multimodal/batch-prediction-from-cloud-storage):
the body is :mod:`aeval.batch.providers.gemini_spec`'s, without ``model`` (the job names
it) and with the request's ``labels`` (``GenerateContentRequest.labels``: lowercase
letters, digits, ``_`` and ``-``, at most 63 characters) carrying its custom id, which is
how each prediction is joined to its row (the adapter writes them; the output's order is
its own).

Claude on Vertex goes through the same ``batchPredictionJobs`` path ("Batch predictions
with Anthropic Claude models",
https://cloud.google.com/vertex-ai/generative-ai/docs/partner-models/claude-batch): lines
``{"custom_id", "request"}`` whose request is the Messages body with ``anthropic_version``
``"vertex-2023-10-16"`` and no ``model``, the model named on the job as
``publishers/anthropic/models/NAME``. ``vertex/claude-…`` models are written so; their
body and its checks are :mod:`aeval.batch.providers.claude_messages`', as Bedrock's are.

Project and location are google-genai's own variables, ``GOOGLE_CLOUD_PROJECT`` and
``GOOGLE_CLOUD_LOCATION``; credentials are Application Default Credentials
(``GOOGLE_APPLICATION_CREDENTIALS``, or ``gcloud auth application-default login``).
The job's input and output live under ``--vertex-gcs gs://BUCKET/PREFIX`` (or
``AEVAL_VERTEX_GCS``). ``GOOGLE_VERTEX_BASE_URL`` and ``STORAGE_EMULATOR_HOST`` (the
SDKs' own) point them elsewhere: the offline stand-in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aeval.api_settings import Credentials, ShardLimits
from aeval.batch.providers import anthropic_spec, gemini_spec
from aeval.batch.providers.claude_messages import check_cloud_settings, cloud_body
from aeval.batch.providers.spec import ProviderSpec
from aeval.errors import ConfigError
from aeval.feedback import Turn
from aeval.model_names import ModelName
from aeval.prompts import GenerationSettings, PromptSettings, continue_chat

__all__ = [
    "ANTHROPIC_VERSION",
    "GCS_VARIABLE",
    "LOCATION_VARIABLE",
    "PROJECT_VARIABLE",
    "SPEC",
    "family",
    "job_model",
    "request_body",
]

ANTHROPIC_VERSION = "vertex-2023-10-16"
PROJECT_VARIABLE = "GOOGLE_CLOUD_PROJECT"
LOCATION_VARIABLE = "GOOGLE_CLOUD_LOCATION"
GCS_VARIABLE = "AEVAL_VERTEX_GCS"
BASE_URL_VARIABLE = "GOOGLE_VERTEX_BASE_URL"
# "Batch inference with Gemini" (https://cloud.google.com/vertex-ai/generative-ai/docs/
# multimodal/batch-prediction-gemini), limitations: up to 200,000 requests in a job and an
# input file of up to 1 GB in Cloud Storage.
MAX_REQUESTS = 200_000
MAX_FILE_BYTES = 1_000_000_000


def family(model: str) -> str:
    """``"claude"`` for an Anthropic model on Vertex, else ``"gemini"``."""
    name = model.rsplit("/", 1)[-1]
    return "claude" if name.startswith("claude") else "gemini"


def job_model(model: str) -> str:
    """The model a job names: ``publishers/PUBLISHER/models/NAME`` (a full resource name
    is kept as given)."""
    if "/" in model:
        return model
    publisher = "anthropic" if family(model) == "claude" else "google"
    return f"publishers/{publisher}/models/{model}"


def request_body(
    model: str,
    question: str,
    prompt: PromptSettings,
    gen: GenerationSettings,
    turns: Sequence[Turn] = (),
) -> dict[str, Any]:
    """One question as the ``request`` of a batch line (the custom id is the adapter's),
    a repair round's earlier turns after it as the model's family writes them."""
    if family(model) == "claude":
        return cloud_body(
            anthropic_spec.request_body("", question, prompt, gen, turns), ANTHROPIC_VERSION
        )
    body = gemini_spec.request_body(model.rsplit("/", 1)[-1], question, prompt, gen, turns)
    body.pop("model")
    return body


def continue_body(body: dict[str, Any], turns: Sequence[Turn]) -> dict[str, Any]:
    """``body`` with ``turns`` appended: a Gemini body's ``contents``, a Claude body's
    ``messages``."""
    if "contents" in body:
        return gemini_spec.continue_body(body, turns)
    return continue_chat(body, turns)


def check_request(model: ModelName, gen: GenerationSettings, prompt: PromptSettings) -> None:
    """What Vertex would refuse, said before anything is written."""
    if family(model.name) == "claude":
        if gen.seed is not None:
            raise ConfigError(
                f"{model.qualified}: Claude's Messages body has no seed; drop "
                "--generation-seed, or run the Claude models in a run of their own"
            )
        check_cloud_settings(model, gen, "Vertex AI")
        return
    bare = model.name.rsplit("/", 1)[-1]
    gemini_spec.check_request(
        ModelName(model.qualified, "google", bare, model.reasoning), gen, prompt
    )


def resolve(env: Mapping[str, str]) -> Credentials | None:
    """Credentials once a project is named (``GOOGLE_CLOUD_PROJECT``); the key itself is
    Application Default Credentials, which google-auth finds."""
    project = (env.get(PROJECT_VARIABLE) or "").strip()
    if not project:
        return None
    options = [("project", project)]
    location = (env.get(LOCATION_VARIABLE) or "").strip()
    if location:
        options.append(("location", location))
    gcs = (env.get(GCS_VARIABLE) or "").strip()
    if gcs:
        options.append(("gcs", gcs))
    base = (env.get(BASE_URL_VARIABLE) or "").strip()
    return Credentials(api_key=project, base_url=base or None, options=tuple(options))


SPEC = ProviderSpec(
    name="vertex",
    title="Google Vertex AI",
    key_variables=(PROJECT_VARIABLE,),
    base_url_variable=BASE_URL_VARIABLE,
    # One input file per job; a shard keeps OpenAI's request count (a run's shards stay
    # alike across providers), well under the job's 200,000.
    limits=ShardLimits(max_requests=49_000, max_bytes=MAX_FILE_BYTES * 9 // 10),
    adapter="aeval.batch.providers.vertex_api:VertexBatchProvider",
    request_url="vertex:batchPredictionJobs",
    request_body=request_body,
    continue_body=continue_body,
    check_request=check_request,
    credentials=resolve,
    extra="vertex",
)
