"""OpenAI's Batch API (and Azure OpenAI's, and any OpenAI-compatible batch server).

Request lines are the Batch API's own (``/v1/chat/completions`` bodies: model,
messages, and only the generation settings that were set). Keys and base URL
are the openai SDK's variables; ``AZURE_OPENAI_ENDPOINT`` switches to Azure
(:func:`aeval.config.resolve_credentials`).
"""

from __future__ import annotations

from aeval.api_settings import (
    BASE_URL_VARIABLE,
    KEY_VARIABLES,
    Credentials,
    RetrySettings,
    ShardLimits,
    resolve_credentials,
)
from aeval.batch.providers.base import BatchProvider
from aeval.batch.providers.spec import ProviderSpec
from aeval.batch.shard import URL
from aeval.prompts import request_body

__all__ = ["SPEC"]


def _open(credentials: Credentials, retry: RetrySettings) -> BatchProvider:
    # Deferred: the openai SDK is the costliest import of all (bench/README.md, start-up).
    from aeval.batch.providers.openai_api import OpenAIBatchProvider

    return OpenAIBatchProvider(credentials, retry)


SPEC = ProviderSpec(
    name="openai",
    title="OpenAI",
    key_variables=KEY_VARIABLES,
    base_url_variable=BASE_URL_VARIABLE,
    # 50,000 requests or 200 MB per input file, with a margin.
    limits=ShardLimits(),
    request_url=URL,
    request_body=request_body,
    resolve=resolve_credentials,
    open=_open,
    root_path="/v1",
)
