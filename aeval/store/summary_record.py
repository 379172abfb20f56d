"""What ``summary.json`` holds (the record :func:`aeval.report.summarize` returns) and
the provenance record it shares with ``config.json``, as types: the store writes and
reads the files, the report computes the summary, the tables print it.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

__all__ = [
    "AcrossTrials",
    "DatasetRecord",
    "DistanceGroup",
    "GenerationRecord",
    "Group",
    "ItemSpread",
    "Majority",
    "ModelGroup",
    "PassAtK",
    "ProgramGroup",
    "Provenance",
    "Rate",
    "ScoredFile",
    "SeparatingItems",
    "SizeGroup",
    "SolvedCount",
    "StudyTables",
    "Summary",
    "TierGroup",
    "Tokens",
    "TrialGroup",
    "UnsolvedItems",
]


class ScoredFile(TypedDict):
    path: str
    sha256: str | None  # None: the file was not there


class DatasetRecord(TypedDict):
    """The data a run was scored against (a
    :class:`~aeval.dataset.fingerprint.DatasetFingerprint`)."""

    ref: str
    kind: str  # file, directory or hub
    sha256: str | None
    revision: str | None
    content_sha256: str
    total_rows: int
    rows: int


class GenerationRecord(TypedDict):
    """A run's :class:`~aeval.prompts.GenerationSettings` (``None``: not sent)."""

    temperature: float | None
    top_p: float | None
    seed: int | None
    max_tokens: int | None
    max_completion_tokens: int | None


class Provenance(TypedDict):
    """Where a run's or a rescore's numbers came from (``provenance`` in ``config.json``
    and ``summary.json``). ``None`` where it is not known (a rescore cannot know how
    the answers were generated)."""

    synthetic: bool | None  # answered by a synthetic responder, not a model
    offline: bool | None  # answered by the local server the run started
    responder: str | None  # which synthetic responder
    dataset: DatasetRecord | None
    instruction_sha256: str | None
    system_sha256: NotRequired[str | None]  # a run's
    protocol: str | None
    generation: GenerationRecord | None
    scored_files: NotRequired[list[ScoredFile]]  # a rescore's
    versions: dict[str, str | None]


class Rate(TypedDict):
    """A proportion with its 95 % interval (:mod:`aeval.summary.intervals`)."""

    value: float | None  # None when n is 0
    low: float | None
    high: float | None
    successes: int
    n: int
    design_effect: float | None  # 1.0 for a plain Wilson interval


class Tokens(TypedDict):
    prompt: int
    completion: int  # every output token billed, reasoning included
    total: int
    reasoning: int | None  # of ``completion``; None when no answer said how many


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
    # the study's categories of the published reading (aeval.summary.groups)
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


# The item levels (summarize(items=...)): a model's group of one program, extrapolation
# distance or answer-size bin; the value is text, None for verdicts without one.
class ProgramGroup(Group):
    model: str
    program: str | None


class DistanceGroup(Group):
    model: str
    distance: str | None


class SizeGroup(Group):
    model: str
    size: str | None  # the bin's label, e.g. "500–999"


class StudyTables(TypedDict):
    """The study's three tables (:func:`aeval.summary.groups.study_tables`): counts of the
    published reading's categories by model, by model and tier (and ``overall``), and
    by model and program (with ``total_attempts``)."""

    model_summary: dict[str, dict[str, int]]
    model_tier_summary: dict[str, dict[str, dict[str, int]]]
    model_problem_stats: dict[str, dict[str, dict[str, int]]]


class UnsolvedItems(TypedDict):
    count: int
    ids: list[str]  # sorted, the first few


class SolvedCount(TypedDict):
    solved: int  # trials that solved the item
    trials: int


class ItemSpread(TypedDict):
    """One item the models disagree on, and each model's count."""

    custom_id: str
    tier: NotRequired[str | None]  # what the item is, where the verdicts say
    program: NotRequired[str | None]
    distance: NotRequired[int | None]
    models_solving: int
    models: int
    trials_solved: int
    trials: int
    disagreement: float
    per_model: dict[str, SolvedCount]


class SeparatingItems(TypedDict):
    """The items that separate models (:func:`aeval.summary.groups.separating_items`)."""

    items: int
    models: int
    unsolved: UnsolvedItems
    solved_by_all: int
    split: int
    most_disagreed: list[ItemSpread]


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
    programs: NotRequired[list[ProgramGroup]]
    distances: NotRequired[list[DistanceGroup]]
    sizes: NotRequired[list[SizeGroup]]
    study: NotRequired[StudyTables | None]
    separating: NotRequired[SeparatingItems]
