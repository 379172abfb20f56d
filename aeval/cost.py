"""What a run costs: token counts before it starts, dollars before and after.

Prices live in one table per provider, :data:`PROVIDER_PRICES` (US dollars per
million tokens at the synchronous API's list price, by the provider's own model
name; :data:`PRICES` is OpenAI's), and each provider's batch API charges a
fraction of it, :data:`BATCH_DISCOUNTS` (half, at every provider aeval knows).
A model is priced by its provider-qualified name (``anthropic/claude-sonnet-4-5``;
a bare name is OpenAI's). A model not in its provider's table has an unknown
price: estimates and summaries say so rather than guess. Check the tables
against each provider's price page before relying on a figure; they are the
one place to edit.

Input tokens are counted with the model's tokenizer (``tiktoken``, the optional
``aeval[tokens]`` extra) when its encoding can be loaded. tiktoken downloads
its encoding files on first use and caches them; without the extra or without
a network (and no cache), the count falls back to :data:`CHARS_PER_TOKEN`
characters per token, and every estimate says which way it was counted.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "BATCH_DISCOUNT",
    "BATCH_DISCOUNTS",
    "CHARS_PER_TOKEN",
    "PRICES",
    "PROVIDER_PRICES",
    "CostEstimate",
    "Price",
    "actual_cost",
    "batch_factor",
    "estimate_cost",
    "price_of",
    "token_counter",
    "usd",
]


@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per million tokens at the synchronous API's list price."""

    input: float
    output: float


# OpenAI's list prices (USD per 1M tokens, standard tier) as published in 2025.
# Exact model names only: a prefix match would price "gpt-4o-audio-preview" as gpt-4o.
PRICES: dict[str, Price] = {
    "gpt-4o-mini": Price(0.15, 0.60),
    "gpt-4o-mini-2024-07-18": Price(0.15, 0.60),
    "gpt-4o": Price(2.50, 10.00),
    "gpt-4o-2024-11-20": Price(2.50, 10.00),
    "gpt-4o-2024-08-06": Price(2.50, 10.00),
    "gpt-4o-2024-05-13": Price(5.00, 15.00),
    "gpt-3.5-turbo": Price(0.50, 1.50),
    "gpt-3.5-turbo-0125": Price(0.50, 1.50),
    "gpt-4-turbo": Price(10.00, 30.00),
    "gpt-4-turbo-2024-04-09": Price(10.00, 30.00),
    "gpt-4.1": Price(2.00, 8.00),
    "gpt-4.1-2025-04-14": Price(2.00, 8.00),
    "gpt-4.1-mini": Price(0.40, 1.60),
    "gpt-4.1-mini-2025-04-14": Price(0.40, 1.60),
    "gpt-4.1-nano": Price(0.10, 0.40),
    "gpt-4.1-nano-2025-04-14": Price(0.10, 0.40),
    "o1": Price(15.00, 60.00),
    "o1-2024-12-17": Price(15.00, 60.00),
    "o3-mini": Price(1.10, 4.40),
    "o3-mini-2025-01-31": Price(1.10, 4.40),
    "o4-mini": Price(1.10, 4.40),
    "o4-mini-2025-04-16": Price(1.10, 4.40),
}
# Anthropic's list prices (USD per 1M tokens; base input, output), 2025. Thinking
# tokens are billed as output. Aliases and dated ids both, as the API takes both.
ANTHROPIC_PRICES: dict[str, Price] = {
    "claude-opus-4-5": Price(5.00, 25.00),
    "claude-opus-4-5-20251101": Price(5.00, 25.00),
    "claude-opus-4-1": Price(15.00, 75.00),
    "claude-opus-4-1-20250805": Price(15.00, 75.00),
    "claude-opus-4-0": Price(15.00, 75.00),
    "claude-opus-4-20250514": Price(15.00, 75.00),
    "claude-sonnet-4-5": Price(3.00, 15.00),
    "claude-sonnet-4-5-20250929": Price(3.00, 15.00),
    "claude-sonnet-4-0": Price(3.00, 15.00),
    "claude-sonnet-4-20250514": Price(3.00, 15.00),
    "claude-3-7-sonnet-latest": Price(3.00, 15.00),
    "claude-3-7-sonnet-20250219": Price(3.00, 15.00),
    "claude-haiku-4-5": Price(1.00, 5.00),
    "claude-haiku-4-5-20251001": Price(1.00, 5.00),
    "claude-3-5-haiku-latest": Price(0.80, 4.00),
    "claude-3-5-haiku-20241022": Price(0.80, 4.00),
    "claude-3-haiku-20240307": Price(0.25, 1.25),
}
# Gemini Developer API, paid tier (prompts up to 200k tokens; thinking billed as output).
GOOGLE_PRICES: dict[str, Price] = {
    "gemini-2.5-pro": Price(1.25, 10.00),
    "gemini-2.5-flash": Price(0.30, 2.50),
    "gemini-2.5-flash-lite": Price(0.10, 0.40),
    "gemini-2.0-flash": Price(0.10, 0.40),
    "gemini-2.0-flash-lite": Price(0.075, 0.30),
}
TOGETHER_PRICES: dict[str, Price] = {
    "meta-llama/Llama-3.3-70B-Instruct-Turbo": Price(0.88, 0.88),
    "meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo": Price(0.18, 0.18),
    "Qwen/Qwen2.5-72B-Instruct-Turbo": Price(1.20, 1.20),
    "deepseek-ai/DeepSeek-V3": Price(1.25, 1.25),
}
GROQ_PRICES: dict[str, Price] = {
    "llama-3.3-70b-versatile": Price(0.59, 0.79),
    "llama-3.1-8b-instant": Price(0.05, 0.08),
}
MISTRAL_PRICES: dict[str, Price] = {
    "mistral-large-latest": Price(2.00, 6.00),
    "mistral-medium-latest": Price(0.40, 2.00),
    "mistral-small-latest": Price(0.10, 0.30),
    "open-mistral-nemo": Price(0.15, 0.15),
    "codestral-latest": Price(0.30, 0.90),
}
# Every provider's table, by the provider's name in model names (``anthropic/…``).
PROVIDER_PRICES: dict[str, dict[str, Price]] = {
    "openai": PRICES,
    "anthropic": ANTHROPIC_PRICES,
    "google": GOOGLE_PRICES,
    "together": TOGETHER_PRICES,
    "groq": GROQ_PRICES,
    "mistral": MISTRAL_PRICES,
}
# OpenAI's Batch API charges half the synchronous price for input and output.
BATCH_DISCOUNT = 0.5
# What each provider's batch API charges, as a fraction of its list price.
BATCH_DISCOUNTS: dict[str, float] = {
    "openai": BATCH_DISCOUNT,
    "anthropic": 0.5,
    "google": 0.5,
    "together": 0.5,
    "groq": 0.5,
    "mistral": 0.5,
}
# Fallback when no tokenizer can be loaded. Measured on the WARP benchmark's 671
# prompts with tiktoken's cl100k_base: 2,310,735 characters, 1,135,378 tokens
# (2.04 per token; its ground-truth answers 2.0). SMT-LIB is token-dense, so the
# English rule of thumb (4) would halve the estimate.
CHARS_PER_TOKEN = 2.0
# Chat framing per request: about 3 tokens per message and 3 to prime the
# reply (OpenAI's cookbook, "How to count tokens with tiktoken").
_TOKENS_PER_MESSAGE = 3
_TOKENS_PER_REPLY = 3

