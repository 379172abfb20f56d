"""What a run costs: token counts before it starts, dollars before and after.

Prices come from pydantic's ``genai-prices`` (:data:`PRICE_SOURCE`; MIT, on PyPI), whose
price data is bundled with the package: looked up by the provider's own model name
(``anthropic/claude-sonnet-4-5``; a bare name is OpenAI's), at the rates in force today,
never fetched at run time (its ``UpdatePrices`` is the only thing that downloads, and
aeval never starts it). docs/providers.md, "Prices", says why this source.

A model the source does not list has an unknown price: estimates and summaries say so
rather than guess. Batch requests are priced at the source's batch rate where it has one
for the model; where it has none (every Together model, and some others: see
:func:`batch_rate_from`), at :data:`BATCH_DISCOUNTS`, aeval's own entries, the fraction of
the list price each provider's batch API charges by its own documentation.

Reasoning (thinking) tokens are priced as output: every answer line's
``completion_tokens`` already holds them (OpenAI's ``completion_tokens`` and the Responses
API's ``output_tokens`` include reasoning tokens; Anthropic's ``output_tokens`` include
thinking; Gemini's ``thoughtsTokenCount`` is not in ``candidatesTokenCount``, so the
adapter adds the two, :mod:`aeval.batch.providers.gemini_api`), so they are never added
twice.

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
from decimal import Decimal
from importlib.metadata import version
from typing import TYPE_CHECKING, Any, Literal

from aeval.errors import ConfigError
from aeval.model_names import parse_model

if TYPE_CHECKING:
    from genai_prices.types import ModelInfo

__all__ = [
    "BATCH_DISCOUNTS",
    "CHARS_PER_TOKEN",
    "PRICE_PROVIDERS",
    "PRICE_SOURCE",
    "CostEstimate",
    "Price",
    "actual_cost",
    "azure_priced_as",
    "batch_rate_from",
    "cost_usd",
    "estimate_cost",
    "estimate_rounds",
    "price_of",
    "token_counter",
    "usd",
    "warm_prices",
]


@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per million tokens (below any long-prompt tier)."""

    input: float
    output: float


# The price data's package and version, named by every estimate.
PRICE_SOURCE = f"genai-prices {version('genai-prices')}"
# aeval's own entries: what each provider's batch API charges, as a fraction of its
# list price, for a model the price source has no batch rate for. Each provider
# documents half price: OpenAI (platform.openai.com/docs/guides/batch), Anthropic
# (docs.anthropic.com, Message Batches: 50 % of standard prices), Google (Gemini Batch
# Mode: 50 % of the standard cost), Groq (console.groq.com/docs/batch: 50 % lower cost),
# Together (docs.together.ai, Batch inference: 50 % introductory discount), Mistral
# (docs.mistral.ai, Batch inference: 50 % of the standard cost).
# Amazon Bedrock (aws.amazon.com/bedrock/pricing: batch inference at 50 % of on-demand
# prices for the models it offers batch for) and Vertex AI (cloud.google.com/vertex-ai/
# generative-ai/pricing: batch at a 50 % discount from the standard price) likewise.
BATCH_DISCOUNTS: dict[str, float] = {
    "openai": 0.5,
    "anthropic": 0.5,
    "google": 0.5,
    "together": 0.5,
    "groq": 0.5,
    "mistral": 0.5,
    # xAI (docs.x.ai, Batch API: "50% off compared to real-time API calls"), Azure OpenAI
    # (learn.microsoft.com, Azure OpenAI batch: "50% less cost than global standard").
    "xai": 0.5,
    "azure": 0.5,
    "bedrock": 0.5,
    "vertex": 0.5,
}
# The price source's provider for an aeval provider whose id it spells otherwise: xAI is
# genai-prices' "x-ai"; Bedrock is its "aws" (model ids as Bedrock's, e.g.
# anthropic.claude-…-v1:0), Vertex AI's models its "google" entries (Gemini, and Claude's
# ids as Vertex names them).
PRICE_PROVIDERS: dict[str, str] = {"xai": "x-ai", "bedrock": "aws", "vertex": "google"}
# Clouds whose models are priced by the name they were found by: the source's id of it
# need not match its own rules (aws lists Bedrock's in-Region ids as "regional.…").
_PRICED_BY_NAME = frozenset({"bedrock", "vertex"})
_BATCH = {"processing": "batch"}  # genai-prices' price context of a batch request
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
    try:
        parsed = parse_model(model)
    except ConfigError:
        return None
    return parsed.provider, parsed.name


