"""The benchmark as an Inspect AI task, scored by aeval's judge.

``inspect eval aeval/warp --model openai/gpt-4o-mini`` runs every row with
aeval's structured instruction through any Inspect model (its providers,
epochs, limits and log viewer) and scores each answer with aeval's verifier:
the same killable worker pool, hard time and memory limits, and the three
readings (strict, lenient, published) as :mod:`aeval.verify` gives a run. The
name ``aeval/warp`` resolves through the ``inspect_ai`` entry point in
aeval's ``pyproject.toml`` (module :mod:`aeval.interop.inspect_registry`).

Needs the ``aeval[inspect]`` extra (``inspect-ai``); importing this module
without it raises :class:`ImportError` naming the extra.
"""

from __future__ import annotations

import weakref
from typing import Any

try:
    from inspect_ai import Task, task
    from inspect_ai.dataset import MemoryDataset, Sample
    from inspect_ai.model import ChatMessage, ChatMessageSystem, ChatMessageUser
    from inspect_ai.scorer import (
        CORRECT,
        INCORRECT,
        Score,
        Scorer,
        Target,
        accuracy,
        scorer,
        stderr,
    )
    from inspect_ai.solver import TaskState, generate
except ImportError as err:  # pragma: no cover - depends on the environment
    raise ImportError(
        "aeval's Inspect AI task needs inspect-ai: pip install 'aeval[inspect]'"
    ) from err

from aeval.dataset import DEFAULT_DATASET, demo_dataset_path, load_dataset
from aeval.errors import ConfigError
from aeval.prompts import PROTOCOLS, PromptSettings, format_prompt
from aeval.reward.runtime import PoolRuntime
from aeval.verdicts import INFRA_STATUSES, CheckResult, Status
from aeval.verify import VerifyLimits
from aeval.verify.checker import Checker
from aeval.verify.extract import extract_answer
from aeval.verify.published import PublishedResult

__all__ = ["READINGS", "equivalence", "score_metadata", "warp", "warp_samples"]

# The three readings of one answer, each a key of the score's value.
READINGS = ("lenient", "strict", "published")

DEMO = "demo"  # dataset=demo: the small synthetic benchmark bundled with aeval


def warp_samples(
    dataset: str = DEFAULT_DATASET,
    *,
    tier: str | None = None,
    sample_ids: str | None = None,
    protocol: str = "default",
    limit: int | None = None,
    system: str | None = None,
) -> list[Sample]:
    """The benchmark's rows as Inspect samples: the prompt aeval sends (question and
    instruction, in the protocol's order), the ground truth as target, and the
    declarations the verifier parses answers against in the metadata.

    :raises ConfigError: an unknown protocol.
    :raises DatasetError: the dataset cannot be read or the selection names no row.
    """
    settings = PromptSettings.for_protocol(protocol, system=system)
    source = str(demo_dataset_path()) if dataset == DEMO else dataset
    frame = load_dataset(source, tier=tier, ids=sample_ids, limit=limit)
    samples = []
    for row in frame.iter_rows(named=True):
        messages: list[ChatMessage] = []
        if settings.system is not None:
            messages.append(ChatMessageSystem(content=settings.system))
        messages.append(ChatMessageUser(content=format_prompt(row["question"], settings)))
        samples.append(
            Sample(
                id=row["id"],
                input=messages,
                target=row["answer"],
                metadata={"constants": row["constants"], "tier": row["tier"]},
            )
        )
    return samples


