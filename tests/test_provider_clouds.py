"""What the Bedrock and Vertex AI specs decide before anything is sent, and the corpus of
tests/conformance/bedrock and tests/conformance/vertex read through the adapters.

Bodies in each model family's own shape, keys and settings from the SDKs' own variables,
what each service would refuse said in one line, every job state the service model (or
the SDK) allows given a meaning, every documented result shape read onto its row, and a
shard held within the documented limits.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import botocore.session
import pytest
from google.genai import types

from aeval.batch.providers import bedrock_limits
from aeval.batch.providers.bedrock_api import (
    STATES,
    decode_record_id,
    encode_record_id,
    result_line,
)
from aeval.batch.providers.bedrock_api import _to_remote as bedrock_remote
from aeval.batch.providers.registry import check_providers, missing_key_error, provider_spec
from aeval.batch.providers.vertex_api import STATES as VERTEX_STATES
from aeval.batch.providers.vertex_api import _gemini_line, prediction_line
from aeval.batch.retry import retryable_request
from aeval.config import RunConfig
from aeval.errors import ApiError, ConfigError
from aeval.model_names import parse_model
from aeval.prompts import GenerationSettings, PromptSettings
from aeval.scoring.responses import parse_batch_line

CORPUS = Path(__file__).parent / "conformance"
CLAUDE = "anthropic.claude-sonnet-4-5-20250929-v1:0"


def _doc(provider: str, name: str) -> dict[str, Any]:
    return json.loads((CORPUS / provider / f"{name}.json").read_text())


# -- request bodies ------------------------------------------------------------------------


def test_bedrock_claude_body_is_the_messages_body_with_bedrocks_version_and_no_model() -> None:
    spec = provider_spec("bedrock")
    gen = GenerationSettings(temperature=0.2, max_tokens=300)
    body = spec.request_body(f"us.{CLAUDE}", "Q?", PromptSettings(system="Be terse."), gen)
    assert body["anthropic_version"] == "bedrock-2023-05-31"
    assert "model" not in body and body["max_tokens"] == 300 and body["temperature"] == 0.2
    assert body["system"] == "Be terse." and body["messages"][0]["role"] == "user"
    assert body["messages"][0]["content"].startswith("Q?\n")


def test_bedrock_thinking_budget_is_claudes_thinking_field() -> None:
    body = provider_spec("bedrock").request_body(
        CLAUDE, "Q?", PromptSettings(), GenerationSettings(thinking_budget=2048)
    )
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["max_tokens"] > 2048


def test_bedrock_nova_body_is_messages_v1() -> None:
    gen = GenerationSettings(temperature=0.5, top_p=0.9, max_completion_tokens=200)
    body = provider_spec("bedrock").request_body(
        "amazon.nova-pro-v1:0", "Q?", PromptSettings(system="S"), gen
    )
    assert body["schemaVersion"] == "messages-v1"
    assert body["system"] == [{"text": "S"}]
    assert body["messages"][0]["content"][0]["text"].startswith("Q?\n")
    assert body["inferenceConfig"] == {"maxTokens": 200, "temperature": 0.5, "topP": 0.9}


def test_vertex_gemini_body_has_no_model_and_the_claude_body_vertexs_version() -> None:
    spec = provider_spec("vertex")
    gemini = spec.request_body("gemini-2.5-flash", "Q?", PromptSettings(), GenerationSettings())
    assert "model" not in gemini and gemini["contents"][0]["parts"][0]["text"].startswith("Q?")
    claude = spec.request_body(
        "claude-sonnet-4-5@20250929", "Q?", PromptSettings(), GenerationSettings()
    )
    assert claude["anthropic_version"] == "vertex-2023-10-16" and "model" not in claude


def test_a_vertex_request_carries_its_id_in_a_label_the_api_accepts() -> None:
    line = _gemini_line({"custom_id": "row-17", "body": {"contents": []}})
    value = line["request"]["labels"]["aeval_id"]
    assert value == b"row-17".hex() and len(value) <= 63
    assert set(value) <= set("0123456789abcdef")  # lowercase letters and digits only
    with pytest.raises(ApiError, match="at most 31 bytes"):
        _gemini_line({"custom_id": "x" * 40, "body": {"contents": []}})


def test_a_record_id_is_alphanumeric_and_decodes_to_its_custom_id() -> None:
    for custom_id in ("row-17", "warp_small_0001", "ε-1"):
        record_id = encode_record_id(custom_id)
        assert record_id.isalnum() and decode_record_id(record_id) == custom_id
    assert decode_record_id("3223593EFGH") is None  # one Bedrock made up


@pytest.mark.parametrize(
    ("model", "settings", "says"),
    [
        ("bedrock/meta.llama3-70b-instruct-v1:0", {}, "Anthropic Claude"),
        (f"bedrock/{CLAUDE}", {"seed": 3}, "no seed"),
        (f"bedrock/{CLAUDE}", {"reasoning_effort": "high"}, "thinking budget"),
        (f"bedrock/{CLAUDE}", {"temperature": 1.5}, "maximum of 1.0"),
        (f"bedrock/{CLAUDE}", {"thinking_budget": 500}, "at least 1024"),
        ("bedrock/amazon.nova-lite-v1:0", {"reasoning_effort": "low"}, "Nova"),
        ("vertex/gemini-2.5-flash", {"seed": 2**40}, "32-bit seed"),
        ("vertex/claude-sonnet-4-5", {"reasoning_effort": "high"}, "Vertex AI"),
    ],
)
def test_a_setting_the_cloud_would_refuse_is_refused_in_one_line(
    model: str, settings: dict[str, Any], says: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        check_providers(RunConfig(models=(model,), generation=GenerationSettings(**settings)))
    assert says in str(caught.value) and "\n" not in str(caught.value)
    assert str(caught.value).startswith(parse_model(model).qualified)


def test_credentials_come_from_the_sdks_own_variables_and_the_flags_variables() -> None:
    bedrock = provider_spec("bedrock").resolve
    assert bedrock({"AWS_REGION": "us-west-2"}) is None  # nowhere for boto3's chain to start
    env = {"AWS_PROFILE": "dev", "AWS_REGION": "us-west-2",
           "AEVAL_BEDROCK_S3": "s3://b/p", "AEVAL_BEDROCK_ROLE_ARN": "arn:r"}  # fmt: skip
    found = bedrock(env)
    assert found is not None
    assert (found.option("s3"), found.option("role_arn"), found.option("region")) == (
        "s3://b/p", "arn:r", "us-west-2",
    )  # fmt: skip
    vertex = provider_spec("vertex").resolve
    assert vertex({"GOOGLE_APPLICATION_CREDENTIALS": "/k.json"}) is None  # no project named
    env = {"GOOGLE_CLOUD_PROJECT": "p", "GOOGLE_CLOUD_LOCATION": "europe-west4",
           "AEVAL_VERTEX_GCS": "gs://b/p", "GOOGLE_VERTEX_BASE_URL": "http://h"}  # fmt: skip
    found = vertex(env)
    assert found is not None and found.base_url == "http://h"
    assert (found.option("project"), found.option("location"), found.option("gcs")) == (
        "p", "europe-west4", "gs://b/p",
    )  # fmt: skip
    assert "AWS_ACCESS_KEY_ID" in str(missing_key_error("bedrock"))
    assert "GOOGLE_CLOUD_PROJECT" in str(missing_key_error("vertex"))


# -- the service model ---------------------------------------------------------------------


def test_the_bedrock_fixture_is_botocores_own_service_model() -> None:
    """The corpus's operations and shapes are what the installed botocore serialises and
    validates against: a botocore that changes them fails here until the fixture (and the
    adapter and stand-in held against it) follow."""
    doc = _doc("bedrock", "service-model")
    model = botocore.session.get_session().get_service_model("bedrock")
    for name, op in doc["operations"].items():
        live = model.operation_model(name)
        assert dict(live.http) == op["http"]
        assert list(live.input_shape.required_members) == op["input_required"]
        # what the adapter and stand-in rely on (later members, such as the record counts a
        # later botocore added, are read where present)
        wanted = {"jobArn", "jobName", "modelId", "status", "submitTime", "inputDataConfig",
                  "outputDataConfig"} & set(op["output"])  # fmt: skip
        assert wanted <= set(live.output_shape.members if live.output_shape else ())
    statuses = model.shape_for("ModelInvocationJobStatus").enum
    assert set(statuses) == set(doc["shapes"]["ModelInvocationJobStatus"]["enum"])


# -- job states ----------------------------------------------------------------------------


def test_every_bedrock_job_state_has_a_meaning() -> None:
    enum = _doc("bedrock", "service-model")["shapes"]["ModelInvocationJobStatus"]["enum"]
    fixtures = _doc("bedrock", "job-states")["fixtures"]
    assert {f["wire"] for f in fixtures} == set(enum) == set(STATES)


@pytest.mark.parametrize(
    "fixture", _doc("bedrock", "job-states")["fixtures"], ids=lambda f: f["wire"]
)
def test_a_bedrock_state_means_what_bedrock_means(fixture: dict[str, Any]) -> None:
    job = {
        "jobArn": "arn:aws:bedrock:us-east-1:1:model-invocation-job/j",
        "status": fixture["wire"],
    }
    remote = bedrock_remote(job)
    assert (remote.status, remote.terminal) == (
        fixture["means"]["status"],
        fixture["means"]["terminal"],
    )
    # every ended job is read: what an expired, stopped or failed job finished is kept
    assert (remote.output_file_id is not None) is fixture["means"]["terminal"]


def test_every_vertex_job_state_the_sdk_allows_has_a_meaning() -> None:
    fixtures = _doc("vertex", "job-states")["fixtures"]
    assert {f["wire"] for f in fixtures} == {s.value for s in types.JobState} == set(VERTEX_STATES)


@pytest.mark.parametrize(
    "fixture", _doc("vertex", "job-states")["fixtures"], ids=lambda f: f["wire"]
)
def test_a_vertex_state_means_what_vertex_means(fixture: dict[str, Any]) -> None:
    from aeval.batch.providers.vertex_api import VertexBatchProvider

    adapter = VertexBatchProvider.__new__(VertexBatchProvider)
    adapter._requests = {}
    job = types.BatchJob(name="projects/p/locations/l/batchPredictionJobs/1",
                         state=types.JobState(fixture["wire"]))  # fmt: skip
    remote = adapter._to_remote(job)
    assert (remote.status, remote.terminal) == (
        fixture["means"]["status"],
        fixture["means"]["terminal"],
    )


# -- per-request results -------------------------------------------------------------------


def _check(line: str | None, means: dict[str, Any]) -> None:
    if means["row"] is None:
        assert line is None
        return
    assert line is not None
    response = parse_batch_line(line)
    assert response.custom_id == means["row"]
    assert response.content == means["answer"]
    if means["error_code"] is not None:
        assert response.error_code == means["error_code"]
        assert response.status_code == means["status_code"]
    if means["retryable"] is not None:
        assert response.is_error
        assert retryable_request(response.error_code, response.status_code) is means["retryable"]
    else:
        assert not response.is_error
    if means["finish_reason"] is not None:
        assert response.finish_reason == means["finish_reason"]
    if means["completion_tokens"] is not None:
        assert response.completion_tokens == means["completion_tokens"]


@pytest.mark.parametrize("fixture", _doc("bedrock", "records")["fixtures"], ids=lambda f: f["name"])
def test_a_bedrock_record_means_what_bedrock_means(fixture: dict[str, Any]) -> None:
    _, line = result_line(json.dumps(fixture["line"]), CLAUDE)
    _check(line, fixture["means"])


@pytest.mark.parametrize(
    "fixture", _doc("vertex", "predictions")["fixtures"], ids=lambda f: f["name"]
)
def test_a_vertex_prediction_means_what_vertex_means(fixture: dict[str, Any]) -> None:
    _, line = prediction_line(json.dumps(fixture["line"]), "gemini-2.5-flash")
    _check(line, fixture["means"])


@pytest.mark.parametrize("raw", [b"", b"not json", b"[]", b'{"recordId": 5}', b'{"request": 1}'])
def test_hostile_result_lines_land_on_no_row(raw: bytes) -> None:
    assert result_line(raw) == (None, None)
    assert prediction_line(raw) == (None, None)


# -- limits --------------------------------------------------------------------------------


@pytest.mark.parametrize("provider", ["bedrock", "vertex"])
def test_a_shard_stays_within_the_documented_limits(provider: str) -> None:
    documented = _doc(provider, "limits")
    limits = provider_spec(provider).limits
    assert limits.max_requests <= documented["max_requests"]
    assert limits.max_bytes <= documented["max_bytes"]


def test_bedrocks_limits_file_says_what_the_corpus_says() -> None:
    documented = _doc("bedrock", "limits")
    assert documented["min_records"] == bedrock_limits.MIN_RECORDS_PER_JOB
    assert documented["max_requests"] == bedrock_limits.MAX_RECORDS_PER_JOB
    assert documented["max_bytes"] == bedrock_limits.MAX_FILE_BYTES
    assert documented["max_job_bytes"] == bedrock_limits.MAX_JOB_BYTES


# -- prices --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "list_input", "rate_from"),
    [
        # genai-prices' aws entries have no batch rate: Bedrock's documented 50 %, said so
        (f"bedrock/{CLAUDE}", 3.3, "aeval"),  # in-Region (aws: "regional.…")
        (f"bedrock/global.{CLAUDE}", 3.0, "aeval"),
        ("bedrock/amazon.nova-pro-v1:0", 0.8, "aeval"),
        # its google entries have Gemini's batch rate; Claude on Vertex at 50 %
        ("vertex/gemini-2.5-flash", 0.3, "genai-prices"),
        ("vertex/claude-sonnet-4-5", 3.0, "aeval"),
    ],
)
def test_cloud_prices_come_from_genai_prices_aws_and_google_entries(
    model: str, list_input: float, rate_from: str
) -> None:
    from aeval.cost import batch_rate_from, price_of

    listed, batch = price_of(model), price_of(model, batch=True)
    assert listed is not None and batch is not None
    assert listed.input == pytest.approx(list_input)
    assert batch.input == pytest.approx(list_input / 2)
    assert batch.output == pytest.approx(listed.output / 2)
    assert batch_rate_from(model) == rate_from


def test_a_cloud_run_without_storage_is_refused_before_anything_is_written() -> None:
    from aeval.api_settings import Credentials
    from aeval.commands.drive import check_cloud_storage

    keyed = Credentials("AWS_PROFILE", options=(("s3", "s3://b/p"),))
    with pytest.raises(ConfigError, match="--bedrock-role-arn ARN \\(or AEVAL_BEDROCK_ROLE_ARN\\)"):
        check_cloud_storage({"bedrock": keyed})
    with pytest.raises(ConfigError, match="--vertex-gcs"):
        check_cloud_storage({"vertex": Credentials("p", options=(("project", "p"),))})
    full = Credentials("AWS_PROFILE", options=(("s3", "s3://b/p"), ("role_arn", "arn:r")))
    check_cloud_storage({"bedrock": full, "openai": Credentials("sk")})  # nothing missing
    check_cloud_storage(None)  # the offline demo: its stand-ins bring their own