@functools.lru_cache(maxsize=64)
def _model_info(model: str) -> tuple[str, str, ModelInfo] | None:
    """(aeval's provider, the name the source found it by, the source's model) of
    ``model``, or ``None`` when the source does not list it under that provider (no
    fall-back to another provider's model)."""
    split = _split(model)
    if split is None:
        return None
    provider, name = split
    source = PRICE_PROVIDERS.get(provider, provider)
    from genai_prices.data_snapshot import get_snapshot  # 1.6 MB of price data: on first use

    for candidate in _names(provider, name):
        try:
            found, info = get_snapshot().find_provider_model(candidate, None, source, None)
        except LookupError:
            continue
        return (provider, candidate, info) if found.id == source else None
    return None


def _names(provider: str, name: str) -> list[str]:
    """The names ``name`` is priced by: itself; for an Azure deployment (a name its owner
    chose, e.g. ``gpt-4o-batch``) then each shorter ``-`` prefix, longest first, so a
    deployment named after its model is priced as that model (docs/providers/azure.md says so;
    a deployment named otherwise has an unknown price)."""
    if provider != "azure":
        return [name]
    parts = name.split("-")
    return ["-".join(parts[:n]) for n in range(len(parts), 0, -1)]


def azure_priced_as(model: str) -> str | None:
    """The source's model an Azure deployment is priced as, when its name is not the
    deployment's (``azure/gpt-4o-batch``: ``gpt-4o``); ``None`` otherwise."""
    split = _split(model)
    if split is None or split[0] != "azure":
        return None
    found = _model_info(model)
    if found is None or found[2].id == split[1]:
        return None
    return str(found[2].id)


def warm_prices() -> None:
    """Load the price data now (genai-prices' snapshot, 0.1-0.2 s on first use), so that
    the first price looked up later does not pay for it. Never raises: a price the data
    cannot give is already an unknown price where prices are used."""
    try:
        from genai_prices.data_snapshot import get_snapshot

        get_snapshot()
    except Exception:  # whatever went wrong is met again, and handled, where prices are used
        return


def batch_rate_from(model: str) -> Literal["genai-prices", "aeval"] | None:
    """Where ``model``'s batch price comes from: the source's own batch rate, or aeval's
    :data:`BATCH_DISCOUNTS` on the list price (``None``: the model has no price)."""
    found = _model_info(model)
    if found is None:
        return None
    variants = found[2].price_variants or ()
    return "genai-prices" if any(v.when == _BATCH for v in variants) else "aeval"


def _calc(model: str, requests: int, prompt: int, completion: int, batch: bool) -> Decimal | None:
    found = _model_info(model)
    if found is None:
        return None
    provider, name, info = found
    from genai_prices.data_snapshot import get_snapshot
    from genai_prices.types import Usage

    # One request's mean usage, priced and multiplied: a long-prompt tier (Gemini 2.5 Pro,
    # Claude above 200k input tokens) is chosen per request, as the provider bills it.
    n = max(requests, 1)
    usage = Usage(input_tokens=Decimal(prompt) / n, output_tokens=Decimal(completion) / n)
    own_rate = batch and batch_rate_from(model) == "genai-prices"
    source = PRICE_PROVIDERS.get(provider, provider)
    ref = name if provider in _PRICED_BY_NAME else info.id
    price = get_snapshot().calc(usage, ref, source, None, None, _BATCH if own_rate else None)
    factor = Decimal(str(BATCH_DISCOUNTS.get(provider, 0.5))) if batch and not own_rate else 1
    return price.total_price * n * factor


