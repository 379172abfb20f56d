"""Provider-qualified model names: ``anthropic/claude-sonnet-4-5`` is Anthropic's model.

Inspect AI's convention: ``provider/model``. A bare name is OpenAI's, so every
existing command and run directory keeps its meaning. Only the first ``/``
splits: ``together/meta-llama/Llama-3.3-70B-Instruct-Turbo`` is Together's
``meta-llama/Llama-3.3-70B-Instruct-Turbo``, and ``openai/…`` takes any name an
OpenAI-compatible batch server knows (``openai/google/gemma-3-27b-it`` on a vLLM
server), slashes and all.

A variant is a model with a reasoning setting after ``@`` (:mod:`aeval.reasoning`):
``openai/gpt-5@high`` or ``anthropic/claude-sonnet-4-5@16000``. Its ``qualified`` label
(``gpt-5@high``) is its identity everywhere a model's name is; the provider gets the
bare ``name`` plus the setting. Only the last ``@`` splits, and only when a level or
a number follows it.

Direct mode does not read prefixes: it talks to one OpenAI-compatible endpoint,
whose model names (``meta-llama/…``, ``google/gemma-…``) are sent as written.
"""

from __future__ import annotations

from dataclasses import dataclass

from aeval.errors import ConfigError
from aeval.reasoning import Reasoning, parse_reasoning

__all__ = [
    "DEFAULT_PROVIDER",
    "KNOWN_PROVIDERS",
    "ModelName",
    "parse_model",
    "provider_of",
    "split_variant",
]

# Every provider aeval knows, in the order help texts list them.
KNOWN_PROVIDERS: tuple[str, ...] = (
    "openai", "anthropic", "google", "together", "groq", "mistral",
    "xai", "azure", "bedrock", "vertex",
)  # fmt: skip
DEFAULT_PROVIDER = "openai"


@dataclass(frozen=True, slots=True)
class ModelName:
    """A model as a run names it (``qualified``, what verdicts and reports show), the
    provider whose batch API serves it, and the name that provider knows it by."""

    qualified: str
    provider: str
    name: str
    reasoning: Reasoning | None = None


def parse_model(model: str) -> ModelName:
    """Split a model name into provider and the provider's own name.

    :raises ConfigError: an unknown prefix (listing the known ones), or nothing after it.
    """
    text = model.strip()
    bare, reasoning = split_variant(text)
    prefix, slash, rest = bare.partition("/")
    if not slash:
        return ModelName(text, DEFAULT_PROVIDER, bare, reasoning)
    provider = prefix.lower()
    if provider not in KNOWN_PROVIDERS:
        raise ConfigError(
            f"model {model!r}: unknown provider {prefix!r}; known: "
            f"{', '.join(p + '/' for p in KNOWN_PROVIDERS)} (a bare name is OpenAI's; "
            f"a model of an OpenAI-compatible server whose name has a '/' is 'openai/{text}')"
        )
    if not rest.strip():
        raise ConfigError(f"model {model!r}: no model name after '{prefix}/'")
    return ModelName(text, provider, rest.strip(), reasoning)


def split_variant(model: str) -> tuple[str, Reasoning | None]:
    """(the name without its ``@SETTING``, the setting or ``None``), in every mode
    (direct mode sends the bare name too).

    :raises ConfigError: nothing before the ``@``, or an unknown setting after it.
    """
    bare, at, setting = model.strip().rpartition("@")
    if not at:
        return model.strip(), None
    if not bare.strip():
        raise ConfigError(f"model {model!r}: no model name before '@'")
    return bare.strip(), parse_reasoning(setting.strip(), model)


def provider_of(model: str) -> str:
    """The provider of a model name (see :func:`parse_model`)."""
    return parse_model(model).provider
