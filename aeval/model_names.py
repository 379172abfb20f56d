"""Provider-qualified model names: ``anthropic/claude-sonnet-4-5`` is Anthropic's model.

Inspect AI's convention: ``provider/model``. A bare name is OpenAI's, so every
existing command and run directory keeps its meaning. Only the first ``/``
splits: ``together/meta-llama/Llama-3.3-70B-Instruct-Turbo`` is Together's
``meta-llama/Llama-3.3-70B-Instruct-Turbo``, and ``openai/…`` takes any name an
OpenAI-compatible batch server knows (``openai/google/gemma-3-27b-it`` on a vLLM
server), slashes and all.

Direct mode does not read prefixes: it talks to one OpenAI-compatible endpoint,
whose model names (``meta-llama/…``, ``google/gemma-…``) are sent as written.
"""

from __future__ import annotations

from dataclasses import dataclass

from aeval.errors import ConfigError

__all__ = ["DEFAULT_PROVIDER", "KNOWN_PROVIDERS", "ModelName", "parse_model", "provider_of"]

# Every provider aeval knows, in the order help texts list them.
KNOWN_PROVIDERS: tuple[str, ...] = ("openai", "anthropic", "google", "together", "groq", "mistral")
DEFAULT_PROVIDER = "openai"


@dataclass(frozen=True, slots=True)
class ModelName:
    """A model as a run names it (``qualified``, what verdicts and reports show), the
    provider whose batch API serves it, and the name that provider knows it by."""

    qualified: str
    provider: str
    name: str


def parse_model(model: str) -> ModelName:
    """Split a model name into provider and the provider's own name.

    :raises ConfigError: an unknown prefix (listing the known ones), or nothing after it.
    """
    text = model.strip()
    prefix, slash, rest = text.partition("/")
    if not slash:
        return ModelName(text, DEFAULT_PROVIDER, text)
    provider = prefix.lower()
    if provider not in KNOWN_PROVIDERS:
        raise ConfigError(
            f"model {model!r}: unknown provider {prefix!r}; known: "
            f"{', '.join(p + '/' for p in KNOWN_PROVIDERS)} (a bare name is OpenAI's; "
            f"a model of an OpenAI-compatible server whose name has a '/' is 'openai/{text}')"
        )
    if not rest.strip():
        raise ConfigError(f"model {model!r}: no model name after '{prefix}/'")
    return ModelName(text, provider, rest.strip())


def provider_of(model: str) -> str:
    """The provider of a model name (see :func:`parse_model`)."""
    return parse_model(model).provider