TokenMethod = Literal["tiktoken", "characters"]


def usd(amount: float) -> str:
    """Dollars for people: cents, or four decimals below a cent."""
    return f"${amount:,.2f}" if amount >= 0.01 or amount == 0 else f"${amount:.4f}"


def _split(model: str) -> tuple[str, str] | None:
    """(provider, the provider's model name), or ``None`` for a name no provider reads
    (a direct run's ``meta-llama/…``)."""
    from aeval.errors import ConfigError
    from aeval.model_names import parse_model

    try:
        parsed = parse_model(model)
    except ConfigError:
        return None
    return parsed.provider, parsed.name


def price_of(model: str) -> Price | None:
    """The list price of ``model`` (``provider/name`` or a bare OpenAI name, exact), or
    ``None`` when unknown."""
    split = _split(model)
    if split is None:
        return None
    provider, name = split
    return PROVIDER_PRICES.get(provider, {}).get(name)


def batch_factor(model: str) -> float:
    """The fraction of the list price ``model``'s provider charges for batch requests."""
    split = _split(model)
    return BATCH_DISCOUNTS.get(split[0] if split else "openai", BATCH_DISCOUNT)


@functools.lru_cache(maxsize=32)
def _encoder(model: str) -> Callable[[str], int] | None:
    """``text -> token count`` with the model's tiktoken encoding, or ``None``.

    ``None`` when tiktoken is not installed, the model is unknown to it, or its
    encoding file cannot be loaded (no network and nothing cached).
    """
    try:
        import tiktoken
    except ImportError:
        return None
    try:
        encoding = tiktoken.encoding_for_model(model)
    except KeyError:  # not an OpenAI model name tiktoken knows
        return None
    except Exception:  # the encoding file could not be fetched (offline): fall back, say so
        return None
    return lambda text: len(encoding.encode(text, disallowed_special=()))


