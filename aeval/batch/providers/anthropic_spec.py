"""Anthropic's Message Batches API: what aeval knows before talking to it.

A request is a Messages API call (``params``: model, ``max_tokens``, messages,
an optional top-level ``system``, ``temperature``/``top_p``), sent inline in
the create call. The settings are mapped here (the generation-setting hook):

- ``max_tokens`` is required by the API: ``--max-tokens`` (or
  ``--max-completion-tokens``), else :data:`DEFAULT_MAX_TOKENS`;
- the system text goes in ``system``, the question (with its instruction) in one
  user message;
- ``temperature`` (0 to 1 at Anthropic, not OpenAI's 0 to 2) and ``top_p`` are
  sent when set, but not both (recent Claude models refuse the pair), and only
  where the installed SDK's Messages API parameters still have them: the
  anthropic SDK 2.x drops both (its ``MessageCreateParams`` has no sampling
  settings), and the SDK wins, so with it a run that sets either is refused;
- an effort level goes in ``output_config.effort`` (``low`` to ``max``: anthropic
  2.14, ``types/output_config_param.py``); a variant's budget ``@N`` turns on
  extended thinking, ``thinking: {"type": "enabled", "budget_tokens": N}``
  (``types/thinking_config_enabled_param.py``: "Must be ≥1024 and less than
  ``max_tokens``"), with ``max_tokens`` N + :data:`DEFAULT_MAX_TOKENS` unless set
  (thinking counts toward it: ``MessageCreateParams.thinking``'s docstring), so the
  answer keeps its room after the thinking;
- there is no ``seed``: a run that sets one is refused before anything is sent
  (its trials could not be what the seed promises).

Keys and base URL are the anthropic SDK's own variables, ``ANTHROPIC_API_KEY``
and ``ANTHROPIC_BASE_URL`` (the SDK adds ``/v1/…`` itself).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from aeval.api_settings import ShardLimits
from aeval.batch.providers.anthropic_limits import MAX_BATCH_BYTES, MAX_BATCH_REQUESTS
from aeval.batch.providers.spec import ProviderSpec, check_reasoning
from aeval.errors import ConfigError
from aeval.feedback import Turn
from aeval.model_names import ModelName
from aeval.prompts import GenerationSettings, PromptSettings, conversation_turns, format_prompt

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "MAX_BATCH_BYTES",
    "MAX_BATCH_REQUESTS",
    "REQUEST_URL",
    "SPEC",
    "request_body",
]

KEY_VARIABLE = "ANTHROPIC_API_KEY"
BASE_URL_VARIABLE = "ANTHROPIC_BASE_URL"
# The Messages API requires max_tokens; an SMT-LIB answer is a few hundred tokens,
# so this leaves room for a long one without inviting a runaway reply.
DEFAULT_MAX_TOKENS = 4096
REQUEST_URL = "/v1/messages"


# anthropic 2.14, types/output_config_param.py: OutputConfigParam.effort
EFFORTS = ("low", "medium", "high", "xhigh", "max")
# anthropic 2.14, types/thinking_config_enabled_param.py: budget_tokens "Must be ≥1024"
MIN_THINKING_BUDGET = 1024


def max_tokens(gen: GenerationSettings) -> int:
    """The request's ``max_tokens``: as set, else room for the thinking budget and an answer."""
    given = gen.max_tokens or gen.max_completion_tokens
    if given is not None:
        return given
    return (gen.thinking_budget or 0) + DEFAULT_MAX_TOKENS


def request_body(
    model: str,
    question: str,
    prompt: PromptSettings,
    gen: GenerationSettings,
    turns: Sequence[Turn] = (),
) -> dict[str, Any]:
    """The Messages API ``params`` of one question; a repair round's earlier answers
    and feedback follow it as alternating ``assistant`` and ``user`` messages (anthropic
    2.14 types/message_param.py: ``MessageParam`` role ``user`` | ``assistant``, string
    content), the setting of a reasoning variant kept as in the first round."""
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens(gen)}
    if prompt.system is not None:
        body["system"] = prompt.system
    body["messages"] = [
        {"role": "user", "content": format_prompt(question, prompt)},
        *conversation_turns(turns),
    ]
    if gen.temperature is not None:
        body["temperature"] = gen.temperature
    if gen.top_p is not None:
        body["top_p"] = gen.top_p
    if gen.reasoning_effort is not None:
        body["output_config"] = {"effort": gen.reasoning_effort}
    if gen.thinking_budget is not None:
        body["thinking"] = {"type": "enabled", "budget_tokens": gen.thinking_budget}
    return body


