"""The record ``summary.json`` holds (what :func:`aeval.report.summarize` returns), as
types: the store writes and reads the file, the report computes it, the tables print it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

if TYPE_CHECKING:
    from aeval.store.provenance import Provenance

__all__ = [
    "AcrossTrials",
    "Group",
    "Majority",
    "ModelGroup",
    "PassAtK",
    "Rate",
    "Summary",
    "TierGroup",
    "Tokens",
    "TrialGroup",
]


class Rate(TypedDict):
    """A proportion with its 95 % interval (:mod:`aeval.report.intervals`)."""

    value: float | None  # None when n is 0
    low: float | None
    high: float | None
    successes: int
    n: int
    design_effect: float | None  # 1.0 for a plain Wilson interval


class Tokens(TypedDict):
    prompt: int
    completion: int
    total: int


class Group(TypedDict):
    """The counts of one group of verdicts (all of them, a model, a trial, a tier)."""

    n: int
    scored: int  # n less the infrastructure failures
    correct: int
    correct_strict: int
    accuracy: Rate
    strict_accuracy: Rate
    published_accuracy: Rate
    model_failures: int
    infra_failures: int
    repaired: int
    statuses: dict[str, int]  # every Status value
    directions: dict[str, int]  # every Direction
    tokens: Tokens
    cost_usd: float | None  # None when a model's price is unknown
    # the study's categories of the published reading (aeval.report.groups)
    published_categories: dict[str, int]


class AcrossTrials(TypedDict):
    """Mean ± sample std of the per-trial accuracies."""

    trials: int
    mean: float | None
    std: float | None


class PassAtK(TypedDict):
    k: int
    value: float
    low: float | None
    high: float | None
    items: int  # items with at least k scored answers


class Majority(TypedDict):
    """maj@n over the answers' Z3 equivalence classes."""

    n: int
    items: int
    value: float
    low: float | None
    high: float | None
    correct: float
    ties: int
    no_votes: int
    classes: int


class TrialGroup(Group):
    model: str
    trial: int | None


class ModelGroup(Group):
    model: str
    across_trials: AcrossTrials
    pass_at_k: list[PassAtK]
    majority: Majority | None  # None before the classes were computed


class TierGroup(Group):
    model: str
    tier: str | None
    pass_at_k: list[PassAtK]
    majority: Majority | None


class Summary(TypedDict):
    """The content of ``summary.json`` (:func:`summarize`)."""

    version: int
    confidence: float
    infra_statuses: list[str]
    overall: Group | None  # None for no verdicts
    models: list[ModelGroup]  # in order of first appearance
    trials: list[TrialGroup]
    tiers: list[TierGroup]
    # added by whoever knows where the verdicts came from (None: a run that does not know)
    provenance: NotRequired[Provenance | None]
    # What the items are (summarize(items=...)): the group records per model and
    # program / distance / size bin (keyed "program", "distance", "size"), the
    # study's three tables, and the items that separate models.
    programs: NotRequired[list[dict[str, Any]]]
    distances: NotRequired[list[dict[str, Any]]]
    sizes: NotRequired[list[dict[str, Any]]]
    study: NotRequired[dict[str, Any] | None]
    separating: NotRequired[dict[str, Any]]
