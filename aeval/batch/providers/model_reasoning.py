"""Which reasoning settings each model takes, per model (not per provider): refused before
anything is written, in one line naming what the model takes.

The source is litellm's model map (MIT, Berri AI), whose reasoning fields aeval ships as
package data, ``aeval/data/litellm_reasoning.json`` (``supports_reasoning``, each level's
``supports_none_…``/``supports_minimal_…``/``supports_low_…``/``supports_xhigh_…``/
``supports_max_reasoning_effort``, or an explicit ``reasoning_effort_levels``). litellm
itself is 40+ MB with many dependencies and is not needed at run time; the data is
refreshed from its wheel by ``tools/refresh_reasoning_map.py`` (docs/reasoning.md, "Each
model's own levels", says how and when). Where the map has no entry, :data:`GAPS` fills
in from the provider's own model pages, each cited. A model neither knows is sent as
asked, with one line saying so (:func:`check_model_reasoning`'s note).

How a level reads in the map: a model with ``supports_reasoning`` takes low, medium and
high (less low where ``supports_low_reasoning_effort`` is false), plus each of none,
minimal, xhigh and max its own flag says it takes; an explicit
``reasoning_effort_levels`` is the whole list. A model without ``supports_reasoning``
takes no level and no thinking budget. Gemini's own levels and budgets, per model
family, are :mod:`aeval.batch.providers.gemini_spec`'s (its documented mapping of levels
to 2.5's budgets); here a Gemini model is asked only whether it reasons at all.
"""

from __future__ import annotations

import fnmatch
import functools
import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

from aeval.errors import ConfigError
from aeval.model_names import ModelName
from aeval.prompts import GenerationSettings
from aeval.reasoning import EFFORTS

__all__ = [
    "GAPS",
    "LITELLM_PREFIXES",
    "ModelReasoning",
    "always_reasons",
    "check_model_reasoning",
    "litellm_source",
    "model_reasoning",
]

DATA = "litellm_reasoning.json"
# aeval's provider -> how litellm's map names that provider's models (its key prefix;
# OpenAI's and Anthropic's models are listed bare). Azure's names are deployments, which
# the map knows only where a deployment is named after its model.
LITELLM_PREFIXES: dict[str, str] = {
    "openai": "",
    "anthropic": "",
    "google": "gemini/",
    "groq": "groq/",
    "together": "together_ai/",
    "mistral": "mistral/",
    "xai": "xai/",
    "azure": "azure/",
}
_EXTRA_LEVELS = ("none", "minimal", "xhigh", "max")


@dataclass(frozen=True, slots=True)
class ModelReasoning:
    """What one model takes: whether it reasons, the effort levels it takes, and where
    that was read (for the refusal's line)."""

    reasoning: bool
    levels: tuple[str, ...]
    source: str
    always_on: bool = False  # it reasons whatever it is sent (Grok 4: no level to set)

    def describe(self) -> str:
        if not self.reasoning:
            return "is not a reasoning model: it takes no reasoning effort and no thinking budget"
        if not self.levels:
            return "always reasons and takes no reasoning effort level"
        return "takes reasoning effort " + ", ".join(self.levels)


_XAI_SOURCE = (
    "xAI's reasoning guide (https://docs.x.ai/developers/model-capabilities/text/reasoning): "
    "reasoning_effort on grok-3-mini (low, high) and grok-4.3 (none to high), grok-4.5 "
    "(low to high); Grok 4 and the other reasoning models always reason and refuse it"
)


def _xai(
    levels: tuple[str, ...], *, always_on: bool = False, reasoning: bool = True
) -> ModelReasoning:
    return ModelReasoning(reasoning, levels, _XAI_SOURCE, always_on)