def token_counter(model: str) -> tuple[Callable[[str], int], TokenMethod]:
    """How to count ``model``'s tokens in a text, and which way it counts (tiktoken for
    OpenAI's models only: another provider's tokenizer is its own)."""
    split = _split(model)
    encode = _encoder(split[1]) if split is not None and split[0] == "openai" else None
    if encode is not None:
        return encode, "tiktoken"
    return (lambda text: math.ceil(len(text) / CHARS_PER_TOKEN)), "characters"


@dataclass(frozen=True, slots=True)
class CostEstimate:
    """One model's estimated tokens and cost for a whole run (all its trials)."""

    model: str
    requests: int
    input_tokens: int
    output_tokens: int | None  # None: no bound and no previous run to go on
    output_basis: str  # "--max-tokens", "previous run", or "unknown"
    method: TokenMethod
    usd: float | None  # price of input + output; None when unknown
    batch: bool = True  # priced at the Batch API's half price (False: direct mode, full price)

    def describe(self) -> str:
        counted = "tiktoken" if self.method == "tiktoken" else f"~{CHARS_PER_TOKEN:g} chars/token"
        text = (
            f"{self.model}: {self.requests:,} requests, {self.input_tokens:,} input tokens "
            f"({counted})"
        )
        price = price_of(self.model)
        if self.output_tokens is None:
            text += ", output tokens unknown (--max-tokens bounds them)"
            if price is None:
                return f"{text}: unknown price"
            given = _dollars(price, self.input_tokens, 0, factor=self._factor)
            return f"{text}: input ~{usd(given)} at {self._price_word}, plus the output"
        # An upper bound only when both counts are: a character estimate is approximate.
        bounded = self.output_basis.startswith("--")
        sign = "≤" if bounded else "~"
        cost_sign = "≤" if bounded and self.method == "tiktoken" else "~"
        text += f", {sign}{self.output_tokens:,} output tokens ({self.output_basis})"
        if self.usd is None:
            return f"{text}: unknown price"
        return f"{text}: {cost_sign}{usd(self.usd)} at {self._price_word}"

    @property
    def _factor(self) -> float:
        return batch_factor(self.model) if self.batch else 1.0

    @property
    def _price_word(self) -> str:
        return "batch price" if self.batch else "full price (direct)"


def estimate_cost(
    model: str,
    prompts: Iterable[list[dict[str, str]]],
    *,
    trials: int = 1,
    max_output_tokens: int | None = None,
    output_per_request: float | None = None,
    batch: bool = True,
) -> CostEstimate:
    """Estimate one model's cost for every prompt, ``trials`` times.

    :param prompts: each request's chat messages.
    :param max_output_tokens: ``--max-tokens``/``--max-completion-tokens``: an upper bound.
    :param output_per_request: mean completion tokens seen in a previous run of
        this model, used when there is no bound.
    :param batch: Batch API prices (half); ``False`` for direct mode (full price).
    """
    count, method = token_counter(model)
    per_trial = 0
    requests = 0
    for messages in prompts:
        requests += 1
        per_trial += _TOKENS_PER_REPLY + sum(
            _TOKENS_PER_MESSAGE + count(m["content"]) for m in messages
        )
    n = requests * trials
    if max_output_tokens is not None:
        output: int | None = max_output_tokens * n
        basis = "--max-tokens bound"
    elif output_per_request is not None:
        output = round(output_per_request * n)
        basis = "previous run"
    else:
        output, basis = None, "unknown"
    input_tokens = per_trial * trials
    usd = None
    price = price_of(model)
    if price is not None and output is not None:
        usd = _dollars(price, input_tokens, output, factor=batch_factor(model) if batch else 1.0)
    return CostEstimate(model, n, input_tokens, output, basis, method, usd, batch)


def _dollars(price: Price, prompt: int, completion: int, *, factor: float) -> float:
    return factor * (prompt * price.input + completion * price.output) / 1e6


def actual_cost(model: str, tokens: Mapping[str, Any], *, batch: bool = True) -> float | None:
    """Dollars spent on ``tokens`` (``{"prompt": n, "completion": m}``, the provider's
    own counts, thinking included in the completion), at ``model``'s provider's batch
    price (``batch=False``: list price), or ``None`` when the model's price is unknown."""
    price = price_of(model)
    if price is None:
        return None
    factor = batch_factor(model) if batch else 1.0
    return round(
        _dollars(
            price, int(tokens.get("prompt", 0)), int(tokens.get("completion", 0)), factor=factor
        ),
        6,
    )
