"""xAI's Batch API (Grok): OpenAI's JSONL upload at ``/v1/files``, xAI's own batches.

Request lines are OpenAI Batch-API lines, ``{custom_id, method, url, body}`` with
``/v1/chat/completions`` bodies (xAI's chat API is OpenAI's: ``model``, ``messages``,
``temperature``, ``top_p``, ``max_tokens``/``max_completion_tokens``, ``seed``,
``reasoning_effort``). The key is ``XAI_API_KEY`` (xAI's own SDK's variable);
``XAI_BASE_URL`` (aeval's, as litellm's ``XAI_API_BASE``) points the openai SDK
elsewhere, default ``https://api.x.ai/v1``.

Reasoning: xAI documents ``reasoning_effort`` for a few models only (grok-3-mini: low,
high; grok-4.3: none to high; grok-4.5: low to high). Grok 4 and the other reasoning
models always reason and answer 400 to the parameter; the non-reasoning models take
none. Each model's levels are :mod:`aeval.batch.providers.model_reasoning`'s (xAI's own
pages first, then litellm's map); here only the levels any Grok model takes, and no
thinking budget (xAI's chat API has none).
"""

from __future__ import annotations

from aeval.api_settings import ShardLimits
from aeval.batch.providers.spec import ProviderSpec, check_reasoning
from aeval.batch.providers.xai_limits import MAX_FILE_BYTES, MAX_REQUESTS
from aeval.model_names import ModelName
from aeval.prompts import GenerationSettings, PromptSettings

__all__ = ["BASE_URL_VARIABLE", "EFFORTS", "KEY_VARIABLE", "LOCAL_ROOT", "SPEC"]

KEY_VARIABLE = "XAI_API_KEY"
BASE_URL_VARIABLE = "XAI_BASE_URL"
EFFORTS = ("none", "low", "medium", "high")
# Where ``aeval serve`` answers xAI: under /xai, because xAI's own paths (/v1/files,
# /v1/batches) are OpenAI's on the same port, with other shapes.
LOCAL_ROOT = "/xai/v1"


def check_request(model: ModelName, gen: GenerationSettings, prompt: PromptSettings) -> None:
    check_reasoning(model, gen, "xAI's chat API", EFFORTS)


SPEC = ProviderSpec(
    name="xai",
    title="xAI",
    key_variables=(KEY_VARIABLE,),
    base_url_variable=BASE_URL_VARIABLE,
    # Under xAI's throttling threshold and its Files API's file size, with a margin
    # (aeval.batch.providers.xai_limits).
    limits=ShardLimits(max_requests=49_000, max_bytes=MAX_FILE_BYTES * 95 // 100),
    adapter="aeval.batch.providers.xai_api:XaiBatchProvider",
    check_request=check_request,
    root_path=LOCAL_ROOT,
)

assert SPEC.limits.max_requests <= MAX_REQUESTS