# Models litellm's map does not list (retired from it, or never in it), from the provider's
# own pages: (provider, name pattern) -> what the model takes.
GAPS: dict[tuple[str, str], ModelReasoning] = {
    ("anthropic", "claude-3-5-haiku*"): ModelReasoning(
        False,
        (),
        "Anthropic's models overview (https://docs.anthropic.com/en/docs/about-claude"
        '/models/overview): extended thinking "No" for Claude Haiku 3.5',
    ),
    ("anthropic", "claude-3-haiku*"): ModelReasoning(
        False,
        (),
        'Anthropic\'s models overview: extended thinking "No" for Claude Haiku 3',
    ),
    ("groq", "llama-3.3-70b-versatile"): ModelReasoning(
        False,
        (),
        "Groq's reasoning guide (https://console.groq.com/docs/reasoning) lists the "
        "reasoning models; Llama 3.3 70B is not one",
    ),
    ("groq", "llama-3.1-8b-instant"): ModelReasoning(
        False,
        (),
        "Groq's reasoning guide (https://console.groq.com/docs/reasoning)",
    ),
    ("xai", "grok-3-mini*"): _xai(("low", "high")),
    ("xai", "grok-4.3*"): _xai(("none", "low", "medium", "high")),
    ("xai", "grok-4.5*"): _xai(("low", "medium", "high")),
    ("xai", "grok-4"): _xai((), always_on=True),
    ("xai", "grok-4-0709"): _xai((), always_on=True),
    ("xai", "grok-4-latest"): _xai((), always_on=True),
    ("xai", "grok-4-fast-reasoning*"): _xai((), always_on=True),
    ("xai", "grok-4-1-fast-reasoning*"): _xai((), always_on=True),
    ("xai", "grok-4.20*-reasoning*"): _xai((), always_on=True),
    ("xai", "grok-code-fast*"): _xai((), always_on=True),
    ("xai", "*non-reasoning*"): _xai((), reasoning=False),
    ("xai", "grok-3"): _xai((), reasoning=False),
    ("xai", "grok-3-fast"): _xai((), reasoning=False),
    ("xai", "grok-3-latest"): _xai((), reasoning=False),
    ("xai", "grok-2*"): _xai((), reasoning=False),
}
# xAI's documented rules are the provider's own, and win over the map's general flags.
_PROVIDER_FIRST = frozenset({"xai"})


@functools.cache
def _map() -> tuple[str, dict[str, dict[str, Any]]]:
    doc = json.loads(resources.files("aeval").joinpath("data", DATA).read_text("utf-8"))
    return str(doc["source"]).split(",")[0], doc["models"]


def litellm_source() -> str:
    """``litellm VERSION``: whose map the shipped data is."""
    return _map()[0]


def _from_map(entry: dict[str, Any], source: str) -> ModelReasoning:
    if not entry.get("supports_reasoning"):
        return ModelReasoning(False, (), source)
    listed = entry.get("reasoning_effort_levels")
    if isinstance(listed, list):
        wanted = {str(level) for level in listed}
    else:
        wanted = {"low", "medium", "high"} | {
            level for level in _EXTRA_LEVELS if entry.get(f"supports_{level}_reasoning_effort")
        }
        if entry.get("supports_low_reasoning_effort") is False:
            wanted.discard("low")
    return ModelReasoning(True, tuple(e for e in EFFORTS if e in wanted), source)


def _gap(provider: str, name: str) -> ModelReasoning | None:
    for (owner, pattern), found in GAPS.items():
        if owner == provider and fnmatch.fnmatchcase(name, pattern):
            return found
    return None


def model_reasoning(provider: str, name: str) -> ModelReasoning | None:
    """What ``name`` (the provider's own model name) takes on ``provider``; ``None`` when
    neither litellm's map nor :data:`GAPS` knows it."""
    if provider in _PROVIDER_FIRST and (own := _gap(provider, name)) is not None:
        return own
    prefix = LITELLM_PREFIXES.get(provider)
    if prefix is not None:
        source, models = _map()
        entry = models.get(prefix + name)
        if entry is not None:
            return _from_map(entry, f"{source}'s model map, {prefix + name}")
    return _gap(provider, name)


def always_reasons(provider: str, name: str) -> bool:
    """Whether ``name`` reasons on every answer with no level to set (Grok 4)."""
    known = model_reasoning(provider, name)
    return known is not None and known.always_on


def check_model_reasoning(model: ModelName, gen: GenerationSettings) -> str | None:
    """Refuse a reasoning setting ``model`` does not take, in one line naming what it takes.

    :returns: ``None``, or, for a model no source knows, the one line saying it is sent
        as asked, unchecked.
    :raises ConfigError: the model takes no such level, or no thinking budget.
    """
    if gen.reasoning_effort is None and gen.thinking_budget is None:
        return None
    asked = (
        f"@{gen.reasoning_effort}"
        if gen.reasoning_effort is not None
        else f"a thinking budget of {gen.thinking_budget}"
    )
    known = model_reasoning(model.provider, model.name)
    if known is None:
        return (
            f"{model.qualified}: no source aeval keeps ({litellm_source()}'s model map, or "
            f"the provider's pages) knows {model.name}: sent with {asked} as asked, unchecked"
        )
    refused = not known.reasoning or (
        gen.reasoning_effort is not None
        and model.provider != "google"  # Gemini's levels are its spec's, per family
        and gen.reasoning_effort not in known.levels
    )
    if refused:
        raise ConfigError(
            f"{model.qualified}: {model.name} {known.describe()}, not {asked} ({known.source})"
        )
    return None