def check_request(model: ModelName, gen: GenerationSettings, prompt: PromptSettings) -> None:
    """The settings Anthropic would refuse, each in one line before anything is sent."""
    if gen.seed is not None:
        raise ConfigError(
            f"{model.qualified}: Anthropic's Messages API has no seed; drop "
            "--generation-seed, or run the Anthropic models in a run of their own"
        )
    _check_reasoning(model, gen)
    wanted = [n for n in ("temperature", "top_p") if getattr(gen, n) is not None]
    missing = [n for n in wanted if n not in sdk_sampling_params()]
    if missing:
        flags = " and ".join(f"--{n.replace('_', '-')}" for n in missing)
        raise ConfigError(
            f"{model.qualified}: the installed anthropic SDK's Messages API has no "
            f"{' or '.join(missing)}; drop {flags} for Anthropic models (or run them apart)"
        )
    check_sampling(model, gen, "Anthropic")


def check_sampling(model: ModelName, gen: GenerationSettings, who: str) -> None:
    """The Messages API's sampling rules (temperature at most 1, not both it and top_p),
    wherever the body is sent (``who``: Anthropic, or Claude on a cloud)."""
    if gen.temperature is not None and gen.temperature > 1.0:
        raise ConfigError(
            f"{model.qualified}: temperature {gen.temperature} is above {who}'s maximum of 1.0"
        )
    if gen.temperature is not None and gen.top_p is not None:
        raise ConfigError(
            f"{model.qualified}: Claude models take temperature or top_p, not both; "
            "drop one of --temperature and --top-p"
        )


def check_thinking_budget(model: ModelName, gen: GenerationSettings, who: str) -> None:
    """The Messages API's rules for a thinking budget: at least
    :data:`MIN_THINKING_BUDGET`, below ``max_tokens`` (which counts it)."""
    budget = gen.thinking_budget
    if budget is None:
        return
    if budget < MIN_THINKING_BUDGET:
        raise ConfigError(
            f"{model.qualified}: {who}'s thinking budget must be at least "
            f"{MIN_THINKING_BUDGET} tokens, got {budget}"
        )
    if budget >= max_tokens(gen):
        raise ConfigError(
            f"{model.qualified}: the thinking budget {budget} must be below max_tokens "
            f"({max_tokens(gen)}), which counts the thinking too; raise --max-tokens"
        )


def _check_reasoning(model: ModelName, gen: GenerationSettings) -> None:
    check_reasoning(model, gen, "Anthropic", EFFORTS, budgets=True)
    check_thinking_budget(model, gen, "Anthropic")


def sdk_sampling_params() -> frozenset[str]:
    """Which of ``temperature`` and ``top_p`` the installed anthropic SDK's Messages API
    parameters have (both, without the SDK: the API's documented parameters)."""
    try:
        from anthropic.types import message_create_params
    except ImportError:
        return frozenset({"temperature", "top_p"})
    known = message_create_params.MessageCreateParamsBase.__annotations__
    return frozenset(n for n in ("temperature", "top_p") if n in known)


SPEC = ProviderSpec(
    name="anthropic",
    title="Anthropic",
    key_variables=(KEY_VARIABLE,),
    base_url_variable=BASE_URL_VARIABLE,
    # A margin under the API's limits: the create call's JSON is a little larger
    # than the request file's lines' bodies.
    limits=ShardLimits(max_requests=MAX_BATCH_REQUESTS, max_bytes=240 * 1024 * 1024),
    adapter="aeval.batch.providers.anthropic_api:AnthropicBatchProvider",
    request_url=REQUEST_URL,
    request_body=request_body,
    check_request=check_request,
    extra="anthropic",
)
