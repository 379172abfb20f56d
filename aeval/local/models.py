"""Which responder answers for which model name.

Models are an ordered mapping from a model name or glob pattern (``gpt-4o*``, ``*``) to a
:class:`ModelSpec`; an exact name wins over patterns, then patterns are tried in order. A model
that matches nothing does not exist (the API's 404 ``model_not_found``).

On the command line one ``--models`` value is ``PATTERN=RESPONDER[:key=value,…]``, e.g.
``gpt-4o*=synthetic:seed=3,accuracy=0.8,too_weak=2,failures=deterministic,repair=0.1/0.3/0.6``
or ``*=replay:path=out.jsonl``; several are separated by ``;`` or given as repeated flags. ``demo``
stands for :func:`demo_models`.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

import polars as pl

from aeval.errors import ConfigError
from aeval.local.chat import Responder
from aeval.local.options import parse_fields, split_items
from aeval.local.questions import QuestionIndex
from aeval.local.responders import ReferenceResponder, ReplayResponder
from aeval.local.synthetic import Failures, Intent, SyntheticResponder, repair_rates

__all__ = ["ModelRouter", "ModelSpec", "demo_models", "describe_models", "parse_models"]

ResponderKind = Literal["reference", "synthetic", "replay"]


@dataclass(frozen=True, slots=True)
class ModelSpec:
    """How one model (or family of models) answers.

    ``seed``, ``accuracy``, ``fenced_share``, ``failure_mix``, ``failures`` and ``repair``
    (the chance a repair round fixes a wrong answer: ``P`` or ``RETRY/REASON/COUNTEREXAMPLE``;
    :func:`~aeval.local.synthetic.repair_rates`) apply to the
    ``synthetic`` responder (see :class:`SyntheticResponder`); ``replay`` lists the
    recorded batch output files of the ``replay`` responder.
    """

    responder: ResponderKind = "reference"
    seed: int = 0
    accuracy: float = 0.7
    fenced_share: float = 0.15
    failure_mix: Mapping[Intent, float] | None = None
    replay: tuple[Path, ...] = ()
    failures: Failures = "transient"
    repair: tuple[float, ...] | None = None

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
        repair_rates(self.accuracy, self.repair)

    def build(self, index: QuestionIndex) -> Responder:
        if self.responder == "synthetic":
            return SyntheticResponder(index, seed=self.seed, accuracy=self.accuracy,
                                      fenced_share=self.fenced_share,
                                      failure_mix=self.failure_mix,
                                      failures=self.failures, repair=self.repair)  # fmt: skip
        if self.responder == "replay":
            return ReplayResponder.from_files(self.replay)
        return ReferenceResponder(index)


def demo_models() -> dict[str, ModelSpec]:
    """The offline demo: the three mission models as seeded synthetic responders,
    weakest last."""
    return {
        "gpt-4o-2024-11-20": ModelSpec("synthetic", seed=11, accuracy=0.62),
        "gpt-4o-mini-2024-07-18": ModelSpec("synthetic", seed=7, accuracy=0.41),
        "gpt-3.5-turbo-0125": ModelSpec("synthetic", seed=3, accuracy=0.18),
    }


def describe_models(models: Mapping[str, ModelSpec]) -> str:
    """One line saying which responder answers which model names (for provenance)."""
    parts = []
    for pattern, spec in models.items():
        synthetic = spec.responder == "synthetic"
        seeded = f" seed={spec.seed} accuracy={spec.accuracy}" if synthetic else ""
        seeded += f" repair={'/'.join(map(str, spec.repair))}" if synthetic and spec.repair else ""
        parts.append(f"{pattern}={spec.responder}{seeded}")
    return "aeval local server: " + "; ".join(parts)


def parse_models(values: Iterable[str]) -> dict[str, ModelSpec]:
    """Parse ``--models`` values (see the module docstring) into an ordered mapping."""
    models: dict[str, ModelSpec] = {}
    for item in split_items(values):
        pattern, sep, rest = (part.strip() for part in item.partition("="))
        if item == "demo":
            models.update(demo_models())
        elif not sep or not pattern:
            raise ConfigError(
                f"--models {item!r}: expected PATTERN=RESPONDER[:key=value,...], "
                "e.g. 'gpt-4o*=synthetic:seed=1,accuracy=0.8'"
            )
        else:
            kind, _, options = rest.partition(":")
            models[pattern] = _spec(item, kind, options)
    return models


def _spec(item: str, kind: str, options: str) -> ModelSpec:
    fields: dict[str, Any] = {"responder": kind.strip()}

    def path_or_weight(key: str, raw: str) -> bool:
        if key == "path":
            fields["replay"] = (*fields.get("replay", ()), Path(raw))
        elif key in Intent.__members__.values():
            fields["failure_mix"] = {**fields.get("failure_mix", {}), Intent(key): float(raw)}
        return key == "path" or key in Intent.__members__.values()

    return parse_fields("--models", item, options, ModelSpec, fields, path_or_weight)


class ModelRouter:
    """Resolves model names to responders, each built once, up front (so a bad spec, an
    unreadable replay file…, fails at start-up, not as a failed batch later)."""

    def __init__(
        self, models: Mapping[str, ModelSpec] | None, dataset: pl.DataFrame | None
    ) -> None:
        self.models = dict(models) if models is not None else {"*": ModelSpec()}
        self.index = QuestionIndex.from_frame(dataset)
        self._built = {pattern: spec.build(self.index) for pattern, spec in self.models.items()}

    def responder_for(self, model: str) -> Responder | None:
        """The exact name's responder, else the first matching pattern's; None: no such model."""
        if model in self._built:
            return self._built[model]
        return next((r for p, r in self._built.items() if fnmatch.fnmatchcase(model, p)), None)
