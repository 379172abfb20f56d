"""Together AI's Batch API: OpenAI-like, with its own upload and status words.

Request bodies are OpenAI chat bodies (Together's chat API takes ``seed``).
Keys and base URL are the together SDK's variables.

An effort level goes in ``reasoning_effort`` (together 3.1.1,
``types/chat/completion_create_params.py``: low, medium, high); ``none`` is that
module's ``reasoning: {"enabled": false}``. Together answers a reasoning model's
thinking in the message's ``reasoning`` field, apart from ``content``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aeval.api_settings import ShardLimits
from aeval.batch.providers.spec import ProviderSpec, check_reasoning
from aeval.errors import ConfigError
from aeval.feedback import Turn
from aeval.model_names import ModelName
from aeval.prompts import GenerationSettings, PromptSettings, request_body

__all__ = ["SPEC"]

KEY_VARIABLE = "TOGETHER_API_KEY"
BASE_URL_VARIABLE = "TOGETHER_BASE_URL"
EFFORTS = ("none", "low", "medium", "high")


def together_body(
    model: str,
    question: str,
    prompt: PromptSettings,
    gen: GenerationSettings,
    turns: Sequence[Turn] = (),
) -> dict[str, Any]:
    body = request_body(model, question, prompt, gen, turns)
    if gen.reasoning_effort == "none":
        del body["reasoning_effort"]
        body["reasoning"] = {"enabled": False}
    return body


def check_request(model: ModelName, gen: GenerationSettings, prompt: PromptSettings) -> None:
    check_reasoning(model, gen, "Together", EFFORTS)
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
    request_body=together_body,
    check_request=check_request,
    extra="together",
)
