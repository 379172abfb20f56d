"""OpenAI's Batch API (and Azure OpenAI's, and any OpenAI-compatible batch server).

Request lines are the Batch API's own (``/v1/chat/completions`` bodies: model,
messages, and only the generation settings that were set). Keys and base URL
are the openai SDK's variables; ``AZURE_OPENAI_ENDPOINT`` switches to Azure
(:func:`aeval.config.resolve_credentials`).
"""

from __future__ import annotations

from aeval.api_settings import BASE_URL_VARIABLE, KEY_VARIABLES, ShardLimits, resolve_credentials
from aeval.batch.providers.spec import ProviderSpec

__all__ = ["SPEC"]


SPEC = ProviderSpec(
    name="openai",
    title="OpenAI",
    key_variables=KEY_VARIABLES,
    base_url_variable=BASE_URL_VARIABLE,
    # 50,000 requests or 200 MB per input file, with a margin.
    limits=ShardLimits(),
    # Imported when opened: the openai SDK is the costliest import of all
    # (bench/README.md, start-up).
    adapter="aeval.batch.providers.openai_api:OpenAIBatchProvider",
    credentials=resolve_credentials,
    root_path="/v1",
)
