"""Mistral's batch jobs API.

A request line's body is a Mistral chat body: ``messages``, ``temperature``,
``top_p``, ``max_tokens`` and ``random_seed`` (Mistral's name for the seed),
plus ``model``, which the adapter moves to the job (Mistral's input lines are
``{"custom_id", "body"}`` with the model named once, on the job). The key is
the mistralai SDK's ``MISTRAL_API_KEY``; the SDK reads no base-URL variable,
so aeval reads ``MISTRAL_BASE_URL`` (Inspect AI's name for it) and passes it as
the SDK's ``server_url``. An effort level goes in ``reasoning_effort`` (mistralai
3.7.0, ``client/models/reasoningeffort.py``: none to max, OpenAI's vocabulary).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aeval.api_settings import ShardLimits
from aeval.batch.providers.spec import ProviderSpec, check_reasoning
from aeval.errors import ConfigError
from aeval.feedback import Turn
from aeval.model_names import ModelName
from aeval.prompts import GenerationSettings, PromptSettings, messages

__all__ = ["SPEC", "request_body"]

KEY_VARIABLE = "MISTRAL_API_KEY"
BASE_URL_VARIABLE = "MISTRAL_BASE_URL"


def request_body(
    model: str,
    question: str,
    prompt: PromptSettings,
    gen: GenerationSettings,
    turns: Sequence[Turn] = (),
) -> dict[str, Any]:
    """One question as a Mistral chat body (``model`` is moved to the job on upload)."""
    if not model.strip():
        raise ConfigError("a Mistral model name must not be empty")
    body: dict[str, Any] = {"model": model, "messages": messages(question, prompt, turns)}
    for name, value in (
        ("temperature", gen.temperature),
        ("top_p", gen.top_p),
        ("max_tokens", gen.max_tokens),
        ("random_seed", gen.seed),
        ("reasoning_effort", gen.reasoning_effort),
    ):
        if value is not None:
            body[name] = value
    return body


def check_request(model: ModelName, gen: GenerationSettings, prompt: PromptSettings) -> None:
    check_reasoning(model, gen, "Mistral")
    if gen.max_completion_tokens is not None:
        raise ConfigError(
            f"{model.qualified}: Mistral's chat API takes max_tokens, not max_completion_tokens"
        )
    if gen.temperature is not None and gen.temperature > 1.5:
        raise ConfigError(
            f"{model.qualified}: Mistral takes a temperature from 0 to 1.5, not {gen.temperature}"
        )
    if gen.seed is not None and gen.seed < 0:
        raise ConfigError(f"{model.qualified}: Mistral's random_seed must be >= 0")


SPEC = ProviderSpec(
    name="mistral",
    title="Mistral",
    key_variables=(KEY_VARIABLE,),
    base_url_variable=BASE_URL_VARIABLE,
    # Mistral documents no per-job count; its Files API takes files up to 512 MB.
    limits=ShardLimits(max_requests=49_000, max_bytes=480 * 1024 * 1024),
    adapter="aeval.batch.providers.mistral_api:MistralBatchProvider",
    request_body=request_body,
    check_request=check_request,
    extra="mistral",
)
