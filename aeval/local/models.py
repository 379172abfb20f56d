"""Which responder answers for which model name.

Models are configured as an ordered mapping from a model name or glob
pattern (``gpt-4o*``, ``*``) to a :class:`ModelSpec`; an exact name wins over
patterns, then patterns are tried in order. A model that matches nothing does
not exist (the API's 404 ``model_not_found``, per request).

On the command line one ``--models`` value is ``PATTERN=RESPONDER[:key=value,…]``,
for example ``gpt-4o*=synthetic:seed=3,accuracy=0.8`` or
``*=replay:path=out.jsonl``; several are separated by ``;`` or given as
repeated flags. ``demo`` stands for :func:`demo_models`.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import polars as pl

from aeval.errors import ConfigError
from aeval.local.chat import Responder
from aeval.local.options import parse_fields, split_items
from aeval.local.questions import QuestionIndex
from aeval.local.responders import ReferenceResponder, ReplayResponder
from aeval.local.synthetic import Intent, SyntheticResponder

__all__ = [
    "DEMO_MODELS",
    "ModelRouter",
    "ModelSpec",
    "ResponderKind",
    "demo_models",
    "describe_models",
    "parse_models",
]

ResponderKind = Literal["reference", "synthetic", "replay"]

# The three mission models, weakest last, as the offline demo shows them.
DEMO_MODELS: tuple[tuple[str, int, float], ...] = (
    ("gpt-4o-2024-11-20", 11, 0.62),
    ("gpt-4o-mini-2024-07-18", 7, 0.41),
    ("gpt-3.5-turbo-0125", 3, 0.18),
)


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """How one model (or family of models) answers.

    ``seed``, ``accuracy``, ``fenced_share`` and ``failure_mix`` apply to the
    ``synthetic`` responder (see :class:`SyntheticResponder`); ``replay``
    lists the recorded batch output files of the ``replay`` responder.
    """

    responder: ResponderKind = "reference"
    seed: int = 0
    accuracy: float = 0.7
    fenced_share: float = 0.15
    failure_mix: Mapping[Intent, float] | None = None
    replay: tuple[Path, ...] = field(default=())

    def __post_init__(self) -> None:
        if self.responder not in get_args(ResponderKind):
            raise ConfigError(
                f"unknown responder {self.responder!r}: "
                f"use one of {', '.join(get_args(ResponderKind))}"
            )
        if not 0.0 <= self.accuracy <= 1.0 or not 0.0 <= self.fenced_share <= 1.0:
            raise ConfigError("model spec: accuracy and fenced_share must be between 0 and 1")
        if self.responder == "replay" and not self.replay:
            raise ConfigError("model spec: the replay responder needs path=<batch output file>")

    def build(self, index: QuestionIndex) -> Responder:
        if self.responder == "synthetic":
            return SyntheticResponder(
                index,
                seed=self.seed,
                accuracy=self.accuracy,
                fenced_share=self.fenced_share,
                failure_mix=self.failure_mix,
            )
        if self.responder == "replay":
            return ReplayResponder.from_files(self.replay)
        return ReferenceResponder(index)


def demo_models() -> dict[str, ModelSpec]:
    """The offline demo: the three mission models as seeded synthetic responders."""
    return {
        name: ModelSpec("synthetic", seed=seed, accuracy=accuracy)
        for name, seed, accuracy in DEMO_MODELS
    }


def describe_models(models: Mapping[str, ModelSpec]) -> str:
    """One line saying which responder answers which model names (for provenance)."""
    parts = []
    for pattern, spec in models.items():
        detail = f"{spec.responder}"
        if spec.responder == "synthetic":
            detail += f" seed={spec.seed} accuracy={spec.accuracy}"
        parts.append(f"{pattern}={detail}")
    return "aeval local server: " + "; ".join(parts)


def parse_models(values: Iterable[str]) -> dict[str, ModelSpec]:
    """Parse ``--models`` values (see the module docstring) into an ordered mapping."""
    models: dict[str, ModelSpec] = {}
    for item in split_items(values):
        if item == "demo":
            models.update(demo_models())
        else:
            models[_pattern(item)] = _spec(item)
    return models


def _pattern(item: str) -> str:
    pattern, sep, _ = item.partition("=")
    if not sep or not pattern.strip():
        raise ConfigError(
            f"--models {item!r}: expected PATTERN=RESPONDER[:key=value,...], "
            "e.g. 'gpt-4o*=synthetic:seed=1,accuracy=0.8'"
        )
    return pattern.strip()


def _spec(item: str) -> ModelSpec:
    kind, _, options = item.partition("=")[2].partition(":")
    fields: dict[str, Any] = {"responder": kind.strip()}

    def path_or_weight(key: str, raw: str) -> bool:
        if key == "path":
            fields["replay"] = (*fields.get("replay", ()), Path(raw))
        elif key in Intent.__members__.values():
            fields["failure_mix"] = {**fields.get("failure_mix", {}), Intent(key): float(raw)}
        return key == "path" or key in Intent.__members__.values()

    return parse_fields("--models", item, options, ModelSpec, fields, path_or_weight)


class ModelRouter:
    """Resolves model names to responders, building each responder once."""

    def __init__(
        self, models: Mapping[str, ModelSpec] | None, dataset: pl.DataFrame | None
    ) -> None:
        self._models = dict(models) if models is not None else {"*": ModelSpec()}
        index = QuestionIndex.from_frame(dataset)
        self.index = index  # the direct /v1/completions route finds questions in prompts
        # Built up front so a bad spec (unreadable replay file…) fails at start-up,
        # not as a failed batch later.
        self._built: dict[str, Responder] = {
            key: spec.build(index) for key, spec in self._models.items()
        }
        self._resolved: dict[str, str | None] = {}

    @property
    def models(self) -> Mapping[str, ModelSpec]:
        """Model-name patterns and their responder specs, in matching order."""
        return self._models

    def responder_for(self, model: str) -> Responder | None:
        if model not in self._resolved:
            self._resolved[model] = self._match(model)
        key = self._resolved[model]
        return None if key is None else self._built[key]

    def _match(self, model: str) -> str | None:
        if model in self._models:
            return model
        return next((p for p in self._models if fnmatch.fnmatchcase(model, p)), None)