@task
def warp(
    dataset: str = DEFAULT_DATASET,
    tier: str | None = None,
    sample_ids: str | int | list[str | int] | None = None,
    protocol: str = "default",
    limit: int | None = None,
    system: str | None = None,
    timeout: float | None = None,
    memory_mb: int | None = None,
    workers: int | None = None,
) -> Task:
    """The WARP / invaR1ant benchmark, every answer checked for logical equivalence by Z3.

    Task options (``-T name=value``):

    :param dataset: a hub id (default ``dannkoh/invaR1ant-benchmark``), a
        ``.parquet``/``.jsonl``/``.csv`` file, or ``demo`` for the small synthetic
        benchmark bundled with aeval (offline).
    :param tier: only rows of this tier.
    :param sample_ids: only these item ids (``5,7,10-20``; Inspect's ``-T`` turns the
        commas into a list, and a lone ``5`` into a number: both are taken as written).
    :param protocol: ``default`` (aeval's structured instruction after the question)
        or ``warp-2025`` (the study's instruction before it).
    :param limit: the first ``limit`` rows (after ``tier``).
    :param system: a system message.
    :param timeout: the verifier's per-answer budget in seconds (aeval's default otherwise).
    :param memory_mb: each verifier worker's memory cap.
    :param workers: verifier worker processes (default: the CPU count).
    """
    if protocol not in PROTOCOLS:
        raise ConfigError(f"unknown protocol {protocol!r}: expected one of {', '.join(PROTOCOLS)}")
    ids = (
        ",".join(str(i) for i in sample_ids)
        if isinstance(sample_ids, list)
        else None
        if sample_ids is None
        else str(sample_ids)
    )
    samples = warp_samples(
        dataset, tier=tier, sample_ids=ids, protocol=protocol, limit=limit, system=system
    )
    name = "demo" if dataset == DEMO else dataset
    return Task(
        dataset=MemoryDataset(samples, name=name),
        solver=generate(),
        scorer=equivalence(timeout=timeout, memory_mb=memory_mb, workers=workers),
        metadata={"protocol": protocol, "aeval_dataset": name},
    )


@scorer(metrics={reading: [accuracy(), stderr()] for reading in READINGS})
def equivalence(
    timeout: float | None = None, memory_mb: int | None = None, workers: int | None = None
) -> Scorer:
    """aeval's judge as an Inspect scorer: the value holds the ``lenient``, ``strict``
    and ``published`` readings (``C``/``I``), the explanation the verifier's reason,
    and the metadata the verdict's status, repair, direction and counterexample.
    An infrastructure status (``bad_ground_truth``) gets no score.

    Answers are checked in aeval's pool of killable worker processes under its
    time and memory limits; the pool starts on the first answer and its workers
    are killed when the scorer is collected or the interpreter exits.
    """
    caps = {} if memory_mb is None else {"memory_mb": memory_mb}
    limits = VerifyLimits(**caps) if timeout is None else VerifyLimits.with_budget(timeout, **caps)
    runtime = PoolRuntime(limits, workers)

    async def judge(pool: object, text: str, truth: str, constants: str) -> Any:
        assert isinstance(pool, Checker)  # this runtime's own pool, never the machine's
        return await pool.check_both(text, truth, constants)

    async def score(state: TaskState, target: Target) -> Score | None:
        text = state.output.completion if state.output is not None else ""
        truth = target.text
        constants = str(state.metadata.get("constants") or "")
        check, published = await runtime.call_async(
            lambda pool: judge(pool, text, truth, constants)
        )
        if check.status in INFRA_STATUSES:
            # Not the model's failure (a ground truth Z3 cannot read): no score,
            # as aeval's summary and the .eval export leave it.
            return None
        return Score(
            value={
                "lenient": CORRECT if check.status is Status.EQUIVALENT else INCORRECT,
                "strict": CORRECT
                if check.status is Status.EQUIVALENT and check.repaired is None
                else INCORRECT,
                "published": CORRECT if published.correct else INCORRECT,
            },
            answer=extract_answer(text).text,
            explanation=check.reason or check.status.value,
            metadata=score_metadata(check, published, tier=state.metadata.get("tier")),
        )

    weakref.finalize(score, runtime.close)
    # The pool, to kill its workers before the scorer is collected (tests, notebooks).
    score.aeval_pool = runtime  # type: ignore[attr-defined]
    return score


def score_metadata(
    check: CheckResult, published: PublishedResult | None, *, tier: str | None
) -> dict[str, Any]:
    """What a score carries besides its value: the verdict as aeval records it."""
    return {
        "status": check.status.value,
        "repaired": check.repaired,
        "direction": check.direction,
        "counterexample": check.counterexample,
        "published_reason": published.reason if published is not None else None,
        "tier": tier,
        "elapsed_ms": round(check.elapsed_ms, 1),
    }
