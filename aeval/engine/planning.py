"""Planning a run: its ground truth, its shards' request files, and the ``--dry-run`` plan.

Plain file work with no network: it runs before anything is sent (and in a
worker thread when a run plans, so the event loop stays free).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, cast

import polars as pl

from aeval.api_settings import PollSettings, RetrySettings
from aeval.batch.providers.registry import provider_spec, shard_limits_for
from aeval.batch.shard import COMPLETIONS_URL, RESPONSES_URL, URL, write_shards
from aeval.config import Credentials, RunConfig, ShardLimits
from aeval.dataset import DEFAULT_DATASET, TruthTable, load_dataset_fingerprinted
from aeval.dataset.fingerprint import DatasetFingerprint
from aeval.errors import ConfigError, DatasetError, RunDirError
from aeval.feedback import Turn, split_round
from aeval.model_names import parse_model, split_variant
from aeval.prompts import (
    GenerationSettings,
    continue_chat,
    continue_responses,
    request_body,
    responses_body,
)
from aeval.store import RunLayout, RunStore, ShardRecord, new_run_id, shard_key, shard_stem
from aeval.store.hold import hold_submissions
from aeval.store.provenance import PROVENANCE_KEY, Provenance, check_same_data, run_provenance
from aeval.verify.limits import VerifyLimits

__all__ = [
    "DryRunPlan",
    "JobBuild",
    "JobContinue",
    "check_round_ids",
    "job_builder",
    "job_continuer",
    "load_truth",
    "pin_data",
    "plan_run",
    "plan_shards",
    "request_ids",
    "saved_config",
    "trial_generation",
    "write_job_shards",
    "write_subset",
]


@dataclass(frozen=True, slots=True)
class DryRunPlan:
    """What a run would send: shards per job and an estimate of input tokens."""

    run_dir: Path
    items: int
    shards: tuple[ShardRecord, ...]
    request_bytes: int
    estimated_input_tokens: int


def load_truth(config: RunConfig) -> tuple[pl.DataFrame, TruthTable, DatasetFingerprint]:
    """The run's rows: (id, question) to send, the truth table to check against, and
    the data's fingerprint."""
    frame, fingerprint = load_dataset_fingerprinted(
        config.dataset or DEFAULT_DATASET, **config.row_selection()
    )
    return (
        frame.select("id", "question"),
        TruthTable(frame),
        fingerprint,
    )


# What a resumed run cannot change: its rows, prompts, models and trials.
class ResumeOverrides(TypedDict, total=False):
    """What a resumed run may change of its saved configuration (:meth:`Run.resume`):
    how it polls, retries, verifies and paces; never its rows, prompt, models or trials."""

    generation: GenerationSettings
    limits: VerifyLimits
    poll: PollSettings
    retry: RetrySettings
    shard_limits: ShardLimits
    retry_failed: int
    verify_queue: int
    workers: int | None
    ray_address: str | None
    published: bool
    published_binary: bool
    max_connections: int
    request_timeout: float


_FROZEN_ON_RESUME = frozenset(
    {
        *("models", "trials", "dataset", "dataset_revision"),
        *("limit", "sample", "sample_seed", "tier", "sample_ids", "prompt"),
        # how answers are asked for: another route or prompt would be another run
        *("api", "endpoint", "prompt_template"),
        # the repair protocol: how many rounds, and what the feedback tells
        *("rounds", "feedback", "feedback_template"),
    }
)


def saved_config(
    run_dir: Path,
    overrides: Mapping[str, Any],
    credentials: Credentials | Mapping[str, Credentials] | None,
) -> tuple[RunConfig, dict[str, Any] | None]:
    """The configuration a run directory was started with, and its recorded provenance.

    :param overrides: settings to change on resume (e.g. ``poll``, ``workers``).
    :raises RunDirError: no readable ``config.json``.
    :raises ConfigError: ``overrides`` would change the run's rows, prompt, models or trials.
    """
    path = RunLayout(run_dir).config
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RunDirError(
            f"{run_dir} is not a run directory (no config.json); give the directory "
            "that 'python -m aeval run' printed"
        ) from None
    except (OSError, json.JSONDecodeError) as err:
        raise RunDirError(f"{path}: cannot read the saved configuration: {err}") from err
    changed = _FROZEN_ON_RESUME & set(overrides)
    if changed:
        raise ConfigError(f"a resumed run cannot change {sorted(changed)}")
    config = RunConfig.from_dict(saved, source=str(path))
    config = dataclasses.replace(config, out_dir=run_dir.parent, run_id=run_dir.name, **overrides)
    if credentials is not None:
        config = config.with_credentials(credentials)
    recorded = saved.get(PROVENANCE_KEY)
    return config, recorded if isinstance(recorded, dict) else None


