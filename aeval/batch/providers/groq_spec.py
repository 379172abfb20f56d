"""Groq's Batch API: OpenAI's wire format under ``/openai/v1``, windows of 24 h to 7 d.

Request bodies are OpenAI chat bodies (Groq takes every setting aeval sends,
``seed`` and both max-tokens names included). Keys and base URL are the groq SDK's
variables (its base URL is the server's root: the SDK adds ``/openai/v1``).
"""

from __future__ import annotations

from collections.abc import Mapping

from aeval.api_settings import Credentials, RetrySettings, ShardLimits
from aeval.batch.providers.base import BatchProvider
from aeval.batch.providers.env_credentials import key_credentials
from aeval.batch.providers.spec import ProviderSpec
from aeval.batch.shard import URL
from aeval.prompts import request_body

__all__ = ["SPEC"]

KEY_VARIABLE = "GROQ_API_KEY"
BASE_URL_VARIABLE = "GROQ_BASE_URL"


def resolve(env: Mapping[str, str]) -> Credentials | None:
    return key_credentials(env, (KEY_VARIABLE,), BASE_URL_VARIABLE)


def _open(credentials: Credentials, retry: RetrySettings) -> BatchProvider:
    from aeval.batch.providers.groq_api import GroqBatchProvider

    return GroqBatchProvider(credentials, retry)


SPEC = ProviderSpec(
    name="groq",
    title="Groq",
    key_variables=(KEY_VARIABLE,),
    base_url_variable=BASE_URL_VARIABLE,
    # 50,000 requests and 100 MB a batch input file (groq 1.7.0, BatchCreateParams:
    # "The file can be up to 100 MB in size"), with a margin.
    limits=ShardLimits(max_requests=49_000, max_bytes=95 * 1024 * 1024),
    request_url=URL,
    request_body=request_body,
    resolve=resolve,
    open=_open,
    extra="groq",
    root_path="",
)
