"""The benchmark as an Inspect AI task, scored by aeval's judge.

``inspect eval aeval/warp --model openai/gpt-4o-mini`` runs every row with
aeval's structured instruction through any Inspect model (its providers,
epochs, limits and log viewer) and scores each answer with aeval's verifier:
the same killable worker pool, hard time and memory limits, and the three
readings (strict, lenient, published) as :mod:`aeval.verify` gives a run. The
name ``aeval/warp`` resolves through the ``inspect_ai`` entry point in
aeval's ``pyproject.toml`` (module :mod:`aeval.interop.inspect_registry`).

With ``-T rounds=K`` (K > 1) each sample is a repair conversation (issue #44,
docs/repair.md): the solver generates, judges the answer with aeval's verifier,
and after a wrong answer the model's own could repair appends aeval's feedback
message (:func:`aeval.feedback.render_feedback`, byte for byte what ``aeval run
--rounds K`` sends) and generates again, until an ``equivalent`` answer or K
rounds. The score is the last answer's, and its metadata says in which round it
was given.

Needs the ``aeval[inspect]`` extra (``inspect-ai``); importing this module
without it raises :class:`ImportError` naming the extra.
"""

from __future__ import annotations

import functools
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
    from inspect_ai.solver import Generate, Solver, TaskState, generate, solver
except ImportError as err:  # pragma: no cover - depends on the environment
    raise ImportError(
        "aeval's Inspect AI task needs inspect-ai: pip install 'aeval[inspect]'"
    ) from err

from aeval.dataset import DEFAULT_DATASET, demo_dataset_path, load_dataset
from aeval.errors import ConfigError
from aeval.feedback import (
    DEFAULT_FEEDBACK_TEMPLATE,
    FEEDBACK_LEVELS,
    FeedbackLevel,
    check_template,
    is_repairable,
    render_feedback,
)
from aeval.prompts import PROTOCOLS, PromptSettings, format_prompt
from aeval.reward.runtime import PoolRuntime
from aeval.scoring.responses import with_finish_reason
from aeval.verdicts import INFRA_STATUSES, CheckResult, Status
from aeval.verify import VerifyLimits
from aeval.verify.checker import Checker
from aeval.verify.extract import extract_answer
from aeval.verify.published import PublishedResult