def pin_data(
    config: RunConfig,
    fingerprint: DatasetFingerprint,
    *,
    resume_dir: Path | None,
    recorded: dict[str, Any] | None,
    synthetic: str | None,
    offline: bool,
) -> tuple[RunConfig, Provenance]:
    """Pin the run to the data it loaded, and its provenance: (config, provenance).

    :param recorded: the provenance a resumed run recorded when it started.
    :raises DatasetError: a resumed run's rows differ from those it started on.
    """
    if resume_dir is not None:
        check_same_data(resume_dir, recorded, fingerprint)
    elif fingerprint.revision:
        # A batch can outlive a dataset update, and a branch or tag can move:
        # the run (and its resume) stays at the commit it loaded.
        config = dataclasses.replace(config, dataset_revision=fingerprint.revision)
    # What a resumed run recorded is what this module wrote when it started.
    provenance = cast(Provenance, recorded) or run_provenance(
        config, fingerprint, offline=offline, synthetic=synthetic
    )
    return config, provenance


def trial_generation(config: RunConfig, trial: int) -> GenerationSettings:
    """The generation settings of one trial: ``--generation-seed S`` sends seed
    S + trial - 1, in both modes. Trials exist to sample the model afresh; with one
    seed in every trial a server that honours it (OpenAI mostly does, vLLM does)
    returns the same answer k times, and pass@k, maj@n and the trials' spread
    measure nothing. Different seeds keep each trial reproducible."""
    gen = config.generation
    if gen.seed is None:
        return gen
    return dataclasses.replace(gen, seed=gen.seed + trial - 1)


def completion_body(
    model: str, question: str, template: str, config: RunConfig, gen: GenerationSettings
) -> dict[str, Any]:
    """A ``/v1/completions`` body: the template with its slots filled (plain replacement,
    so other braces in the template stay as written)."""
    prompt = template.replace("{instruction}", config.prompt.instruction).replace(
        "{question}", question
    )
    return {"model": model, "prompt": prompt, **gen.as_body_fields()}


def plan_shards(config: RunConfig, store: RunStore, questions: pl.DataFrame) -> list[ShardRecord]:
    """Write every job's request files and return their (not yet saved) shard records.

    In batch mode each model's requests are in its provider's own shape (the spec's
    ``request_body``, under the provider's ``request_url`` and shard limits); direct
    mode's are ``/v1/chat/completions`` (or ``/v1/completions``) bodies for the one
    OpenAI-compatible endpoint, the model named as written. ``--endpoint responses``
    writes ``/v1/responses`` bodies in either mode (batch: OpenAI's models only).

    These are the first round's requests; a repair round's are written when its turn
    comes (:func:`plan_round`).
    """
    records: list[ShardRecord] = []
    for model in config.models:
        for trial in range(1, config.trials + 1):
            build = job_builder(config, model, trial)
            requests = ((cid, build(question, ())) for cid, question in questions.iter_rows())
            records += write_job_shards(config, store, model, trial, requests, first_shard=0)
    return records


def write_job_shards(
    config: RunConfig,
    store: RunStore,
    model: str,
    trial: int,
    requests: Iterator[tuple[str, dict[str, Any]]],
    *,
    first_shard: int,
    repair_round: int = 1,
) -> list[ShardRecord]:
    """Write one job's ``requests`` as shard files numbered from ``first_shard``; their
    (not yet saved) records."""
    _, url, limits = _request_shape(config, model, _template(config))

    def path_for(shard: int) -> Path:
        return store.request_path(shard_stem(model, trial, first_shard + shard))

    records = []
    for f in write_shards(requests, path_for, limits, url=url):
        number = first_shard + f.shard
        records.append(
            ShardRecord(
                key=shard_key(model, trial, number),
                model=model,
                trial=trial,
                shard=number,
                requests=f.requests,
                input_path=str(f.path.relative_to(store.run_dir)),
                sha256=f.sha256,
                bytes=f.bytes,
                repair_round=repair_round,
            )
        )
    return records


# (question, earlier turns) -> one request body of a job
JobBuild = Callable[[str, Sequence[Turn]], dict[str, Any]]


def job_builder(config: RunConfig, model: str, trial: int) -> JobBuild:
    """How ``model``'s trial ``trial`` writes a request body, in every round: the same
    route, provider shape and generation settings (a reasoning variant's included)."""
    build, _, _ = _request_shape(config, model, _template(config))
    _, variant = split_variant(model)
    gen = trial_generation(config, trial).with_reasoning(variant)
    return lambda question, turns: build(question, gen, turns)


# (a request body, more turns) -> the body with them appended
JobContinue = Callable[[dict[str, Any], Sequence[Turn]], dict[str, Any]]


def job_continuer(config: RunConfig, model: str) -> JobContinue:
    """How ``model``'s request bodies take a repair round's turns: the next round's
    request is the last one's with the answer and feedback appended, in the shape
    ``model``'s route and provider write them (what :func:`job_builder` gives with all
    the turns, byte for byte)."""
    if config.endpoint == "completions":
        raise ConfigError("--rounds needs a conversation: --endpoint completions has none")
    if config.endpoint == "responses":
        return continue_responses
    if config.api == "direct":
        return continue_chat
    return provider_spec(parse_model(model).provider).continue_body


