"""The offline demo's clouds: Bedrock and Vertex AI stand-ins over real storage emulators.

:func:`cloud_stand_ins` starts, for the providers asked (``bedrock``, ``vertex``), the
storage emulator each needs (:mod:`aeval.cloud_standins.emulators`: moto's S3 server,
gcp-storage-emulator, each a child process on a free loopback port), a bucket in it, and
the provider's control-plane stand-in (:mod:`aeval.cloud_standins.bedrock`,
:mod:`aeval.cloud_standins.vertex`) in a thread; it yields the credentials that reach
them through the providers' own SDKs, and stops everything on the way out (the emulators
by their PIDs). Their state lives under ``state_dir``, so a resumed offline run finds
its jobs again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from pathlib import Path

import boto3
import botocore.config
import polars as pl
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage

from aeval.api_settings import Credentials
from aeval.cloud_standins.bedrock import BedrockStandIn, BedrockTiming
from aeval.cloud_standins.emulators import GcsEmulator, S3Emulator
from aeval.cloud_standins.vertex import VertexStandIn, VertexTiming, adc_file
from aeval.local.models import ModelSpec

__all__ = ["BUCKET", "CLOUD_PROVIDERS", "cloud_stand_ins"]

CLOUD_PROVIDERS = ("bedrock", "vertex")
BUCKET = "aeval-offline"
_REGION = "us-east-1"
_KEYS = ("aeval-offline", "aeval-offline-secret")
# A few seconds a job, so that the live view shows each state go by.
DEMO_BEDROCK = BedrockTiming(submitted_s=0.5, validating_s=0.5, scheduled_s=0.5, in_progress_s=2)
DEMO_VERTEX = VertexTiming(queued_s=0.5, pending_s=0.5, running_s=2.5)


def _bedrock_bucket(s3_url: str) -> None:
    s3 = boto3.session.Session(
        aws_access_key_id=_KEYS[0], aws_secret_access_key=_KEYS[1], region_name=_REGION
    ).client(
        "s3", endpoint_url=s3_url, config=botocore.config.Config(s3={"addressing_style": "path"})
    )
    try:
        s3.create_bucket(Bucket=BUCKET)
    except s3.exceptions.BucketAlreadyOwnedByYou:
        pass
    finally:
        s3.close()


def _gcs_bucket(gcs_url: str) -> None:
    client = storage.Client(
        project="aeval-offline",
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": gcs_url},
    )
    try:
        if client.lookup_bucket(BUCKET) is None:
            client.create_bucket(BUCKET)
    finally:
        client.close()


@contextlib.contextmanager
def cloud_stand_ins(
    providers: set[str],
    state_dir: Path,
    *,
    dataset: pl.DataFrame | None,
    models: Mapping[str, ModelSpec],
    bedrock_timing: BedrockTiming = DEMO_BEDROCK,
    vertex_timing: VertexTiming = DEMO_VERTEX,
) -> Iterator[tuple[dict[str, Credentials], list[str]]]:
    """The stand-ins of ``providers`` (a subset of :data:`CLOUD_PROVIDERS`) and their
    emulators, running; yields each provider's credentials, and one line per provider
    saying what answers it."""
    creds: dict[str, Credentials] = {}
    said: list[str] = []
    with contextlib.ExitStack() as stack:
        if "bedrock" in providers:
            s3 = stack.enter_context(S3Emulator())
            _bedrock_bucket(s3.url)
            bedrock = stack.enter_context(
                BedrockStandIn(
                    s3_endpoint=s3.url,
                    dataset=dataset,
                    models=models,
                    state_dir=state_dir / "bedrock",
                    timing=bedrock_timing,
                    min_records=1,
                    region=_REGION,
                    access_key=_KEYS[0],
                    secret_key=_KEYS[1],
                )
            )
            said.append(
                f"bedrock/ models run on aeval's Bedrock stand-in ({bedrock.base_url}) over "
                f"moto's S3 server (pid {s3.pid}, {s3.url}), with synthetic answers"
            )
            creds["bedrock"] = Credentials(
                api_key=_KEYS[1],
                base_url=bedrock.base_url,
                aeval_server=True,
                options=(
                    ("aws_access_key_id", _KEYS[0]),
                    ("region", _REGION),
                    ("s3_endpoint", s3.url),
                    ("s3", f"s3://{BUCKET}/runs"),
                    ("role_arn", "arn:aws:iam::123456789012:role/aeval-offline"),
                    ("min_records", "1"),
                ),
            )
        if "vertex" in providers:
            gcs = stack.enter_context(GcsEmulator(state_dir=state_dir / "gcs"))
            _gcs_bucket(gcs.url)
            vertex = stack.enter_context(
                VertexStandIn(
                    gcs_endpoint=gcs.url,
                    state_dir=state_dir / "vertex",
                    dataset=dataset,
                    models=models,
                    timing=vertex_timing,
                )
            )
            adc = adc_file(state_dir / "vertex" / "adc.json", vertex.base_url + "/token")
            said.append(
                f"vertex/ models run on aeval's Vertex AI stand-in ({vertex.base_url}) over "
                f"gcp-storage-emulator (pid {gcs.pid}, {gcs.url}), with synthetic answers"
            )
            creds["vertex"] = Credentials(
                api_key="aeval-offline",
                base_url=vertex.base_url,
                aeval_server=True,
                options=(
                    ("project", "aeval-offline"),
                    ("location", "us-central1"),
                    ("gcs", f"gs://{BUCKET}/runs"),
                    ("adc_file", str(adc)),
                    ("gcs_endpoint", gcs.url),
                ),
            )
        yield creds, said