__all__ = ["READINGS", "equivalence", "repair_loop", "score_metadata", "warp", "warp_samples"]

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
    rounds: int = 1,
    feedback: str | None = None,
    feedback_file: str | None = None,
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
    :param rounds: repair rounds K (default 1: one answer per sample, as before).
    :param feedback: what a repair round tells (``retry``, ``reason`` or
        ``counterexample``, the default when ``rounds`` > 1), as ``aeval run --feedback``.
    :param feedback_file: a file holding the feedback template (``aeval run
        --feedback-file``; its fields ``{verdict}``, ``{reason}``, ``{counterexample}``).
    """
    if protocol not in PROTOCOLS:
        raise ConfigError(f"unknown protocol {protocol!r}: expected one of {', '.join(PROTOCOLS)}")
    if rounds < 1:
        raise ConfigError(f"rounds must be at least 1, got {rounds}")
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
    metadata: dict[str, Any] = {"protocol": protocol, "aeval_dataset": name}
    if rounds > 1 or feedback is not None or feedback_file is not None:
        level, template = _feedback_settings(feedback, feedback_file)
        metadata |= {"rounds": rounds, "feedback": level, "feedback_template": template}
        task_solver = repair_loop(
            rounds, level, template, timeout=timeout, memory_mb=memory_mb, workers=workers
        )
    else:
        task_solver = generate()
    return Task(
        dataset=MemoryDataset(samples, name=name),
        solver=task_solver,
        scorer=equivalence(timeout=timeout, memory_mb=memory_mb, workers=workers),
        metadata=metadata,
    )


def _feedback_settings(
    feedback: str | None, feedback_file: str | None
) -> tuple[FeedbackLevel, str]:
    """The feedback level and template of the task options (as ``aeval run`` reads them)."""
    level = "counterexample" if feedback is None else feedback
    if level not in FEEDBACK_LEVELS:
        raise ConfigError(
            f"unknown feedback {level!r}: expected one of {', '.join(FEEDBACK_LEVELS)}"
        )
    if feedback_file is None:
        return level, DEFAULT_FEEDBACK_TEMPLATE
    try:
        with open(feedback_file, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as err:
        raise ConfigError(f"feedback_file {feedback_file}: cannot read it ({err})") from err
    return level, check_template(text, f"feedback_file {feedback_file}")


# Inspect's stop reasons (inspect_ai/model/_model_output.py: StopReason) in the finish
# reasons of aeval's verdicts, which the providers' adapters normalize to OpenAI's
# (aeval.batch.providers: Anthropic's "max_tokens", Gemini's "MAX_TOKENS" are "length")
_FINISH_REASONS: dict[str, str | None] = {
    "stop": "stop", "max_tokens": "length", "model_length": "length", "unknown": None}  # fmt: skip


def _limits(timeout: float | None, memory_mb: int | None) -> VerifyLimits:
    caps = {} if memory_mb is None else {"memory_mb": memory_mb}
    return VerifyLimits(**caps) if timeout is None else VerifyLimits.with_budget(timeout, **caps)


@solver
def repair_loop(
    rounds: int,
    feedback: str = "counterexample",
    template: str = DEFAULT_FEEDBACK_TEMPLATE,
    timeout: float | None = None,
    memory_mb: int | None = None,
    workers: int | None = None,
) -> Solver:
    """Generate, judge with aeval's verifier, and after an answer the model could
    repair (:func:`aeval.feedback.is_repairable`) append aeval's feedback message and
    generate again, up to ``rounds`` answers. Each round's verdict is kept in the
    sample's store under ``aeval_rounds`` (status, reason, direction, counterexample).
    """
    level, _ = _feedback_settings(feedback, None)
    check_template(template)
    runtime = PoolRuntime(_limits(timeout, memory_mb), workers)

    async def judge(pool: object, text: str, truth: str, constants: str) -> CheckResult:
        assert isinstance(pool, Checker)  # this runtime's own pool, never the machine's
        return await pool.check(text, truth, constants)  # with direction and counterexample

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        truth = state.target.text
        constants = str(state.metadata.get("constants") or "")
        verdicts: list[dict[str, Any]] = []
        for round_ in range(1, rounds + 1):
            state = await generate(state)
            text = state.output.completion if state.output is not None else ""
            asked = functools.partial(judge, text=text, truth=truth, constants=constants)
            check = await runtime.call_async(asked)
            # as the engine's verdict of a cut-off answer says it, so is the feedback
            stop = state.output.stop_reason if state.output is not None else None
            check = with_finish_reason(check, _FINISH_REASONS.get(str(stop), stop))
            verdicts.append(
                {
                    "round": round_,
                    "status": check.status.value,
                    "reason": check.reason,
                    "direction": check.direction,
                    "counterexample": check.counterexample,
                }
            )
            state.store.set("aeval_rounds", verdicts)
            if round_ == rounds or state.completed or not is_repairable(check.status):
                break
            message = render_feedback(
                level,
                status=check.status,
                reason=check.reason,
                direction=check.direction,
                counterexample=check.counterexample,
                template=template,
            )
            state.messages.append(ChatMessageUser(content=message))
        return state

    weakref.finalize(solve, runtime.close)
    solve.aeval_pool = runtime  # type: ignore[attr-defined]
    return solve


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
    runtime = PoolRuntime(_limits(timeout, memory_mb), workers)

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
            metadata=score_metadata(check, published, tier=state.metadata.get("tier"))
            | _rounds_metadata(state),
        )

    weakref.finalize(score, runtime.close)
    # The pool, to kill its workers before the scorer is collected (tests, notebooks).
    score.aeval_pool = runtime  # type: ignore[attr-defined]
    return score


def _rounds_metadata(state: TaskState) -> dict[str, Any]:
    """With repair rounds: the round of the scored answer and each round's verdict."""
    verdicts = state.store.get("aeval_rounds")
    if not verdicts:
        return {}
    return {"round": verdicts[-1]["round"], "rounds": verdicts}


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