def _template(config: RunConfig) -> str | None:
    return config.prompt_template if config.endpoint == "completions" else None


# (question, generation settings, earlier turns) -> one request body
_Build = Callable[[str, GenerationSettings, Sequence[Turn]], dict[str, Any]]


def _request_shape(
    config: RunConfig, model: str, template: str | None
) -> tuple[_Build, str, ShardLimits]:
    """How ``model``'s requests are written: (body builder, request url, shard limits)."""
    extra = config.extra_body or {}
    if config.api == "direct" or config.endpoint == "responses":
        # Direct mode reads no provider prefix; OpenAI's Batch API names its own model.
        # Either way a variant's name is sent bare, its setting in the body.
        direct = config.api == "direct"
        bare = split_variant(model)[0] if direct else parse_model(model).name
        limits = config.shard_limits if direct else shard_limits_for("openai", config.shard_limits)
        if template is not None:
            # no conversation: RunConfig refuses repair rounds with a completions prompt
            return (
                lambda q, gen, turns: {**completion_body(bare, q, template, config, gen), **extra},
                COMPLETIONS_URL,
                limits,
            )
        if config.endpoint == "responses":
            return (
                lambda q, gen, turns: {
                    **responses_body(bare, q, config.prompt, gen, turns),
                    **extra,
                },
                RESPONSES_URL,
                limits,
            )
        return (
            lambda q, gen, turns: {**request_body(bare, q, config.prompt, gen, turns), **extra},
            URL,
            limits,
        )
    parsed = parse_model(model)
    spec = provider_spec(parsed.provider)
    return (
        lambda q, gen, turns: {
            **spec.request_body(parsed.name, q, config.prompt, gen, turns),
            **extra,
        },
        spec.request_url,
        shard_limits_for(parsed.provider, config.shard_limits),
    )


def check_round_ids(ids: Iterable[str]) -> None:
    """Refuse rows whose ids would read as a repair round's request ids (``ID_r2``):
    their answers would be taken for another item's.

    :raises DatasetError: naming the first such id.
    """
    for cid in ids:
        item, rnd = split_round(cid)
        if rnd != 1:
            raise DatasetError(
                f"row id {cid!r} reads as round {rnd} of item {item!r} (aeval.feedback); "
                "--rounds needs ids that do not end in _r<N>"
            )


def request_ids(path: Path, sha256: str | None = None) -> list[str]:
    """The custom_ids of a request file, in order, checked against the manifest's ``sha256``
    in the same pass (a changed file would pair answers with the wrong requests)."""
    ids: list[str] = []
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for lineno, line in enumerate(fh, start=1):
            digest.update(line)
            try:
                ids.append(json.loads(line)["custom_id"])
            except (ValueError, KeyError, TypeError) as err:
                raise RunDirError(f"{path}, line {lineno}: not a request line ({err})") from err
    if sha256 is not None and digest.hexdigest() != sha256:
        raise RunDirError(
            f"request file {path} has sha256 {digest.hexdigest()[:12]}…, but the manifest "
            f"recorded {sha256[:12]}… for it: it was changed after the run wrote it"
        )
    return ids


def write_subset(source: Path, dest: Path, ids: frozenset[str]) -> tuple[int, int, str]:
    """Copy the request lines of ``ids`` from ``source`` to ``dest``; (count, bytes, sha256)."""
    digest = hashlib.sha256()
    count = size = 0
    with source.open("rb") as src, dest.open("wb") as out:
        for raw in src:
            if json.loads(raw)["custom_id"] in ids:
                out.write(raw)
                digest.update(raw)
                count += 1
                size += len(raw)
    return count, size, digest.hexdigest()


def plan_run(config: RunConfig) -> DryRunPlan:
    """Write the request files of a run (``--dry-run``) without calling any API."""
    questions, truth, fingerprint = load_truth(config)
    # Pinned to the commit loaded, as a run is.
    config, provenance = pin_data(
        config, fingerprint, resume_dir=None, recorded=None, synthetic=None, offline=False
    )
    run_id = config.run_id or new_run_id()
    saved = {**config.to_dict(), PROVENANCE_KEY: provenance}
    store = RunStore.create(config.out_dir, run_id, saved)
    try:
        hold_submissions(store.run_dir, "dry-run")  # resume only submits it when told to
        records = plan_shards(config, store, questions)
        store.put_shards(records)
    finally:
        store.close()
    total = sum(r.bytes for r in records)
    return DryRunPlan(
        run_dir=store.run_dir,
        items=len(truth),
        shards=tuple(records),
        request_bytes=total,
        # ~4 bytes per token for English text and JSON framing: an estimate only.
        estimated_input_tokens=total // 4,
    )
