"""Groq's Batch API: OpenAI's wire format under ``/openai/v1``, windows of 24 h to 7 d.

Request bodies are OpenAI chat bodies (Groq takes every setting aeval sends,
``seed`` and both max-tokens names included). Keys and base URL are the groq SDK's
variables (its base URL is the server's root: the SDK adds ``/openai/v1``).
"""

from __future__ import annotations

from aeval.api_settings import ShardLimits
from aeval.batch.providers.spec import ProviderSpec

__all__ = ["SPEC"]

KEY_VARIABLE = "GROQ_API_KEY"
BASE_URL_VARIABLE = "GROQ_BASE_URL"


SPEC = ProviderSpec(
    name="groq",
    title="Groq",
    key_variables=(KEY_VARIABLE,),
    base_url_variable=BASE_URL_VARIABLE,
    # 50,000 requests and 100 MB a batch input file (groq 1.7.0, BatchCreateParams:
    # "The file can be up to 100 MB in size"), with a margin.
    limits=ShardLimits(max_requests=49_000, max_bytes=95 * 1024 * 1024),
    adapter="aeval.batch.providers.groq_api:GroqBatchProvider",
    extra="groq",
)
