"""Groq's Batch API: OpenAI's wire format under ``/openai/v1``, windows of 24 h to 7 d.

Request bodies are OpenAI chat bodies (Groq takes every setting aeval sends,
``seed`` and both max-tokens names included). Keys and base URL are the groq SDK's
variables (its base URL is the server's root: the SDK adds ``/openai/v1``).

An effort level goes in ``reasoning_effort`` (groq 1.7.0,
``types/chat/completion_create_params.py``: none, default, low, medium, high), with
``reasoning_format: "parsed"``, which puts the thinking in the message's own
``reasoning`` field (``types/chat/chat_completion_message.py``), out of the answer text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aeval.api_settings import ShardLimits
from aeval.batch.providers.spec import ProviderSpec, check_reasoning
from aeval.feedback import Turn
from aeval.model_names import ModelName
from aeval.prompts import GenerationSettings, PromptSettings, request_body

__all__ = ["SPEC"]

KEY_VARIABLE = "GROQ_API_KEY"
BASE_URL_VARIABLE = "GROQ_BASE_URL"
EFFORTS = ("none", "low", "medium", "high")


def groq_body(
    model: str,
    question: str,
    prompt: PromptSettings,
    gen: GenerationSettings,
    turns: Sequence[Turn] = (),
) -> dict[str, Any]:
    body = request_body(model, question, prompt, gen, turns)
    if gen.reasoning_effort not in (None, "none"):
        body["reasoning_format"] = "parsed"
    return body


def check_request(model: ModelName, gen: GenerationSettings, prompt: PromptSettings) -> None:
    check_reasoning(model, gen, "Groq", EFFORTS)


SPEC = ProviderSpec(
    name="groq",
    title="Groq",
    key_variables=(KEY_VARIABLE,),
    base_url_variable=BASE_URL_VARIABLE,
    # 50,000 requests and 100 MB a batch input file (groq 1.7.0, BatchCreateParams:
    # "The file can be up to 100 MB in size"), with a margin.
    limits=ShardLimits(max_requests=49_000, max_bytes=95 * 1024 * 1024),
    adapter="aeval.batch.providers.groq_api:GroqBatchProvider",
    request_body=groq_body,
    check_request=check_request,
    extra="groq",
)
