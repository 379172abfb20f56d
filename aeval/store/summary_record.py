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
    "RoundRate",
    "RoundsRecord",
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
    "VersusTrials",
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


class RoundRate(Rate):
    """accuracy@k: the answers solved by round k, over the round-1 answers scored."""

    k: int


class VersusTrials(TypedDict):
    """accuracy@k of k rounds beside pass@k of k independent trials, each at its cost
    per item (one answer of round 1: a (trial, item)); None where a side has no k."""

    k: int
    accuracy_at_k: float | None
    rounds_cost_per_item: float | None  # USD of rounds 1..k, per item
    rounds_tokens_per_item: float | None
    pass_at_k: float | None
    trials_cost_per_item: float | None  # USD of k round-1 answers, per item
    trials_tokens_per_item: float | None


class RoundsRecord(TypedDict):
    """What repair rounds bought (:mod:`aeval.summary.rounds`), for a run with K > 1.

    Lists indexed by round (``[0]`` is round 1). ``items`` is the denominator of every
    accuracy@k: the round-1 answers scored (infrastructure failures of round 1 left
    out, as accuracy leaves them out), so ``accuracy_by_round[0]`` is the group's
    ``accuracy``."""

    rounds: int  # K
    items: int
    asked: list[int]  # verdicts of round r (requests answered or failed)
    infra_failures: list[int]  # of those, infrastructure failures
    solved: list[int]  # items first solved in round r
    solved_by: list[int]  # items solved in rounds 1..r
    accuracy_by_round: list[float | None]  # solved_by / items
    accuracy_at_k: list[RoundRate]  # the same with 95 % intervals
    first_wrong: int  # items whose round-1 answer was scored and not equivalent
    repaired: int  # of those, solved in a later round
    repair_rate: Rate  # repaired / first_wrong
    mean_rounds_to_solve: float | None  # over the items solved by round K
    tokens: list[Tokens]  # per round
    cost_usd: list[float | None]  # per round; None when the price is unknown
    cumulative_cost_usd: list[float | None]  # rounds 1..r
    cost_per_solved_usd: float | None  # all K rounds' cost / items solved by round K
    tokens_per_solved: float | None
    versus_trials: NotRequired[list[VersusTrials]]  # a model's, with several trials


class TrialGroup(Group):
    model: str
    trial: int | None
    rounds: NotRequired[RoundsRecord]  # only a run with repair rounds


class ModelGroup(Group):
    model: str
    across_trials: AcrossTrials
    pass_at_k: list[PassAtK]
    majority: Majority | None  # None before the classes were computed
    rounds: NotRequired[RoundsRecord]  # only a run with repair rounds


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
