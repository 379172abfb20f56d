"""Together AI's Batch API: OpenAI-like, with its own upload and status words.

Request bodies are OpenAI chat bodies (Together's chat API takes ``seed``).
Keys and base URL are the together SDK's variables.
"""

from __future__ import annotations

from aeval.api_settings import ShardLimits
from aeval.batch.providers.spec import ProviderSpec
from aeval.errors import ConfigError
from aeval.model_names import ModelName
from aeval.prompts import GenerationSettings, PromptSettings

__all__ = ["SPEC"]

KEY_VARIABLE = "TOGETHER_API_KEY"
BASE_URL_VARIABLE = "TOGETHER_BASE_URL"


def check_request(model: ModelName, gen: GenerationSettings, prompt: PromptSettings) -> None:
    if gen.max_completion_tokens is not None:
        raise ConfigError(
            f"{model.qualified}: Together's chat API takes max_tokens, not max_completion_tokens"
        )


SPEC = ProviderSpec(
    name="together",
    title="Together AI",
    key_variables=(KEY_VARIABLE,),
    base_url_variable=BASE_URL_VARIABLE,
    # 50,000 requests and 100 MB a batch input file, with a margin.
    limits=ShardLimits(max_requests=49_000, max_bytes=95 * 1024 * 1024),
    adapter="aeval.batch.providers.together_api:TogetherBatchProvider",
    check_request=check_request,
    extra="together",
)
