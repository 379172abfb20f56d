"""Google's Gemini Batch API (the Developer API's ``batchGenerateContent``).

A request line's body is a ``GenerateContentRequest`` in the API's own JSON:
the question in ``contents``, the system text in ``systemInstruction``, the
settings in ``generationConfig`` (``temperature``, ``topP``,
``maxOutputTokens`` for either max-tokens setting, ``seed``, ``thinkingConfig``),
and ``model``
(``models/NAME``), which the create call's URL takes. Keys are google-genai's
variables (``GOOGLE_API_KEY`` wins over ``GEMINI_API_KEY`` when both are set,
as in the SDK); ``GOOGLE_GEMINI_BASE_URL`` points it elsewhere (``aeval serve``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from aeval.api_settings import Credentials, ShardLimits
from aeval.batch.providers.env_credentials import key_credentials
from aeval.batch.providers.spec import ProviderSpec, check_reasoning
from aeval.errors import ConfigError
from aeval.feedback import Turn
from aeval.model_names import ModelName
from aeval.prompts import GenerationSettings, PromptSettings, format_prompt

__all__ = ["KEY_VARIABLES", "REQUEST_URL", "SPEC", "continue_body", "request_body"]

KEY_VARIABLES = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
BASE_URL_VARIABLE = "GOOGLE_GEMINI_BASE_URL"
REQUEST_URL = ":batchGenerateContent"
_INT32 = 2**31
# google-genai 3.6.1, types.ThinkingLevel: MINIMAL, LOW, MEDIUM, HIGH, XHIGH; "none" is
# ThinkingConfig.thinking_budget 0 ("0 is DISABLED", the same docstring).
EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")


# Gemini 2.5 takes a thinking budget, not a level (thinkingLevel is Gemini 3's): each
# family's range and whether 0 switches thinking off, from "Thinking budgets" in
# https://ai.google.dev/gemini-api/docs/thinking (2.5 Pro: 128 to 32,768, cannot be
# switched off; 2.5 Flash: 0 to 24,576; 2.5 Flash-Lite: 512 to 24,576, or 0).
# The longest prefix names the family.
BUDGETS_25: dict[str, tuple[int, int, bool]] = {
    "gemini-2.5-pro": (128, 32_768, False),
    "gemini-2.5-flash": (1, 24_576, True),
    "gemini-2.5-flash-lite": (512, 24_576, True),
}
# Gemini's own mapping of effort levels to 2.5's budgets, in its OpenAI-compatible layer
# (https://ai.google.dev/gemini-api/docs/openai, "Thinking": low, medium and high are
# budgets of 1,024, 8,192 and 24,576 tokens; none switches thinking off).
LEVEL_BUDGETS_25 = {"low": 1024, "medium": 8192, "high": 24_576}


def gemini_25_family(model: str) -> str | None:
    """The Gemini 2.5 family of ``model`` (a :data:`BUDGETS_25` key), or ``None``."""
    name = model.removeprefix("models/")
    found = [family for family in BUDGETS_25 if name.startswith(family)]
    return max(found, key=len) if found else None


def thinking_config(gen: GenerationSettings, model: str = "") -> dict[str, Any] | None:
    """``generationConfig.thinkingConfig`` (google-genai 3.6.1 ``types.ThinkingConfig``,
    camelCase as the API's JSON): a level in ``thinkingLevel`` (Gemini 3), a budget in
    ``thinkingBudget``; a Gemini 2.5 model's level as the budget Gemini documents for it
    (:data:`LEVEL_BUDGETS_25`). Thought summaries are not asked for
    (``includeThoughts`` unset): they are not the answer, and the adapter drops any
    thought part."""
    if gen.thinking_budget is not None:
        return {"thinkingBudget": gen.thinking_budget}
    if gen.reasoning_effort == "none":
        return {"thinkingBudget": 0}
    if gen.reasoning_effort is not None and gemini_25_family(model) is not None:
        return {"thinkingBudget": LEVEL_BUDGETS_25[gen.reasoning_effort]}
    if gen.reasoning_effort is not None:
        return {"thinkingLevel": gen.reasoning_effort.upper()}
    return None


def check_thinking_25(model: ModelName, gen: GenerationSettings) -> None:
    """A Gemini 2.5 model's setting, against its family's budgets and Gemini's mapping."""
    family = gemini_25_family(model.name)
    if family is None:
        return
    least, most, off = BUDGETS_25[family]
    takes = ", ".join(("none", *LEVEL_BUDGETS_25) if off else LEVEL_BUDGETS_25)
    where = f"{family} takes {takes}, or a budget @{least} to @{most}" + (
        " (@0: off)" if off else ""
    )
    effort, budget = gen.reasoning_effort, gen.thinking_budget
    if effort is not None and effort not in LEVEL_BUDGETS_25 and not (effort == "none" and off):
        cannot = " (its thinking cannot be switched off)" if effort == "none" else ""
        raise ConfigError(
            f"{model.qualified}: {where}; not @{effort}{cannot} "
            "(https://ai.google.dev/gemini-api/docs/thinking)"
        )
    if budget is not None and not least <= budget <= most:
        raise ConfigError(
            f"{model.qualified}: {where}; not @{budget} "
            "(https://ai.google.dev/gemini-api/docs/thinking)"
        )


def request_body(
    model: str,
    question: str,
    prompt: PromptSettings,
    gen: GenerationSettings,
    turns: Sequence[Turn] = (),
) -> dict[str, Any]:
    """One question as a ``GenerateContentRequest`` (camelCase, as the API's JSON); a
    repair round's earlier answers are ``contents`` of role ``model`` and their feedback
    of role ``user`` (google-genai types.Content: "role ... Must be either 'user' or
    'model'")."""
    if not model.strip():
        raise ConfigError("a Gemini model name must not be empty")
    name = model if model.startswith(("models/", "tunedModels/")) else f"models/{model}"
    body: dict[str, Any] = {
        "model": name,
        "contents": [
            {"role": "user", "parts": [{"text": format_prompt(question, prompt)}]},
            *_turn_contents(turns),
        ],
    }
    if prompt.system is not None:
        body["systemInstruction"] = {"parts": [{"text": prompt.system}]}
    config: dict[str, Any] = {}
    if gen.temperature is not None:
        config["temperature"] = gen.temperature
    if gen.top_p is not None:
        config["topP"] = gen.top_p
    limit = gen.max_tokens if gen.max_tokens is not None else gen.max_completion_tokens
    if limit is not None:
        config["maxOutputTokens"] = limit
    if gen.seed is not None:
        config["seed"] = gen.seed
    thinking = thinking_config(gen, name)
    if thinking is not None:
        config["thinkingConfig"] = thinking
    if config:
        body["generationConfig"] = config
    return body


def continue_body(body: dict[str, Any], turns: Sequence[Turn]) -> dict[str, Any]:
    """``body`` with ``turns`` appended to its ``contents`` (as :func:`request_body`
    writes them)."""
    return {**body, "contents": [*body["contents"], *_turn_contents(turns)]}


def _turn_contents(turns: Sequence[Turn]) -> list[dict[str, Any]]:
    return [
        {"role": role, "parts": [{"text": text}]}
        for turn in turns
        for role, text in (("model", turn.answer), ("user", turn.feedback))
    ]


def check_request(model: ModelName, gen: GenerationSettings, prompt: PromptSettings) -> None:
    """What the Gemini API would refuse, said before any batch is created."""
    if gen.seed is not None and not -_INT32 <= gen.seed < _INT32:
        raise ConfigError(
            f"{model.qualified}: Gemini takes a 32-bit seed; {gen.seed} is out of range"
        )
    check_reasoning(model, gen, "Gemini", EFFORTS, budgets=True)
    check_thinking_25(model, gen)
    if "/" in model.name and not model.name.startswith(("models/", "tunedModels/")):
        raise ConfigError(
            f"{model.qualified}: not a Gemini model name (e.g. google/gemini-2.5-flash)"
        )


def resolve(env: Mapping[str, str]) -> Credentials | None:
    # google-genai's own precedence: GOOGLE_API_KEY over GEMINI_API_KEY.
    return key_credentials(env, ("GOOGLE_API_KEY", "GEMINI_API_KEY"), BASE_URL_VARIABLE)


SPEC = ProviderSpec(
    name="google",
    title="Google Gemini",
    key_variables=KEY_VARIABLES,
    base_url_variable=BASE_URL_VARIABLE,
    # The Files API takes up to 2 GB a file; no request-count limit is documented,
    # so a shard keeps OpenAI's count (a run's shards stay alike across providers).
    limits=ShardLimits(max_requests=49_000, max_bytes=1900 * 1024 * 1024),
    adapter="aeval.batch.providers.gemini_api:GeminiBatchProvider",
    request_url=REQUEST_URL,
    request_body=request_body,
    continue_body=continue_body,
    check_request=check_request,
    credentials=resolve,
    extra="google",
)
