"""The storage emulators (moto's S3 server, gcp-storage-emulator) once per test session, and
the Bedrock and Vertex AI stand-ins over them per test, with credentials that reach both
through the providers' own SDKs. Each test gets buckets of its own.

Import the fixtures into a test module (``from cloud_fixtures import gcs_emulator, …``).
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator, Mapping
from pathlib import Path

import boto3
import botocore.config
import polars as pl
import pytest
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage

from aeval.cloud_standins.bedrock import BedrockFaults, BedrockStandIn, BedrockTiming
from aeval.cloud_standins.emulators import GcsEmulator, S3Emulator
from aeval.cloud_standins.vertex import VertexFaults, VertexStandIn, VertexTiming, adc_file
from aeval.config import Credentials
from aeval.local import ModelSpec

REGION = "us-east-1"
KEYS = ("aeval-test", "aeval-test-secret")
ROLE = "arn:aws:iam::123456789012:role/aeval-test"
FAST_BEDROCK = BedrockTiming(submitted_s=0.05, validating_s=0.05, scheduled_s=0.05,
                             in_progress_s=0.1)  # fmt: skip
FAST_VERTEX = VertexTiming(queued_s=0.05, pending_s=0.05, running_s=0.15)


@pytest.fixture(scope="session")
def s3_emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Emulator]:
    with S3Emulator() as emulator:
        yield emulator


@pytest.fixture(scope="session")
def gcs_emulator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GcsEmulator]:
    with GcsEmulator(state_dir=tmp_path_factory.mktemp("gcs")) as emulator:
        yield emulator


def s3_client(s3: S3Emulator) -> object:
    return boto3.session.Session(
        aws_access_key_id=KEYS[0], aws_secret_access_key=KEYS[1], region_name=REGION
    ).client(
        "s3", endpoint_url=s3.url, config=botocore.config.Config(s3={"addressing_style": "path"})
    )


def gcs_client(gcs: GcsEmulator) -> storage.Client:
    return storage.Client(project="aeval-test", credentials=AnonymousCredentials(),
                          client_options={"api_endpoint": gcs.url})  # fmt: skip


def new_bucket() -> str:
    return f"aeval-{secrets.token_hex(6)}"


@contextlib.contextmanager
def bedrock_stand_in(
    s3: S3Emulator, tmp: Path, frame: pl.DataFrame | None, models: Mapping[str, ModelSpec],
    *, faults: BedrockFaults | None = None, min_records: int = 1,
    timing: BedrockTiming = FAST_BEDROCK, state_dir: Path | None = None,
) -> Iterator[tuple[BedrockStandIn, Credentials, str]]:  # fmt: skip
    """A stand-in over ``s3`` with a bucket of its own; (it, credentials, the bucket)."""
    bucket = new_bucket()
    s3_client(s3).create_bucket(Bucket=bucket)  # type: ignore[attr-defined]
    with BedrockStandIn(
        s3_endpoint=s3.url, dataset=frame, models=models, state_dir=state_dir or tmp / "bedrock",
        timing=timing, faults=faults, min_records=min_records, region=REGION,
        access_key=KEYS[0], secret_key=KEYS[1],
    ) as stand_in:  # fmt: skip
        yield stand_in, bedrock_credentials(stand_in.base_url, s3.url, bucket, min_records), bucket


def bedrock_credentials(base_url: str, s3_url: str, bucket: str, min_records: int = 1
                        ) -> Credentials:  # fmt: skip
    return Credentials(KEYS[1], base_url, aeval_server=True, options=(
        ("aws_access_key_id", KEYS[0]), ("region", REGION), ("s3_endpoint", s3_url),
        ("s3", f"s3://{bucket}/runs"), ("role_arn", ROLE), ("min_records", str(min_records)),
    ))  # fmt: skip


def bedrock_env(base_url: str, s3_url: str, bucket: str) -> dict[str, str]:
    """What a ``python -m aeval`` child needs to reach the stand-in through boto3's own
    variables (AWS_ENDPOINT_URL_<SERVICE>)."""
    return {
        "AWS_ACCESS_KEY_ID": KEYS[0], "AWS_SECRET_ACCESS_KEY": KEYS[1], "AWS_REGION": REGION,
        "AWS_ENDPOINT_URL_BEDROCK": base_url, "AWS_ENDPOINT_URL_S3": s3_url,
        "AEVAL_BEDROCK_S3": f"s3://{bucket}/runs", "AEVAL_BEDROCK_ROLE_ARN": ROLE,
    }  # fmt: skip


@contextlib.contextmanager
def vertex_stand_in(
    gcs: GcsEmulator, tmp: Path, frame: pl.DataFrame | None, models: Mapping[str, ModelSpec],
    *, faults: VertexFaults | None = None, timing: VertexTiming = FAST_VERTEX,
    state_dir: Path | None = None,
) -> Iterator[tuple[VertexStandIn, Credentials, str]]:  # fmt: skip
    bucket = new_bucket()
    gcs_client(gcs).create_bucket(bucket)
    with VertexStandIn(gcs_endpoint=gcs.url, state_dir=state_dir or tmp / "vertex",
                       dataset=frame, models=models, timing=timing,
                       faults=faults) as stand_in:  # fmt: skip
        adc = adc_file(tmp / f"adc-{bucket}.json", stand_in.base_url + "/token")
        yield stand_in, vertex_credentials(stand_in.base_url, gcs.url, bucket, adc), bucket


def vertex_credentials(base_url: str, gcs_url: str, bucket: str, adc: Path) -> Credentials:
    return Credentials("aeval-test", base_url, aeval_server=True, options=(
        ("project", "aeval-test"), ("location", "us-central1"), ("gcs", f"gs://{bucket}/runs"),
        ("adc_file", str(adc)), ("gcs_endpoint", gcs_url),
    ))  # fmt: skip


def vertex_env(base_url: str, gcs_url: str, bucket: str, adc: Path) -> dict[str, str]:
    """What a child needs to reach the stand-in through the SDKs' own variables."""
    return {
        "GOOGLE_CLOUD_PROJECT": "aeval-test", "GOOGLE_CLOUD_LOCATION": "us-central1",
        "GOOGLE_VERTEX_BASE_URL": base_url, "GOOGLE_APPLICATION_CREDENTIALS": str(adc),
        "STORAGE_EMULATOR_HOST": gcs_url, "AEVAL_VERTEX_GCS": f"gs://{bucket}/runs",
    }  # fmt: skip