def cost_usd(
    model: str, *, requests: int, prompt: int, completion: int, batch: bool = True
) -> float | None:
    """Dollars for ``requests`` requests of ``prompt`` input and ``completion`` output tokens
    in all (reasoning included), at batch prices (``batch=False``: list price); ``None``
    when the model's price is unknown."""
    total = _calc(model, requests, prompt, completion, batch)
    return None if total is None else round(float(total), 6)


def price_of(model: str, *, batch: bool = False) -> Price | None:
    """What ``model`` costs per million tokens (``provider/name`` or a bare OpenAI name),
    at list price or (``batch``) batch price, or ``None`` when unknown."""
    # A million tokens in requests of a thousand: below any long-prompt tier.
    prices = [_calc(model, 1000, 1_000_000, 0, batch), _calc(model, 1000, 0, 1_000_000, batch)]
    if prices[0] is None or prices[1] is None:
        return None
    return Price(float(prices[0]), float(prices[1]))


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
        if self.output_tokens is None:
            text += ", output tokens unknown (--max-tokens bounds them)"
            given = cost_usd(self.model, requests=self.requests, prompt=self.input_tokens,
                             completion=0, batch=self.batch)  # fmt: skip
            if given is None:
                return f"{text}: unknown price"
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
    def _price_word(self) -> str:
        word = "batch price"
        if not self.batch:
            word = "full price (direct)"
        elif batch_rate_from(self.model) == "aeval":  # the source has no batch rate for it
            word = "batch price (list price × aeval's batch discount)"
        named = azure_priced_as(self.model)
        return word if named is None else f"{word}, priced as {named} (the deployment's name)"


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
    dollars = None
    if output is not None:
        dollars = cost_usd(model, requests=n, prompt=input_tokens, completion=output, batch=batch)
    return CostEstimate(model, n, input_tokens, output, basis, method, dollars, batch)


def estimate_rounds(first: CostEstimate, rounds: int, feedback: Callable[[], int]) -> CostEstimate:
    """The most a run of ``rounds`` repair rounds (``--rounds``) can cost one model, from
    its first round's estimate ``first``.

    Every item may be wrong in every round, so each later round asks every item again;
    round k's prompt is the first one plus k - 1 earlier answers (each at most the
    output bound the first round's estimate used) and k - 1 feedback messages
    (``feedback()``: the tokens of the longest one the run's template can make, a
    solver's message included). Without an output bound there is no most: the
    estimate's basis says what it stands on, as the first round's does.
    """
    n = first.requests
    if rounds <= 1 or n == 0:
        return first
    per_answer = (first.output_tokens or 0) / n
    grown = _TOKENS_PER_MESSAGE * 2 + per_answer + feedback()
    # Σ_{k=1..K} (first input + (k-1)·n·grown) = K·first + n·grown·K(K-1)/2
    input_tokens = first.input_tokens * rounds + math.ceil(n * grown * rounds * (rounds - 1) / 2)
    output = None if first.output_tokens is None else first.output_tokens * rounds
    dollars = None
    if output is not None and first.output_tokens is not None:
        dollars = cost_usd(
            first.model,
            requests=n * rounds,
            prompt=input_tokens,
            completion=output,
            batch=first.batch,
        )
    return CostEstimate(
        first.model,
        n * rounds,
        input_tokens,
        output,
        first.output_basis,
        first.method,
        dollars,
        first.batch,
    )


def actual_cost(
    model: str, tokens: Mapping[str, Any], *, requests: int = 1, batch: bool = True
) -> float | None:
    """Dollars spent on ``tokens`` (``{"prompt": n, "completion": m}``, the provider's
    own counts, reasoning included in the completion) over ``requests`` answers, at
    ``model``'s batch price (``batch=False``: list price), or ``None`` when the model's
    price is unknown."""
    return cost_usd(
        model,
        requests=requests,
        prompt=int(tokens.get("prompt", 0)),
        completion=int(tokens.get("completion", 0)),
        batch=batch,
    )
