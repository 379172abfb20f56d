"""OpenAI's Batch API (and Azure OpenAI's, and any OpenAI-compatible batch server).

Request lines are the Batch API's own (``/v1/chat/completions`` bodies: model,
messages, and only the generation settings that were set, ``reasoning_effort``
among them). Keys and base URL are the openai SDK's variables;
``AZURE_OPENAI_ENDPOINT`` switches to Azure (:func:`aeval.config.resolve_credentials`).

What the reasoning models refuse is refused here, before anything is written
(:func:`check_request`).
"""

from __future__ import annotations

import re

from aeval.api_settings import BASE_URL_VARIABLE, KEY_VARIABLES, ShardLimits, resolve_credentials
from aeval.batch.providers.spec import ProviderSpec, check_reasoning
from aeval.errors import ConfigError
from aeval.model_names import ModelName
from aeval.prompts import GenerationSettings, PromptSettings

__all__ = ["SPEC", "check_request", "is_reasoning_model"]

# OpenAI's reasoning models: the o-series and the gpt-5 family, whose chat variants
# (gpt-5-chat-latest) are not reasoning models and take sampling settings.
_REASONING = re.compile(r"^(o1|o3|o4-mini)(-|$)|^gpt-5(?!.*-chat)")


def is_reasoning_model(name: str) -> bool:
    """Whether ``name`` (the provider's own name) is one of OpenAI's reasoning models."""
    return _REASONING.match(name) is not None


def check_request(model: ModelName, gen: GenerationSettings, prompt: PromptSettings) -> None:
    """What OpenAI refuses, each in one line before anything is written.

    - A thinking budget: chat completions define only ``reasoning_effort``
      (``openai.types.chat.completion_create_params``, openai 3.57).
    - Sampling settings and ``max_tokens`` on a reasoning model: the API answers 400
      ``unsupported_parameter`` ("'temperature' is not supported with this model",
      openai/openai-python#2104); reasoning models take ``max_completion_tokens``
      (the SDK's ``max_tokens`` docstring: "not compatible with o-series models";
      https://developers.openai.com/api/docs/guides/reasoning).
    """
    check_reasoning(model, gen, "OpenAI's chat API")
    if not is_reasoning_model(model.name):
        return
    sampling = [n for n in ("temperature", "top_p") if getattr(gen, n) is not None]
    if sampling:
        flags = " and ".join(f"--{n.replace('_', '-')}" for n in sampling)
        raise ConfigError(
            f"{model.qualified}: OpenAI's reasoning models refuse {' and '.join(sampling)} "
            f"(400 unsupported_parameter); drop {flags} or run this model apart"
        )
    if gen.max_tokens is not None:
        raise ConfigError(
            f"{model.qualified}: OpenAI's reasoning models refuse max_tokens; "
            "use --max-completion-tokens"
        )


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
    check_request=check_request,
    credentials=resolve_credentials,
    root_path="/v1",
)
