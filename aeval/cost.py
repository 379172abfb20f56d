"""What a run costs: token counts before it starts, dollars before and after.

Prices live in :data:`PRICES` (US dollars per million tokens at the synchronous
API's list price; the Batch API charges half, :data:`BATCH_DISCOUNT`). A model
not in the table has an unknown price: estimates and summaries say so rather
than guess. Check the table against the provider's price page before relying on
a figure; it is the one place to edit.

Input tokens are counted with the model's tokenizer (``tiktoken``, the optional
``aeval[tokens]`` extra) when its encoding can be loaded. tiktoken downloads
its encoding files on first use and caches them; without the extra or without
a network (and no cache), the count falls back to :data:`CHARS_PER_TOKEN`
characters per token, and every estimate says which way it was counted.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "BATCH_DISCOUNT",
    "CHARS_PER_TOKEN",
    "PRICES",
    "CostEstimate",
    "Price",
    "actual_cost",
    "estimate_cost",
    "previous_output_per_request",
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
# The Batch API charges half the synchronous price for input and output.
BATCH_DISCOUNT = 0.5
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


def price_of(model: str) -> Price | None:
    """The list price of ``model`` (exact name), or ``None`` when unknown."""
    return PRICES.get(model)


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
    """How to count ``model``'s tokens in a text, and which way it counts."""
    encode = _encoder(model)
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
            given = _dollars(price, self.input_tokens, 0, batch=self.batch)
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
        usd = _dollars(price, input_tokens, output, batch=batch)
    return CostEstimate(model, n, input_tokens, output, basis, method, usd, batch)


def _dollars(price: Price, prompt: int, completion: int, *, batch: bool) -> float:
    factor = BATCH_DISCOUNT if batch else 1.0
    return factor * (prompt * price.input + completion * price.output) / 1e6


def actual_cost(model: str, tokens: Mapping[str, Any], *, batch: bool = True) -> float | None:
    """Dollars spent on ``tokens`` (``{"prompt": n, "completion": m}``), or ``None``
    when the model's price is unknown."""
    price = price_of(model)
    if price is None:
        return None
    return round(
        _dollars(
            price, int(tokens.get("prompt", 0)), int(tokens.get("completion", 0)), batch=batch
        ),
        6,
    )


def previous_output_per_request(results_dir: Path, model: str) -> float | None:
    """Mean completion tokens per answer of ``model`` in the newest finished run under
    ``results_dir`` that has it (its ``summary.json``), or ``None``."""
    try:
        runs = sorted(
            (p for p in Path(results_dir).glob("*/summary.json") if p.is_file()),
            key=lambda p: p.stat().st_mtime,
            reverse=True,
        )
    except OSError:
        return None
    for path in runs:
        try:
            summary = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        for group in summary.get("models") or ():
            if not isinstance(group, dict) or group.get("model") != model:
                continue
            tokens = group.get("tokens") or {}
            answered = int(group.get("n") or 0) - int(group.get("infra_failures") or 0)
            completion = int(tokens.get("completion") or 0)
            if answered > 0 and completion > 0:
                return completion / answered
    return None
